//! CSINodes.

use crate::registry::Strategy;

/// The strategy of `storage.k8s.io/CSINode`.
pub(crate) struct CsiNode;

impl Strategy for CsiNode {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("storage.k8s.io", "CSINode")
    }
}
