//! DaemonSets: defaults, kube's validation with an immutable selector, and the
//! template generation kube's strategy counts in an annotation.

use serde_json::{Value, json};

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::status::ApiResult;
use crate::store::State;
use crate::validate::{self, Errors, apps};

/// The annotation kube's DaemonSet strategy counts template changes in.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const DAEMON_SET: TypeMeta = TypeMeta::new("apps/v1", "DaemonSet");

/// The strategy of `apps/DaemonSet`.
pub(crate) struct DaemonSet;

impl Strategy for DaemonSet {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("apps", "DaemonSet")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::daemon_set(obj);
    }

    fn prepare_for_create(&self, _st: &State, obj: &mut Value, _now: &str) -> ApiResult<()> {
        obj["metadata"]["annotations"][TEMPLATE_GENERATION] = json!("1");
        Ok(())
    }

    fn prepare_for_update(
        &self,
        _st: &State,
        new: &mut Value,
        old: &Value,
        _now: &str,
    ) -> ApiResult<()> {
        if old["spec"]["template"] != new["spec"]["template"] {
            let n = (old["metadata"]["annotations"][TEMPLATE_GENERATION].as_str())
                .and_then(|g| g.parse::<i64>().ok())
                .unwrap_or(0);
            new["metadata"]["annotations"][TEMPLATE_GENERATION] = json!((n + 1).to_string());
        }
        Ok(())
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        apps::daemon_set(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        validate::with_immutable_selector(apps::daemon_set, new, old, &mut errs);
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::DAEMON_SET
    }
}
