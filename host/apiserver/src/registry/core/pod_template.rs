//! PodTemplates: their template's defaults and validation.

use serde_json::Value;

use crate::defaults;
use crate::registry::Strategy;
use crate::store::State;
use crate::validate::{Errors, pod};

/// The strategy of `PodTemplate`.
pub(crate) struct PodTemplate;

impl Strategy for PodTemplate {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "PodTemplate")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::pod_template(obj);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        pod::template(&obj["template"], "template", &mut errs);
        errs
    }
}
