//! The `storage.k8s.io` group's strategies.

mod csi_driver;
mod csi_node;
mod csi_storage_capacity;
mod storage_class;
mod volume_attachment;

pub(crate) use csi_driver::CsiDriver;
pub(crate) use csi_node::CsiNode;
pub(crate) use csi_storage_capacity::CsiStorageCapacity;
pub(crate) use storage_class::StorageClass;
pub(crate) use volume_attachment::VolumeAttachment;
