//! Plugin Events through the whole controller loop (embedded API server, informers, sandbox,
//! applier): recorded as kube-runtime and client-go record them, with a series for repeats, and
//! best effort, so an Event the server refuses never fails the reconcile that emitted it. Its own
//! test binary because it captures the process's log.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use wasmctrl::apiserver::ApiServer;
use wasmctrl::reconcile::controller::Manager;

/// An in-process server with the `Thing` CRD and the hostile plugin in `warn` mode (a status
/// write and the same Warning `NotReady` on every reconcile, requeued after 10 ms), named
/// `name`, holding only the RBAC its manifest implies.
async fn warning_plugin(name: &str) -> (ApiServer, Manager, Api<DynamicObject>) {
    let server = ApiServer::new().unwrap();
    let client = server.client();
    common::things::install(&client).await;
    let settings = json!({"mode": "warn", "afterMs": 10, "name": name});
    let host = common::host_of(&server, "hostile", &settings).await;
    (server, host, common::things::api(&client))
}

/// Every Event about Thing `name` with `reason`, as events.k8s.io/v1 serves them.
async fn events_about(client: &kube::Client, name: &str, reason: &str) -> Vec<Value> {
    common::events(client, "default")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| e["reason"] == reason && e["regarding"]["name"] == name)
        .collect()
}

/// The value of `series` in the host's metrics, read as Prometheus would scrape them.
fn sample(host: &Manager, series: &str) -> Option<f64> {
    host.refresh_metrics();
    let text = host.metrics().encode(false);
    let line = text
        .lines()
        .find(|l| l.strip_prefix(series).is_some_and(|r| r.starts_with(' ')))?;
    line.rsplit(' ').next()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_warning_on_every_retry_is_one_event_whose_series_counts_them() {
    let (server, host, api) = warning_plugin("warn-series").await;
    common::things::create(&api, "t1", json!({})).await;
    common::eventually(60, "20 reconciles of t1", || async {
        (host.counts("warn-series").unwrap().requeue >= 20).then_some(())
    })
    .await;
    host.shutdown(Duration::from_secs(5)).await;

    let events = events_about(&server.client(), "t1", "NotReady").await;
    assert_eq!(events.len(), 1, "one Event, not one per retry: {events:#?}");
    let event = &events[0];
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reportingController"], "wasmctrl/warn-series");
    assert!(
        event["series"]["count"].as_i64().unwrap() >= 2,
        "series: {}",
        event["series"]
    );
    assert!(event["series"]["lastObservedTime"].is_string(), "{event}");
    assert_eq!(
        sample(
            &host,
            r#"wasmctrl_events_failed_total{controller="warn-series"}"#
        ),
        None,
        "no event was refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_the_server_refuses_leaves_the_reconcile_and_its_status_write_standing() {
    let log = common::Captured::global(tracing::Level::WARN);
    let (server, host, api) = warning_plugin("warn-refused").await;
    // Every Event create is refused as invalid, as kube-apiserver refused the host's own
    // Events before they were recorded through kube-runtime.
    server
        .faults()
        .fail(Some("create"), Some("events"), 422, u32::MAX);
    common::things::create(&api, "t2", json!({})).await;

    let status = common::eventually(20, "t2's status write", || async {
        let thing = api.get_opt("t2").await.unwrap()?;
        thing.data.get("status").cloned()
    })
    .await;
    assert_eq!(status["warned"], true);
    let failed = r#"wasmctrl_events_failed_total{controller="warn-refused"}"#;
    common::eventually(20, "the refused events to be counted", || async {
        sample(&host, failed).filter(|n| *n >= 3.0)
    })
    .await;
    // An Event is refused during its reconcile, which is counted once it has ended: wait for
    // three reconciles to have ended, not just for their Events to have been refused.
    let counts = common::eventually(20, "three reconciles to end", || async {
        host.counts("warn-refused")
            .filter(|c| c.requeue + c.error >= 3)
    })
    .await;
    host.shutdown(Duration::from_secs(5)).await;

    assert_eq!(counts.error, 0, "no reconcile failed: {counts:?}");
    assert!(counts.requeue >= 3, "{counts:?}");
    assert_eq!(
        sample(
            &host,
            r#"controller_runtime_reconcile_errors_total{controller="warn-refused"}"#
        ),
        Some(0.0)
    );
    assert!(
        events_about(&server.client(), "t2", "NotReady")
            .await
            .is_empty()
    );
    let logged = log.text();
    let line = logged
        .lines()
        .find(|l| l.contains("event not recorded") && l.contains("wasmctrl/warn-refused"))
        .unwrap_or_else(|| panic!("no log line for the refused event:\n{logged}"));
    assert!(
        line.contains("object.name=\"t2\"") || line.contains("object.name=t2"),
        "{line}"
    );
    assert!(!logged.contains("reconcile failed"), "{logged}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_series_whose_first_event_is_gone_starts_again_with_a_new_event() {
    use k8s_openapi::api::core::v1::ObjectReference;
    use wasmctrl::observe::events::{Note, Recorders};

    let server = ApiServer::new().unwrap();
    let client = server.client();
    let recorders = Recorders::new("host-0");
    let regarding = ObjectReference {
        api_version: Some("example.com/v1".into()),
        kind: Some("Thing".into()),
        namespace: Some("default".into()),
        name: Some("t3".into()),
        uid: Some("u3".into()),
        ..ObjectReference::default()
    };
    let note = Note {
        warning: true,
        reason: "NotReady",
        note: "t3 is not ready",
        action: "Reconcile",
    };
    let record = || recorders.record(&client, "wasmctrl/p", "p", &regarding, &note);
    assert!(record().await);
    assert!(record().await);
    let events = events_about(&client, "t3", "NotReady").await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["series"]["count"], 2);
    assert_eq!(events[0]["note"], "t3 is not ready");
    assert_eq!(events[0]["reportingInstance"], "host-0");

    // The server let it go (kube-apiserver keeps Events for an hour): the next occurrence
    // creates a new one rather than failing on the missing first.
    let first = events[0]["metadata"]["name"].as_str().unwrap().to_owned();
    common::events(&client, "default")
        .delete(&first, &Default::default())
        .await
        .unwrap();
    assert!(record().await);
    let events = events_about(&client, "t3", "NotReady").await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_ne!(events[0]["metadata"]["name"], first.as_str());
    assert!(events[0]["series"].is_null(), "{}", events[0]);
    // And the series goes on from there.
    assert!(record().await);
    let events = events_about(&client, "t3", "NotReady").await;
    assert_eq!(events[0]["series"]["count"], 2);
    assert_eq!(recorders.series(), 1);
}
