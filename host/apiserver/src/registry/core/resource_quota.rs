//! ResourceQuotas: stored as sent (no quota admission or controller here).

use crate::registry::Strategy;

/// The strategy of `ResourceQuota`.
pub(crate) struct ResourceQuota;

impl Strategy for ResourceQuota {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "ResourceQuota")
    }
}
