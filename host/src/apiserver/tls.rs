//! HTTPS for the listener, as kube-apiserver always serves: a certificate authority of the
//! server's own (kept in the data directory when there is one, so kubeconfigs stay valid
//! across restarts) signs a fresh serving certificate for `localhost`, `127.0.0.1` and `::1` at
//! every start; the kubeconfig carries the authority.
//!
//! TLS is not optional: kubectl and client-go never send a bearer token over plain HTTP, so
//! without it every kubectl request would be anonymous and RBAC could not be tried with it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::Listener;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The server's certificates.
#[derive(Debug)]
pub struct Tls {
    /// The authority clients trust (PEM), for the kubeconfig.
    pub ca_pem: String,
    config: Arc<rustls::ServerConfig>,
}

fn io_error(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

fn ca_params() -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "wasmctrl-apiserver-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(params)
}

/// The authority: loaded from `dir` (`ca.crt`, `ca.key`) or made (and saved there).
fn authority(dir: Option<&Path>) -> std::io::Result<(String, Issuer<'static, KeyPair>)> {
    if let Some(dir) = dir {
        let (crt, key) = (dir.join("ca.crt"), dir.join("ca.key"));
        if crt.exists() && key.exists() {
            let pem = std::fs::read_to_string(&crt)?;
            let key = KeyPair::from_pem(&std::fs::read_to_string(&key)?).map_err(io_error)?;
            // The saved certificate was made from these same parameters and this key, so what
            // this issuer signs verifies against it.
            let issuer = Issuer::new(ca_params().map_err(io_error)?, key);
            return Ok((pem, issuer));
        }
    }
    let key = KeyPair::generate().map_err(io_error)?;
    let params = ca_params().map_err(io_error)?;
    let pem = params.self_signed(&key).map_err(io_error)?.pem();
    if let Some(dir) = dir {
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true).mode(0o600);
        std::io::Write::write_all(
            &mut options.open(dir.join("ca.key"))?,
            key.serialize_pem().as_bytes(),
        )?;
        std::fs::write(dir.join("ca.crt"), &pem)?;
    }
    Ok((pem, Issuer::new(params, key)))
}

impl Tls {
    /// The authority (kept in `data_dir` if given) and a fresh serving certificate.
    pub fn new(data_dir: Option<&Path>) -> std::io::Result<Self> {
        let (ca_pem, issuer) = authority(data_dir)?;
        let names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
        let mut params = CertificateParams::new(names).map_err(io_error)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "wasmctrl-apiserver");
        let key = KeyPair::generate().map_err(io_error)?;
        let cert = params.signed_by(&key, &issuer).map_err(io_error)?;
        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(io_error)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(io_error)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self {
            ca_pem,
            config: Arc::new(config),
        })
    }

    /// A listener handing out TLS connections accepted on `tcp`; handshakes run concurrently,
    /// so a client that stalls in one holds up nobody else.
    pub fn listener(&self, tcp: TcpListener) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(self.config.clone());
        let (tx, rx) = mpsc::channel(64);
        let task = tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::debug!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let handshake = tokio::time::timeout(HANDSHAKE, acceptor.accept(stream));
                    match handshake.await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener {
            local,
            connections: rx,
            accepting: task,
        })
    }
}

/// How long a client gets to finish its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// TLS connections, for `axum::serve`.
#[derive(Debug)]
pub struct TlsListener {
    local: std::net::SocketAddr,
    connections: mpsc::Receiver<(TlsStream<TcpStream>, std::net::SocketAddr)>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.connections.recv().await {
            Some(connection) => connection,
            // The accepting task only ends when the listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
