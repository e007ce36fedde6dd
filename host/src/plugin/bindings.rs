//! Host bindings of the plugin contracts this host serves: the current one, generated from
//! `wit/plugin.wit` (`wasmctrl:plugin@0.2.0`), and the previous one, from
//! `wit/0.1.1/plugin.wit` (`wasmctrl:plugin@0.1.1`).
//!
//! The host checks and applies what a plugin of either contract returns with one code path, in
//! the current contract's types; [`previous`] converts to and from the previous one's.

#![allow(missing_docs, clippy::all)]

pub use self::current::wasmctrl::plugin::types as wit;

/// `wasmctrl:plugin@0.2.0`: the reconciler exported as the interface `reconciler`.
pub mod current {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "plugin",
        additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
    });
}

/// `wasmctrl:plugin@0.1.1`: `manifest` and `reconcile` exported by the world itself.
pub mod previous {
    wasmtime::component::bindgen!({
        path: "../wit/0.1.1",
        world: "plugin",
        additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
    });

    use serde::Serialize;
    use serde::de::DeserializeOwned;

    pub use self::wasmctrl::plugin::types as old;
    use super::wit;

    /// A value of a type both contracts define alike (same names, same shape, so the same serde
    /// form), in the other contract's type. 0.2.0 only added to the types 0.1.1 has, so every
    /// 0.1.1 value converts; the reverse holds for every type whose 0.2.0 additions it lacks.
    pub fn convert<A: Serialize, B: DeserializeOwned>(value: &A) -> wasmtime::Result<B> {
        let json = serde_json::to_value(value)?;
        Ok(serde_json::from_value(json)?)
    }

    /// The request as a 0.1.1 plugin reads it: `now` as RFC 3339 text.
    pub fn request(request: &wit::Request) -> old::Request {
        old::Request {
            namespace: request.namespace.clone(),
            name: request.name.clone(),
            object: request.object.clone(),
            deleting: request.deleting,
            settings: request.settings.clone(),
            now: request.now.to_rfc3339(),
        }
    }
}
