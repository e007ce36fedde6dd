//! PersistentVolumeClaims: defaults, the `DefaultStorageClass` admission plugin, `Pending`
//! from creation, kube's validation (immutable spec but for its resources).

use serde_json::{Value, json};

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::selector::{self, Field};
use crate::status::ApiResult;
use crate::store::State;
use crate::validate::{Errors, core};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const PERSISTENT_VOLUME_CLAIM: TypeMeta = TypeMeta::new("v1", "PersistentVolumeClaim");

/// The strategy of `PersistentVolumeClaim`.
pub(crate) struct PersistentVolumeClaim;

impl Strategy for PersistentVolumeClaim {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "PersistentVolumeClaim")
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::claim(obj);
    }

    fn prepare_for_create(&self, st: &State, obj: &mut Value, _now: &str) -> ApiResult<()> {
        defaults::default_storage_class(st, obj);
        obj["status"] = json!({"phase": "Pending"});
        Ok(())
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        core::claim(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        core::claim_update(new, old, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::PERSISTENT_VOLUME_CLAIM
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::VOLUME_FIELDS
    }
}
