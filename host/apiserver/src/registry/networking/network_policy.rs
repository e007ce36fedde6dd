//! NetworkPolicies: defaults (ports' protocol, policy types), kube's validation.

use serde_json::Value;

use crate::defaults;
use crate::registry::Strategy;
use crate::store::State;
use crate::validate::{Errors, networking};

/// The strategy of `networking.k8s.io/NetworkPolicy`.
pub(crate) struct NetworkPolicy;

impl Strategy for NetworkPolicy {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("networking.k8s.io", "NetworkPolicy")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::network_policy(obj);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        networking::network_policy(obj, &mut errs);
        errs
    }
}
