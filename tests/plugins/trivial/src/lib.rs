//! The benchmark's trivial reconciler: read the object's generation and replica count, report a
//! phase. Compiled both to wasm and natively so the two can be compared.
//!
//! By default it reads the object the way the SDK suggests, into a struct of the fields it
//! needs (serde still scans the whole object, but builds nothing for the rest). With the setting
//! `{"parse": "value"}` it builds the whole object as a `serde_json::Value` first, which is what
//! a plugin that walks arbitrary objects pays. With `{"log": true}` it logs what it read through
//! `tracing`, for the tests of plugin logs (off by default: the benchmarks measure the call).

use serde::Deserialize;
use wasmctrl_sdk::{
    Action, Context, Error, Gvk, Manifest, Outcome, Reconciler, Request, Value, json,
};

/// The plugin.
pub struct Trivial;

/// How it reads the object: `{"parse": "value"}` builds the whole `serde_json::Value`;
/// `{"log": true}` logs what it read.
#[derive(Debug, Default, Deserialize)]
pub struct Settings {
    #[serde(default)]
    parse: Option<String>,
    #[serde(default)]
    log: bool,
}

#[derive(Deserialize)]
struct Object {
    metadata: Metadata,
    #[serde(default)]
    spec: Spec,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    generation: i64,
}

#[derive(Default, Deserialize)]
struct Spec {
    #[serde(default)]
    replicas: Option<i64>,
}

/// `(generation, replicas)` of the request's object, if it exists.
fn read(req: &Request, settings: &Settings) -> Result<Option<(i64, i64)>, Error> {
    if settings.parse.as_deref() == Some("value") {
        return Ok(req.object::<Value>()?.map(|o| {
            let generation = o["metadata"]["generation"].as_i64().unwrap_or(0);
            (generation, o["spec"]["replicas"].as_i64().unwrap_or(1))
        }));
    }
    Ok(req
        .object::<Object>()?
        .map(|o| (o.metadata.generation, o.spec.replicas.unwrap_or(1))))
}

impl Reconciler for Trivial {
    type Settings = Settings;

    fn manifest(_settings: &Settings) -> Result<Manifest, String> {
        Ok(Manifest::new(
            "trivial",
            Gvk::new("example.com", "v1", "Thing"),
        ))
    }

    fn reconcile(req: &Request, ctx: &Context<'_, Settings>) -> Result<Outcome, Error> {
        let Some((generation, replicas)) = read(req, ctx.settings())? else {
            return Ok(Outcome::done());
        };
        if ctx.settings().log {
            wasmctrl_sdk::tracing::debug!(generation, replicas, parse = ?ctx.settings().parse, "read");
        }
        let status =
            json!({"phase": "Ready", "observedGeneration": generation, "replicas": replicas});
        Ok(Outcome::with(vec![Action::update_status(&status)?]))
    }
}

wasmctrl_sdk::export!(Trivial);
