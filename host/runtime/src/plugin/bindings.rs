//! Host bindings of the plugin contracts this host serves: the current one, generated from
//! `wit/plugin.wit` (`wasmctrl:plugin@0.3.1`, its world with webhooks, whose `webhooks` export
//! a plugin may leave out), and the previous one, from
//! `wit/0.2.0/plugin.wit` (`wasmctrl:plugin@0.2.0`).
//!
//! The host checks and applies what a plugin of either contract returns with one code path, in
//! the current contract's types; [`previous`] converts to and from the previous one's.

#![allow(missing_docs, clippy::all)]

/// The types of the `webhooks` export.
pub use self::current::exports::wasmctrl::plugin::webhooks as hooks;
pub use self::current::wasmctrl::plugin::types as wit;

/// `wasmctrl:plugin@0.3.1` (0.3.0: action outcomes, best-effort actions, delete propagation;
/// 0.3.1: webhooks).
pub mod current {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "plugin-with-webhooks",
        additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
    });
}

/// The contract's `gvk` is wasmctrl's [`Gvk`](wasmctrl_core::Gvk) past the boundary.
impl From<&wit::Gvk> for wasmctrl_core::Gvk {
    fn from(g: &wit::Gvk) -> Self {
        Self::new(&g.group, &g.version, &g.kind)
    }
}

/// `wasmctrl:plugin@0.2.0`: the reconciler exported as the interface `reconciler`.
pub mod previous {
    wasmtime::component::bindgen!({
        path: "../../wit/0.2.0",
        world: "plugin",
        additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
    });

    use serde::Serialize;
    use serde::de::DeserializeOwned;

    pub use self::wasmctrl::plugin::types as old;
    use super::wit;

    /// A value of a type both contracts define alike (same names, same shape, so the same serde
    /// form), in the other contract's type: the manifest, errors, and the `log`, `cache` and
    /// `sql` imports' types. Types 0.3.0 changed are converted by hand below.
    pub fn convert<A: Serialize, B: DeserializeOwned>(value: &A) -> wasmtime::Result<B> {
        let json = serde_json::to_value(value)?;
        Ok(serde_json::from_value(json)?)
    }

    /// The request as a 0.2.0 plugin reads it: without what its previous actions did.
    pub fn request(request: &wit::Request) -> old::Request {
        old::Request {
            namespace: request.namespace.clone(),
            name: request.name.clone(),
            object: request.object.clone(),
            deleting: request.deleting,
            settings: request.settings.clone(),
            now: old::Timestamp {
                seconds: request.now.seconds,
                nanoseconds: request.now.nanoseconds,
            },
        }
    }

    /// A 0.2.0 outcome in 0.3.0's terms: no action is best effort, and a delete propagates in
    /// the background, as the host always sent it under 0.2.0.
    pub fn outcome(outcome: old::Outcome) -> wasmtime::Result<wit::Outcome> {
        let actions = outcome
            .actions
            .into_iter()
            .map(|action| match action {
                old::Action::Delete(target) => Ok(wit::Action::Delete(wit::Deletion {
                    target: convert(&target)?,
                    propagation: wit::Propagation::Background,
                })),
                other => convert(&other),
            })
            .collect::<wasmtime::Result<_>>()?;
        Ok(wit::Outcome {
            actions,
            best_effort: Vec::new(),
            requeue_after_ms: outcome.requeue_after_ms,
        })
    }
}
