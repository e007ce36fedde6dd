//! The `scheduling.k8s.io` group's strategies.

mod priority_class;

pub(crate) use priority_class::PriorityClass;
