//! Where plugins come from: [`loader`] (the plugin directory, hot-reloaded), [`oci`] (pushing
//! plugins to OCI registries and pulling them back by digest, verified and bounded),
//! [`resources`] (the `WasmPlugin` and `ClusterWasmPlugin` resources that declare them in a
//! cluster) and [`cluster_plugins`] (the controller that turns those resources into loaded
//! plugins, tenants' under their own rights). Each hands the controllers (`reconcile`) what
//! changed.

pub mod cluster_plugins;
pub mod loader;
pub mod oci;
pub mod resources;
