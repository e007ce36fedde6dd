//! Host memory through object churn: the real `wasmctrl run` against `wasmctrl apiserver`, the
//! hostile test plugin owning one ConfigMap per Thing. N Things (default 20,000; `CHURN_OBJECTS`)
//! are created, reconciled (N children applied), then deleted (the children collected). Prints
//! the host's resident memory before, at the peak and after, from /proc.

// Bench helpers may unwrap (clippy.toml covers only tests).
#![allow(clippy::unwrap_used)]

#[path = "../tests/it/common/mod.rs"]
mod common;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;

use common::process::{Cluster, plugin_dir};

/// `VmRSS` and `VmHWM` (peak) of a process, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
            .unwrap_or_default()
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Seconds of once-a-second RSS readings after the last child is collected.
const AFTER_SAMPLES: u32 = 30;

/// The ConfigMaps the plugin owns: every one in the namespace but the `kube-root-ca.crt` the
/// cluster's ServiceAccount controller keeps there.
async fn children(configmaps: &Api<ConfigMap>) -> usize {
    let owned = kube::api::ListParams::default().fields("metadata.name!=kube-root-ca.crt");
    configmaps
        .list(&owned)
        .await
        .map(|l| l.items.len())
        .unwrap_or(usize::MAX)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("CHURN_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    common::things::install(&client).await;
    let config = "concurrency = 8\n[settings]\nmode = \"own\"\n";
    let plugins = plugin_dir(dir.path(), &[("hostile", Some(config))]);
    let host = cluster.run_host(&plugins, &[], &[]);
    let pid = host.pid().unwrap();
    let api = common::things::api(&client);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // Started and synced: one object reconciled.
    common::things::create(&api, "warm-up", json!({})).await;
    common::eventually(60, "the first child", || async {
        (children(&configmaps).await == 1).then_some(())
    })
    .await;
    api.delete("warm-up", &Default::default()).await.unwrap();
    common::eventually(60, "the first child collected", || async {
        (children(&configmaps).await == 0).then_some(())
    })
    .await;
    let (before, _) = memory(pid);

    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move { common::things::create(&api, &format!("churn-{i}"), json!({})).await }
        })
        .await;
    common::eventually(900, &format!("{n} children"), || async {
        (children(&configmaps).await == n).then_some(())
    })
    .await;
    let (full, _) = memory(pid);
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move {
                api.delete(&format!("churn-{i}"), &Default::default())
                    .await
                    .unwrap();
            }
        })
        .await;
    common::eventually(900, "every child collected", || async {
        (children(&configmaps).await == 0).then_some(())
    })
    .await;
    // The host sees the last deletions a moment after the server made them (and holds a key
    // up to 5 s for its writes' echoes), and returns freed heap to the system every 10 s: one
    // reading at a fixed moment can land before the last trim that matters (1.31 in one run,
    // 0.97 in the next). What the host settles at is the lowest of a reading a second over
    // three trim periods.
    let mut after = f64::MAX;
    for _ in 0..AFTER_SAMPLES {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        after = after.min(memory(pid).0);
    }
    let (_, peak) = memory(pid);
    println!(
        "churn of {n} objects: host RSS before {before:.1} MiB, with all cached {full:.1} MiB, \
         peak {peak:.1} MiB, after {after:.1} MiB (lowest over {AFTER_SAMPLES} s; after/before {:.2})",
        after / before
    );
}
