//! CSIStorageCapacities.

use crate::registry::Strategy;

/// The strategy of `storage.k8s.io/CSIStorageCapacity`.
pub(crate) struct CsiStorageCapacity;

impl Strategy for CsiStorageCapacity {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("storage.k8s.io", "CSIStorageCapacity")
    }
}
