//! One-shot HTTP/1.1 GETs of the host's endpoints (probes, metrics): over plain HTTP, or over
//! HTTPS with a bearer token as Prometheus scrapes the secure `/metrics`; and requests to an API
//! server through a kube client, whatever their answer.

use std::io::{Read, Write};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// `GET path` from `addr` over plain HTTP/1.1: the status code and the body.
pub fn get(addr: &str, path: &str) -> (u16, String) {
    let (code, _, body) = get_with_headers(addr, path);
    (code, body)
}

/// `GET path` from `addr` over plain HTTP/1.1: the status code, the header lines and the body.
pub fn get_with_headers(addr: &str, path: &str) -> (u16, String, String) {
    try_get_with_headers(addr, path).unwrap_or_else(|e| panic!("GET {path} from {addr}: {e}"))
}

/// `GET path` from `addr` over plain HTTP/1.1, or the error of a server not (yet) answering:
/// for readiness probes of a process still starting, whose early connections may be reset.
pub fn try_get(addr: &str, path: &str) -> std::io::Result<u16> {
    try_get_with_headers(addr, path).map(|(code, _, _)| code)
}

fn try_get_with_headers(addr: &str, path: &str) -> std::io::Result<(u16, String, String)> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    get_over(&mut stream, addr, path, "")
}

/// `GET path` from `addr` over HTTPS, with `Authorization: Bearer <token>` when given: the
/// status code, the header lines and the body. The server's certificate is verified against
/// the authority `ca` (PEM) when given, and not at all without one (Prometheus's
/// `insecure_skip_verify`, for a self-signed certificate).
pub fn get_tls(
    addr: &str,
    path: &str,
    token: Option<&str>,
    ca: Option<&str>,
) -> (u16, String, String) {
    try_get_tls(addr, path, token, ca).unwrap_or_else(|e| panic!("GET {path} from {addr}: {e}"))
}

/// [`get_tls`], or the error of a server not (yet) answering.
pub fn try_get_tls(
    addr: &str,
    path: &str,
    token: Option<&str>,
    ca: Option<&str>,
) -> std::io::Result<(u16, String, String)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let config = match ca {
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                roots.add(cert.expect("a PEM certificate")).expect("a CA");
            }
            builder.with_root_certificates(roots)
        }
        None => {
            (builder.dangerous()).with_custom_certificate_verifier(Arc::new(Unverified(provider)))
        }
    }
    .with_no_client_auth();
    let host = addr.rsplit_once(':').expect("host:port").0;
    let name = ServerName::try_from(host.to_string()).expect("a server name");
    let connection = rustls::ClientConnection::new(Arc::new(config), name).expect("TLS client");
    let tcp = std::net::TcpStream::connect(addr)?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    get_over(&mut stream, addr, path, &auth)
}

/// Sends the request (with `headers`, each line ending in CRLF) and reads the response until
/// the server closes.
fn get_over(
    stream: &mut (impl Read + Write),
    addr: &str,
    path: &str,
    headers: &str,
) -> std::io::Result<(u16, String, String)> {
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n"
    )?;
    let mut bytes = Vec::new();
    match stream.read_to_end(&mut bytes) {
        Ok(_) => {}
        // A TLS server that closes without close_notify: what came before is the response.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !bytes.is_empty() => {}
        Err(e) => return Err(e),
    }
    let response = String::from_utf8(bytes).expect("a UTF-8 response");
    let code = response
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Ok((code, head.to_string(), body.to_string()))
}

/// Takes any certificate, checking only that the handshake is signed by its key.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `method path` with a JSON `body` through a kube client (its authentication, its server):
/// the status, the `Warning` headers and the body (`Null` when not JSON), whatever the status.
pub async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: &serde_json::Value,
) -> (u16, Vec<String>, serde_json::Value) {
    send_raw(
        client,
        method,
        path,
        serde_json::to_vec(body).expect("a JSON body"),
    )
    .await
}

/// [`send`] of a body as it is (one JSON cannot hold: a field named twice).
pub async fn send_raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> (u16, Vec<String>, serde_json::Value) {
    let json = [("content-type", "application/json")];
    let (status, headers, body) = request(client, method, path, &json, body).await;
    let warnings = (headers.get_all("warning").iter())
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .collect();
    (
        status,
        warnings,
        serde_json::from_slice(&body).unwrap_or_default(),
    )
}

/// One request with `headers` and a body of any media type: the status, the response's
/// headers and its body as bytes.
pub async fn request(
    client: &kube::Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, ::http::HeaderMap, Vec<u8>) {
    let mut request = ::http::Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(body).expect("a request");
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("the body")
        .to_bytes();
    (status, headers, body.to_vec())
}
