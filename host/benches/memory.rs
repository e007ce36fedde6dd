//! Memory, next to kube-runtime, each figure measured in fresh child processes (this benchmark
//! re-runs itself with `WASMCTRL_BENCH_ROLE`), rounds interleaved (`WASMCTRL_BENCH_ROUNDS`,
//! default 5), against an embedded API server over HTTPS in this process:
//!
//! - **Cache bytes per object**: the resident-size growth of a process after its cache holds N
//!   ConfigMaps of ~1 KB (default 100,000; `WASMCTRL_BENCH_CACHE_OBJECTS`): the host's informer
//!   (`wasmctrl::reconcile::informer`), a kube-runtime `reflector` store of `DynamicObject`s as it comes,
//!   and one with `managedFields` dropped (as the host drops them). Each child trims its heap
//!   (`malloc_trim`) before both readings, so the figure is what the cache holds, not what the
//!   allocator kept from the list it decoded.
//! - **Idle controllers**: `wasmctrl run` serving 10 plugins (the four seed plugins, copies
//!   renamed by their operator configs), against the sum of 10 native kube-runtime controller
//!   processes watching the same kinds, 10 s after start.

// Bench helpers may unwrap (clippy.toml covers only tests).
#![allow(clippy::unwrap_used)]

#[path = "../tests/it/common/mod.rs"]
mod common;
mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use wasmctrl::reconcile::informer::{Informers, Watch};

use support::{env_or, mib, rss, run_host, serve, spread};

const ROLE: &str = "WASMCTRL_BENCH_ROLE";
const KUBECONFIG: &str = "WASMCTRL_BENCH_KUBECONFIG";
const NAMESPACE: &str = "mem";
/// Plugins (and native controllers) of the idle figure.
const IDLE: usize = 10;
const IDLE_GOAL_MIB: f64 = 60.0;

/// Resident bytes after returning the heap's free pages.
async fn settled_rss() -> u64 {
    tokio::time::sleep(Duration::from_millis(500)).await;
    wasmctrl::memory::trim();
    tokio::time::sleep(Duration::from_millis(200)).await;
    rss("self")
}

async fn client_from_env() -> kube::Client {
    let path = std::env::var(KUBECONFIG).unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Children.

/// Caches every ConfigMap of the namespace one way and prints
/// `<rss before> <rss after> <objects> <json bytes>`.
async fn cache_child(how: &str) {
    let client = client_from_env().await;
    // Connection, TLS and the client's own allocations before the first reading.
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    api.list(&ListParams::default().limit(1)).await.unwrap();
    let before = settled_rss().await;
    let (objects, json_bytes, after) = match how {
        "host" => {
            let informers = Informers::new(client);
            let watch = Watch {
                kind: wasmctrl_core::Gvk::new("", "v1", "ConfigMap"),
                namespace: Some(NAMESPACE.into()),
                labels: Default::default(),
                sharded: false,
                account: None,
            };
            let informer = informers.get(&watch);
            informer.synced().await;
            let after = settled_rss().await;
            let entries = informer.entries();
            let bytes: usize = entries.iter().map(|e| e.json.len()).sum();
            (entries.len(), bytes, after)
        }
        _ => {
            let ar = ApiResource::erase::<ConfigMap>(&());
            let writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
            let store = writer.as_reader();
            let api: Api<DynamicObject> = Api::namespaced_with(client, NAMESPACE, &ar);
            let events = watcher::watcher(api, watcher::Config::default().any_semantic());
            let strip = how == "reflector-stripped";
            let events = events.modify(move |o: &mut DynamicObject| {
                if strip {
                    o.metadata.managed_fields = None;
                }
            });
            let stream = reflector::reflector(writer, events).default_backoff();
            let task = tokio::spawn(stream.for_each(|_| async {}));
            store.wait_until_ready().await.unwrap();
            let after = settled_rss().await;
            let state = store.state();
            let bytes: usize = state
                .iter()
                .map(|o| serde_json::to_string(o.as_ref()).unwrap().len())
                .sum();
            task.abort();
            (state.len(), bytes, after)
        }
    };
    println!("{before} {after} {objects} {json_bytes}");
}

/// The kinds the seed plugins watch, for the native controllers: (kind, owned kind).
fn seed_kinds() -> Vec<(GroupVersionKind, Option<GroupVersionKind>)> {
    let gvk = GroupVersionKind::gvk;
    vec![
        (gvk("cloudnative.tw", "v1alpha1", "VirtualMachine"), None),
        (gvk("demo.yash.com", "v1", "PostgresWriter"), None),
        (
            gvk("ide.wasmctrl.io", "v1alpha1", "Workspace"),
            Some(gvk("", "v1", "Pod")),
        ),
        (gvk("", "v1", "Pod"), Some(gvk("apps", "v1", "Deployment"))),
    ]
}

/// A native controller over seed kind `index`, reconciling nothing, until killed.
async fn native_child(index: usize) {
    let client = client_from_env().await;
    let (kind, owned) = seed_kinds()[index % 4].clone();
    let (ar, _) = kube::discovery::pinned_kind(&client, &kind).await.unwrap();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut controller = Controller::new_with(api, watcher::Config::default(), ar);
    if let Some(owned) = owned {
        let (oar, _) = kube::discovery::pinned_kind(&client, &owned).await.unwrap();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &oar);
        controller = controller.owns_with(api, oar, watcher::Config::default());
    }
    controller
        .run(
            |_, _| async { Ok::<_, kube::Error>(Action::await_change()) },
            |_, _, _| Action::requeue(Duration::from_secs(1)),
            Arc::new(()),
        )
        .for_each(|_| async {})
        .await;
}

// ---------------------------------------------------------------------------------------------
// The parent.

fn child(role: &str, kubeconfig: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
    command
        .env(ROLE, role)
        .env(KUBECONFIG, kubeconfig)
        .kill_on_drop(true);
    command
}

async fn create_configmaps(client: &kube::Client, n: usize) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&Default::default(), &ns)
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    futures::stream::iter(0..n)
        .for_each_concurrent(64, |i| {
            let api = api.clone();
            async move {
                // ~1 KB as served: metadata, two labels, a few keys and a payload.
                let cm = json!({"metadata": {"name": format!("cm-{i:06}"),
                        "labels": {"app": "bench", "shard": (i % 16).to_string()}},
                    "data": {"index": i.to_string(), "owner": "bench", "payload": "x".repeat(640)}});
                api.create(&Default::default(), &serde_json::from_value(cm).unwrap())
                    .await
                    .unwrap();
            }
        })
        .await;
}

async fn cache_figures(rounds: usize) {
    let n = env_or("WASMCTRL_BENCH_CACHE_OBJECTS", 100_000);
    let dir = tempfile::tempdir().unwrap();
    let (server, http, kubeconfig) = serve(dir.path()).await;
    create_configmaps(&server.client(), n).await;
    println!(
        "cache: {n} ConfigMaps, resident growth per cached object, {rounds} rounds interleaved"
    );
    let ways = ["host", "reflector", "reflector-stripped"];
    let mut per_object: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
    let mut json_per_object = 0.0;
    for _ in 0..rounds {
        for (i, way) in ways.iter().enumerate() {
            let out = child(&format!("cache-{way}"), &kubeconfig)
                .output()
                .await
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let figures: Vec<f64> = text
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            assert_eq!(
                figures.len(),
                4,
                "child {way}: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(figures[2] as usize, n, "child {way} cached {}", figures[2]);
            per_object[i].push((figures[1] - figures[0]) / figures[2]);
            if *way == "host" {
                json_per_object = figures[3] / figures[2];
            }
        }
    }
    println!(
        "  objects' JSON (managedFields dropped, as the host holds it): {json_per_object:.0} B each"
    );
    let labels = [
        "wasmctrl informer",
        "kube-runtime reflector (DynamicObject)",
        "kube-runtime reflector, managedFields dropped",
    ];
    let mut medians = Vec::new();
    for (label, v) in labels.iter().zip(&per_object) {
        let (min, med, max) = spread(v.clone());
        medians.push(med);
        println!(
            "  {label:<46} {med:>7.0} B/object ({min:.0}..{max:.0}), {:.2}x the JSON",
            med / json_per_object
        );
    }
    println!(
        "cache: wasmctrl {:.0} B/object ({:.2}x JSON, goal <= 1.5x), kube-runtime {:.0} B/object, ratio {:.2}",
        medians[0],
        medians[0] / json_per_object,
        medians[1],
        medians[0] / medians[1]
    );
    http.shutdown().await;
}

/// Applies the seed plugins' CRDs.
async fn seed_crds(client: &kube::Client) {
    for example in ["postgres-writer", "virtualmachine", "workspace"] {
        for crd in common::yaml_objects(&format!("examples/{example}/crd.yaml")) {
            common::install_crd(client, crd).await;
        }
    }
}

/// A plugin directory with the four seed plugins and copies of them renamed, `IDLE` in all.
fn idle_plugins(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("plugins");
    std::fs::create_dir_all(&out).unwrap();
    let seeds = [
        "virtualmachine",
        "postgres-writer",
        "workspace",
        "pod-restarter",
    ];
    for i in 0..IDLE {
        let seed = seeds[i % seeds.len()];
        let name = if i < seeds.len() {
            seed.to_string()
        } else {
            format!("{seed}-{}", i / seeds.len() + 1)
        };
        std::fs::copy(common::plugin_path(seed), out.join(format!("{name}.wasm"))).unwrap();
        if name != seed {
            std::fs::write(
                out.join(format!("{name}.toml")),
                format!("name = \"{name}\"\n"),
            )
            .unwrap();
        }
    }
    out
}

async fn idle_figures(rounds: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (server, http, kubeconfig) = serve(dir.path()).await;
    seed_crds(&server.client()).await;
    let plugins = idle_plugins(dir.path());
    let settle = Duration::from_secs(10);
    println!(
        "idle: wasmctrl run with {IDLE} plugins (compiled at start) vs {IDLE} native kube-runtime controller processes, RSS {}s after all started, {rounds} rounds interleaved",
        settle.as_secs()
    );
    let (mut host, mut native) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let log = dir.path().join(format!("host-{round}.log"));
        let process = run_host(&kubeconfig, &plugins, None, log);
        // Idle means every plugin compiled and started (a cold start compiles them, which takes
        // seconds on a loaded machine), then `settle` of nothing to do.
        let deadline = std::time::Instant::now() + Duration::from_secs(300);
        while process.log().matches("plugin started").count() < IDLE {
            assert!(
                std::time::Instant::now() < deadline,
                "plugins did not all start: {}",
                process.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(settle).await;
        host.push(rss(&process.pid().unwrap().to_string()) as f64);
        drop(process);

        let children: Vec<_> = (0..IDLE)
            .map(|i| {
                child(&format!("native-{i}"), &kubeconfig)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        tokio::time::sleep(settle).await;
        let sum: u64 = children
            .iter()
            .map(|c| rss(&c.id().unwrap().to_string()))
            .sum();
        native.push(sum as f64);
        drop(children);
    }
    let (hmin, hmed, hmax) = spread(host);
    let (nmin, nmed, nmax) = spread(native);
    println!(
        "  wasmctrl, one process:      {:>6.1} MiB ({:.1}..{:.1})",
        mib(hmed),
        mib(hmin),
        mib(hmax)
    );
    println!(
        "  native, sum of {IDLE} processes: {:>6.1} MiB ({:.1}..{:.1}), {:.1} MiB each",
        mib(nmed),
        mib(nmin),
        mib(nmax),
        mib(nmed) / IDLE as f64
    );
    println!(
        "idle: wasmctrl {:.1} MiB with {IDLE} plugins (goal <= {IDLE_GOAL_MIB} MiB), native {:.1} MiB, ratio {:.2}",
        mib(hmed),
        mib(nmed),
        hmed / nmed
    );
    http.shutdown().await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    match std::env::var(ROLE).ok().as_deref() {
        Some(role) if role.starts_with("cache-") => cache_child(&role["cache-".len()..]).await,
        Some(role) if role.starts_with("native-") => {
            native_child(role["native-".len()..].parse().unwrap()).await
        }
        _ => {
            let rounds = env_or("WASMCTRL_BENCH_ROUNDS", 5).max(1);
            cache_figures(rounds).await;
            idle_figures(rounds).await;
        }
    }
}
