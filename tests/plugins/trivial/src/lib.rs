//! The benchmark's trivial reconciler: read the object's generation and replica count, report a
//! phase. Compiled both to wasm and natively so the two can be compared.
//!
//! It reads the object the way the SDK suggests, into a type of the fields it needs (serde still
//! scans the whole object, but builds nothing for the rest of its spec). With `{"log": true}` it
//! logs what it read through `tracing`, for the tests of plugin logs (off by default: the
//! benchmarks measure the call).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::json;
use wasmctrl_sdk::k8s_openapi::NamespaceResourceScope;
use wasmctrl_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmctrl_sdk::{Action, Context, Error, Manifest, Outcome, Reconcile, Reconciler, Resource};

/// The plugin.
pub struct Trivial;

/// `{"log": true}` logs what it read.
#[derive(Debug, Default, Deserialize)]
pub struct Settings {
    #[serde(default)]
    log: bool,
}

/// The part of a Thing (`example.com/v1`) it reads. Declared by hand rather than with
/// `#[derive(CustomResource)]`, whose `spec` is required: a Thing may have none.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Thing {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: ThingSpec,
}

/// The part of a Thing's spec it reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ThingSpec {
    #[serde(default)]
    replicas: Option<i64>,
}

impl Resource for Thing {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Thing".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "example.com".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "things".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Reconciler for Trivial {
    type Object = Thing;
    type Settings = Settings;

    fn manifest(_settings: &Settings) -> Result<Manifest, String> {
        Ok(Manifest::for_::<Thing>("trivial"))
    }

    fn reconcile(event: Reconcile<Thing>, ctx: &Context<'_, Settings>) -> Result<Outcome, Error> {
        let Reconcile::Apply(thing) = event else {
            return Ok(Outcome::done());
        };
        let generation = thing.metadata.generation.unwrap_or(0);
        let replicas = thing.spec.replicas.unwrap_or(1);
        if ctx.settings().log {
            wasmctrl_sdk::tracing::debug!("looking");
            wasmctrl_sdk::tracing::debug!(generation, replicas, "read");
        }
        let status =
            json!({"phase": "Ready", "observedGeneration": generation, "replicas": replicas});
        Ok(Outcome::with(vec![Action::update_status(&status)?]))
    }
}

wasmctrl_sdk::export!(Trivial);
