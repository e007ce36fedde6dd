//! What the host tells the outside: [`metrics`] (Prometheus metrics named as
//! controller-runtime's, served over HTTPS behind TokenReview and SubjectAccessReview),
//! [`probes`] (the kubelet's health and readiness probes) and [`events`] (Kubernetes Events
//! with series, as client-go records them, best effort).

pub mod events;
pub mod metrics;
pub mod probes;
