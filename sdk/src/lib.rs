//! Write wasmctrl reconciler plugins in Rust.
//!
//! A plugin is one type implementing [`Reconciler`] and one [`export!`] line:
//!
//! ```
//! use wasmctrl_sdk::k8s_openapi::api::core::v1::ConfigMap;
//! use wasmctrl_sdk::{Context, Error, Manifest, NoSettings, Outcome, Reconciler, Request};
//!
//! struct Hello;
//!
//! impl Reconciler for Hello {
//!     type Settings = NoSettings;
//!
//!     fn manifest(_settings: &NoSettings) -> Result<Manifest, String> {
//!         Ok(Manifest::for_::<ConfigMap>("hello"))
//!     }
//!
//!     fn reconcile(req: &Request, ctx: &Context<'_>) -> Result<Outcome, Error> {
//!         ctx.info("reconciling", &[("key", &req.key())]);
//!         Ok(Outcome::done())
//!     }
//! }
//!
//! wasmctrl_sdk::export!(Hello);
//! ```
//!
//! The host calls [`Reconciler::manifest`] once per plugin version and [`Reconciler::reconcile`]
//! once per key, each time in a fresh sandbox: statics never survive from one call to the next.
//! Build with `wasmctrl build <crate dir>`; test natively with [`testing::Harness`].
//! Read an object's `metadata` into [`ObjectMeta`] rather than a struct of your own, and a custom
//! resource into [`Object<Spec, Status>`](Object) with your own `Spec` and `Status`.
//!
//! With the feature `kube` (on by default), read and write built-in kinds as [`k8s_openapi`]
//! types and declare custom resources with kube's `#[derive(CustomResource)]`, their CRD
//! generated from the types (see the [`kube`](mod@kube) module); the manifest and the cache
//! reads take those types (`Manifest::for_::<Website>("website").owns::<ConfigMap>()`,
//! `ctx.get::<Pod>(namespace, name)`).
//!
//! The SDK implements the plugin contract `wasmctrl:plugin@0.3.0`; its copy of the contract's
//! WIT is `wit/plugin.wit` in this crate.

// The generated bindings name the SDK by its crate name, from plugin crates and from here alike.
extern crate self as wasmctrl_sdk;

mod action;
pub mod conditions;
mod context;
#[cfg(feature = "kube")]
pub mod kube;
mod logging;
mod meta;
mod request;
pub mod sql;
pub mod testing;
mod types;

#[doc(hidden)]
#[path = "export.rs"]
pub mod __private;

pub use action::{
    Action, Children, Deletion, Event, EventType, Finalizer, ObjectRef, Outcome, Patch, PatchBody,
    Propagation, finalizer,
};
pub use conditions::{Condition, find_condition, set_condition};
pub use context::{Context, Host};
pub use jiff::{self, Timestamp};
pub use meta::{Metadata, Object, ObjectMeta, OwnerReference};
pub use request::{ActionFailure, ActionResult, ActionStatus, Error, Request};
pub use serde_json::{Value, json};
pub use tracing;
pub use types::{Gvk, Level, Manifest, Mapping, NoSettings, Predicate, Related, Selector, Watch};
#[cfg(feature = "kube")]
pub use {
    k8s_openapi, kube_core,
    kube_core::{CustomResourceExt, Resource},
    kube_derive::CustomResource,
    schemars,
};

/// A reconciler: declares what it watches and decides, per key, what should happen.
///
/// Both functions are associated functions rather than methods because every call runs in a
/// fresh instance: there is no `self` that could carry state between calls.
pub trait Reconciler {
    /// The operator's settings for this plugin (the config file beside the `.wasm`), parsed by
    /// the SDK before each call. No settings give `Default::default()`; settings that do not
    /// deserialize make the host refuse the plugin at load, with serde's message. Use
    /// [`NoSettings`] for a plugin that takes none.
    type Settings: serde::de::DeserializeOwned + Default;

    /// Describes the plugin for the operator's settings. An `Err` rejects the settings and the
    /// host refuses to load the plugin, printing the message.
    fn manifest(settings: &Self::Settings) -> Result<Manifest, String>;

    /// Decides what to do for one key. `req.object` is absent when the object no longer exists.
    fn reconcile(req: &Request, ctx: &Context<'_, Self::Settings>) -> Result<Outcome, Error>;
}

/// Exports a [`Reconciler`] as the plugin's `reconciler` interface.
///
/// Use it once, at the crate root of a `cdylib` plugin crate.
#[macro_export]
macro_rules! export {
    ($reconciler:ty) => {
        const _: () = {
            // Natively (tests, `rlib` builds) nothing is exported: export names such as
            // `wasmctrl:plugin/reconciler@0.3.0#reconcile` are not valid native symbols.
            #[allow(dead_code)]
            struct Guest;

            impl $crate::__private::Guest for Guest {
                fn manifest(
                    settings: ::std::string::String,
                ) -> ::std::result::Result<$crate::__private::WireManifest, ::std::string::String>
                {
                    $crate::__private::manifest::<$reconciler>(&settings)
                }

                fn reconcile(
                    request: $crate::__private::WireRequest,
                ) -> ::std::result::Result<
                    $crate::__private::WireOutcome,
                    $crate::__private::WireError,
                > {
                    $crate::__private::reconcile::<$reconciler>(request)
                }
            }

            #[cfg(target_arch = "wasm32")]
            $crate::__private::bindings::__export_plugin!(
                Guest with_types_in $crate::__private::bindings
            );
        };
    };
}

#[cfg(test)]
mod tests {
    /// The SDK carries its own copy of the contract so that it builds as a published crate; it
    /// must be the host's, word for word.
    #[test]
    fn the_sdk_wit_is_the_contract() {
        let ours = include_str!("../wit/plugin.wit");
        let contract = include_str!("../../wit/plugin.wit");
        assert!(
            ours == contract,
            "sdk/wit/plugin.wit differs from wit/plugin.wit: copy wit/plugin.wit over it"
        );
    }
}
