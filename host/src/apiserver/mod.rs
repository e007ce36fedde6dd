//! An embedded, protocol-faithful Kubernetes API server.
//!
//! Serves the built-in kinds the host needs (Namespace, Pod, ConfigMap, Secret, Service, Event,
//! Deployment, Lease, CustomResourceDefinition) and any CRD registered at run time, with the
//! behaviour real clients depend on: discovery, list/watch with resourceVersions, the four patch
//! types, server-side apply, status subresources, finalizers and `Status` errors. It runs
//! in-process ([`ApiServer::client`], no sockets) or over HTTP ([`ApiServer::serve`]).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let server = wasmctrl::apiserver::ApiServer::builder().history(1000).build()?;
//! let client: kube::Client = server.client();
//! let http = server.serve("127.0.0.1:0".parse()?).await?;
//! println!("{} {}", http.addr(), http.kubeconfig());
//! # Ok(()) }
//! ```
//!
//! Module map: [`store`](self) (objects, RV counter, history, snapshots) and `persist` (data
//! dir log); `registry` + `discovery` (kinds, CRDs, discovery, OpenAPI v3); `router` ->
//! `handlers` (get/list), `watch`, `write` + `admission` + `schema` + `delete` (writes), `patch`,
//! `apply` + `fields` (server-side apply, managedFields); `table`, `protobuf` (kubectl
//! formats); `status` (errors); `faults` + `audit` + `listener` (HTTP, kubeconfig, admin endpoints, request log);
//! `gc` (owner-reference GC and namespace cleanup).
//!
//! Known differences from kube-apiserver: no authentication/authorization or admission
//! webhooks; custom resources are pruned and validated against their CRD's structural schema
//! (`schema`), but without `default`s, CEL rules, `format` checks or
//! `allOf`/`anyOf`/`oneOf`/`not`, and unknown fields are pruned silently whatever
//! `fieldValidation` says; CRD versions share storage and are converted by rewriting
//! `apiVersion` only; `resourceVersionMatch=Exact` lists only at the current resourceVersion;
//! protobuf request bodies (kubectl's typed commands) are decoded for Namespace, ConfigMap,
//! Secret, Service and Deployment only (others 415);
//! core/v1 and events.k8s.io/v1 Events are stored separately; `scale` only for Deployments;
//! plain HTTP only (loopback).

mod admission;
mod apply;
mod audit;
mod delete;
mod discovery;
mod faults;
mod fields;
mod gc;
mod handlers;
mod listener;
mod patch;
mod persist;
mod protobuf;
mod registry;
mod router;
mod scale;
mod schema;
mod selector;
mod status;
mod store;
mod table;
mod watch;
mod write;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub use audit::Request as AuditRecord;
pub use faults::{Faults, Rule};
pub use listener::HttpServer;
pub use status::ApiError;

use store::Store;

/// Errors building or serving the API server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The data directory could not be opened or loaded.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Background controllers need a tokio runtime at build time.
    #[error("background controllers need a running tokio runtime")]
    NoRuntime,
    /// Binding or serving the HTTP listener failed.
    #[error("listening on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Shared server state.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) store: Store,
    pub(crate) faults: Arc<Faults>,
    pub(crate) audit: audit::Log,
    pub(crate) admin: bool,
    pub(crate) addr: Mutex<String>,
    /// Set when the HTTP listener shuts down: new watches end at once so the graceful
    /// shutdown does not wait on clients that re-watch immediately.
    pub(crate) closing: std::sync::atomic::AtomicBool,
}

/// Configures an [`ApiServer`].
#[derive(Debug, Clone)]
pub struct Builder {
    history: usize,
    data_dir: Option<PathBuf>,
    gc: bool,
    namespace_cleanup: bool,
    admin: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            history: 1000,
            data_dir: None,
            gc: false,
            namespace_cleanup: false,
            admin: false,
        }
    }
}

impl Builder {
    /// Events kept per resource for watch resume (older resourceVersions get 410).
    pub fn history(mut self, n: usize) -> Self {
        self.history = n.max(1);
        self
    }

    /// Persist objects in this directory (append-only log, fsync per write).
    pub fn data_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.data_dir = dir;
        self
    }

    /// Run the owner-reference garbage collector (background propagation).
    pub fn gc(mut self, on: bool) -> Self {
        self.gc = on;
        self
    }

    /// Run the namespace controller (deleting a namespace deletes its objects, then it).
    pub fn namespace_cleanup(mut self, on: bool) -> Self {
        self.namespace_cleanup = on;
        self
    }

    /// Serve the fault-injection admin endpoints (`/_admin/...`) on the HTTP listener.
    pub fn admin(mut self, on: bool) -> Self {
        self.admin = on;
        self
    }

    /// Builds the server (loading the data directory, starting controllers).
    pub fn build(self) -> Result<ApiServer, Error> {
        let log = match &self.data_dir {
            Some(dir) => Some(persist::Log::open(dir).map_err(|source| Error::DataDir {
                path: dir.clone(),
                source,
            })?),
            None => None,
        };
        let fresh = log.as_ref().is_none_or(|(_, recs)| recs.is_empty());
        let store = Store::new(self.history, log);
        if fresh {
            seed_namespaces(&store);
        } else if let Some(dir) = &self.data_dir {
            store.compact_log().map_err(|source| Error::DataDir {
                path: dir.clone(),
                source,
            })?;
        }
        let inner = Arc::new(Inner {
            store,
            faults: Arc::new(Faults::default()),
            audit: audit::Log::default(),
            admin: self.admin,
            addr: Mutex::new("127.0.0.1:0".into()),
            closing: std::sync::atomic::AtomicBool::new(false),
        });
        if self.gc || self.namespace_cleanup {
            let rt = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
            rt.spawn(gc::run(
                Arc::downgrade(&inner),
                self.gc,
                self.namespace_cleanup,
            ));
        }
        Ok(ApiServer { inner })
    }
}

fn seed_namespaces(store: &Store) {
    let mut st = store.lock();
    let key = (String::new(), "namespaces".to_string());
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let obj = serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "uid": uuid::Uuid::new_v4().to_string(),
                          "creationTimestamp": admission::now(), "generation": 1,
                          "labels": {"kubernetes.io/metadata.name": ns}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        if let Err(e) = st.put(&key, obj) {
            tracing::error!(error = %e, "seeding namespace");
        }
    }
}

/// The embedded API server; cheap to clone (shared state).
#[derive(Debug, Clone)]
pub struct ApiServer {
    inner: Arc<Inner>,
}

impl ApiServer {
    /// A builder with defaults (history 1000, in memory, no controllers, no admin endpoint).
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A server with default settings.
    pub fn new() -> Result<Self, Error> {
        Builder::default().build()
    }

    /// The server as a tower service (an axum `Router`).
    pub fn service(&self) -> axum::Router {
        router::router(self.inner.clone())
    }

    /// A `kube::Client` talking to this server in-process (needs a tokio runtime).
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.service(), "default")
    }

    /// The fault-injection handle.
    pub fn faults(&self) -> Arc<Faults> {
        self.inner.faults.clone()
    }

    /// Serves over HTTP on `addr` (port 0 picks a free port).
    pub async fn serve(&self, addr: SocketAddr) -> Result<HttpServer, Error> {
        listener::serve(self.inner.clone(), addr).await
    }

    /// The resource requests answered so far (the most recent 200,000), oldest first. Also
    /// served as `GET /_admin/requests` when the admin endpoints are on.
    pub fn requests(&self) -> Vec<AuditRecord> {
        self.inner.audit.requests()
    }

    /// The last assigned resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.inner.store.lock().rv
    }
}
