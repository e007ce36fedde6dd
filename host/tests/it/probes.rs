//! The real host's probes: `/healthz` answers while it serves; `/readyz` is 503, naming what it
//! waits for, until every plugin's caches have synced (here: until the CRD of the kind a plugin
//! watches is installed), then 200.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::http::get;
use common::process::{Cluster, plugin_dir, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_caches_and_healthz_answers_throughout() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    let plugins = plugin_dir(dir.path(), &[("trivial", None)]);
    let host = cluster.run_host(&plugins, &[], &[]);
    let addr = host.address("health probes");
    wait_for(30, "the plugin to be started", || {
        host.log().contains("plugin started")
    });

    assert_eq!(get(&addr, "/healthz"), (200, "ok".to_string()));
    // Thing is not served yet: the plugin's cache cannot sync.
    let (code, body) = get(&addr, "/readyz?verbose");
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("[+]ping ok\n[+]plugins-loaded ok\n"),
        "{body}"
    );
    assert!(
        body.contains(
            "[-]informer-sync failed: waiting for trivial: example.com/v1/Thing in all namespaces"
        ),
        "{body}"
    );
    assert!(body.ends_with("readyz check failed\n"), "{body}");

    common::things::install(&cluster.client().await).await;
    wait_for(60, "readyz to pass", || get(&addr, "/readyz").0 == 200);
    assert_eq!(get(&addr, "/readyz"), (200, "ok".to_string()));
    let (_, verbose) = get(&addr, "/readyz?verbose");
    assert!(
        verbose.ends_with("[+]informer-sync ok\nreadyz check passed\n"),
        "{verbose}"
    );
    assert_eq!(get(&addr, "/livez").0, 200);
}
