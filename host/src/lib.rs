//! wasmctrl: a Kubernetes controller host whose reconcilers are sandboxed WebAssembly plugins.
//!
//! Layers, each only reaching down: [`plugin`] (what a plugin declares and may do) ->
//! [`runtime`] (wasmtime: one fresh sandbox per reconcile) -> [`build`] (turning plugin crates into
//! components). [`queue`] is the client-go workqueue contract. [`apiserver`] is an embedded,
//! protocol-faithful Kubernetes API server with its own module tree. [`loader`] owns the plugin
//! directory and hot-reloads it. [`cli`] wires them to commands.

pub mod apiserver;
pub mod build;
pub mod cli;
pub mod loader;
pub mod plugin;
pub mod queue;
pub mod runtime;
pub mod selector;
pub mod view;
