//! Guest bindings generated from `wit/plugin.wit` (the `wasmctrl:plugin@0.1.1` world).
//!
//! Plugin authors do not use this module directly: the crate root re-exports the types and
//! [`crate::export!`] wires a [`crate::Reconciler`] to the generated exports.

#![allow(missing_docs, clippy::all, unsafe_code)]

wit_bindgen::generate!({
    path: "../wit",
    world: "plugin",
    additional_derives: [Clone, PartialEq],
    pub_export_macro: true,
    export_macro_name: "__export_plugin",
    default_bindings_module: "wasmctrl_sdk::bindings",
    runtime_path: "wasmctrl_sdk::__private::wit_bindgen::rt",
});
