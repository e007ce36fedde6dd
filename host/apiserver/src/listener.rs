//! The loopback HTTP listener, serving the router (`super::router`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::{Error, Inner, router};

/// A running HTTP listener; dropping it stops accepting connections and ends open watches.
#[derive(Debug)]
pub struct HttpServer {
    addr: SocketAddr,
    inner: Arc<Inner>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl HttpServer {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server URL (`https://127.0.0.1:port`).
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The certificate authority (PEM) that signed the server's certificate.
    pub fn ca_pem(&self) -> &str {
        &self.inner.tls.ca_pem
    }

    /// A kubeconfig (YAML) for this listener as its administrator, namespace `default`.
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_with_token("wasmctrl", self.inner.auth.admin_token())
    }

    /// A kubeconfig (YAML) for this listener that authenticates with `token` (a ServiceAccount
    /// token, say) as user `user`, namespace `default`.
    pub fn kubeconfig_with_token(&self, user: &str, token: &str) -> String {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.inner.tls.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: wasmctrl\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\n\
             contexts:\n- name: wasmctrl\n  context:\n    cluster: wasmctrl\n    user: {user}\n    namespace: default\n\
             current-context: wasmctrl\nusers:\n- name: {user}\n  user:\n    token: {token}\n",
            self.url(),
        )
    }

    /// Stops the listener and waits for it.
    pub async fn shutdown(mut self) {
        self.stop_now();
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }

    fn stop_now(&mut self) {
        if let Some(s) = self.stop.take() {
            self.inner
                .closing
                .store(true, std::sync::atomic::Ordering::SeqCst);
            self.inner.faults.drop_watches();
            let _ = s.send(());
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Binds and serves.
pub(crate) async fn serve(inner: Arc<Inner>, addr: SocketAddr) -> Result<HttpServer, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Listen { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Listen { addr, source })?;
    if let Ok(mut a) = inner.addr.lock() {
        *a = bound.to_string();
    }
    let listener = inner
        .tls
        .listener(listener)
        .map_err(|source| Error::Listen { addr, source })?;
    let (stop, rx) = oneshot::channel::<()>();
    let app = router::router(inner.clone());
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = rx.await;
        });
        if let Err(e) = served.await {
            tracing::warn!(error = %e, "apiserver listener stopped");
        }
    });
    Ok(HttpServer {
        addr: bound,
        inner,
        stop: Some(stop),
        task: Some(task),
    })
}
