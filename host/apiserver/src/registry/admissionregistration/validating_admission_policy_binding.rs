//! ValidatingAdmissionPolicyBindings (stored; not enforced here).

use crate::registry::Strategy;

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
}
