//! What the applier sends to the API server, and what it skips, counted in the embedded API
//! server's request log: a reconcile never re-sends what the previous one wrote just because a
//! cache has not caught up with that write yet, while drift is still corrected.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use wasmctrl::apiserver::ApiServer;
use wasmctrl::plugin::{Intent, wit};
use wasmctrl::reconcile::applier::{Applier, Echo, Subject};
use wasmctrl::reconcile::informer::{Entry, Informer, Informers, ObjectKey, Watch};
use wasmctrl::runtime::{Config, Plugin, Runtime};
use wasmctrl::view::EmptyView;
use wasmctrl_core::Gvk;

fn watch(kind: Gvk) -> Watch {
    Watch {
        kind,
        namespace: None,
        labels: Default::default(),
        sharded: false,
        account: None,
    }
}

/// The `converge` plugin's intents for the cached version of a Thing.
fn reconcile(plugin: &Plugin, entry: &Entry) -> Vec<Intent> {
    let request = wit::Request {
        namespace: entry.key.namespace().to_owned(),
        name: entry.key.name().to_owned(),
        object: Some(entry.json.to_string()),
        deleting: false,
        settings: String::new(),
        now: wit::Timestamp::parse("2026-11-23T00:00:00Z").expect("RFC 3339"),
        previous: Vec::new(),
    };
    plugin
        .reconcile(request, Arc::new(EmptyView))
        .unwrap()
        .intents
}

/// Writes (create, update, patch) the server has answered so far.
fn writes(server: &ApiServer) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| matches!(r.verb.as_str(), "create" | "update" | "patch"))
        .map(|r| format!("{} {} {} {}", r.verb, r.resource, r.subresource, r.name))
        .collect()
}

/// Waits until `informer` holds `key` in a version `ready` accepts.
async fn cached(
    informer: &Informer,
    key: &ObjectKey,
    ready: impl Fn(&Entry) -> bool,
) -> Arc<Entry> {
    common::eventually(20, &format!("{key} in the cache"), || async {
        informer.get(key).filter(|e| ready(e))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_cache_does_not_make_the_applier_resend_its_last_write() {
    let server = ApiServer::new().unwrap();
    let client = server.client();
    common::things::install(&client).await;
    common::things::create(&common::things::api(&client), "t", json!({})).await;
    let informers = Arc::new(Informers::new(client.clone()));
    let things = informers.get(&watch(Gvk::new("example.com", "v1", "Thing")));
    let children = informers.get(&watch(Gvk::new("", "v1", "ConfigMap")));
    things.synced().await;
    children.synced().await;
    let runtime = Runtime::new(Config::default()).unwrap();
    let plugin = runtime
        .load("converge.wasm", &common::plugin_bytes("converge"), "")
        .unwrap();
    let applier = Applier::new(client.clone(), informers.clone());
    let key = ObjectKey::new("default", "t");
    let child_key = ObjectKey::new("default", "t-child");
    let stale = things.get(&key).unwrap();
    let intents = reconcile(&plugin, &stale);
    let subject = |object| Subject {
        manifest: plugin.manifest(),
        key: &key,
        object,
        cache: Some(&things),
    };

    let before = writes(&server).len();
    let first = applier
        .apply(&subject(Some(&stale)), &intents, &[])
        .await
        .succeeded()
        .unwrap();
    assert_eq!(first.writes, 2, "the child and the status");
    assert_eq!(first.echoes.len(), 2, "both writes changed a cached object");
    // The controller reconciles the key again at once (the child's creation queued its owner)
    // while the Thing's cache still holds the version without status: nothing is re-sent.
    let again = applier
        .apply(&subject(Some(&stale)), &intents, &[])
        .await
        .succeeded()
        .unwrap();
    assert_eq!((again.writes, again.skipped), (0, 2));
    assert!(again.echoes.is_empty(), "nothing sent, nothing to wait for");
    // Nor once the caches show both writes.
    let current = cached(&things, &key, |e| {
        e.resource_version != stale.resource_version
    })
    .await;
    cached(&children, &child_key, |_| true).await;
    assert!(first.echoes.iter().all(Echo::seen), "{:?}", first.echoes);
    let settled = applier
        .apply(&subject(Some(&current)), &intents, &[])
        .await
        .succeeded()
        .unwrap();
    assert_eq!(settled.writes, 0);
    assert_eq!(
        writes(&server)[before..],
        [
            "patch configmaps  t-child".to_string(),
            "patch things status t".to_string()
        ]
    );

    // Drift is still corrected: someone else changes the child, and once the cache shows it the
    // same intent is applied again.
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    let drifted = configmaps
        .patch(
            "t-child",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"value": "other"}})),
        )
        .await
        .unwrap();
    let drifted_rv = drifted.metadata.resource_version.unwrap();
    cached(&children, &child_key, |e| {
        e.resource_version.to_string() == drifted_rv
    })
    .await;
    let corrected = applier
        .apply(&subject(Some(&current)), &intents, &[])
        .await
        .succeeded()
        .unwrap();
    assert_eq!(
        corrected.writes, 1,
        "the child applied again, the status unchanged"
    );
    let child = configmaps.get("t-child").await.unwrap();
    assert_eq!(child.data.unwrap()["value"], "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_writing_the_same_kind_at_once_discover_it_once() {
    let server = ApiServer::new().unwrap();
    let driver = server.client();
    common::things::install(&driver).await;
    let names: Vec<String> = (0..8).map(|i| format!("t{i}")).collect();
    for name in &names {
        common::things::create(&common::things::api(&driver), name, json!({})).await;
    }
    // The client counts the discovery documents asked for once the informer has synced (it
    // discovers Things itself), by path.
    let discovered = Arc::new(std::sync::Mutex::new(None::<Vec<String>>));
    let service =
        tower::ServiceExt::map_request(server.service_with_token(server.admin_token()), {
            let discovered = discovered.clone();
            move |req: http::Request<kube::client::Body>| {
                let path = req.uri().path();
                if let Some(paths) = discovered.lock().unwrap().as_mut()
                    && ["/api/v1", "/apis/example.com/v1"].contains(&path)
                {
                    paths.push(path.to_string());
                }
                req
            }
        });
    let client = kube::Client::new(service, "default");
    let informers = Arc::new(Informers::new(client.clone()));
    let things = informers.get(&watch(Gvk::new("example.com", "v1", "Thing")));
    things.synced().await;
    let runtime = Runtime::new(Config::default()).unwrap();
    let plugin = runtime
        .load("converge.wasm", &common::plugin_bytes("converge"), "")
        .unwrap();
    let applier = Applier::new(client, informers.clone());
    *discovered.lock().unwrap() = Some(Vec::new());

    // Eight reconciles at once, each writing a ConfigMap and its Thing's status: the first
    // writes of two kinds the applier has not resolved yet.
    let keys: Vec<ObjectKey> = names.iter().map(|n| ObjectKey::new("default", n)).collect();
    let applied = futures::future::join_all(keys.iter().map(|key| {
        let (things, applier, plugin) = (&things, &applier, &plugin);
        async move {
            let entry = things.get(key).unwrap();
            let subject = Subject {
                manifest: plugin.manifest(),
                key,
                object: Some(&entry),
                cache: Some(things),
            };
            applier
                .apply(&subject, &reconcile(plugin, &entry), &[])
                .await
                .succeeded()
                .unwrap()
        }
    }))
    .await;
    assert!(applied.iter().all(|a| a.writes == 2), "{applied:?}");
    let mut discovered = discovered.lock().unwrap().take().unwrap();
    discovered.sort();
    assert_eq!(discovered, ["/api/v1", "/apis/example.com/v1"]);
}

/// A plugin newer than the installed CRD writes status fields the CRD does not declare; the API
/// server prunes them, and the applier says so (log and a Warning Event on the object) instead
/// of letting them vanish. A status the schema keeps whole raises nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_fields_the_server_prunes_are_reported_on_the_object() {
    let server = ApiServer::new().unwrap();
    let client = server.client();
    // Status declares only `phase`; `trivial` also writes `observedGeneration` and `replicas`.
    common::install_crd(&client, json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Thing", "plural": "things", "singular": "thing", "listKind": "ThingList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]}
    }))
    .await;
    let things_api = common::things::api(&client);
    for name in ["old", "kept"] {
        common::things::create(&things_api, name, json!({})).await;
    }
    let informers = Arc::new(Informers::new(client.clone()));
    let things = informers.get(&watch(Gvk::new("example.com", "v1", "Thing")));
    things.synced().await;
    let runtime = Runtime::new(Config::default()).unwrap();
    let plugin = runtime
        .load("trivial.wasm", &common::plugin_bytes("trivial"), "")
        .unwrap();
    let applier = Applier::new(client.clone(), informers.clone());
    let apply = |name: &'static str, status: serde_json::Value| {
        let key = ObjectKey::new("default", name);
        let entry = things.get(&key).unwrap();
        let applier = &applier;
        let plugin = &plugin;
        let things = &things;
        async move {
            let subject = Subject {
                manifest: plugin.manifest(),
                key: &key,
                object: Some(&entry),
                cache: Some(things),
            };
            let intents = [Intent::UpdateStatus { status }];
            applier
                .apply(&subject, &intents, &[])
                .await
                .succeeded()
                .unwrap()
        }
    };
    let newer = json!({"phase": "Ready", "observedGeneration": 1, "replicas": 1});
    assert_eq!(apply("old", newer).await.writes, 1);
    assert_eq!(apply("kept", json!({"phase": "Ready"})).await.writes, 1);

    let events = common::events(&client, "default")
        .list(&Default::default())
        .await
        .unwrap();
    let pruned: Vec<_> = (events.items.iter())
        .filter(|e| e.data["reason"] == "StatusFieldsPruned")
        .collect();
    assert_eq!(pruned.len(), 1, "{:#?}", events.items);
    let event = &pruned[0].data;
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["regarding"]["name"], "old");
    let note = event["note"].as_str().unwrap();
    assert!(
        note.contains(".status.observedGeneration") && note.contains(".status.replicas"),
        "{note}"
    );
    assert!(!note.contains(".status.phase"), "{note}");
}
