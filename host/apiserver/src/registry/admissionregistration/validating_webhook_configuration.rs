//! ValidatingWebhookConfigurations (stored; no webhooks are called here).

use crate::registry::Strategy;

/// The strategy of `admissionregistration.k8s.io/ValidatingWebhookConfiguration`.
pub(crate) struct ValidatingWebhookConfiguration;

impl Strategy for ValidatingWebhookConfiguration {
    fn group_kind(&self) -> (&'static str, &'static str) {
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
        )
    }

    fn has_generation(&self) -> bool {
        true
    }
}
