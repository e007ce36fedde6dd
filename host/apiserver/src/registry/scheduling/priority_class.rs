//! PriorityClasses (read by the `Priority` admission of Pods, `defaults::admit_pod`).

use crate::registry::Strategy;

/// The strategy of `scheduling.k8s.io/PriorityClass`.
pub(crate) struct PriorityClass;

impl Strategy for PriorityClass {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("scheduling.k8s.io", "PriorityClass")
    }

    fn has_generation(&self) -> bool {
        true
    }
}
