//! ValidatingAdmissionPolicies (stored; not enforced here).

use crate::registry::Strategy;

/// The strategy of `admissionregistration.k8s.io/ValidatingAdmissionPolicy`.
pub(crate) struct ValidatingAdmissionPolicy;

impl Strategy for ValidatingAdmissionPolicy {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy")
    }

    fn has_generation(&self) -> bool {
        true
    }
}
