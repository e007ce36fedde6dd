//! The `node.k8s.io` group's strategies.

mod runtime_class;

pub(crate) use runtime_class::RuntimeClass;
