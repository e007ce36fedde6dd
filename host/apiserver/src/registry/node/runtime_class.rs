//! RuntimeClasses.

use crate::registry::Strategy;

/// The strategy of `node.k8s.io/RuntimeClass`.
pub(crate) struct RuntimeClass;

impl Strategy for RuntimeClass {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("node.k8s.io", "RuntimeClass")
    }
}
