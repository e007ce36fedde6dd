//! MutatingWebhookConfigurations: kube's defaults and validation; the server calls their webhooks
//! (`webhooks`).

use serde_json::Value;

use crate::defaults;
use crate::registry::Strategy;
use crate::store::State;
use crate::validate::{Errors, admissionregistration};

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

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::webhook_configuration(obj, true);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        admissionregistration::webhook_configuration(obj, true, &mut errs);
        errs
    }
}
