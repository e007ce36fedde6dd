//! PersistentVolumes: kube's defaults, `Pending` from creation.

use serde_json::{Value, json};

use crate::defaults;
use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::selector::{self, Field};
use crate::status::ApiResult;
use crate::store::State;

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const PERSISTENT_VOLUME: TypeMeta = TypeMeta::new("v1", "PersistentVolume");

/// The strategy of `PersistentVolume`.
pub(crate) struct PersistentVolume;

impl Strategy for PersistentVolume {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "PersistentVolume")
    }

    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        defaults::volume(obj);
    }

    fn prepare_for_create(&self, _st: &State, obj: &mut Value, now: &str) -> ApiResult<()> {
        obj["status"] = json!({"phase": "Pending", "lastPhaseTransitionTime": now});
        Ok(())
    }

    fn printer(&self) -> &'static Printer {
        &printers::PERSISTENT_VOLUME
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::VOLUME_FIELDS
    }
}
