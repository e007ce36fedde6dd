//! CertificateSigningRequests and their `approval` subresource (conditions stamped and
//! checked as kube's approval strategy does).

use serde_json::Value;

use crate::defaults;
use crate::registry::Strategy;
use crate::selector::{self, Field};
use crate::validate::{Errors, core};

/// The subresource that approves or denies a request.
const APPROVAL: &str = "approval";

/// The strategy of `certificates.k8s.io/CertificateSigningRequest`.
pub(crate) struct CertificateSigningRequest;

impl Strategy for CertificateSigningRequest {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("certificates.k8s.io", "CertificateSigningRequest")
    }

    fn subresource_part(&self, sub: &str) -> Option<(&'static str, &'static [&'static str])> {
        (sub == APPROVAL).then_some((APPROVAL, &["status", "conditions"]))
    }

    fn prepare_subresource_update(&self, sub: &str, new: &mut Value, old: &Value, now: &str) {
        if sub == APPROVAL {
            defaults::condition_times(new, old, now);
        }
    }

    fn validate_subresource_update(&self, sub: &str, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        if sub == APPROVAL {
            core::approval_update(new, old, &mut errs);
        }
        errs
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::CSR_FIELDS
    }
}
