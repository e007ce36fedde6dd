//! ReplicationControllers.

use serde_json::Value;

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::Strategy;
use crate::selector::{self, Field};
use crate::store::State;
use crate::validate::{Errors, apps};

/// The strategy of `ReplicationController`.
pub(crate) struct ReplicationController;

impl Strategy for ReplicationController {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "ReplicationController")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::replication_controller(obj);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        apps::replication_controller(obj, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::REPLICATION_CONTROLLER
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::REPLICAS_FIELDS
    }
}
