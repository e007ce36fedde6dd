//! A plugin of the previous contract, `wasmctrl:plugin@0.2.0`: its deletes carry no
//! propagation policy, its outcome marks nothing best effort, and its request has no
//! `previous`. It watches `example.com/v1` Things and owns ConfigMaps; each reconcile logs,
//! reads its ConfigMap from the cache, applies it (carrying the request's `now` and settings),
//! deletes the ConfigMap of an older name and reports a status, so a test sees every part of the
//! old contract at work.

#![allow(missing_docs, unsafe_code, clippy::all)]

wit_bindgen::generate!({
    path: "../../../wit/0.2.0",
    world: "plugin",
});

use exports::wasmctrl::plugin::reconciler::{Error, Guest, Outcome, PluginManifest, Request};
use serde_json::json;
use wasmctrl::plugin::types::{Action, Gvk, ObjectRef, Selector, Watch};
use wasmctrl::plugin::{cache, log};

struct PreviousContract;

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

impl Guest for PreviousContract {
    fn manifest(settings: String) -> Result<PluginManifest, String> {
        if settings.contains("reject") {
            return Err("rejected by request".into());
        }
        Ok(PluginManifest {
            name: "previous-contract".into(),
            version: "0.2.0".into(),
            watches: Watch {
                kind: gvk("example.com", "v1", "Thing"),
                selector: Selector {
                    namespaces: Vec::new(),
                    labels: String::new(),
                },
                predicates: Vec::new(),
            },
            owns: vec![gvk("", "v1", "ConfigMap")],
            reads: Vec::new(),
            writes: Vec::new(),
            capabilities: Vec::new(),
        })
    }

    fn reconcile(request: Request) -> Result<Outcome, Error> {
        let Some(object) = request.object else {
            return Ok(Outcome {
                actions: Vec::new(),
                requeue_after_ms: None,
            });
        };
        log::log(
            log::Level::Info,
            "reconciling under the previous contract",
            &[("name".into(), request.name.clone())],
        );
        let config_map = gvk("", "v1", "ConfigMap");
        let cached =
            cache::get(&config_map, &request.namespace, &request.name).map_err(|message| {
                Error {
                    message,
                    retryable: true,
                }
            })?;
        let object: serde_json::Value = serde_json::from_str(&object).map_err(|e| Error {
            message: e.to_string(),
            retryable: false,
        })?;
        let child = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": request.name, "namespace": request.namespace},
            "data": {"now": request.now.seconds.to_string(), "settings": request.settings},
        });
        let old_child = ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: request.namespace.clone(),
            name: format!("{}-old", request.name),
        };
        let status = json!({
            "phase": "Ready",
            "observedGeneration": object["metadata"]["generation"],
            "configMapCached": cached.is_some(),
        });
        Ok(Outcome {
            actions: vec![
                Action::Apply(child.to_string()),
                Action::Delete(old_child),
                Action::UpdateStatus(status.to_string()),
            ],
            requeue_after_ms: Some(60_000),
        })
    }
}

// Natively (`cargo build --workspace`) nothing is exported: export names such as
// `wasmctrl:plugin/reconciler@0.2.0#reconcile` are not valid native symbols.
#[cfg(target_arch = "wasm32")]
export!(PreviousContract);
