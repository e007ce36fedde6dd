//! Services: defaults and a cluster IP from the service range on create, kube's
//! validation.

use serde_json::Value;

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::selector::{self, Field};
use crate::store::State;
use crate::validate::{Errors, core};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const SERVICE: TypeMeta = TypeMeta::new("v1", "Service");

/// The strategy of `Service`.
pub(crate) struct Service;

impl Strategy for Service {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "Service")
    }

    fn default(&self, st: &State, obj: &mut Value, old: Option<&Value>) {
        defaults::service(st, obj, old);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        core::service(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        core::service_update(new, old, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::SERVICE
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::SERVICE_FIELDS
    }
}
