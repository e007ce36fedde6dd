//! wasmctrl: a Kubernetes controller host whose reconcilers are sandboxed WebAssembly plugins.
//!
//! Layers, each only reaching down. The sandbox is the crate `wasmctrl-runtime`
//! (`host/runtime`), re-exported here: [`plugin`] (the contract: what a plugin declares and may
//! do) -> [`runtime`] (wasmtime: one fresh sandbox per reconcile, reading through a [`view`];
//! [`sql`] is the database capability plugins reach through the `sql` import). [`build`] turns
//! plugin crates into components (the crate `wasmctrl-build`, in `host/build`).
//!
//! This crate's own modules, grouped by the data's path, bottom-up:
//! - shared knowledge: [`kinds`] (each kind's plural and scope, from `k8s-openapi` and CRDs),
//!   [`identity`] (whose rights a plugin's requests use: the host's, or a tenant's
//!   ServiceAccount's by impersonation), [`rbac`] (least-privilege RBAC from what plugins
//!   declare, and the permission preflight that asks the API server before a plugin starts),
//!   [`clock`] (the time plugins are told), [`memory`] (freed heap handed back), [`requests`]
//!   (requests whose responses are read as text);
//! - [`observe`]: metrics, health probes, Kubernetes Events;
//! - [`replicas`]: leader election and its fence, sharding, shard membership;
//! - [`reconcile`]: informer -> queue -> controller -> applier, the controller loop;
//! - [`plugins`]: where plugins come from (the directory, OCI registries, `WasmPlugin` and
//!   `ClusterWasmPlugin` resources), handed to the controllers as changes;
//! - [`webhooks`]: the plugins' admission and conversion webhooks, served to the API server
//!   (the plugin each request goes to is the one the controllers run), and the configurations
//!   that register them;
//! - [`cli`] wires them to commands. [`apiserver`] (the crate `wasmctrl-apiserver`, feature
//!   `apiserver`) is an embedded, protocol-faithful Kubernetes API server, for `dev`,
//!   `apiserver` and the tests; [`tls`] is the HTTPS both it and the metrics endpoint serve.

#[cfg(feature = "apiserver")]
pub use wasmctrl_apiserver as apiserver;
pub use wasmctrl_build as build;
pub mod cli;
pub mod clock;
pub mod identity;
pub mod kinds;
pub mod memory;
pub mod observe;
pub use wasmctrl_runtime::plugin;
pub mod plugins;
pub mod rbac;
pub mod reconcile;
pub mod replicas;
pub mod requests;
pub mod webhooks;
pub use wasmctrl_core::selector;
pub use wasmctrl_runtime as runtime;
pub use wasmctrl_runtime::sql;
pub use wasmctrl_runtime::view;
pub use wasmctrl_tls as tls;
