//! Convergence under API faults: while 1,000 objects are reconciled, watches are dropped, a watch
//! is forced to 410, and writes get 409s and 500s. Every object still converges, no key is
//! reconciled twice at once, nothing is lost.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use kube::api::{ListParams, PostParams};
use serde_json::json;
use wasmctrl::apiserver::ApiServer;
use wasmctrl::reconcile::controller::{Manager, Tuning};
use wasmctrl::runtime::{Config, Runtime};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_converges_through_dropped_watches_410s_409s_and_500s() {
    let server = ApiServer::new().unwrap();
    let client = server.client();
    common::things::install(&client).await;
    let things = common::things::api(&client);

    let runtime = Runtime::new(Config::default()).unwrap();
    let settings = json!({"mode": "version", "version": 7}).to_string();
    let plugin = runtime
        .load("hostile.wasm", &common::plugin_bytes("hostile"), &settings)
        .unwrap();
    let host = Manager::new(client.clone());
    host.upsert(Arc::new(plugin), Tuning::default()).await;

    let faults = server.faults();
    for i in 0..1000 {
        match i {
            100 | 400 | 700 => faults.drop_watches(),
            250 | 550 => {
                faults.expire_next_watch();
                faults.drop_watches();
            }
            300 => faults.fail(Some("patch"), Some("things"), 409, 40),
            600 => faults.fail(Some("patch"), Some("things"), 500, 40),
            800 => faults.fail(Some("list"), Some("things"), 500, 3),
            _ => {}
        }
        let thing = json!({"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": format!("thing-{i:04}"), "namespace": "default"}, "spec": {"i": i}});
        things
            .create(
                &PostParams::default(),
                &serde_json::from_value(thing).unwrap(),
            )
            .await
            .unwrap();
    }
    faults.drop_watches();

    common::eventually(120, "all 1000 objects to converge", || async {
        let list = things.list(&ListParams::default()).await.ok()?;
        let done = list
            .items
            .iter()
            .filter(|t| t.data["status"]["version"] == 7)
            .count();
        (done == 1000).then_some(())
    })
    .await;
    let counts = host.counts("hostile-version").unwrap();
    assert_eq!(counts.overlaps, 0, "a key was reconciled concurrently");
    assert!(
        counts.error + counts.requeue > 0,
        "the injected faults never reached the controller: {counts:?}"
    );
    host.shutdown(Duration::from_secs(10)).await;
}
