//! The `admissionregistration.k8s.io` group's strategies.

mod mutating_webhook_configuration;
mod validating_admission_policy;
mod validating_admission_policy_binding;
mod validating_webhook_configuration;

pub(crate) use mutating_webhook_configuration::MutatingWebhookConfiguration;
pub(crate) use validating_admission_policy::ValidatingAdmissionPolicy;
pub(crate) use validating_admission_policy_binding::ValidatingAdmissionPolicyBinding;
pub(crate) use validating_webhook_configuration::ValidatingWebhookConfiguration;
