//! FlowSchemas (stored; no priority and fairness here).

use crate::registry::Strategy;

/// The strategy of `flowcontrol.apiserver.k8s.io/FlowSchema`.
pub(crate) struct FlowSchema;

impl Strategy for FlowSchema {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("flowcontrol.apiserver.k8s.io", "FlowSchema")
    }

    fn has_generation(&self) -> bool {
        true
    }
}
