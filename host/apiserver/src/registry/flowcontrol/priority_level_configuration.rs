//! PriorityLevelConfigurations (stored; no priority and fairness here).

use crate::registry::Strategy;

/// The strategy of `flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration`.
pub(crate) struct PriorityLevelConfiguration;

impl Strategy for PriorityLevelConfiguration {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration")
    }

    fn has_generation(&self) -> bool {
        true
    }
}
