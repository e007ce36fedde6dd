//! Write wasmctrl reconciler plugins in Rust.
//!
//! A plugin is one type implementing [`Reconciler`] and one [`export!`] line:
//!
//! ```ignore
//! use wasmctrl_sdk::{Context, Error, Gvk, Manifest, Outcome, Reconciler, Request, Settings};
//!
//! struct Hello;
//!
//! impl Reconciler for Hello {
//!     fn manifest(_settings: &Settings) -> Result<Manifest, String> {
//!         Ok(Manifest::new("hello", Gvk::new("", "v1", "ConfigMap")))
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

// The generated bindings name the SDK by its crate name, from plugin crates and from here alike.
extern crate self as wasmctrl_sdk;

mod action;
#[doc(hidden)]
pub mod bindings;
pub mod conditions;
mod context;
mod manifest;
mod meta;
mod request;
pub mod sql;
pub mod testing;

pub use action::{Finalizer, finalizer};
pub use bindings::wasmctrl::plugin::types::{
    Action, Error, Event, EventType, Gvk, Level, Manifest, Mapping, ObjectRef, Outcome, Patch,
    PatchBody, Predicate, Related, Request, Selector, Watch,
};
pub use conditions::{Condition, find_condition, set_condition};
pub use context::{Context, Host};
pub use manifest::Settings;
pub use meta::{Object, ObjectMeta, OwnerReference};
pub use serde_json::{Value, json};

/// A reconciler: declares what it watches and decides, per key, what should happen.
///
/// Both functions are associated functions rather than methods because every call runs in a
/// fresh instance: there is no `self` that could carry state between calls.
pub trait Reconciler {
    /// Describes the plugin for the operator's settings. An `Err` rejects the settings and the
    /// host refuses to load the plugin, printing the message.
    fn manifest(settings: &Settings) -> Result<Manifest, String>;

    /// Decides what to do for one key. `req.object` is absent when the object no longer exists.
    fn reconcile(req: &Request, ctx: &Context<'_>) -> Result<Outcome, Error>;
}

/// Exports a [`Reconciler`] as the plugin's `manifest` and `reconcile` functions.
///
/// Use it once, at the crate root of a `cdylib` plugin crate.
#[macro_export]
macro_rules! export {
    ($reconciler:ty) => {
        const _: () = {
            struct Guest;

            impl $crate::bindings::Guest for Guest {
                fn manifest(settings: String) -> Result<$crate::Manifest, String> {
                    $crate::__private::manifest::<$reconciler>(&settings)
                }

                fn reconcile(request: $crate::Request) -> Result<$crate::Outcome, $crate::Error> {
                    $crate::__private::reconcile::<$reconciler>(&request)
                }
            }

    $crate::bindings::__export_plugin!(Guest with_types_in $crate::bindings);
        };
    };
}

/// Support for [`export!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use wit_bindgen;

    use crate::{Context, Error, Manifest, Outcome, Reconciler, Request, Settings};

    pub fn manifest<R: Reconciler>(settings: &str) -> Result<Manifest, String> {
        report_panics();
        let settings = Settings::parse(settings)?;
        R::manifest(&settings)
    }

    pub fn reconcile<R: Reconciler>(request: &Request) -> Result<Outcome, Error> {
        report_panics();
        R::reconcile(request, &Context::new(&crate::context::Imports))
    }

    /// wasm32-unknown-unknown has nowhere to print a panic; hand the message to the host, which
    /// puts it in the trap error it reports.
    fn report_panics() {
        #[cfg(target_arch = "wasm32")]
        std::panic::set_hook(Box::new(|info| {
            let message = info.to_string();
            crate::bindings::wasmctrl::plugin::log::log(
                crate::Level::Error,
                &message,
                &[("panic".to_string(), "true".to_string())],
            );
        }));
    }
}
