//! The convergence benchmark's reconciler: each `Thing` (example.com/v1) gets one owned
//! ConfigMap `<name>-child` carrying its `spec.value`, applied with server-side apply, and a
//! status saying which generation that was. `host/benches/convergence.rs` runs it against a
//! native kube-runtime controller sending the same requests.

use serde::{Deserialize, Serialize};
use serde_json::json;
use wasmctrl_sdk::k8s_openapi::api::core::v1::ConfigMap;
use wasmctrl_sdk::kube::child_meta;
use wasmctrl_sdk::{
    Action, Context, CustomResource, Error, Manifest, NoSettings, Outcome, Reconcile, Reconciler,
    ResourceExt,
};

/// The plugin.
pub struct Converge;

/// A Thing's spec: the value its ConfigMap carries.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Thing",
    namespaced,
    schema = "disabled",
    crates(
        kube_core = "::wasmctrl_sdk::kube_core",
        k8s_openapi = "::wasmctrl_sdk::k8s_openapi"
    )
)]
pub struct ThingSpec {
    #[serde(default)]
    value: i64,
}

impl Reconciler for Converge {
    type Object = Thing;
    type Settings = NoSettings;

    fn manifest(_settings: &NoSettings) -> Result<Manifest, String> {
        Ok(Manifest::for_::<Thing>("converge").owns::<ConfigMap>())
    }

    fn reconcile(event: Reconcile<Thing>, _ctx: &Context<'_>) -> Result<Outcome, Error> {
        // Deleted or gone: its child goes with it (garbage collection by owner reference).
        let Reconcile::Apply(thing) = event else {
            return Ok(Outcome::done());
        };
        let name = thing.name_any();
        let child = ConfigMap {
            metadata: child_meta(&thing, &format!("{name}-child")),
            data: Some(
                [
                    ("owner".to_string(), name),
                    ("value".to_string(), thing.spec.value.to_string()),
                ]
                .into(),
            ),
            ..ConfigMap::default()
        };
        let generation = thing.metadata.generation.unwrap_or_default();
        let status = json!({"phase": "Ready", "observedGeneration": generation});
        Ok(Outcome::with(vec![
            Action::apply(&child)?,
            Action::update_status(&status)?,
        ]))
    }
}

wasmctrl_sdk::export!(Converge);
