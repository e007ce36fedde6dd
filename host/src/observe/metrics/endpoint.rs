//! The `/metrics` endpoint: the exposition in the format the scraper asks for, over plain HTTP
//! or, as kubebuilder's scaffold serves it (controller-runtime's `SecureServing` with its
//! authentication and authorization filter), over HTTPS to scrapers the API server vouches for.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::http::{HeaderMap, header};

use super::auth::{self, Filter};
use crate::tls;

/// The content type of each exposition format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// HTTPS, and bearer tokens checked with the API server: the certificate and the filter.
pub struct Secure {
    tls: tls::Server,
    filter: Arc<Filter>,
}

impl Secure {
    /// Serves the certificate and key in the PEM files `cert` (read again when renewed), or
    /// without them a self-signed certificate made now, as controller-runtime does: the point
    /// is that tokens travel encrypted; scrapers skip verifying it. Tokens are reviewed with
    /// `client`, the host's own.
    pub fn new(client: kube::Client, cert: Option<(&Path, &Path)>) -> std::io::Result<Self> {
        // HTTP/1.1 only, as kubebuilder's scaffold serves metrics unless `--enable-http2`.
        let tls = match cert {
            Some((cert, key)) => tls::Server::from_files(cert, key, tls::HTTP1)?,
            None => tls::Server::self_signed(tls::LOOPBACK, "wasmctrl-metrics", tls::HTTP1)?,
        };
        Ok(Self {
            tls,
            filter: Arc::new(Filter::new(client)),
        })
    }
}

/// Serves `GET /metrics` on `addr` until the process ends, over HTTPS and to allowed scrapers
/// only when `secure`; `render(openmetrics)` produces the exposition (OpenMetrics when the
/// scraper's `Accept` asks for it). Returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    render: Arc<dyn Fn(bool) -> String + Send + Sync>,
    secure: Option<Secure>,
) -> std::io::Result<SocketAddr> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move |headers: HeaderMap| async move {
            let openmetrics = headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.contains("application/openmetrics-text"));
            let body = render(openmetrics);
            let content_type = if openmetrics {
                OPENMETRICS_TEXT
            } else {
                PROMETHEUS_TEXT
            };
            ([(header::CONTENT_TYPE, content_type)], body)
        }),
    );
    match secure {
        None => crate::observe::probes::serve_router(addr, app, "metrics", None).await,
        Some(Secure { tls, filter }) => {
            // Every request, whatever its path, as controller-runtime's filter wraps the whole
            // handler: nobody learns anything about the server without a token.
            let app = app.layer(axum::middleware::from_fn_with_state(filter, auth::guard));
            crate::observe::probes::serve_router(addr, app, "metrics", Some(&tls)).await
        }
    }
}
