//! Namespaces: the name label, the `kubernetes` finalizer and `Active` on create.

use serde_json::{Value, json};

use crate::printers::{self, Printer};
use crate::registry::Strategy;
use crate::selector::{self, Field};
use crate::status::ApiResult;
use crate::store::State;

/// The strategy of `Namespace`.
pub(crate) struct Namespace;

impl Strategy for Namespace {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "Namespace")
    }

    fn prepare_for_create(&self, _st: &State, obj: &mut Value, _now: &str) -> ApiResult<()> {
        let name = obj["metadata"]["name"].clone();
        obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        obj["spec"]["finalizers"] = json!(["kubernetes"]);
        obj["status"] = json!({"phase": "Active"});
        Ok(())
    }

    fn printer(&self) -> &'static Printer {
        &printers::NAMESPACE
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::NAMESPACE_FIELDS
    }
}
