//! EndpointSlices (written here by the endpoints controller, `cluster`).

use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const ENDPOINT_SLICE: TypeMeta = TypeMeta::new("discovery.k8s.io/v1", "EndpointSlice");

/// The strategy of `discovery.k8s.io/EndpointSlice`.
pub(crate) struct EndpointSlice;

impl Strategy for EndpointSlice {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("discovery.k8s.io", "EndpointSlice")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn printer(&self) -> &'static Printer {
        &printers::ENDPOINT_SLICE
    }
}
