//! The `apiextensions.k8s.io` group's strategies.

mod custom_resource_definition;

pub(crate) use custom_resource_definition::CustomResourceDefinition;
