//! The `apiregistration.k8s.io` group's strategies.

mod api_service;

pub(crate) use api_service::ApiService;
