//! HorizontalPodAutoscalers (stored; no autoscaler runs here).

use crate::printers::{self, Printer};
use crate::registry::Strategy;

/// The strategy of `autoscaling/HorizontalPodAutoscaler`.
pub(crate) struct HorizontalPodAutoscaler;

impl Strategy for HorizontalPodAutoscaler {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("autoscaling", "HorizontalPodAutoscaler")
    }

    fn printer(&self) -> &'static Printer {
        &printers::HORIZONTAL_POD_AUTOSCALER
    }
}
