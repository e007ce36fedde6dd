//! StatefulSets: defaults (their claim templates' included), kube's validation and
//! what may change on update.

use serde_json::Value;

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::store::State;
use crate::validate::{Errors, apps};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const STATEFUL_SET: TypeMeta = TypeMeta::new("apps/v1", "StatefulSet");

/// The strategy of `apps/StatefulSet`.
pub(crate) struct StatefulSet;

impl Strategy for StatefulSet {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("apps", "StatefulSet")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::stateful_set(obj);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        apps::stateful_set(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        apps::stateful_set_update(new, old, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::STATEFUL_SET
    }
}
