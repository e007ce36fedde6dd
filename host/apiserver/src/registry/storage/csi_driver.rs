//! CSIDrivers.

use crate::registry::Strategy;

/// The strategy of `storage.k8s.io/CSIDriver`.
pub(crate) struct CsiDriver;

impl Strategy for CsiDriver {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("storage.k8s.io", "CSIDriver")
    }
}
