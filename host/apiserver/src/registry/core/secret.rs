//! Secrets: `Opaque` by default, kube's validation of keys, types and size, `immutable`.

use serde_json::Value;

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::Strategy;
use crate::selector::{self, Field};
use crate::store::State;
use crate::validate::{Errors, core};

/// The strategy of `Secret`.
pub(crate) struct Secret;

impl Strategy for Secret {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "Secret")
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::secret(obj);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        core::secret(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        core::secret_update(new, old, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::SECRET
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::SECRET_FIELDS
    }
}
