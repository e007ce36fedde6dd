//! wasmctrl: a Kubernetes controller host whose reconcilers are sandboxed WebAssembly plugins.
//!
//! Layers, each only reaching down. The sandbox is the crate `wasmctrl-runtime`
//! (`host/runtime`), re-exported here: [`plugin`] (the contract: what a plugin declares and may
//! do) -> [`runtime`] (wasmtime: one fresh sandbox per reconcile, reading through a [`view`];
//! [`sql`] is the database capability plugins reach through the `sql` import). [`build`] turns
//! plugin crates into components (the crate `wasmctrl-build`, in `host/build`). The controller
//! loop, this crate's own, is [`informer`] (shared caches) -> [`queue`] (the client-go
//! workqueue contract) -> [`controller`] (a plugin per queue) -> [`applier`] (carrying out
//! checked intents; [`events`] records Kubernetes Events, best effort; [`identity`] is whose
//! rights a plugin's requests use: the host's, or a tenant's ServiceAccount's by
//! impersonation). [`loader`] owns the
//! plugin directory and hot-reloads it; [`oci`] pushes plugins to OCI registries and pulls them
//! back by digest, and [`resources`] declares them as cluster resources (`WasmPlugin`,
//! `ClusterWasmPlugin`). [`leader`] elects the one replica that reconciles; [`sharding`] spreads
//! the reconciling over replicas instead, [`membership`] keeping each replica's share.
//! [`probes`] serves the kubelet's health and readiness probes, [`metrics`] the Prometheus
//! metrics (over HTTPS, behind TokenReview and SubjectAccessReview, by default); [`tls`] is the
//! HTTPS both it and the API server serve. [`memory`] hands freed heap back to the system.
//! [`kinds`] knows each Kubernetes kind's plural and scope (from `k8s-openapi` and CRDs), which
//! [`rbac`] turns declarations into Roles with. [`apiserver`] (the crate `wasmctrl-apiserver`,
//! feature `apiserver`) is an embedded, protocol-faithful Kubernetes API server, for `dev`,
//! `apiserver` and the tests. [`cli`] wires them to commands.

#[cfg(feature = "apiserver")]
pub use wasmctrl_apiserver as apiserver;
pub mod applier;
pub use wasmctrl_build as build;
pub mod cli;
pub mod clock;
pub mod cluster_plugins;
pub mod controller;
pub mod events;
pub mod identity;
pub mod informer;
pub mod kinds;
pub mod leader;
pub mod loader;
pub mod membership;
pub mod memory;
pub mod metrics;
pub mod oci;
pub mod preflight;
pub use wasmctrl_runtime::plugin;
pub mod probes;
pub mod queue;
pub mod rbac;
pub mod resources;
pub use wasmctrl_runtime as runtime;
pub mod sharding;
mod sync;
pub use wasmctrl_runtime::sql;
pub use wasmctrl_runtime::view;
pub use wasmctrl_scope::selector;
pub use wasmctrl_tls as tls;
