//! Pods: defaults, what the admission plugins every cluster enables set on create
//! (`defaults::admit_pod`), kube's validation, and the `ephemeralcontainers` subresource.

use serde_json::Value;

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::selector::{self, Field};
use crate::status::ApiResult;
use crate::store::State;
use crate::validate::{Errors, pod};

/// The subresource that adds ephemeral containers.
const EPHEMERAL_CONTAINERS: &str = "ephemeralcontainers";

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const POD: TypeMeta = TypeMeta::new("v1", "Pod");

/// The strategy of `Pod`.
pub(crate) struct Pod;

impl Strategy for Pod {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "Pod")
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::pod(obj);
    }

    fn prepare_for_create(&self, st: &State, obj: &mut Value, _now: &str) -> ApiResult<()> {
        defaults::admit_pod(st, obj)
    }

    fn validate(&self, obj: &Value) -> Errors {
        let mut errs = Errors::new();
        pod::pod(obj, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        pod::pod_update(new, old, &mut errs);
        errs
    }

    fn subresource_part(&self, sub: &str) -> Option<(&'static str, &'static [&'static str])> {
        (sub == EPHEMERAL_CONTAINERS)
            .then_some((EPHEMERAL_CONTAINERS, &["spec", "ephemeralContainers"]))
    }

    fn prepare_subresource_update(&self, sub: &str, new: &mut Value, _old: &Value, _now: &str) {
        if sub == EPHEMERAL_CONTAINERS {
            defaults::ephemeral_containers(new);
        }
    }

    fn validate_subresource_update(&self, sub: &str, new: &Value, old: &Value) -> Errors {
        let mut errs = Errors::new();
        if sub == EPHEMERAL_CONTAINERS {
            pod::ephemeral_containers_update(new, old, &mut errs);
        }
        errs
    }

    fn printer(&self) -> &'static Printer {
        &printers::POD
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::POD_FIELDS
    }
}
