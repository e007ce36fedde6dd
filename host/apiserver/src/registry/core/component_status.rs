//! ComponentStatuses: served, read-only, and none exist here.

use crate::registry::Strategy;

/// The strategy of `ComponentStatus`.
pub(crate) struct ComponentStatus;

impl Strategy for ComponentStatus {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "ComponentStatus")
    }
}
