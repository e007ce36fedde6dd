//! core/v1 Events (the Event rules themselves are `admission`'s, shared with
//! `events.k8s.io`'s view of them).

use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::selector::{self, Field};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const EVENT: TypeMeta = TypeMeta::new("v1", "Event");

/// The strategy of `Event`.
pub(crate) struct Event;

impl Strategy for Event {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "Event")
    }

    fn printer(&self) -> &'static Printer {
        &printers::EVENT
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::EVENT_FIELDS
    }
}
