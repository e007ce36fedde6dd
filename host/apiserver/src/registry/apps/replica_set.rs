//! ReplicaSets: defaults, kube's validation with an immutable selector.

use serde_json::Value;

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::selector::{self, Field};
use crate::store::State;
use crate::validate::{self, Errors, apps};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const REPLICA_SET: TypeMeta = TypeMeta::new("apps/v1", "ReplicaSet");

/// The strategy of `apps/ReplicaSet`.
pub(crate) struct ReplicaSet;

impl Strategy for ReplicaSet {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("apps", "ReplicaSet")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::replica_set(obj);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        apps::replica_set(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        validate::with_immutable_selector(apps::replica_set, new, old, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::REPLICA_SET
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::REPLICAS_FIELDS
    }
}
