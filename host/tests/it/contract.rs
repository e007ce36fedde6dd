//! Contract versioning: a plugin built from source against the previous contract
//! (`wit/0.2.0/plugin.wit`, tests/plugins/previous-contract) loads and reconciles under this
//! host beside plugins of the current one, with every import it uses (log, cache) served, and
//! its outcome read in the current contract's terms.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use wasmctrl::plugin::{Intent, wit};
use wasmctrl::runtime::{CONTRACT, Config, LoadError, PREVIOUS_CONTRACT, Runtime};
use wasmctrl::view::{StaticView, View};

fn request(now: &str) -> wit::Request {
    common::things::request(3, now)
}

#[test]
fn a_plugin_of_the_previous_contract_loads_and_reconciles_beside_a_current_one() {
    let rt = Runtime::new(Config::default()).expect("runtime");
    let old = rt
        .load(
            "previous-contract.wasm",
            &common::plugin_bytes("previous-contract"),
            r#"{"team":"a"}"#,
        )
        .expect("a 0.2.0 plugin loads");
    assert_eq!(old.contract(), PREVIOUS_CONTRACT);
    assert_eq!(old.manifest().name, "previous-contract");
    let current = rt
        .load("trivial.wasm", &common::plugin_bytes("trivial"), "")
        .expect("a current plugin loads");
    assert_eq!(current.contract(), CONTRACT);

    // Its cache read is served: the ConfigMap it owns is found.
    let mut view = StaticView::new();
    view.insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "default", "name": "t1"}}))
        .expect("a whole object");
    let view: Arc<dyn View> = Arc::new(view);
    let done = old
        .reconcile(request("2026-11-22T10:00:00.5Z"), view.clone())
        .expect("a 0.2.0 plugin reconciles");
    let [
        Intent::Apply { object, .. },
        Intent::Delete {
            target,
            propagation,
        },
        Intent::UpdateStatus { status },
    ] = &done.intents[..]
    else {
        panic!("unexpected intents: {:?}", done.intents);
    };
    // `now` reaches it as its seconds, the settings as given.
    assert_eq!(object["data"]["now"], "1795341600");
    // Its delete propagates in the background, as 0.2.0's always did; nothing is best effort.
    assert_eq!(target.name, "t1-old");
    assert_eq!(*propagation, wit::Propagation::Background);
    assert!(done.best_effort.is_empty());
    assert_eq!(object["data"]["settings"], r#"{"team":"a"}"#);
    // The owned child gets its owner reference, as for any plugin.
    assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], "u1");
    assert_eq!(
        status,
        &json!({"phase": "Ready", "observedGeneration": 3, "configMapCached": true})
    );
    assert_eq!(done.requeue_after, Some(Duration::from_secs(60)));

    // The current plugin in the same runtime is unaffected.
    let done = current
        .reconcile(request("2026-11-22T10:00:00Z"), view)
        .expect("current plugin reconciles");
    assert_eq!(done.intents.len(), 1);
}

#[test]
fn a_previous_contract_plugin_rejecting_its_settings_is_refused_with_its_message() {
    let rt = Runtime::new(Config::default()).expect("runtime");
    let err = rt
        .load(
            "previous-contract.wasm",
            &common::plugin_bytes("previous-contract"),
            r#"{"reject":true}"#,
        )
        .unwrap_err();
    assert!(matches!(err, LoadError::Manifest { .. }), "{err}");
    assert!(err.to_string().contains("rejected by request"), "{err}");
}
