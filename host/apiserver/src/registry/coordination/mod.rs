//! The `coordination.k8s.io` group's strategies.

mod lease;

pub(crate) use lease::Lease;
