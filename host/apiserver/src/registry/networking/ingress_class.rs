//! IngressClasses.

use crate::registry::Strategy;

/// The strategy of `networking.k8s.io/IngressClass`.
pub(crate) struct IngressClass;

impl Strategy for IngressClass {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("networking.k8s.io", "IngressClass")
    }

    fn has_generation(&self) -> bool {
        true
    }
}
