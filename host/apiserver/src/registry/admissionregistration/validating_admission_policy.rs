//! ValidatingAdmissionPolicys: kube's defaults and validation; enforced by the server (`policies`).

use serde_json::Value;

use crate::defaults;
use crate::registry::Strategy;
use crate::store::State;
use crate::validate::{Errors, admissionregistration};

/// The strategy of `admissionregistration.k8s.io/ValidatingAdmissionPolicy`.
pub(crate) struct ValidatingAdmissionPolicy;

impl Strategy for ValidatingAdmissionPolicy {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::admission_policy(obj, false);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        admissionregistration::policy(obj, &mut errs);
        errs
    }
}
