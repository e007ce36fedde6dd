//! The benchmark's trivial reconciler: parse the object, report a phase and the observed
//! generation. Compiled both to wasm and natively so the two can be compared.

use wasmctrl_sdk::{
    Action, Context, Error, Gvk, Manifest, Outcome, Reconciler, Request, Settings, Value, json,
};

/// The plugin.
pub struct Trivial;

impl Reconciler for Trivial {
    fn manifest(_settings: &Settings) -> Result<Manifest, String> {
        Ok(Manifest::new(
            "trivial",
            Gvk::new("example.com", "v1", "Thing"),
        ))
    }

    fn reconcile(req: &Request, _ctx: &Context<'_>) -> Result<Outcome, Error> {
        let Some(object) = req.object::<Value>()? else {
            return Ok(Outcome::done());
        };
        let generation = object["metadata"]["generation"].as_i64().unwrap_or(0);
        let replicas = object["spec"]["replicas"].as_i64().unwrap_or(1);
        let status =
            json!({"phase": "Ready", "observedGeneration": generation, "replicas": replicas});
        Ok(Outcome::with(vec![Action::update_status(&status)?]))
    }
}

wasmctrl_sdk::export!(Trivial);
