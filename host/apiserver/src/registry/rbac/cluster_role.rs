//! ClusterRoles: kube's validation of their rules.

use serde_json::Value;

use crate::registry::Strategy;
use crate::validate::{Errors, rbac};

/// The strategy of `rbac.authorization.k8s.io/ClusterRole`.
pub(crate) struct ClusterRole;

impl Strategy for ClusterRole {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("rbac.authorization.k8s.io", "ClusterRole")
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        rbac::rules(obj, false, &mut errs);
        errs
    }
}
