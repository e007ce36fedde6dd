//! ValidatingAdmissionPolicyBindings: kube's defaults and validation; bind policies to what they judge (`policies`).

use serde_json::Value;

use crate::defaults;
use crate::registry::Strategy;
use crate::store::State;
use crate::validate::{Errors, admissionregistration};

/// The strategy of `admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding`.
pub(crate) struct ValidatingAdmissionPolicyBinding;

impl Strategy for ValidatingAdmissionPolicyBinding {
    fn group_kind(&self) -> (&'static str, &'static str) {
        (
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicyBinding",
        )
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::admission_policy(obj, true);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        admissionregistration::policy_binding(obj, &mut errs);
        errs
    }
}
