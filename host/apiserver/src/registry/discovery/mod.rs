//! The `discovery.k8s.io` group's strategies.

mod endpoint_slice;

pub(crate) use endpoint_slice::{ENDPOINT_SLICE, EndpointSlice};
