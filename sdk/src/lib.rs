//! Write wasmctrl reconciler plugins in Rust.
//!
//! A plugin is one type implementing [`Reconciler`] and one [`export!`] line. Objects are
//! k8s-openapi's types for built-in kinds and kube's `#[derive(CustomResource)]` types for your
//! own, as in a kube-rs controller:
//!
//! ```
//! use wasmctrl_sdk::k8s_openapi::api::core::v1::ConfigMap;
//! use wasmctrl_sdk::{Context, Error, Manifest, NoSettings, Outcome, Reconcile, Reconciler};
//!
//! struct Hello;
//!
//! impl Reconciler for Hello {
//!     type Object = ConfigMap;
//!     type Settings = NoSettings;
//!
//!     fn manifest(_settings: &NoSettings) -> Result<Manifest, String> {
//!         Ok(Manifest::for_::<ConfigMap>("hello"))
//!     }
//!
//!     fn reconcile(event: Reconcile<ConfigMap>, ctx: &Context<'_>) -> Result<Outcome, Error> {
//!         if let Reconcile::Apply(config) = event {
//!             let keys = config.data.unwrap_or_default().len();
//!             wasmctrl_sdk::tracing::info!(key = %ctx.key(), keys, "reconciling");
//!         }
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
//!
//! The root holds what every plugin uses; the [`manifest`] module holds the rest of what a
//! manifest is built from (predicates, mappings, selectors), [`action`] the parts of actions,
//! [`kube`] the helpers for typed objects (a child's metadata, CRDs with descriptions cut,
//! conditions' schema), [`conditions`] and [`sql`] what their names say.
//!
//! The SDK implements the plugin contract `wasmctrl:plugin@0.3.0`; its copy of the contract's
//! WIT is `wit/plugin.wit` in this crate.
//!
//! # Kubernetes version
//!
//! [`k8s_openapi`]'s types are **Kubernetes 1.33**'s (its `v1_33` feature, the oldest k8s-openapi
//! 0.29 offers); `wasmctrl dev`'s embedded API server serves **1.32**. The two differ in fields
//! 1.33 added (such as a Pod's `spec.resources`); dev mode prunes a field it does not serve, as a
//! 1.32 cluster does, so write for the oldest cluster you deploy to. Plugins take the types
//! through `wasmctrl_sdk::k8s_openapi` and need no `k8s-openapi` dependency (and no version
//! feature) of their own.
//!
//! # Finalizers: two patterns
//!
//! - **Declared** ([`Manifest::finalizer`], kube-runtime's `finalizer()`): the SDK adds the
//!   finalizer in a reconcile of its own, before the first [`Reconcile::Apply`] (one extra
//!   reconcile per object, brought back by the finalizer's own change), calls
//!   [`Reconcile::Cleanup`] once the object is being deleted, and appends the finalizer's
//!   removal to a cleanup that succeeded. Nothing to get wrong; the cost is that extra pass.
//! - **By hand** (what operator-sdk's Memcached tutorial does, controllerutil's
//!   `AddFinalizer`/`RemoveFinalizer`): declare no finalizer, and in [`Reconcile::Apply`] push
//!   [`Action::add_finalizer`] with the first pass's other actions (it is a no-op once present);
//!   in [`Reconcile::Cleanup`], check the finalizer is yours
//!   (`object.finalizers().contains(..)`), clean up, and push [`Action::remove_finalizer`] last,
//!   after the status and Events that report the cleanup. Saves the extra reconcile; the plugin
//!   must not forget either half.
//!
//! Either way the host does not reconcile the key again until its cache shows every object the
//! reconcile wrote at the version its last write returned, so a cleanup that writes the status
//! and then removes the finalizer runs once.
//!
//! # CRDs from types: kubebuilder's markers in Rust
//!
//! A `#[derive(CustomResource)]` type generates its CRD (schemars, through kube);
//! [`testing::check_crd`] keeps the checked-in file current and refuses a schema whose defaults
//! do not validate against it, as kube-apiserver refuses such a CRD.
//!
//! | kubebuilder (Go) | Rust |
//! |---|---|
//! | `+kubebuilder:validation:Minimum=1`, `Maximum=5` | `#[schemars(range(min = 1, max = 5))]` |
//! | `+kubebuilder:validation:ExclusiveMinimum=true` | `#[schemars(extend("exclusiveMinimum" = true))]` |
//! | `+kubebuilder:validation:MinLength=1`, `MaxLength=63` | `#[schemars(length(min = 1, max = 63))]` |
//! | `+kubebuilder:validation:MinItems=1`, `MaxItems` | `#[schemars(length(min = 1))]` on a `Vec` |
//! | `+kubebuilder:validation:Pattern=^[a-z]+$` | `#[schemars(pattern(r"^[a-z]+$"))]` |
//! | `+kubebuilder:validation:Enum=A;B` | a Rust `enum` deriving `JsonSchema` (unit variants) |
//! | `+kubebuilder:validation:Format=date-time` | `#[schemars(extend("format" = "date-time"))]` |
//! | `+kubebuilder:validation:XValidation:rule="self.a < self.b"` | `#[schemars(extend("x-kubernetes-validations" = [{"rule": "self.a < self.b"}]))]` |
//! | `+optional` with `omitempty` | `Option<T>` with `#[serde(default, skip_serializing_if = "Option::is_none")]` |
//! | `+required` (no `omitempty`) | a plain field without `#[serde(default)]` |
//! | `+kubebuilder:default=1` | `#[serde(default = "one")]` with `fn one() -> i32 { 1 }` (schemars writes `default: 1`) |
//! | `+kubebuilder:pruning:PreserveUnknownFields` | `#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]` on a `serde_json::Value` |
//! | `+listType=map`, `+listMapKey=type` | `#[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]`; for conditions `#[schemars(schema_with = "wasmctrl_sdk::kube::conditions")]` |
//! | `+listType=set` | `#[schemars(extend("x-kubernetes-list-type" = "set"))]` |
//! | `+kubebuilder:printcolumn:name=Size,type=integer,JSONPath=.spec.size` | `#[kube(printcolumn = r#"{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}"#)]` |
//! | `+kubebuilder:subresource:status` | `#[kube(status = "MyStatus")]` |
//! | `+kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas` | `#[kube(scale(spec_replicas_path = ".spec.replicas", status_replicas_path = ".status.replicas"))]` |
//! | `+kubebuilder:resource:scope=Cluster`, `shortName=mc` | no `namespaced` in `#[kube(...)]`; `#[kube(shortname = "mc")]` |
//! | `metav1.Condition` | [`Condition`] (its schema is `metav1.Condition`'s) |
//!
//! A bare `#[serde(default)]` makes the type's `Default` (0, `""`) the schema's default: on a
//! field with a lower bound that default is invalid, and [`testing::check_crd`] fails naming
//! the field. Write the default with a function, or make the field an `Option`.

// The generated bindings name the SDK by its crate name, from plugin crates and from here alike.
extern crate self as wasmctrl_sdk;

pub mod action;
pub mod conditions;
pub mod context;
mod error;
pub mod kube;
mod logging;
pub mod manifest;
mod reconcile;
pub mod request;
pub mod sql;
pub mod testing;
pub mod webhooks;

#[doc(hidden)]
#[path = "export.rs"]
pub mod __private;

pub use action::{Action, ObjectRef, Outcome, Propagation};
pub use conditions::Condition;
pub use context::Context;
pub use error::Error;
pub use jiff;
pub use manifest::{Gvk, Manifest, NoSettings};
pub use reconcile::{Reconcile, finalizer};
pub use request::{ActionFailure, ActionResult, ActionStatus};
pub use tracing;
pub use {
    k8s_openapi, kube_core,
    kube_core::{CustomResourceExt, Resource, ResourceExt},
    kube_derive::CustomResource,
    schemars,
};

/// A reconciler: declares what it watches and decides, per key, what should happen.
///
/// Both functions are associated functions rather than methods because every call runs in a
/// fresh instance: there is no `self` that could carry state between calls.
pub trait Reconciler {
    /// The kind reconciled, as its Rust type: a k8s-openapi type, a `#[derive(CustomResource)]`
    /// type, or [`kube_core::DynamicObject`] for a kind with no Rust type. The SDK decodes the
    /// cached object into it; an object that does not fit is a terminal error naming it.
    type Object: Resource + serde::de::DeserializeOwned;

    /// The operator's settings for this plugin (the config file beside the `.wasm`), parsed by
    /// the SDK before each call. No settings give `Default::default()`; settings that do not
    /// deserialize make the host refuse the plugin at load, with serde's message. Use
    /// [`NoSettings`] for a plugin that takes none.
    type Settings: serde::de::DeserializeOwned + Default;

    /// Describes the plugin for the operator's settings. An `Err` rejects the settings and the
    /// host refuses to load the plugin, printing the message.
    ///
    /// The SDK also calls it before each reconcile of an existing object, to learn the
    /// [finalizer](Manifest::finalizer) it handles: keep it a pure function of the settings.
    fn manifest(settings: &Self::Settings) -> Result<Manifest, String>;

    /// Decides what to do for one key: [`Reconcile::Apply`] a live object,
    /// [`Reconcile::Cleanup`] one being deleted, or let a [`Reconcile::Gone`] one go. The
    /// context carries the settings, the host's clock, what the previous reconcile's actions
    /// did, and the cache.
    fn reconcile(
        event: Reconcile<Self::Object>,
        ctx: &Context<'_, Self::Settings>,
    ) -> Result<Outcome, Error>;
}

/// Exports a [`Reconciler`] as the plugin's `reconciler` interface, and the webhooks it serves
/// as its `webhooks` interface: name each one it implements after the reconciler, `validate`
/// ([`webhooks::Validator`]), `default` ([`webhooks::Defaulter`]) and `convert`
/// ([`webhooks::Converter`]), as its [`Manifest`] declares them.
///
/// ```ignore
/// wasmctrl_sdk::export!(VirtualMachines);
/// wasmctrl_sdk::export!(VirtualMachines, validate, default);
/// ```
///
/// Use it once, at the crate root of a `cdylib` plugin crate.
#[macro_export]
macro_rules! export {
    ($reconciler:ty $(, $hook:ident)* $(,)?) => {
        const _: () = {
            // Natively (tests, `rlib` builds) nothing is exported: export names such as
            // `wasmctrl:plugin/reconciler@0.3.1#reconcile` are not valid native symbols.
            #[allow(dead_code)]
            struct Guest;

            $( $crate::__webhook_name!($hook); )*

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

            impl $crate::__private::WebhooksGuest for Guest {
                fn declare(
                    settings: ::std::string::String,
                ) -> ::std::result::Result<$crate::__private::WireDeclaration, ::std::string::String>
                {
                    $crate::__private::declare::<$reconciler>(&settings, &[$(stringify!($hook)),*])
                }

                fn validate(
                    request: $crate::__private::WireAdmissionRequest,
                ) -> ::std::result::Result<$crate::__private::WireAdmissionResponse, ::std::string::String>
                {
                    $crate::__webhook!(validate, $reconciler, (request); $($hook),*)
                }

                fn mutate(
                    request: $crate::__private::WireAdmissionRequest,
                ) -> ::std::result::Result<$crate::__private::WireAdmissionResponse, ::std::string::String>
                {
                    $crate::__webhook!(default, $reconciler, (request); $($hook),*)
                }

                fn convert(
                    settings: ::std::string::String,
                    api_version: ::std::string::String,
                    objects: ::std::vec::Vec<::std::string::String>,
                ) -> ::std::result::Result<::std::vec::Vec<::std::string::String>, ::std::string::String>
                {
                    $crate::__webhook!(convert, $reconciler, (&settings, &api_version, objects); $($hook),*)
                }
            }

            #[cfg(target_arch = "wasm32")]
            $crate::__private::bindings::__export_plugin!(
                Guest with_types_in $crate::__private::bindings
            );
        };
    };
}

/// Refuses, at compile time, a webhook name [`export!`] does not know.
#[doc(hidden)]
#[macro_export]
macro_rules! __webhook_name {
    (validate) => {};
    (default) => {};
    (convert) => {};
    ($other:ident) => {
        compile_error!(concat!(
            "export!: unknown webhook `",
            stringify!($other),
            "` (validate, default or convert)"
        ));
    };
}

/// Calls the SDK's side of one webhook when [`export!`] names it, else answers that the plugin
/// does not serve it.
#[doc(hidden)]
#[macro_export]
macro_rules! __webhook {
    (validate, $r:ty, ($($arg:expr),*); validate $(, $rest:ident)*) => {
        $crate::__private::validate::<$r>($($arg),*)
    };
    (default, $r:ty, ($($arg:expr),*); default $(, $rest:ident)*) => {
        $crate::__private::default::<$r>($($arg),*)
    };
    (convert, $r:ty, ($($arg:expr),*); convert $(, $rest:ident)*) => {
        $crate::__private::convert::<$r>($($arg),*)
    };
    ($want:ident, $r:ty, ($($arg:expr),*); $other:ident $(, $rest:ident)*) => {
        $crate::__webhook!($want, $r, ($($arg),*); $($rest),*)
    };
    ($want:ident, $r:ty, ($($arg:expr),*); ) => {{
        let _ = ($($arg),*);
        ::std::result::Result::Err($crate::__private::unserved(stringify!($want)))
    }};
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
