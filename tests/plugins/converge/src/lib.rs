//! The convergence benchmark's reconciler: each `Thing` (example.com/v1) gets one owned
//! ConfigMap `<name>-child` carrying its `spec.value`, applied with server-side apply, and a
//! status saying which generation that was. `host/benches/convergence.rs` runs it against a
//! native kube-runtime controller sending the same requests.

use serde::Deserialize;
use wasmctrl_sdk::k8s_openapi::api::core::v1::ConfigMap;
use wasmctrl_sdk::{
    Action, Context, Error, Gvk, Manifest, NoSettings, ObjectMeta, Outcome, Reconciler, Request,
    json,
};

/// The plugin.
pub struct Converge;

#[derive(Deserialize)]
struct Thing {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Spec,
}

#[derive(Default, Deserialize)]
struct Spec {
    #[serde(default)]
    value: i64,
}

impl Reconciler for Converge {
    type Settings = NoSettings;

    fn manifest(_settings: &NoSettings) -> Result<Manifest, String> {
        Ok(Manifest::new("converge", Gvk::new("example.com", "v1", "Thing")).owns::<ConfigMap>())
    }

    fn reconcile(req: &Request, _ctx: &Context<'_>) -> Result<Outcome, Error> {
        // Gone: its child goes with it (garbage collection by owner reference).
        let Some(thing) = req.object::<Thing>()? else {
            return Ok(Outcome::done());
        };
        let meta = &thing.metadata;
        let mut child = meta.child(
            &Gvk::new("", "v1", "ConfigMap"),
            &format!("{}-child", meta.name),
        );
        child["data"] = json!({"owner": meta.name, "value": thing.spec.value.to_string()});
        let status = json!({"phase": "Ready", "observedGeneration": meta.generation});
        Ok(Outcome::with(vec![
            Action::apply(&child)?,
            Action::update_status(&status)?,
        ]))
    }
}

wasmctrl_sdk::export!(Converge);
