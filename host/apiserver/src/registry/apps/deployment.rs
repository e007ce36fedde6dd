//! Deployments: defaults, kube's validation with an immutable selector; the
//! generation also counts annotation changes (kube copies them to the ReplicaSets).

use serde_json::Value;

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::{self, Strategy, TypeMeta};
use crate::store::State;
use crate::validate::{self, Errors, apps};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const DEPLOYMENT: TypeMeta = TypeMeta::new("apps/v1", "Deployment");

/// The strategy of `apps/Deployment`.
pub(crate) struct Deployment;

impl Strategy for Deployment {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("apps", "Deployment")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn generation_source(&self, obj: &Value, status_sub: bool) -> Value {
        let mut v = registry::without_metadata(obj, status_sub);
        if let (Some(m), Some(annotations)) =
            (v.as_object_mut(), obj.pointer("/metadata/annotations"))
        {
            m.insert("metadata.annotations".into(), annotations.clone());
        }
        v
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::deployment(obj);
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        apps::deployment(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        validate::with_immutable_selector(apps::deployment, new, old, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::DEPLOYMENT
    }
}
