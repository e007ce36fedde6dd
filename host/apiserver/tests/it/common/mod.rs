//! Helpers the dev-cluster tests share: waiting for a condition to hold and reading status
//! conditions.

#![allow(dead_code, reason = "each test file uses its own share of the helpers")]

use std::future::Future;
use std::time::Duration;

use serde_json::Value;

/// How long a test waits for the cluster to get somewhere.
const PATIENCE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

/// Polls `check` until it gives a value (30 s at most).
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `check` until it holds (30 s at most).
pub async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually(what, || {
        let holds = check();
        async move { holds.await.then_some(()) }
    })
    .await
}

/// The condition of type `kind` in the object's status.
pub fn condition<'a>(o: &'a Value, kind: &str) -> Option<&'a Value> {
    (o.pointer("/status/conditions")?.as_array()?.iter()).find(|c| c["type"] == kind)
}

/// Serves `server` over HTTP (loopback, TLS) and returns a client of that listener as its
/// administrator, with the listener (dropping it stops serving).
pub async fn http_client(
    server: &wasmctrl_apiserver::ApiServer,
) -> (kube::Client, wasmctrl_apiserver::HttpServer) {
    let http = server
        .serve(([127, 0, 0, 1], 0).into())
        .await
        .expect("serve");
    let client = client_of(&http.kubeconfig()).await;
    (client, http)
}

/// A client of the listener a kubeconfig (YAML) points at.
pub async fn client_of(kubeconfig: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("client config");
    kube::Client::try_from(cfg).expect("client")
}

/// The `Status` of a refused request, or a panic naming what came instead.
pub fn refusal<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Serves `app` over HTTPS on loopback, as a webhook is served: its base URL, the CA bundle
/// (base64 PEM) that verifies it, and the server task.
pub async fn https(app: axum::Router) -> (String, String, tokio::task::JoinHandle<()>) {
    use base64::Engine as _;
    let key = rcgen::KeyPair::generate().expect("a key");
    let cert = wasmctrl_tls::leaf(&["127.0.0.1"], "webhooks")
        .and_then(|c| c.self_signed(&key).map_err(wasmctrl_tls::io_error))
        .expect("a certificate");
    let bundle = base64::engine::general_purpose::STANDARD.encode(cert.pem());
    let (chain, key) = wasmctrl_tls::der(cert.der().to_vec(), &key);
    let tls = wasmctrl_tls::Server::new(chain, key, wasmctrl_tls::HTTP1).expect("TLS");
    let tcp = (tokio::net::TcpListener::bind("127.0.0.1:0").await).expect("a port");
    let addr = tcp.local_addr().expect("its address");
    let listener = tls.listener(tcp).expect("a TLS listener");
    let served = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serving");
    });
    (format!("https://{addr}"), bundle, served)
}
