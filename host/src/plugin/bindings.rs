//! Host bindings generated from `wit/plugin.wit` (the `wasmctrl:plugin@0.1.1` world).

#![allow(missing_docs, clippy::all)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "plugin",
    additional_derives: [PartialEq],
});
