//! An embedded, protocol-faithful Kubernetes API server.
//!
//! Serves every resource kube-apiserver 1.32 serves by default (`catalog`, from the list kept
//! in `data/builtin-resources.json`: names, scope, verbs, short names, categories) and any CRD
//! registered at run time, with the
//! behaviour real clients depend on: discovery, list/watch with resourceVersions (and Kubernetes
//! 1.36's sharded list and watch, KEP-5866's `shardSelector`), the four patch types, server-side
//! apply, status subresources, finalizers and `Status` errors. It runs
//! in-process ([`ApiServer::client`], no sockets) or over HTTP ([`ApiServer::serve`]).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let server = wasmctrl_apiserver::ApiServer::builder().history(1000).build()?;
//! let client: kube::Client = server.client();
//! let http = server.serve("127.0.0.1:0".parse()?).await?;
//! println!("{} {}", http.addr(), http.kubeconfig());
//! # Ok(()) }
//! ```
//!
//! Modules, in layers (each uses only the layers before it and, within its own, the modules
//! named before it; a test, `host/tests/it/module_layers.rs`, holds the crate to this order):
//!
//! 1. `status` (API errors), `audit` (request log), `metrics` (`/metrics`), `tls`, `quantity`
//!    (resource quantities), `cron` (CronJob schedules), `decode` (JSON bodies' duplicate
//!    fields), `json` (reading objects' fields), `names` (generated names and hashes),
//!    `faults` (injected failures), `protobuf` (the protobuf encoding of built-in kinds).
//! 2. Storage: `schema` (structural schemas), `catalog` (kinds, CRDs, their resources and
//!    their schemas), `persist` (the data dir's log), `compaction` (how long earlier revisions
//!    stay readable), `events` (the two Event APIs over one storage), `store` (objects, RV
//!    counter, history, snapshots, lists at earlier revisions), `selector` (label, field and
//!    shard selectors), `printers` (kubectl's columns of each built-in kind).
//! 3. Kinds and requests: `validate` (kube's validation of specs), `defaults` (kube's
//!    defaulting), `registry` (one strategy per kind, as kube's `pkg/registry`: what the
//!    server does with a kind's objects, choosing its defaults, validation, printer and
//!    selectable fields; nothing else matches on kind names), `table` (Table responses),
//!    `handlers` (targets, content negotiation, get/list), `auth` (RBAC), `admission` (of
//!    metadata, and of specs through the kind's strategy), `webhooks` (admission and CRD
//!    conversion webhooks, called as kube-apiserver calls them), `policies` (ValidatingAdmissionPolicies and their
//!    bindings), `typed` (built-in kinds decoded as
//!    their `k8s-openapi` types: unknown fields, schemas), `patch`, `fields` + `apply`
//!    (server-side apply, managedFields).
//! 4. Writes and reads built on them: `delete`, `write` (which admits custom resources through
//!    their version's `schema`), `scale`, `pods` (binding, eviction), `watch`, `discovery`
//!    (discovery, OpenAPI v3), `swagger` (OpenAPI v2), `reviews` (access and token reviews),
//!    `cluster` (what makes dev mode a cluster: kube-controller-manager's workload controllers,
//!    fake Nodes, a scheduler and a kubelet stand-in), `gc` (owner-reference GC and namespace
//!    cleanup).
//! 5. HTTP: `admin` (fault-injection endpoints), `router`, `listener` (the socket, the
//!    kubeconfig).
//!
//! Lists at an earlier revision (`resourceVersionMatch=Exact`, or a `resourceVersion` with
//! `limit`, which kube-apiserver 1.32 reads from etcd) are rebuilt from the resource's event
//! history (the current objects with the newer events undone) until etcd's compaction, as
//! kube-apiserver drives it every [`Builder::compaction_interval`], or the history cap
//! ([`Builder::history`]) has dropped what they need: then 410 `Expired`, with etcd's message.
//!
//! Authentication is by bearer token (the kubeconfig's admin token, ServiceAccount tokens from
//! the TokenRequest API) and authorization is kube's RBAC (`auth`), with impersonation and
//! SelfSubjectAccessReview, LocalSubjectAccessReview, SubjectAccessReview and
//! SelfSubjectRulesReview, so `kubectl auth can-i [--list]` answers, SelfSubjectReview
//! (`kubectl auth whoami`), a scheduler's Binding; TokenReview
//! tells delegating servers (the host's secure `/metrics`) whom a token belongs to.
//!
//! `/metrics` serves kube-apiserver's main series (`metrics`): `apiserver_request_total` and
//! `apiserver_request_duration_seconds` (kube's labels, verbs, scopes and buckets),
//! `apiserver_storage_objects` and `etcd_request_duration_seconds` (the store's own
//! operations), as OpenMetrics text, to users RBAC lets `get` the non-resource URL `/metrics`
//! (`cluster-admin`, and the group `system:monitoring` through kube's bootstrap role of that
//! name).
//!
//! Object metadata is validated on every write as kube's `rest.BeforeCreate`/`BeforeUpdate` and
//! apimachinery's validation do (`admission`, rules in `wasmctrl_core::validation`): names and
//! `generateName` by each kind's rule, labels, annotations (and their 256 KiB), finalizers,
//! owner references, what only the server sets (uid, timestamps, generation), a resourceVersion
//! required on PUT where kube requires one, and Events by kube's Event rules; refusals are 422
//! `Invalid` with kube's message and causes (compared side by side with kube-apiserver 1.32:
//! the same words, but each cause once where kube repeats some, and owner references printed as
//! JSON where kube prints Go structures). The specs of the kinds users write most are validated
//! as kube's registry strategies validate them (`validate`: Pods and Pod templates, the
//! workload kinds, Services, PersistentVolumeClaims, ConfigMaps and Secrets, Ingresses,
//! NetworkPolicies, RBAC, Leases), immutable fields included, with kube's fields, reasons and
//! words (`host/tests/it/apiserver_specs.rs`, a table read off kube-apiserver 1.32).
//!
//! Objects of every built-in kind travel as JSON, YAML or protobuf (`protobuf`: request and
//! response bodies, lists, errors and watch streams, from a field table generated from
//! k8s.io/api's Go types), and leave this server as kube's Go types write them (`status: {}`,
//! quantities in canonical form). Pods are created as kube's default admission plugins leave
//! them (QoS class, priority, default tolerations) and, where `Builder::service_accounts` keeps
//! each namespace's `default` ServiceAccount and `kube-root-ca.crt` (`accounts`, as `wasmctrl
//! dev` and `wasmctrl apiserver` do), as the `ServiceAccount` plugin does (the account's token
//! mounted).
//!
//! Known differences from kube-apiserver: no client certificates, OIDC or webhook
//! authentication, no ClusterRole aggregation; admission webhooks (`webhooks`) are called for
//! creates, updates (status included) and deletes of single objects through the API, not for
//! `scale`, collection deletes or the writes of the in-process controllers, and a webhook's
//! `service` is not routed (only `url` reaches a webhook); custom resources get
//! their structural schema's pruning, types, `default`s (a CRD's own defaults checked against
//! its schema as kube checks them), `format`s, list types and CEL rules
//! (`schema`, with `messageExpression`s and the most used of kube's CEL libraries), but not
//! `allOf`/`anyOf`/`oneOf`/`not`, kube's typed CEL values (`quantity()`, `url()`, `ip()`) or
//! CEL cost limits, nor, in a CRD's defaults, the ObjectMeta rules kube applies to defaults of an
//! embedded resource's metadata; a CRD's conversion webhook converts reads and writes through
//! its other versions (`webhooks::conversion`), but not a custom resource's `scale`; the specs of some built-in kinds (Nodes, PersistentVolumes,
//! StorageClasses, ...) are stored without kube's validation, and `validate` leaves out some of
//! kube's checks of the kinds it covers (volume sources' own fields, probes, security
//! contexts, affinity terms); subresources are `status`, `scale`, `token`, a Pod's `binding`,
//! `eviction` and `ephemeralcontainers`, a CSR's `approval` (no `log`, `exec`, `attach`,
//! `portforward`, `proxy`, `resize`); of kube-controller-manager's controllers, those `cluster`
//! lists (no HorizontalPodAutoscaler, ResourceQuota, disruption, node lifecycle, Pod GC or
//! TTL-of-Pods controllers, no protection finalizers on claims and volumes; Events from the
//! scheduler, the kubelet stand-in and the Deployment and ReplicaSet controllers only); the kubelet stand-in runs no containers (no logs, exec or probes beyond their
//! initial delay); ComponentStatuses are served but none exist; field selectors are those kube
//! registers: `metadata.name`, `metadata.namespace`, each built-in kind's own (`selector`) and
//! CRDs' `selectableFields`;
//! HTTPS with the server's own authority only (no client certificates); `/metrics` in
//! OpenMetrics text only (kube writes Prometheus' 0.0.4 text), a watch counted when it starts.

mod admin;
mod admission;
mod apply;
mod audit;
mod auth;
mod catalog;
mod cluster;
mod compaction;
mod cron;
mod decode;
mod defaults;
mod delete;
mod discovery;
mod events;
mod faults;
mod fields;
mod gc;
mod handlers;
mod json;
mod listener;
mod metrics;
mod names;
mod patch;
mod persist;
mod pods;
mod policies;
mod printers;
mod protobuf;
mod quantity;
mod registry;
mod reviews;
mod router;
mod scale;
mod schema;
mod selector;
mod status;
mod store;
mod swagger;
mod table;
mod tls;
mod typed;
mod validate;
mod watch;
mod webhooks;
mod write;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub use audit::Request as AuditRecord;
pub use cluster::WORKLOAD_CONTROLLERS;
pub use cluster::kubelet::Kubelet;
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
    /// The admin token and the key ServiceAccount tokens are signed with.
    pub(crate) auth: auth::Auth,
    /// The listener's certificates.
    pub(crate) tls: tls::Tls,
    /// Lists and watches take KEP-5866's `shardSelector` (else it is ignored, as a server
    /// before Kubernetes 1.36, or without the alpha feature, does).
    pub(crate) shard_selectors: bool,
    /// The admission webhooks writes are sent to.
    pub(crate) webhooks: webhooks::Webhooks,
    /// The ValidatingAdmissionPolicies writes are judged by.
    pub(crate) policies: policies::Policies,
    /// Closed when this, the last field, is dropped: every other field is freed by then. See
    /// [`ApiServer::released`].
    released: tokio::sync::watch::Sender<()>,
}

/// Configures an [`ApiServer`].
#[derive(Debug, Clone)]
pub struct Builder {
    history: usize,
    data_dir: Option<PathBuf>,
    gc: bool,
    namespace_cleanup: bool,
    service_accounts: bool,
    workloads: Vec<&'static str>,
    kubelet: Option<Kubelet>,
    admin: bool,
    shard_selectors: bool,
    compaction_interval: std::time::Duration,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            history: 1000,
            data_dir: None,
            gc: false,
            namespace_cleanup: false,
            service_accounts: false,
            workloads: Vec::new(),
            kubelet: None,
            admin: false,
            shard_selectors: true,
            compaction_interval: compaction::DEFAULT_INTERVAL,
        }
    }
}

impl Builder {
    /// Events kept per resource for watch resume and lists at earlier revisions (older
    /// resourceVersions get 410).
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

    /// Keep a `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap in every namespace
    /// (kube-controller-manager's ServiceAccounts controller and root CA publisher), and admit
    /// Pods as kube's `ServiceAccount` admission plugin does: run by that account, which must
    /// exist, its token mounted unless automounting is off.
    pub fn service_accounts(mut self, on: bool) -> Self {
        self.service_accounts = on;
        self
    }

    /// Run kube-controller-manager's workload controllers: ReplicaSets, Deployments,
    /// StatefulSets, DaemonSets, Jobs, CronJobs, EndpointSlices and PersistentVolumeClaim
    /// binding, each keeping its objects and their status as kube's does.
    pub fn workloads(mut self, on: bool) -> Self {
        self.workloads = if on {
            WORKLOAD_CONTROLLERS.to_vec()
        } else {
            Vec::new()
        };
        self
    }

    /// Run only these of kube-controller-manager's workload controllers, by its names for
    /// them ([`WORKLOAD_CONTROLLERS`]); unknown names are ignored.
    pub fn workload_controllers<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Self {
        let names: Vec<&str> = names.into_iter().collect();
        self.workloads = (WORKLOAD_CONTROLLERS.iter().copied())
            .filter(|n| names.contains(n))
            .collect();
        self
    }

    /// Run a kubelet stand-in (`None`: Pods stay as clients write them, as on a cluster
    /// without nodes): fake Nodes, a scheduler binding Pods to them, and Pods going through
    /// their lifecycle, as [`Kubelet`] sets out.
    pub fn kubelet(mut self, kubelet: Option<Kubelet>) -> Self {
        self.kubelet = kubelet;
        self
    }

    /// Serve the fault-injection admin endpoints (`/_admin/...`) on the HTTP listener.
    pub fn admin(mut self, on: bool) -> Self {
        self.admin = on;
        self
    }

    /// Whether lists and watches take KEP-5866's `shardSelector` (on by default, as with the
    /// feature on); off, the parameter is ignored and lists carry no `shardInfo`, as from a
    /// server before Kubernetes 1.36, for testing clients' fallback.
    pub fn shard_selectors(mut self, on: bool) -> Self {
        self.shard_selectors = on;
        self
    }

    /// How often old revisions are compacted, as kube-apiserver's `--etcd-compaction-interval`
    /// has etcd do it (5 minutes by default; zero: never): a `resourceVersionMatch=Exact` list
    /// reads a revision back until the second compaction after it was superseded (and while
    /// the resource's [`history`](Self::history) still holds the events since), and gets 410
    /// `Expired` after.
    pub fn compaction_interval(mut self, interval: std::time::Duration) -> Self {
        self.compaction_interval = interval;
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
        let auth = auth::Auth::new(self.data_dir.as_deref()).map_err(|source| Error::DataDir {
            path: self.data_dir.clone().unwrap_or_default(),
            source,
        })?;
        let tls = tls::Tls::new(self.data_dir.as_deref()).map_err(|source| Error::DataDir {
            path: self.data_dir.clone().unwrap_or_default(),
            source,
        })?;
        let store = Store::new(self.history, log);
        if fresh {
            seed_namespaces(&store);
        } else if let Some(dir) = &self.data_dir {
            store.compact_log().map_err(|source| Error::DataDir {
                path: dir.clone(),
                source,
            })?;
        }
        seed_policy(&store);
        {
            let mut st = store.lock();
            st.cluster.service_accounts = self.service_accounts;
            st.cluster.kubelet = self.kubelet.is_some();
            st.compaction.set_interval(self.compaction_interval);
        }
        let inner = Arc::new(Inner {
            store,
            faults: Arc::new(Faults::default()),
            audit: audit::Log::default(),
            admin: self.admin,
            addr: Mutex::new("127.0.0.1:0".into()),
            closing: std::sync::atomic::AtomicBool::new(false),
            auth,
            tls,
            shard_selectors: self.shard_selectors,
            webhooks: webhooks::Webhooks::default(),
            policies: policies::Policies::default(),
            released: tokio::sync::watch::Sender::new(()),
        });
        if self.gc
            || self.namespace_cleanup
            || self.service_accounts
            || !self.workloads.is_empty()
            || self.kubelet.is_some()
        {
            let rt = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
            let controllers = gc::Controllers {
                gc: self.gc,
                namespaces: self.namespace_cleanup,
                accounts: self.service_accounts,
                workloads: (self.workloads.iter())
                    .filter_map(|n| cluster::pass_of(n))
                    .collect(),
                kubelet: self.kubelet,
            };
            rt.spawn(gc::run(Arc::downgrade(&inner), controllers));
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
                          "creationTimestamp": admission::now(),
                          "labels": {"kubernetes.io/metadata.name": ns}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        if let Err(e) = st.put(&key, obj) {
            tracing::error!(error = %e, "seeding namespace");
        }
    }
}

/// Seeds the bootstrap RBAC policy objects that are missing (kube-apiserver does the same at
/// every start), so `cluster-admin` can be bound and discovery works for every user.
fn seed_policy(store: &Store) {
    let mut st = store.lock();
    for (plural, mut obj) in auth::bootstrap_policy() {
        let key = ("rbac.authorization.k8s.io".to_string(), plural.to_string());
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if st.get(&key, "", &name).is_some() {
            continue;
        }
        obj["metadata"]["uid"] = serde_json::json!(uuid::Uuid::new_v4().to_string());
        obj["metadata"]["creationTimestamp"] = serde_json::json!(admission::now());
        if let Err(e) = st.put(&key, obj) {
            tracing::error!(error = %e, "seeding the bootstrap RBAC policy");
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

    /// The server as a tower service (an axum `Router`). Requests are authenticated by their
    /// `Authorization` header, as over HTTP; without one they are anonymous.
    pub fn service(&self) -> axum::Router {
        router::router(self.inner.clone())
    }

    /// Drops this handle and waits until the server's state (objects, watch history) is freed,
    /// that is until its last handle is gone: every client, open watch stream, request in
    /// flight and listener. A benchmark that starts its next round before then times this
    /// server's teardown with it.
    pub async fn released(self) {
        let mut released = self.inner.released.subscribe();
        drop(self);
        // Errs once the sender is dropped; changes never happen (nothing sends).
        while released.changed().await.is_ok() {}
    }

    /// A `kube::Client` talking to this server in-process as its administrator (needs a tokio
    /// runtime).
    pub fn client(&self) -> kube::Client {
        self.client_with_token(self.inner.auth.admin_token())
    }

    /// A `kube::Client` talking to this server in-process with a bearer token (from
    /// [`token`](Self::token), say).
    pub fn client_with_token(&self, token: &str) -> kube::Client {
        kube::Client::new(self.service_with_token(token), "default")
    }

    /// The server as a tower service that authenticates every request with a bearer token.
    pub fn service_with_token(
        &self,
        token: &str,
    ) -> tower::util::MapRequest<
        axum::Router,
        impl FnMut(http::Request<kube::client::Body>) -> http::Request<kube::client::Body>
        + Clone
        + use<>,
    > {
        let header = http::HeaderValue::from_str(&format!("Bearer {token}"))
            .unwrap_or_else(|_| http::HeaderValue::from_static("Bearer -"));
        tower::ServiceExt::map_request(
            self.service(),
            move |mut req: http::Request<kube::client::Body>| {
                req.headers_mut()
                    .insert(http::header::AUTHORIZATION, header.clone());
                req
            },
        )
    }

    /// The token in the kubeconfig the HTTP listener writes: full rights (`system:masters`).
    pub fn admin_token(&self) -> &str {
        self.inner.auth.admin_token()
    }

    /// A token for ServiceAccount `namespace/name`, valid for `valid_for`, as the TokenRequest
    /// API (`kubectl create token`) issues; `None` when the account does not exist.
    pub fn token(
        &self,
        namespace: &str,
        name: &str,
        valid_for: std::time::Duration,
    ) -> Option<String> {
        let key = (String::new(), "serviceaccounts".to_string());
        let account = self.inner.store.lock().get(&key, namespace, name)?;
        let uid = account["metadata"]["uid"].as_str()?.to_string();
        let expires = chrono::Utc::now().timestamp() + valid_for.as_secs() as i64;
        Some(self.inner.auth.mint(namespace, name, &uid, expires))
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

    /// Moves the CronJob controller's clock `by` ahead, as if that time had been waited for:
    /// CronJobs start what their schedules gave in it (the most recent time, as kube does).
    /// A test clock (also `POST /_admin/advance-cronjob-clock`); other timestamps keep the
    /// system's time.
    pub fn advance_cronjob_clock(&self, by: std::time::Duration) {
        let mut st = self.inner.store.lock();
        st.cluster.cronjob_clock +=
            chrono::TimeDelta::from_std(by).unwrap_or(chrono::TimeDelta::zero());
        st.wake_within(std::time::Duration::ZERO);
        let rv = st.rv();
        drop(st);
        self.inner.store.notify(rv);
    }

    /// How far [`advance_cronjob_clock`](Self::advance_cronjob_clock) has moved the test clock
    /// ahead of the system's.
    pub fn cronjob_clock(&self) -> std::time::Duration {
        let ahead = self.inner.store.lock().cluster.cronjob_clock;
        ahead.to_std().unwrap_or_default()
    }

    /// Moves the clock of the storage's compaction ([`Builder::compaction_interval`]) `by`
    /// ahead, as if that time had been waited for: revisions it compacts in that time can no
    /// longer be listed with `resourceVersionMatch=Exact`. A test clock; other timestamps keep
    /// the system's time.
    pub fn advance_compaction_clock(&self, by: std::time::Duration) {
        let mut st = self.inner.store.lock();
        st.compaction.advance_clock(by);
        let rv = st.rv();
        st.compaction.tick(rv);
    }

    /// The last assigned resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.inner.store.lock().rv()
    }
}

/// A built-in resource this server serves: its group, kind, plural and scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedKind {
    /// API group (`""` for core).
    pub group: String,
    /// Kind (`ConfigMap`).
    pub kind: String,
    /// Plural resource (`configmaps`).
    pub plural: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

/// The built-in resources this server serves, reviews (create-only, nothing stored) left
/// out: for tests that hold it to Kubernetes' own list, and to pick kinds it does not serve.
pub fn served_builtins() -> Vec<ServedKind> {
    (catalog::Catalog::default().all())
        .filter(|r| !r.create_only)
        .map(|r| ServedKind {
            group: r.group.clone(),
            kind: r.kind.clone(),
            plural: r.plural.clone(),
            namespaced: r.namespaced,
        })
        .collect()
}
