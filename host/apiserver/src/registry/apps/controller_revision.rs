//! ControllerRevisions (the DaemonSet and StatefulSet controllers' history).

use serde_json::Value;

use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::validate::{Errors, apps};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const CONTROLLER_REVISION: TypeMeta = TypeMeta::new("apps/v1", "ControllerRevision");

/// The strategy of `apps/ControllerRevision`.
pub(crate) struct ControllerRevision;

impl Strategy for ControllerRevision {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("apps", "ControllerRevision")
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        apps::controller_revision(obj, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::CONTROLLER_REVISION
    }
}
