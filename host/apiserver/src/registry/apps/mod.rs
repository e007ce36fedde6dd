//! The `apps` group's strategies.

mod controller_revision;
mod daemon_set;
mod deployment;
mod replica_set;
mod stateful_set;

pub(crate) use controller_revision::{CONTROLLER_REVISION, ControllerRevision};
pub(crate) use daemon_set::{DAEMON_SET, DaemonSet};
pub(crate) use deployment::{DEPLOYMENT, Deployment};
pub(crate) use replica_set::{REPLICA_SET, ReplicaSet};
pub(crate) use stateful_set::{STATEFUL_SET, StatefulSet};
