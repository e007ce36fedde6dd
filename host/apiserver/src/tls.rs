//! HTTPS for the listener, as kube-apiserver always serves: a certificate authority of the
//! server's own (kept in the data directory when there is one, so kubeconfigs stay valid
//! across restarts) signs a fresh serving certificate for `localhost`, `127.0.0.1` and `::1` at
//! every start; the kubeconfig carries the authority.
//!
//! TLS is not optional: kubectl and client-go never send a bearer token over plain HTTP, so
//! without it every kubectl request would be anonymous and RBAC could not be tried with it.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use tokio::net::TcpListener;

use wasmctrl_tls::{self as tls, io_error};

/// The server's certificates.
#[derive(Debug)]
pub struct Tls {
    /// The authority clients trust (PEM), for the kubeconfig.
    pub ca_pem: String,
    server: tls::Server,
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
        let params = tls::leaf(tls::LOOPBACK, "wasmctrl-apiserver")?;
        let key = KeyPair::generate().map_err(io_error)?;
        let cert = params.signed_by(&key, &issuer).map_err(io_error)?;
        let (chain, key) = tls::der(cert.der().to_vec(), &key);
        Ok(Self {
            ca_pem,
            server: tls::Server::new(chain, key, tls::H2_AND_HTTP1)?,
        })
    }

    /// A listener handing out TLS connections accepted on `tcp`.
    pub fn listener(&self, tcp: TcpListener) -> std::io::Result<tls::Listener> {
        self.server.listener(tcp)
    }
}
