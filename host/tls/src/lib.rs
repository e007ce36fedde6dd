//! Serving HTTPS, for the embedded API server and the secure metrics endpoint alike: a
//! certificate and key (made in memory, or read from PEM files and read again when they change,
//! as controller-runtime's certwatcher does for cert-manager's rotations) as a rustls server
//! configuration, and a listener that runs each handshake on its own task.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcgen::{CertificateParams, DnType, KeyPair};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// ALPN for a server that speaks HTTP/2 and HTTP/1.1 (kube-apiserver's).
pub const H2_AND_HTTP1: &[&[u8]] = &[b"h2", b"http/1.1"];
/// ALPN for HTTP/1.1 only: kubebuilder's scaffold turns HTTP/2 off on its metrics server
/// (`--enable-http2=false`, for the HTTP/2 Rapid Reset and Stream Cancellation CVEs).
pub const HTTP1: &[&[u8]] = &[b"http/1.1"];

/// How often certificate files are looked at again (controller-runtime's certwatcher polls
/// every 10 s).
const RECHECK: Duration = Duration::from_secs(10);

/// How long a client gets to finish its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// An error of another kind as an I/O error, with its message.
pub fn io_error(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server's certificate, key and protocols.
#[derive(Debug, Clone)]
pub struct Server {
    config: Arc<rustls::ServerConfig>,
}

impl Server {
    /// Serves `chain` (leaf first) with `key`, offering the `alpn` protocols.
    pub fn new(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        alpn: &[&[u8]],
    ) -> std::io::Result<Self> {
        let certified = certified_key(chain, key)?;
        Self::with_resolver(Arc::new(Fixed(certified)), alpn)
    }

    /// A self-signed certificate for `names` (DNS names or IP addresses), made in memory.
    pub fn self_signed(names: &[&str], common_name: &str, alpn: &[&[u8]]) -> std::io::Result<Self> {
        let key = KeyPair::generate().map_err(io_error)?;
        let cert = (leaf(names, common_name)?.self_signed(&key)).map_err(io_error)?;
        let (chain, key) = der(cert.der().to_vec(), &key);
        Self::new(chain, key, alpn)
    }

    /// [`Self::self_signed`], with the certificate's PEM (what a client must trust it by).
    pub fn self_signed_with_pem(
        names: &[&str],
        common_name: &str,
        alpn: &[&[u8]],
    ) -> std::io::Result<(Self, String)> {
        let key = KeyPair::generate().map_err(io_error)?;
        let cert = (leaf(names, common_name)?.self_signed(&key)).map_err(io_error)?;
        let pem = cert.pem();
        let (chain, key) = der(cert.der().to_vec(), &key);
        Ok((Self::new(chain, key, alpn)?, pem))
    }

    /// The certificate chain and key in the PEM files `cert` and `key`, read again when they
    /// change (a renewed certificate is served without a restart; a half-written pair keeps the
    /// old one until both match).
    pub fn from_files(cert: &Path, key: &Path, alpn: &[&[u8]]) -> std::io::Result<Self> {
        let files = Files::read(cert.to_path_buf(), key.to_path_buf())?;
        Self::with_resolver(Arc::new(files), alpn)
    }

    fn with_resolver(
        resolver: Arc<dyn ResolvesServerCert>,
        alpn: &[&[u8]],
    ) -> std::io::Result<Self> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(io_error)?
            .with_no_client_auth()
            .with_cert_resolver(resolver);
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Self {
            config: Arc::new(config),
        })
    }

    /// A listener handing out TLS connections accepted on `tcp`; handshakes run concurrently,
    /// so a client that stalls in one holds up nobody else.
    pub fn listener(&self, tcp: TcpListener) -> std::io::Result<Listener> {
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
        Ok(Listener {
            local,
            connections: rx,
            accepting: task,
        })
    }
}

/// The names a server on loopback answers to.
pub const LOOPBACK: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// A serving certificate's parameters: `names` (DNS names or IP addresses) and a common name.
pub fn leaf(names: &[&str], common_name: &str) -> std::io::Result<CertificateParams> {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).map_err(io_error)?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    Ok(params)
}

/// An rcgen certificate and key as rustls takes them.
pub fn der(cert: Vec<u8>, key: &KeyPair) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let chain = vec![CertificateDer::from(cert)];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    (chain, key)
}

fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> std::io::Result<Arc<CertifiedKey>> {
    let certified = CertifiedKey::from_der(chain, key, &provider()).map_err(io_error)?;
    Ok(Arc::new(certified))
}

/// The certificate and key in PEM, checked to belong together.
fn parse_pem(cert: &[u8], key: &[u8]) -> Result<Arc<CertifiedKey>, String> {
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the certificate: {e}"))?;
    if chain.is_empty() {
        return Err("the certificate file holds no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("the key: {e}"))?;
    certified_key(chain, key).map_err(|e| format!("the key does not fit the certificate: {e}"))
}

/// Always the same certificate.
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The certificate in a pair of PEM files, read again at a handshake once [`RECHECK`] has
/// passed since the last look. A Secret volume swaps both files at once, but a reader may
/// still see a new certificate beside an old key: then the old pair is served until the files
/// agree.
#[derive(Debug)]
struct Files {
    cert: PathBuf,
    key: PathBuf,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    pem: (Vec<u8>, Vec<u8>),
    certified: Arc<CertifiedKey>,
    checked: Instant,
}

impl Files {
    fn read(cert: PathBuf, key: PathBuf) -> std::io::Result<Self> {
        let with_path = |path: &Path| {
            let path = path.display().to_string();
            move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{path}: {e}"))
        };
        let pem = (
            std::fs::read(&cert).map_err(with_path(&cert))?,
            std::fs::read(&key).map_err(with_path(&key))?,
        );
        let certified = parse_pem(&pem.0, &pem.1)
            .map_err(|e| io_error(format!("{} and {}: {e}", cert.display(), key.display())))?;
        Ok(Self {
            cert,
            key,
            state: Mutex::new(Loaded {
                pem,
                certified,
                checked: Instant::now(),
            }),
        })
    }

    /// Reads the files again and takes them if they changed and are a valid pair.
    fn refresh(&self, loaded: &mut Loaded) {
        let (Ok(cert), Ok(key)) = (std::fs::read(&self.cert), std::fs::read(&self.key)) else {
            tracing::warn!(cert = %self.cert.display(), key = %self.key.display(), "cannot read the certificate files; serving the last ones read");
            return;
        };
        if (&cert, &key) == (&loaded.pem.0, &loaded.pem.1) {
            return;
        }
        match parse_pem(&cert, &key) {
            Ok(certified) => {
                tracing::info!(cert = %self.cert.display(), "serving the renewed certificate");
                loaded.certified = certified;
                loaded.pem = (cert, key);
            }
            Err(e) => {
                tracing::warn!(cert = %self.cert.display(), error = %e, "the changed certificate files are not a valid pair (yet); serving the last good one")
            }
        }
    }
}

impl ResolvesServerCert for Files {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut loaded = self.state.lock().ok()?;
        if loaded.checked.elapsed() >= RECHECK {
            loaded.checked = Instant::now();
            self.refresh(&mut loaded);
        }
        Some(loaded.certified.clone())
    }
}

/// TLS connections, for `axum::serve`.
#[derive(Debug)]
pub struct Listener {
    local: std::net::SocketAddr,
    connections: mpsc::Receiver<(TlsStream<TcpStream>, std::net::SocketAddr)>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for Listener {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(name: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn served(files: &Files) -> Vec<u8> {
        let mut loaded = files.state.lock().unwrap();
        files.refresh(&mut loaded);
        loaded.certified.cert[0].to_vec()
    }

    #[test]
    fn certificate_files_are_read_again_when_they_change_and_only_as_a_valid_pair() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let (first_cert, first_key) = pair("first.example");
        std::fs::write(&cert, &first_cert).unwrap();
        std::fs::write(&key, &first_key).unwrap();
        let files = Files::read(cert.clone(), key.clone()).unwrap();
        let first = served(&files);

        // A new certificate beside the old key: not a pair, the first is still served.
        let (second_cert, second_key) = pair("second.example");
        std::fs::write(&cert, &second_cert).unwrap();
        assert_eq!(served(&files), first);
        std::fs::write(&key, &second_key).unwrap();
        let second = served(&files);
        assert_ne!(second, first);
        assert_eq!(
            second,
            CertificateDer::from_pem_slice(second_cert.as_bytes())
                .unwrap()
                .to_vec()
        );

        std::fs::write(&key, "not a key").unwrap();
        assert!(
            Files::read(cert, key)
                .unwrap_err()
                .to_string()
                .contains("the key")
        );
    }
}
