//! Roles: kube's validation of their rules.

use serde_json::Value;

use crate::registry::Strategy;
use crate::validate::{Errors, rbac};

/// The strategy of `rbac.authorization.k8s.io/Role`.
pub(crate) struct Role;

impl Strategy for Role {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("rbac.authorization.k8s.io", "Role")
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        rbac::rules(obj, true, &mut errs);
        errs
    }
}
