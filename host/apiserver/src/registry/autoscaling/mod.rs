//! The `autoscaling` group's strategies.

mod horizontal_pod_autoscaler;

pub(crate) use horizontal_pod_autoscaler::HorizontalPodAutoscaler;
