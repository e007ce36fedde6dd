//! Leases (`pkg/apis/coordination/validation`).

use serde_json::Value;
use wasmctrl_core::validation::FieldError;

use super::{Errors, int, text};

/// A Lease (`ValidateLeaseSpec`).
pub(crate) fn lease(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    if let Some(d) = int(spec, "leaseDurationSeconds").filter(|d| *d <= 0) {
        errs.push(FieldError::invalid_printed(
            "spec.leaseDurationSeconds",
            d.to_string(),
            "must be greater than 0",
        ));
    }
    if let Some(t) = int(spec, "leaseTransitions").filter(|t| *t < 0) {
        errs.push(FieldError::invalid_printed(
            "spec.leaseTransitions",
            t.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    let preferred = text(spec, "preferredHolder");
    if !preferred.is_empty() && text(spec, "strategy").is_empty() {
        errs.push(FieldError::forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        ));
    }
}
