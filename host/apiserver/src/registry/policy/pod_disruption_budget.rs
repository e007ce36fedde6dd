//! PodDisruptionBudgets.

use crate::printers::{self, Printer};
use crate::registry::Strategy;

/// The strategy of `policy/PodDisruptionBudget`.
pub(crate) struct PodDisruptionBudget;

impl Strategy for PodDisruptionBudget {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("policy", "PodDisruptionBudget")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn printer(&self) -> &'static Printer {
        &printers::POD_DISRUPTION_BUDGET
    }
}
