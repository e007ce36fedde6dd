//! Webhooks for the kind a plugin reconciles, answered from the same sandbox: validation and
//! defaulting shaped like controller-runtime's `CustomValidator` and `CustomDefaulter` (typed on
//! [`Reconciler::Object`]), and CRD conversion with kubebuilder's hub and spokes
//! ([`HubAndSpoke`]).
//!
//! A plugin declares what it serves in its [`Manifest`](crate::Manifest)
//! ([`validating`](crate::Manifest::validating), [`defaulting`](crate::Manifest::defaulting),
//! [`converting`](crate::Manifest::converting)), implements the traits, and names them in
//! [`export!`](crate::export): `export!(VirtualMachines, validate, default)`. Each call is pure:
//! it decides, with no actions; it may read the cache as the manifest declares.
//!
//! ```
//! use wasmctrl_sdk::k8s_openapi::api::core::v1::ConfigMap;
//! use wasmctrl_sdk::webhooks::{Admission, Defaulter, Denied, Operation, Validator, Verdict};
//! use wasmctrl_sdk::{Context, Error, Gvk, Manifest, NoSettings, Outcome, Reconcile, Reconciler};
//!
//! struct Sizes;
//!
//! impl Reconciler for Sizes {
//!     type Object = ConfigMap;
//!     type Settings = NoSettings;
//!     fn manifest(_: &NoSettings) -> Result<Manifest, String> {
//!         Ok(Manifest::new("sizes", Gvk::of::<ConfigMap>())
//!             .validating(&[Operation::Create, Operation::Update])
//!             .defaulting())
//!     }
//!     fn reconcile(_: Reconcile<ConfigMap>, _: &Context<'_>) -> Result<Outcome, Error> {
//!         Ok(Outcome::done())
//!     }
//! }
//!
//! impl Validator for Sizes {
//!     fn validate_create(cm: &ConfigMap, _: &Admission<'_>) -> Verdict {
//!         let size = cm.data.as_ref().and_then(|d| d.get("size"));
//!         match size.map(|s| s.parse::<u32>()) {
//!             Some(Ok(n)) if n > 10 => Err(Denied::new(format!("size {n} is over 10"))),
//!             Some(Err(_)) => Err(Denied::new("size must be a number")),
//!             _ => Ok(vec![]),
//!         }
//!     }
//!
//!     fn validate_update(_: &ConfigMap, new: &ConfigMap, ctx: &Admission<'_>) -> Verdict {
//!         Self::validate_create(new, ctx)
//!     }
//! }
//!
//! impl Defaulter for Sizes {
//!     fn default(cm: &mut ConfigMap, _: &Admission<'_>) -> Verdict {
//!         cm.data.get_or_insert_default().entry("size".into()).or_insert("1".into());
//!         Ok(vec![])
//!     }
//! }
//! ```

use std::collections::BTreeMap;
use std::ops::Deref;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use crate::manifest::{Operation, Webhooks};
use crate::{Context, Reconciler};

/// Who sent an admission request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user's name (`system:serviceaccount:<ns>:<name>` for a ServiceAccount).
    pub username: String,
    /// Its uid, if it has one.
    pub uid: String,
    /// Its groups.
    pub groups: Vec<String>,
}

/// An admission request as a validator or defaulter sees it: the operation, who asked, and
/// (through [`Deref`]) the [`Context`] of a reconcile: settings, clock and cache.
pub struct Admission<'a, S = crate::NoSettings> {
    /// What is being done.
    pub operation: Operation,
    /// The subresource written (`status`), or empty.
    pub subresource: String,
    /// Who asked.
    pub user: UserInfo,
    /// A dry run: nothing the request implies is stored, so a webhook with side effects
    /// must not have them.
    pub dry_run: bool,
    context: Context<'a, S>,
}

impl<'a, S> Admission<'a, S> {
    /// An admission request; the SDK builds one from the host's, tests from theirs.
    pub fn new(
        operation: Operation,
        subresource: &str,
        user: UserInfo,
        dry_run: bool,
        context: Context<'a, S>,
    ) -> Self {
        Self {
            operation,
            subresource: subresource.to_string(),
            user,
            dry_run,
            context,
        }
    }
}

impl<'a, S> Deref for Admission<'a, S> {
    type Target = Context<'a, S>;

    fn deref(&self) -> &Self::Target {
        &self.context
    }
}

/// Warnings for the client (kubectl prints each as `Warning: ...`).
pub type Warnings = Vec<String>;

/// A validator's or defaulter's decision: allowed with warnings, or denied.
pub type Verdict = Result<Warnings, Denied>;

/// A refused request: the client sees `admission webhook "<name>" denied the request:
/// <message>` with `code` (403 by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// Why.
    pub message: String,
    /// The HTTP code the refusal answers with.
    pub code: u16,
    /// Warnings sent with the refusal.
    pub warnings: Warnings,
}

impl Denied {
    /// A refusal with `message` (403 Forbidden).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 403,
            warnings: Vec::new(),
        }
    }

    /// The same refusal answered with `code` (for example 422 for an invalid object).
    pub fn with_code(mut self, code: u16) -> Self {
        self.code = code;
        self
    }
}

/// Validates the objects of the reconciled kind, as controller-runtime's `CustomValidator`:
/// one function per operation, each allowing by default.
pub trait Validator: Reconciler {
    /// A create of `object`.
    fn validate_create(object: &Self::Object, ctx: &Admission<'_, Self::Settings>) -> Verdict {
        let _ = (object, ctx);
        Ok(Vec::new())
    }

    /// An update from `old` (as stored) to `new`.
    fn validate_update(
        old: &Self::Object,
        new: &Self::Object,
        ctx: &Admission<'_, Self::Settings>,
    ) -> Verdict {
        let _ = (old, new, ctx);
        Ok(Vec::new())
    }

    /// A delete of `object` (as stored).
    fn validate_delete(object: &Self::Object, ctx: &Admission<'_, Self::Settings>) -> Verdict {
        let _ = (object, ctx);
        Ok(Vec::new())
    }
}

/// Defaults the objects of the reconciled kind on create and update, as controller-runtime's
/// `CustomDefaulter`: it changes `object` in place, and the webhook answers the JSON Patch of
/// what it changed (fields its Rust type does not know are left as they were).
pub trait Defaulter: Reconciler<Object: Serialize> {
    /// Fills in what `object` leaves out.
    fn default(object: &mut Self::Object, ctx: &Admission<'_, Self::Settings>) -> Verdict;
}

/// Converts objects of the reconciled kind (a CRD with several versions) between versions.
/// [`HubAndSpoke`] writes one from conversions to and from a hub version.
pub trait Converter: Reconciler {
    /// `object` (at any version the manifest declares) as `api_version` (`group/version`).
    fn convert(
        object: Value,
        api_version: &str,
        settings: &Self::Settings,
    ) -> Result<Value, String>;
}

/// A validator's verdict on a request whose objects are JSON (`object` as written, `old` as
/// stored): the function its operation names, or the 400 refusal controller-runtime answers
/// when an object does not decode as the reconciled kind.
pub(crate) fn validate_json<R: Validator>(
    ctx: &Admission<'_, R::Settings>,
    object: Option<&str>,
    old: Option<&str>,
) -> Verdict {
    match ctx.operation {
        Operation::Create => decoded(object).and_then(|o| R::validate_create(&o, ctx)),
        Operation::Update => {
            let (old, new) = (decoded(old)?, decoded(object)?);
            R::validate_update(&old, &new, ctx)
        }
        Operation::Delete => decoded(old).and_then(|o| R::validate_delete(&o, ctx)),
        Operation::Connect => Ok(Vec::new()),
    }
}

/// A defaulter's result on `json`: the object with the defaulter's changes (none when it
/// changed nothing) and nothing else its Rust type's round trip would change (fields the type
/// does not know kept, as controller-runtime keeps them), or its refusal. `Err` when its
/// changes cannot be applied to the object.
pub(crate) fn default_json<R: Defaulter>(
    ctx: &Admission<'_, R::Settings>,
    json: &str,
) -> Result<Result<(Option<Value>, Warnings), Denied>, String> {
    let original: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let mut typed: R::Object = match decoded(Some(json)) {
        Ok(t) => t,
        Err(denied) => return Ok(Err(denied)),
    };
    let before = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let warnings = match R::default(&mut typed, ctx) {
        Ok(w) => w,
        Err(denied) => return Ok(Err(denied)),
    };
    let after = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let changes = json_patch::diff(&before, &after);
    if changes.0.is_empty() {
        return Ok(Ok((None, warnings)));
    }
    let mut patched = original;
    json_patch::patch(&mut patched, &changes.0)
        .map_err(|e| format!("the defaulter's changes do not apply to the object: {e}"))?;
    Ok(Ok((Some(patched), warnings)))
}

/// The object of `json` as `T`, or the 400 refusal controller-runtime answers when it does
/// not decode.
fn decoded<T: DeserializeOwned>(json: Option<&str>) -> Result<T, Denied> {
    serde_json::from_str(json.unwrap_or("null"))
        .map_err(|e| Denied::new(format!("the object does not decode: {e}")).with_code(400))
}

/// A spoke version of a kind: how it converts to and from the hub version `H`, as kubebuilder's
/// `Convertible` with `ConvertTo` and `ConvertFrom`.
pub trait Spoke<H>: Sized {
    /// This version as the hub.
    fn to_hub(self) -> Result<H, String>;
    /// The hub as this version.
    fn from_hub(hub: H) -> Result<Self, String>;
}

type Step = Box<dyn Fn(Value) -> Result<Value, String>>;

/// Conversion through a hub, as kubebuilder lays it out: each spoke version converts to and
/// from the hub, so N versions need 2(N - 1) conversions, not N(N - 1).
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use wasmctrl_sdk::webhooks::{HubAndSpoke, Spoke};
///
/// #[derive(Serialize, Deserialize)]
/// struct V1 { #[serde(rename = "apiVersion")] api_version: String, kind: String, size: u32 }
/// #[derive(Serialize, Deserialize)]
/// struct V2 { #[serde(rename = "apiVersion")] api_version: String, kind: String, capacity: u32 }
///
/// impl Spoke<V1> for V2 {
///     fn to_hub(self) -> Result<V1, String> {
///         Ok(V1 { api_version: String::new(), kind: self.kind, size: self.capacity })
///     }
///     fn from_hub(hub: V1) -> Result<Self, String> {
///         Ok(V2 { api_version: String::new(), kind: hub.kind, capacity: hub.size })
///     }
/// }
///
/// let conversion = HubAndSpoke::<V1>::new("example.com", "v1").spoke::<V2>("v2");
/// let v2 = conversion
///     .convert(serde_json::json!({"apiVersion": "example.com/v1", "kind": "Box", "size": 3}), "example.com/v2")
///     .unwrap();
/// assert_eq!(v2, serde_json::json!({"apiVersion": "example.com/v2", "kind": "Box", "capacity": 3}));
/// ```
pub struct HubAndSpoke<H> {
    group: String,
    hub: String,
    to_hub: BTreeMap<String, Step>,
    from_hub: BTreeMap<String, Step>,
    _hub: std::marker::PhantomData<fn() -> H>,
}

impl<H: Serialize + DeserializeOwned + 'static> HubAndSpoke<H> {
    /// Conversions of `group`'s kind through the hub version `hub`, the Rust type `H`.
    pub fn new(group: &str, hub: &str) -> Self {
        Self {
            group: group.to_string(),
            hub: hub.to_string(),
            to_hub: BTreeMap::new(),
            from_hub: BTreeMap::new(),
            _hub: std::marker::PhantomData,
        }
    }

    /// Adds the spoke `version`, the Rust type `T`.
    pub fn spoke<T: Spoke<H> + Serialize + DeserializeOwned + 'static>(
        mut self,
        version: &str,
    ) -> Self {
        let to = |object: Value| -> Result<Value, String> {
            let spoke: T = serde_json::from_value(object).map_err(|e| e.to_string())?;
            serde_json::to_value(spoke.to_hub()?).map_err(|e| e.to_string())
        };
        let from = |object: Value| -> Result<Value, String> {
            let hub: H = serde_json::from_value(object).map_err(|e| e.to_string())?;
            serde_json::to_value(T::from_hub(hub)?).map_err(|e| e.to_string())
        };
        self.to_hub.insert(version.to_string(), Box::new(to));
        self.from_hub.insert(version.to_string(), Box::new(from));
        self
    }

    /// `object` as `api_version`: to the hub from its own version, then from the hub; its
    /// `apiVersion` set, and everything the versions share (metadata, kind) kept.
    pub fn convert(&self, object: Value, api_version: &str) -> Result<Value, String> {
        let version_of = |api_version: &str| -> Result<String, String> {
            match api_version.rsplit_once('/') {
                Some((group, version)) if group == self.group => Ok(version.to_string()),
                _ => Err(format!("{api_version} is not a version of {}", self.group)),
            }
        };
        let from = version_of(object["apiVersion"].as_str().unwrap_or_default())?;
        let to = version_of(api_version)?;
        let metadata = object.get("metadata").cloned();
        let kind = object.get("kind").cloned();
        let mut hub = match self.to_hub.get(&from) {
            Some(step) => step(object)?,
            None if from == self.hub => object,
            None => return Err(format!("no conversion from {from}")),
        };
        hub["apiVersion"] = Value::String(format!("{}/{}", self.group, self.hub));
        let mut out = match self.from_hub.get(&to) {
            Some(step) => step(hub)?,
            None if to == self.hub => hub,
            None => return Err(format!("no conversion to {to}")),
        };
        out["apiVersion"] = Value::String(api_version.to_string());
        if let Some(kind) = kind {
            out["kind"] = kind;
        }
        if let Some(metadata) = metadata {
            out["metadata"] = metadata;
        }
        Ok(out)
    }
}
