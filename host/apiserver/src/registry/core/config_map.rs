//! ConfigMaps: kube's validation of keys and size, `immutable`.

use serde_json::Value;

use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::validate::{Errors, core};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const CONFIG_MAP: TypeMeta = TypeMeta::new("v1", "ConfigMap");

/// The strategy of `ConfigMap`.
pub(crate) struct ConfigMap;

impl Strategy for ConfigMap {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "ConfigMap")
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        core::config_map(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        core::config_map_update(new, old, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::CONFIG_MAP
    }
}
