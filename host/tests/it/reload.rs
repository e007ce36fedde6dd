//! Hot reload under load: a plugin replaced 20 times (with a corrupt file in between) while 500
//! objects are reconciled. Each version is new component bytes (so a real compile and swap) and
//! new settings. No reconcile fails because of a swap, a corrupt file changes nothing, and every
//! object ends reconciled by the last version.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kube::api::ListParams;
use serde_json::json;
use wasmctrl::apiserver::ApiServer;
use wasmctrl::plugins::loader::{self, Loader};
use wasmctrl::reconcile::controller::Manager;
use wasmctrl::runtime::{Config, Runtime};

/// Replaces `path` in one step, as `kubectl cp`/ConfigMap updates or an editor would.
fn put(path: &Path, bytes: &[u8]) {
    let tmp = path.with_file_name(format!(
        ".{}.tmp",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The same component with a custom section carrying `version`: other bytes and digest (the
/// host compiles and swaps it like any new build), the same behaviour.
fn build(component: &[u8], version: u32) -> Vec<u8> {
    let name = b"wasmctrl-test-version";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(&version.to_le_bytes());
    let mut out = component.to_vec();
    // Custom section (id 0), its size as a one-byte LEB128: allowed anywhere in a component.
    out.push(0);
    out.push(u8::try_from(section.len()).unwrap());
    out.extend(section);
    out
}

fn config(version: u32) -> String {
    format!("concurrency = 4\n\n[settings]\nmode = \"version\"\nversion = {version}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_a_plugin_under_load_loses_nothing_and_ends_on_the_last_version() {
    let server = ApiServer::new().unwrap();
    let client = server.client();
    common::things::install(&client).await;
    let things = common::things::api(&client);
    for i in 0..500 {
        common::things::create(&things, &format!("thing-{i:03}"), json!({})).await;
    }

    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("hostile.wasm");
    let toml = dir.path().join("hostile.toml");
    let good = common::plugin_bytes("hostile");
    put(&wasm, &build(&good, 0));
    put(&toml, config(0).as_bytes());

    let host = Arc::new(Manager::new(client.clone()));
    let options = loader::Options {
        debounce: Duration::from_millis(50),
        ..Default::default()
    };
    let (loader, mut changes) = Loader::start(
        dir.path().to_path_buf(),
        Runtime::new(Config::default()).unwrap(),
        options,
    )
    .await
    .unwrap();
    let failed = Arc::new(AtomicUsize::new(0));
    let follower = {
        let (host, failed) = (host.clone(), failed.clone());
        tokio::spawn(async move {
            while let Some(change) = changes.recv().await {
                if matches!(change, loader::Change::Failed { .. }) {
                    failed.fetch_add(1, Ordering::SeqCst);
                }
                change.deliver(&host, 4, Duration::from_secs(10)).await;
            }
        })
    };

    for version in 1..=20 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        if version == 10 {
            // A corrupt upload: it must not replace the working version. Wait until the loader
            // has refused it (a rescan may be busy compiling the previous build)...
            put(&wasm, b"\0asm garbage, not a component");
            common::eventually(60, "the corrupt upload to be refused", || async {
                (failed.load(Ordering::SeqCst) == 1).then_some(())
            })
            .await;
            // ...and putting the good bytes back is no change at all.
            put(&wasm, &build(&good, version - 1));
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        put(&wasm, &build(&good, version));
        put(&toml, config(version).as_bytes());
    }

    common::eventually(120, "every object reconciled by version 20", || async {
        let list = things.list(&ListParams::default()).await.ok()?;
        let done = list
            .items
            .iter()
            .filter(|t| t.data["status"]["version"] == 20)
            .count();
        (done == 500).then_some(())
    })
    .await;
    let served = loader.current();
    assert_eq!(
        served[0].0.digest(),
        wasmctrl::runtime::digest(&build(&good, 20)),
        "the last build is the one served"
    );
    let counts = host.counts("hostile-version").unwrap();
    assert_eq!(
        counts.error + counts.terminal,
        0,
        "reconciles failed during swaps: {counts:?}"
    );
    assert_eq!(counts.overlaps, 0);
    assert!(counts.total() >= 500);

    host.shutdown(Duration::from_secs(10)).await;
    loader.shutdown().await;
    follower.await.unwrap();
    assert_eq!(
        failed.load(Ordering::SeqCst),
        1,
        "exactly the corrupt upload failed to load"
    );
}
