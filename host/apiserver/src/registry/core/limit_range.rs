//! LimitRanges: stored as sent (no LimitRanger admission here).

use crate::registry::Strategy;

/// The strategy of `LimitRange`.
pub(crate) struct LimitRange;

impl Strategy for LimitRange {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "LimitRange")
    }
}
