//! A plugin's operator config is honoured by the real host: its own deadline ends its slow
//! reconciles while another plugin in the same host serves the same objects undisturbed.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::process::{Cluster, plugin_dir, wait_for};

/// The hostile plugin as `slow`: a reconcile that never ends, cut off by its 100 ms deadline
/// (the host's default is 2 s).
const SLOW: &str = "deadline_ms = 100\n[settings]\nmode = \"loop\"\nname = \"slow\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_ms_times_out_one_plugin_while_another_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    common::things::install(&client).await;
    let plugins = plugin_dir(dir.path(), &[("hostile", Some(SLOW)), ("trivial", None)]);
    let host = cluster.run_host(&plugins, &[], &[]);
    let api = common::things::api(&client);
    common::things::create(&api, "t1", serde_json::json!({})).await;

    // The well-behaved plugin reports the object Ready.
    common::eventually(30, "trivial to report t1 Ready", || async {
        let thing = api.get("t1").await.ok()?;
        (thing.data["status"]["phase"] == "Ready").then_some(())
    })
    .await;
    // The slow one is cut off at its own deadline, named, and retried.
    wait_for(30, "slow's reconcile to time out twice", || {
        let log = host.log();
        log.lines()
            .filter(|l| l.contains("plugin slow, key default/t1: timed out after 100ms"))
            .count()
            >= 2
    });
    assert!(!host.log().contains("timed out after 2s"), "{}", host.log());
}
