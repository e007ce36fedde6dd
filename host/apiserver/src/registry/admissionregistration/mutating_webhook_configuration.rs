//! MutatingWebhookConfigurations (stored; no webhooks are called here).

use crate::registry::Strategy;

/// The strategy of `admissionregistration.k8s.io/MutatingWebhookConfiguration`.
pub(crate) struct MutatingWebhookConfiguration;

impl Strategy for MutatingWebhookConfiguration {
    fn group_kind(&self) -> (&'static str, &'static str) {
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
        )
    }

    fn has_generation(&self) -> bool {
        true
    }
}
