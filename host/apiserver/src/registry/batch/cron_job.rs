//! CronJobs: defaults (their Job template's included), kube's validation of the
//! schedule, time zone and template.

use serde_json::Value;

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::store::State;
use crate::validate::{Errors, batch};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const CRON_JOB: TypeMeta = TypeMeta::new("batch/v1", "CronJob");

/// The strategy of `batch/CronJob`.
pub(crate) struct CronJob;

impl Strategy for CronJob {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("batch", "CronJob")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::cron_job(obj);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        batch::cron_job(obj, None, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        batch::cron_job(new, Some(old), &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::CRON_JOB
    }
}
