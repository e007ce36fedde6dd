//! The `flowcontrol.apiserver.k8s.io` group's strategies.

mod flow_schema;
mod priority_level_configuration;

pub(crate) use flow_schema::FlowSchema;
pub(crate) use priority_level_configuration::PriorityLevelConfiguration;
