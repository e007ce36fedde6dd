//! Watches through kube-runtime: a `watcher` + `reflector` store stays correct across a forced
//! 410, dropped streams and `timeoutSeconds` expiry; metadata-only watches; raw watch protocol.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use wasmctrl::apiserver::ApiServer;

fn cm(name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "x"}}, "data": {"v": v}}),
    )
    .unwrap()
}

async fn server_state(api: &Api<ConfigMap>) -> BTreeMap<String, String> {
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| (c.name_any(), c.resource_version().unwrap()))
        .collect()
}

fn store_state(store: &reflector::Store<ConfigMap>) -> BTreeMap<String, String> {
    store
        .state()
        .iter()
        .map(|c| (c.name_any(), c.resource_version().unwrap()))
        .collect()
}

async fn converge(api: &Api<ConfigMap>, store: &reflector::Store<ConfigMap>) {
    for _ in 0..200 {
        if store_state(store) == server_state(api).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "store diverged: {:?} vs {:?}",
        store_state(store),
        server_state(api).await
    );
}

async fn run_reflector(client: Client, cfg: watcher::Config) -> reflector::Store<ConfigMap> {
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(api, cfg)).default_backoff();
    tokio::spawn(async move {
        stream.for_each(|_| async {}).await;
    });
    reader.wait_until_ready().await.unwrap();
    reader
}

async fn churn(api: &Api<ConfigMap>, round: usize) {
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("r{round}-{i}"), "1"))
            .await
            .unwrap();
    }
    api.patch(
        &format!("r{round}-0"),
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    api.delete(&format!("r{round}-1"), &DeleteParams::default())
        .await
        .unwrap();
}

async fn resilience(cfg: watcher::Config) {
    let server = ApiServer::builder().history(50).build().unwrap();
    let client = server.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    churn(&api, 0).await;
    let store = run_reflector(client, cfg).await;
    converge(&api, &store).await;
    // Forced 410 on the next watch, then a dropped stream that makes the watcher re-watch.
    server.faults().expire_next_watch();
    server.faults().drop_watches();
    churn(&api, 1).await;
    converge(&api, &store).await;
    // Dropped stream alone.
    server.faults().drop_watches();
    churn(&api, 2).await;
    converge(&api, &store).await;
    // History overflow while disconnected: resume gets 410 Expired and the watcher relists.
    // The re-watch fails once (500), the watcher backs off, and the flood overflows the history.
    server
        .faults()
        .fail(Some("watch"), Some("configmaps"), 500, 1);
    server.faults().drop_watches();
    for i in 0..80 {
        api.create(&PostParams::default(), &cm(&format!("flood-{i}"), "1"))
            .await
            .unwrap();
    }
    converge(&api, &store).await;
    // timeoutSeconds expiry (the config uses 1s): changes after it still arrive.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    churn(&api, 3).await;
    converge(&api, &store).await;
}

#[tokio::test]
async fn reflector_survives_faults_list_watch() {
    resilience(watcher::Config::default().timeout(1)).await;
}

#[tokio::test]
async fn reflector_survives_faults_streaming_lists() {
    resilience(watcher::Config::default().timeout(1).streaming_lists()).await;
}

#[tokio::test]
async fn metadata_watcher_sees_partial_objects() {
    let server = ApiServer::new().unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &cm("m1", "1"))
        .await
        .unwrap();
    let meta = api.get_metadata("m1").await.unwrap();
    assert_eq!(meta.types.as_ref().unwrap().kind, "PartialObjectMetadata");
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    // Api<PartialObjectMeta<_>> lists and watches with `Accept: ...;as=PartialObjectMetadata`
    // (what kube's Controller::owns does), so the server must answer in that form.
    let meta_api: Api<PartialObjectMeta<ConfigMap>> = Api::default_namespaced(server.client());
    let mut events = watcher(meta_api, watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.name_any(), "m1");
    api.create(&PostParams::default(), &cm("m2", "1"))
        .await
        .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        second.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata"),
        "a watch event in metadata form"
    );
    assert_eq!(second.name_any(), "m2");
}

#[tokio::test]
async fn raw_watch_protocol() {
    let server = ApiServer::new().unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let c = api
        .create(&PostParams::default(), &cm("w1", "1"))
        .await
        .unwrap();
    let rv = c.resource_version().unwrap();
    let wp = WatchParams::default().timeout(2).labels("app=x");
    let mut s = api.watch(&wp, &rv).await.unwrap().boxed();
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    // Label no longer matching: the watcher sees DELETED.
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "y"}}})),
    )
    .await
    .unwrap();
    let e1 = s.try_next().await.unwrap().unwrap();
    assert!(matches!(e1, WatchEvent::Modified(_)), "{e1:?}");
    let e2 = s.try_next().await.unwrap().unwrap();
    assert!(matches!(e2, WatchEvent::Deleted(_)), "{e2:?}");
    // timeoutSeconds ends the stream.
    let end = tokio::time::timeout(Duration::from_secs(5), s.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none());
    // Resuming from a compacted RV: ERROR 410 Expired.
    let small = ApiServer::builder().history(2).build().unwrap();
    let api2: Api<ConfigMap> = Api::default_namespaced(small.client());
    let first = api2
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    for i in 0..5 {
        api2.create(&PostParams::default(), &cm(&format!("b{i}"), "1"))
            .await
            .unwrap();
    }
    let mut s = api2
        .watch(&WatchParams::default(), &first.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();
    match s.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("{other:?}"),
    }
    // Bookmarks and the initial-events-end bookmark.
    let wp = WatchParams::streaming_lists().timeout(2);
    let mut s = api2.watch(&wp, "").await.unwrap().boxed();
    let mut added = 0;
    loop {
        match s.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(_) => added += 1,
            WatchEvent::Bookmark(b) => {
                assert_eq!(
                    b.metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .map(String::as_str),
                    Some("true")
                );
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(added, 6);
}

/// `released` waits for every handle: a live client (and the watch it opened) keeps the server,
/// and once both are gone the server's state is freed and the future resolves. The watch ends
/// as soon as its client drops the stream, not at its next bookmark tick.
#[tokio::test(start_paused = true)]
async fn a_server_is_released_once_its_clients_and_watches_are_gone() {
    let server = ApiServer::new().unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &cm("kept", "1"))
        .await
        .unwrap();
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    // The watch is being served: its first event has arrived.
    let first = watch.try_next().await.unwrap().unwrap();
    assert!(matches!(first, WatchEvent::Added(_)), "{first:?}");
    let mut released = Box::pin(server.released());
    // The client holds the server: the first poll finds it alive.
    assert!(futures::poll!(&mut released).is_pending());
    drop(api);
    drop(watch);
    // The clock is paused: it moves only when every task waits on a timer, and then to the
    // next one. This timeout's comes before the watch's bookmark tick (5 s), so only a watch
    // that ended when its client went away lets the server go in time.
    tokio::time::timeout(Duration::from_secs(1), released)
        .await
        .expect("the server is still held after its client and watch were dropped");
}
