//! Posting a review to a webhook over HTTPS: the server verified against the webhook's
//! `caBundle` (the system's roots when it has none), `?timeout=<n>s` on the URL as kube-apiserver
//! sends it, the whole call within that time, and the answer bounded in size.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use super::config::Client;

/// The largest answer read from an admission webhook, and per object from a conversion
/// webhook (kube-apiserver's own request limit): what is longer is refused as a failed call,
/// not read on.
pub(crate) const MAX_ANSWER: usize = 3 * 1024 * 1024;

/// HTTP clients, one per CA bundle (a client keeps its connections, so a webhook called often
/// is not handshaken with each time).
#[derive(Debug, Default)]
pub(crate) struct Clients {
    by_bundle: Mutex<HashMap<Option<Vec<u8>>, reqwest::Client>>,
}

impl Clients {
    fn client(&self, bundle: Option<&Vec<u8>>) -> Result<reqwest::Client, String> {
        let mut clients = wasmctrl_core::sync::lock(&self.by_bundle);
        if let Some(c) = clients.get(&bundle.cloned()) {
            return Ok(c.clone());
        }
        let mut roots = rustls::RootCertStore::empty();
        match bundle {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| format!("the caBundle does not parse: {e}"))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("the caBundle holds a bad certificate: {e}"))?;
                }
            }
            None => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .https_only(true)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        clients.insert(bundle.cloned(), client.clone());
        Ok(client)
    }

    /// Posts `review` to the webhook; the answer's body (at most `max_answer` bytes), or why
    /// the call failed, worded as Go's client words it (`Post "<url>": context deadline
    /// exceeded`).
    pub(crate) async fn post(
        &self,
        to: &Client,
        timeout: Duration,
        review: Vec<u8>,
        max_answer: usize,
    ) -> Result<Vec<u8>, String> {
        let url = format!("{}?timeout={}s", to.url, timeout.as_secs());
        let failed = |why: &dyn std::fmt::Display| format!("Post {url:?}: {why}");
        let client = self.client(to.ca_bundle.as_ref()).map_err(|e| failed(&e))?;
        let call = async {
            let mut response = client
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", "application/json")
                .body(review)
                .send()
                .await
                .map_err(|e| failed(&error_chain(&e)))?;
            let status = response.status();
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| failed(&e))? {
                if body.len() + chunk.len() > max_answer {
                    return Err(failed(&format!(
                        "the answer is larger than {max_answer} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            if !status.is_success() {
                return Err(format!(
                    "the server responded with the status code {} but did not return more information",
                    status.as_u16()
                ));
            }
            Ok(body)
        };
        match tokio::time::timeout(timeout, call).await {
            Ok(answered) => answered,
            Err(_) => Err(failed(&"context deadline exceeded")),
        }
    }
}

/// An error with its causes, as Go prints a wrapped error (`dial tcp ...: connection refused`).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let said = s.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = s.source();
    }
    text
}
