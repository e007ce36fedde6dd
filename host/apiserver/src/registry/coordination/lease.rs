//! Leases: kube's validation; a PUT must name the version it replaces, so no holder
//! blindly overwrites another.

use serde_json::Value;

use crate::printers::{self, Printer};
use crate::registry::Strategy;
use crate::validate::{Errors, coordination};

/// The strategy of `coordination.k8s.io/Lease`.
pub(crate) struct Lease;

impl Strategy for Lease {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("coordination.k8s.io", "Lease")
    }

    fn allows_unconditional_update(&self) -> bool {
        false
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        coordination::lease(obj, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::LEASE
    }
}
