//! The core group's strategies.

mod binding;
mod component_status;
mod config_map;
mod endpoints;
mod event;
mod limit_range;
mod namespace;
mod node;
mod persistent_volume;
mod persistent_volume_claim;
mod pod;
mod pod_template;
mod replication_controller;
mod resource_quota;
mod secret;
mod service;
mod service_account;

pub(crate) use binding::Binding;
pub(crate) use component_status::ComponentStatus;
pub(crate) use config_map::{CONFIG_MAP, ConfigMap};
pub(crate) use endpoints::{ENDPOINTS, Endpoints};
pub(crate) use event::{EVENT, Event};
pub(crate) use limit_range::LimitRange;
pub(crate) use namespace::Namespace;
pub(crate) use node::{NODE, Node};
pub(crate) use persistent_volume::{PERSISTENT_VOLUME, PersistentVolume};
pub(crate) use persistent_volume_claim::{PERSISTENT_VOLUME_CLAIM, PersistentVolumeClaim};
pub(crate) use pod::{POD, Pod};
pub(crate) use pod_template::PodTemplate;
pub(crate) use replication_controller::ReplicationController;
pub(crate) use resource_quota::ResourceQuota;
pub(crate) use secret::Secret;
pub(crate) use service::{SERVICE, Service};
pub(crate) use service_account::{SERVICE_ACCOUNT, ServiceAccount};
