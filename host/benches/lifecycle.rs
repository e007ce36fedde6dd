//! The real `wasmctrl run` (the bench-profile binary) against an embedded API server over HTTPS
//! in this process:
//!
//! - **Hot reload**: a plugin of ~1 MB (`hostile` in `version` mode, padded with a custom
//!   section that changes its digest) is swapped 20 times (`WASMCTRL_BENCH_RELOADS`) the way the
//!   kubelet updates a ConfigMap volume (new files, then the `..data` symlink renamed over the
//!   old one); timed from the swap to the status written by the first reconcile of the new
//!   version (watched here). Without the artifact cache every version is new bytes (compiled);
//!   with `--cache-dir`, a first pass compiled the same 20 versions into the cache. The two
//!   modes alternate reload by reload, each in its own host.
//! - **Start-up**: process start to the first reconcile of each of the four seed plugins (the
//!   examples applied), cold (empty `--cache-dir`) and warm (the cache filled by an earlier
//!   start), `WASMCTRL_BENCH_ROUNDS` (default 5) rounds, cold and warm alternating.

// Bench helpers may unwrap (clippy.toml covers only tests).
#![allow(clippy::unwrap_used)]

#[path = "../tests/it/common/mod.rs"]
mod common;
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use wasmctrl::apiserver::HttpServer;

use common::process::Process;
use support::{env_or, percentile, run_host, serve, sorted};

const RELOAD_GOAL_MS: f64 = 300.0;
const PADDED_SIZE: usize = 1 << 20;

// ---------------------------------------------------------------------------------------------
// Hot reload.

/// `bytes` with a custom section appended that makes it `PADDED_SIZE` long and unique to
/// `version` (a component may carry custom sections anywhere; they are not compiled).
fn padded(bytes: &[u8], version: usize) -> Vec<u8> {
    let name = "wasmctrl-bench-padding";
    let payload_len = PADDED_SIZE.saturating_sub(bytes.len() + name.len() + 16);
    let mut payload = format!("version {version} ").into_bytes();
    payload.resize(payload_len.max(payload.len()), b'.');
    common::with_custom_section(bytes, name, &payload)
}

/// A ConfigMap-style plugin directory: `hostile.{wasm,toml}` -> `..data/...` -> `..v<n>/`.
struct Volume {
    dir: PathBuf,
}

impl Volume {
    fn new(dir: PathBuf) -> Self {
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["hostile.wasm", "hostile.toml"] {
            std::os::unix::fs::symlink(format!("..data/{file}"), dir.join(file)).unwrap();
        }
        Self { dir }
    }

    /// Writes version `n` (its bytes and config) and swaps it in atomically.
    fn swap(&self, n: usize, tag: &str, bytes: &[u8]) {
        let version = format!("..{tag}-v{n}");
        let target = self.dir.join(&version);
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("hostile.wasm"), bytes).unwrap();
        let config = format!("[settings]\nmode = \"version\"\nversion = \"{tag}-{n}\"\n");
        std::fs::write(target.join("hostile.toml"), config).unwrap();
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&version, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
    }
}

/// The task of [`watch_version`], stopped when dropped: it must not outlive the API server it
/// watches.
struct Watching(tokio::task::JoinHandle<()>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Watches Thing `t` and sends its `status.version` on every change.
fn watch_version(client: &kube::Client) -> (tokio::sync::watch::Receiver<String>, Watching) {
    let (tx, rx) = tokio::sync::watch::channel(String::new());
    let api = common::things::api(client);
    // With backoff: a watcher without it retries a failing request at once, forever, and
    // never yields, so a server that went away first kept a worker spinning and the benchmark
    // from exiting.
    let stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects();
    let task = tokio::spawn(stream.for_each(move |obj| {
        if let Ok(obj) = obj
            && let Some(v) = obj.data["status"]["version"].as_str()
        {
            tx.send_replace(v.to_string());
        }
        async {}
    }));
    (rx, Watching(task))
}

async fn wait_version(rx: &mut tokio::sync::watch::Receiver<String>, want: &str) {
    tokio::time::timeout(Duration::from_secs(120), rx.wait_for(|v| v == want))
        .await
        .unwrap_or_else(|_| panic!("version {want} never reported"))
        .unwrap();
}

/// One host serving the padded plugin from its own volume, for one mode.
struct Reloading {
    tag: &'static str,
    volume: Volume,
    rx: tokio::sync::watch::Receiver<String>,
    _watching: Watching,
    _host: Process,
    _http: HttpServer,
    samples: Vec<f64>,
}

async fn reloading(
    dir: &Path,
    tag: &'static str,
    cache: Option<&Path>,
    base: &[u8],
    n: usize,
) -> Reloading {
    let dir = dir.join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let (server, http, kubeconfig) = serve(&dir).await;
    let client = server.client();
    common::things::install(&client).await;
    common::things::create(&common::things::api(&client), "t", serde_json::json!({})).await;
    let (mut rx, watching) = watch_version(&client);
    let volume = Volume::new(dir.join("plugins"));
    if cache.is_some() {
        // Fill the cache with every version the timed reloads will use.
        for i in 1..=n {
            let warm = run_host_once(&kubeconfig, &dir, cache, &padded(base, i)).await;
            drop(warm);
        }
    }
    volume.swap(0, tag, &padded(base, 0));
    let host = run_host(&kubeconfig, &volume.dir, cache, dir.join("host.log"));
    wait_version(&mut rx, &format!("{tag}-0")).await;
    Reloading {
        tag,
        volume,
        rx,
        _watching: watching,
        _host: host,
        _http: http,
        samples: Vec::new(),
    }
}

/// Compiles `bytes` into the cache by serving them once in a throwaway host.
async fn run_host_once(
    kubeconfig: &Path,
    dir: &Path,
    cache: Option<&Path>,
    bytes: &[u8],
) -> Process {
    let plugins = dir.join("warm-plugins");
    let _ = std::fs::remove_dir_all(&plugins);
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::write(plugins.join("hostile.wasm"), bytes).unwrap();
    std::fs::write(
        plugins.join("hostile.toml"),
        "[settings]\nmode = \"version\"\nversion = \"warm\"\n",
    )
    .unwrap();
    let host = run_host(kubeconfig, &plugins, cache, dir.join("warm.log"));
    common::eventually(120, "the warm-up host to load the plugin", || async {
        host.log().contains("plugin started").then_some(())
    })
    .await;
    host
}

impl Reloading {
    async fn reload(&mut self, n: usize, base: &[u8]) {
        let bytes = padded(base, n);
        let started = Instant::now();
        self.volume.swap(n, self.tag, &bytes);
        wait_version(&mut self.rx, &format!("{}-{n}", self.tag)).await;
        self.samples.push(started.elapsed().as_secs_f64() * 1000.0);
    }
}

async fn reload_figures() {
    let n = env_or("WASMCTRL_BENCH_RELOADS", 20).max(1);
    let base = common::plugin_bytes("hostile");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    println!(
        "reload: {n} reloads of a {} KB plugin ({} KB of it the component, the rest a custom \
         section), swapped as a ConfigMap volume; swap to the new version's first status write",
        padded(&base, 0).len() / 1024,
        base.len() / 1024
    );
    let mut cold = reloading(dir.path(), "uncached", None, &base, n).await;
    let mut warm = reloading(dir.path(), "cached", Some(&cache), &base, n).await;
    for i in 1..=n {
        cold.reload(i + n, &base).await;
        warm.reload(i, &base).await;
    }
    for (label, r) in [
        ("without artifact cache", &cold),
        ("with --cache-dir (warm)", &warm),
    ] {
        let s = sorted(r.samples.clone());
        println!(
            "  {label:<26} p50 {:>6.0} ms  p95 {:>6.0} ms  (min {:.0}, max {:.0})",
            percentile(&s, 0.5),
            percentile(&s, 0.95),
            s[0],
            s[s.len() - 1]
        );
    }
    let cold_p50 = percentile(&sorted(cold.samples.clone()), 0.5);
    let warm_p50 = percentile(&sorted(warm.samples.clone()), 0.5);
    println!(
        "reload: p50 warm {warm_p50:.0} ms (goal <= {RELOAD_GOAL_MS:.0} ms), cold {cold_p50:.0} ms"
    );
}

// ---------------------------------------------------------------------------------------------
// Start-up.

/// Applies the examples (CRDs first) with server-side apply.
async fn apply_examples(client: &kube::Client) {
    let files = [
        "examples/virtualmachine/crd.yaml",
        "examples/postgres-writer/crd.yaml",
        "examples/workspace/crd.yaml",
        "examples/virtualmachine/test-vm.yaml",
        "examples/postgres-writer/sample.yaml",
        "examples/workspace/sample.yaml",
        "examples/pod-restarter/nginx-pod.yaml",
        "examples/pod-restarter/tools-deployment.yaml",
    ];
    for file in files {
        for object in common::yaml_objects(file) {
            let text = |v: &Value| v.as_str().unwrap().to_string();
            let api_version = text(&object["apiVersion"]);
            let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
            let gvk = GroupVersionKind::gvk(group, version, &text(&object["kind"]));
            let (resource, caps): (ApiResource, _) =
                kube::discovery::pinned_kind(client, &gvk).await.unwrap();
            let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
                let ns = object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default");
                Api::namespaced_with(client.clone(), ns, &resource)
            } else {
                Api::all_with(client.clone(), &resource)
            };
            let name = text(&object["metadata"]["name"]);
            api.patch(
                &name,
                &PatchParams::apply("bench").force(),
                &Patch::Apply(&object),
            )
            .await
            .unwrap();
        }
    }
}

/// Seconds from spawning the host to its first finished reconcile of each seed plugin (the
/// last of the four), and to the first of any.
async fn start_once(kubeconfig: &Path, plugins: &Path, cache: &Path, log: PathBuf) -> (f64, f64) {
    let seeds = [
        "virtualmachine",
        "postgres-writer",
        "workspace",
        "pod-restarter",
    ];
    let started = Instant::now();
    let host = run_host(kubeconfig, plugins, Some(cache), log);
    let mut first_any = None;
    loop {
        let log = host.log();
        let done = seeds
            .iter()
            .filter(|s| {
                log.lines()
                    .any(|l| l.contains(" reconciled ") && l.contains(&format!("plugin.name={s} ")))
            })
            .count();
        if done > 0 && first_any.is_none() {
            first_any = Some(started.elapsed().as_secs_f64());
        }
        if done == seeds.len() {
            return (started.elapsed().as_secs_f64(), first_any.unwrap());
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "not all seeds reconciled: {log}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn startup_figures(rounds: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, kubeconfig) = serve(dir.path()).await;
    apply_examples(&server.client()).await;
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    for seed in [
        "virtualmachine",
        "postgres-writer",
        "workspace",
        "pod-restarter",
    ] {
        std::fs::copy(
            common::plugin_path(seed),
            plugins.join(format!("{seed}.wasm")),
        )
        .unwrap();
    }
    let warm_cache = dir.path().join("warm-cache");
    // Fills the warm cache (and the page cache with the binary).
    start_once(
        &kubeconfig,
        &plugins,
        &warm_cache,
        dir.path().join("fill.log"),
    )
    .await;
    println!(
        "start-up: process start to the first reconcile of each of the 4 seed plugins, {rounds} rounds, cold and warm alternating"
    );
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let empty = dir.path().join(format!("cold-cache-{r}"));
        cold.push(
            start_once(
                &kubeconfig,
                &plugins,
                &empty,
                dir.path().join(format!("cold-{r}.log")),
            )
            .await,
        );
        warm.push(
            start_once(
                &kubeconfig,
                &plugins,
                &warm_cache,
                dir.path().join(format!("warm-{r}.log")),
            )
            .await,
        );
    }
    let mut medians = Vec::new();
    for (label, samples) in [
        ("cold (empty artifact cache)", &cold),
        ("warm (artifact cache filled)", &warm),
    ] {
        let all = sorted(samples.iter().map(|s| s.0 * 1000.0).collect());
        let any = sorted(samples.iter().map(|s| s.1 * 1000.0).collect());
        let med = all[all.len() / 2];
        medians.push(med);
        println!(
            "  {label:<30} all four {med:>6.0} ms ({:.0}..{:.0}), first plugin {:>6.0} ms",
            all[0],
            all[all.len() - 1],
            any[any.len() / 2]
        );
    }
    println!(
        "start-up: cold {:.0} ms, warm {:.0} ms",
        medians[0], medians[1]
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds = env_or("WASMCTRL_BENCH_ROUNDS", 5).max(1);
    reload_figures().await;
    startup_figures(rounds).await;
}
