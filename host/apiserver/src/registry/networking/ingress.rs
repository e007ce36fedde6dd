//! Ingresses: kube's validation of rules, paths and backends.

use serde_json::Value;

use crate::registry::Strategy;
use crate::validate::{Errors, networking};

/// The strategy of `networking.k8s.io/Ingress`.
pub(crate) struct Ingress;

impl Strategy for Ingress {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("networking.k8s.io", "Ingress")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        networking::ingress(obj, &mut errs);
        errs
    }
}
