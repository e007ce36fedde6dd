//! client-go's REST client metrics for the host's Kubernetes client:
//! `rest_client_requests_total{code,method,host}` and
//! `rest_client_request_duration_seconds{verb,host}`, as a tower layer around kube's client.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use tower::{Layer, Service};

/// `code`, `method`, `host` of one request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The HTTP status, or `<error>` when no response came.
    pub code: String,
    /// The HTTP method.
    pub method: String,
    /// The API server (`host:port`).
    pub host: String,
}

/// `verb`, `host` of one request's latency.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    /// The HTTP method.
    pub verb: String,
    /// The API server (`host:port`).
    pub host: String,
}

/// Counts and times every request the wrapped client sends.
#[derive(Clone)]
pub struct RestClientLayer {
    pub(super) requests: Family<RequestLabels, Counter>,
    pub(super) latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
    /// The server's `host:port`, for requests whose URI carries none (kube sends paths).
    pub(super) host: String,
}

impl<S> Layer<S> for RestClientLayer {
    type Service = RestClient<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RestClient {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`RestClientLayer`] makes.
#[derive(Clone)]
pub struct RestClient<S> {
    inner: S,
    layer: RestClientLayer,
}

impl<S, B, R> Service<Request<B>> for RestClient<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let method = request.method().as_str().to_string();
        let host = request
            .uri()
            .authority()
            .map_or_else(|| self.layer.host.clone(), |a| a.to_string());
        let layer = self.layer.clone();
        let started = Instant::now();
        let call = self.inner.call(request);
        Box::pin(async move {
            let result = call.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            layer
                .latency
                .get_or_create(&LatencyLabels {
                    verb: method.clone(),
                    host: host.clone(),
                })
                .observe(started.elapsed().as_secs_f64());
            layer
                .requests
                .get_or_create(&RequestLabels { code, method, host })
                .inc();
            result
        })
    }
}
