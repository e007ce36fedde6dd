//! RoleBindings: subjects' and role reference's groups defaulted, kube's validation; the
//! role reference may not change.

use serde_json::Value;

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::Strategy;
use crate::store::State;
use crate::validate::{self, Errors, rbac};

/// The strategy of `rbac.authorization.k8s.io/RoleBinding`.
pub(crate) struct RoleBinding;

impl Strategy for RoleBinding {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("rbac.authorization.k8s.io", "RoleBinding")
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::role_binding(obj);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        rbac::binding(obj, true, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        validate::binding_update(new, old, true, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::BINDING
    }
}
