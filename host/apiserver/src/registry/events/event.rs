//! `events.k8s.io` Events: a view of the core Events they are stored as (`events`).

use crate::printers::{self, Printer};
use crate::registry::Strategy;

/// The strategy of `events.k8s.io/Event`.
pub(crate) struct Event;

impl Strategy for Event {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("events.k8s.io", "Event")
    }

    fn printer(&self) -> &'static Printer {
        &printers::EVENT
    }
}
