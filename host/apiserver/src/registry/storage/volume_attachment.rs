//! VolumeAttachments.

use crate::registry::Strategy;

/// The strategy of `storage.k8s.io/VolumeAttachment`.
pub(crate) struct VolumeAttachment;

impl Strategy for VolumeAttachment {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("storage.k8s.io", "VolumeAttachment")
    }
}
