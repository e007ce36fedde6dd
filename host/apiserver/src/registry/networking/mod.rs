//! The `networking.k8s.io` group's strategies.

mod ingress;
mod ingress_class;
mod network_policy;

pub(crate) use ingress::Ingress;
pub(crate) use ingress_class::IngressClass;
pub(crate) use network_policy::NetworkPolicy;
