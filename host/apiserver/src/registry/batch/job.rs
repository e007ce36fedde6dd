//! Jobs: defaults and, on create, the selector tied to the Job's uid; kube's
//! validation and what may change on update.

use serde_json::Value;

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::selector::{self, Field};
use crate::store::State;
use crate::validate::{Errors, batch};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const JOB: TypeMeta = TypeMeta::new("batch/v1", "Job");

/// The strategy of `batch/Job`.
pub(crate) struct Job;

impl Strategy for Job {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("batch", "Job")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn default(&self, _st: &State, obj: &mut Value, old: Option<&Value>) {
        defaults::job(obj, old);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        batch::job(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        batch::job_update(new, old, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::JOB
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::JOB_FIELDS
    }
}
