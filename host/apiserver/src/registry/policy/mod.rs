//! The `policy` group's strategies.

mod pod_disruption_budget;

pub(crate) use pod_disruption_budget::PodDisruptionBudget;
