//! Scale-out: `wasmctrl run --sharding` replicas (the bench-profile binary) against an embedded
//! API server over HTTPS in this process, which applies `shardSelector`. 100,000
//! VirtualMachines (`WASMCTRL_BENCH_SHARD_OBJECTS`) over 1,000 namespaces, reconciled by the
//! virtualmachine plugin, with 1, 2 and 4 replicas (`WASMCTRL_BENCH_SHARD_REPLICAS`, e.g.
//! `1,2,4`). For each replica count, with controller-runtime's Lease timings (15 s, 10 s, 2 s):
//!
//! - **Convergence**: every VM's spec changed, then the replicas started; from their start to
//!   the last VM's status showing the change (watched here).
//! - **Per replica**, once converged: cached VMs (`wasmctrl_cached_objects`), owned keys, and
//!   resident memory (/proc), against the single replica's.
//! - **SIGKILL** (2 replicas or more): one replica killed; the time until the others' Leases
//!   claim all its slots (polled here), and until 1,000 of its VMs, changed right after the kill,
//!   show the change.
//! - **Join**: a replica started beside the survivors; the fraction of keys whose owner changed
//!   (from the Leases' slots and the VMs' uids).
//!
//! From the replicas' cached objects and memory it fits resident bytes per cached object, and
//! prints the estimate for 1,000,000 objects over 16 replicas.

// Bench helpers may unwrap (clippy.toml covers only tests).
#![allow(clippy::unwrap_used)]

#[path = "../tests/it/common/mod.rs"]
mod common;
mod support;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;
use wasmctrl::replicas::sharding::{SLOTS, SlotSet, slot_of};
use wasmctrl_core::shard::hash;

use common::process::{Process, wait_for};
use common::vms::{resource, set_cpu};
use support::{env_or, mib, rss, run_host_with, serve};

const NAMESPACES: usize = 1000;
const GROUP: &str = "sharding.wasmctrl.dev/group=wasmctrl";
const CACHED: &str = r#"wasmctrl_cached_objects{kind="cloudnative.tw/v1alpha1/VirtualMachine"}"#;
const OWNED: &str = r#"wasmctrl_shard_owned_keys{controller="virtualmachine"}"#;
const SAMPLE: usize = 1000;

type Key = (String, String);

/// Every VM's key and uid.
async fn uids(client: &kube::Client) -> BTreeMap<Key, String> {
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
    (all.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter())
    .map(|vm| {
        let m = vm.metadata;
        ((m.namespace.unwrap(), m.name.unwrap()), m.uid.unwrap())
    })
    .collect()
}

/// Keys of VMs whose status shows `cpu` for their latest generation, kept current by a watch.
struct Converged {
    keys: Arc<Mutex<HashSet<Key>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Converged {
    /// Starts watching; returns once the watch has listed every VM (so that its list does not
    /// weigh on what is measured next).
    async fn watch(client: &kube::Client, cpu: i64) -> Self {
        let keys = Arc::new(Mutex::new(HashSet::new()));
        let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
        let seen = keys.clone();
        let (listed, mut ready) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut events = watcher(all, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(Ok(event)) = events.next().await {
                let vm = match event {
                    watcher::Event::Apply(vm) | watcher::Event::InitApply(vm) => vm,
                    watcher::Event::InitDone => {
                        listed.send_replace(true);
                        continue;
                    }
                    _ => continue,
                };
                let status = &vm.data["status"];
                if status["server"]["cpu"] == cpu
                    && status["observedGeneration"] == json!(vm.metadata.generation.unwrap())
                {
                    let key = (vm.metadata.namespace.unwrap(), vm.metadata.name.unwrap());
                    seen.lock().unwrap().insert(key);
                }
            }
        });
        ready.wait_for(|listed| *listed).await.unwrap();
        Self { keys, task }
    }

    async fn wait(&self, which: &[Key], patience: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let done = {
                let keys = self.keys.lock().unwrap();
                which.iter().all(|k| keys.contains(k))
            };
            if done {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < patience,
                "not converged in {patience:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Converged {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A shard member over `plugins`, logging to `log` (no per-reconcile records: 100,000 of them
/// would cost the host more than its work).
fn member(kubeconfig: &Path, plugins: &Path, log: std::path::PathBuf) -> Process {
    let args = ["--metrics-secure=false", "--sharding"];
    run_host_with(kubeconfig, plugins, &args, &[("RUST_LOG", "info")], log)
}

/// The name of `host`'s membership Lease, from its log.
fn lease_of(host: &Process) -> String {
    let mut name = String::new();
    wait_for(60, "the host to join", || {
        name = (host.log().lines())
            .find(|l| l.contains("joining the shard group"))
            .and_then(|l| l.split("lease=").nth(1))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_default()
            .to_string();
        !name.is_empty()
    });
    name
}

/// The slots each of `leases` claims now.
async fn claims(client: &kube::Client) -> BTreeMap<String, SlotSet> {
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    (api.list(&ListParams::default().labels(GROUP))
        .await
        .unwrap()
        .items
        .into_iter())
    .map(|l| {
        let slots =
            l.metadata.annotations.unwrap_or_default()["sharding.wasmctrl.dev/slots"].clone();
        (l.metadata.name.unwrap(), SlotSet::parse(&slots).unwrap())
    })
    .collect()
}

/// Waits until `live` Leases claim every slot between them, each its share; their claims.
async fn settled(client: &kube::Client, live: &[String]) -> BTreeMap<String, SlotSet> {
    let started = Instant::now();
    loop {
        let mut claims = claims(client).await;
        claims.retain(|name, _| live.contains(name));
        let union = claims.values().fold(SlotSet::default(), |a, s| a.union(s));
        let share = SLOTS / live.len();
        let even = claims
            .values()
            .all(|s| s.len() == share || s.len() == share + 1);
        if claims.len() == live.len() && union.len() == SLOTS && even {
            return claims;
        }
        assert!(started.elapsed() < Duration::from_secs(180), "{claims:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn owner_of(claims: &BTreeMap<String, SlotSet>, uid: &str) -> String {
    let slot = slot_of(hash(uid));
    (claims.iter())
        .find(|(_, s)| s.contains(slot))
        .map(|(n, _)| n.clone())
        .unwrap_or_default()
}

/// One replica's figures once converged.
struct Replica {
    cached: f64,
    owned: f64,
    rss: f64,
}

struct Round {
    replicas: usize,
    convergence: Duration,
    each: Vec<Replica>,
    takeover: Option<Duration>,
    sample: Option<Duration>,
    moved: f64,
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench());
}

async fn bench() {
    let objects = env_or("WASMCTRL_BENCH_SHARD_OBJECTS", 100_000);
    let counts: Vec<usize> = std::env::var("WASMCTRL_BENCH_SHARD_REPLICAS")
        .unwrap_or_else(|_| "1,2,4".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, kubeconfig) = serve(dir.path()).await;
    let client = server.client();
    common::install_crd(
        &client,
        common::yaml_objects("examples/virtualmachine/crd.yaml").remove(0),
    )
    .await;
    let plugins = common::process::plugin_dir(dir.path(), &[("virtualmachine", None)]);
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for n in 0..NAMESPACES {
        let ns = json!({"metadata": {"name": format!("ns-{n:04}")}});
        (namespaces.create(&PostParams::default(), &serde_json::from_value(ns).unwrap()))
            .await
            .unwrap();
    }
    let vm = common::yaml_objects("examples/virtualmachine/test-vm.yaml").remove(0);
    let created = Instant::now();
    futures::stream::iter(0..objects)
        .map(|i| {
            let ns = format!("ns-{:04}", i % NAMESPACES);
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource());
            let mut vm = vm.clone();
            vm["metadata"] = json!({"name": format!("vm-{i:06}"), "namespace": ns});
            async move {
                let vm = serde_json::from_value(vm).unwrap();
                api.create(&PostParams::default(), &vm).await.unwrap();
            }
        })
        .buffer_unordered(64)
        .collect::<()>()
        .await;
    let uids = uids(&client).await;
    let keys: Vec<Key> = uids.keys().cloned().collect();
    let list_bytes = {
        let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
        let items = all
            .list(&ListParams::default().limit(1000))
            .await
            .unwrap()
            .items;
        serde_json::to_vec(&items).unwrap().len() as f64 / items.len() as f64
    };
    println!(
        "sharding: {objects} VirtualMachines over {NAMESPACES} namespaces created in {:.1} s, {list_bytes:.0} JSON bytes each",
        created.elapsed().as_secs_f64()
    );

    let mut rounds = Vec::new();
    let mut logs = 0;
    let mut log = || {
        logs += 1;
        dir.path().join(format!("host-{logs}.log"))
    };
    for (round, &replicas) in counts.iter().enumerate() {
        let cpu = 10 + round as i64;
        set_cpu(&client, &keys, cpu).await;
        let converged = Converged::watch(&client, cpu).await;
        let mut hosts: Vec<Process> = (0..replicas)
            .map(|_| member(&kubeconfig, &plugins, log()))
            .collect();
        let convergence = converged.wait(&keys, Duration::from_secs(1800)).await;
        let live: Vec<String> = hosts.iter().map(lease_of).collect();
        settled(&client, &live).await;
        // Freed memory handed back (the host does so every 10 s) before it is read.
        tokio::time::sleep(Duration::from_secs(12)).await;
        let each: Vec<Replica> = (hosts.iter())
            .map(|h| Replica {
                cached: h.sample(CACHED).unwrap_or(0.0),
                owned: h.sample(OWNED).unwrap_or(0.0),
                rss: rss(&h.pid().unwrap().to_string()) as f64,
            })
            .collect();
        println!(
            "  {replicas} replica(s): converged in {:.1} s after start",
            convergence.as_secs_f64()
        );
        let (mut takeover, mut sample) = (None, None);
        let mut moved = 0.0;
        if replicas >= 2 {
            // SIGKILL one; change a sample of its VMs at once.
            let before = claims(&client).await;
            let victim = live[0].clone();
            let theirs: Vec<Key> = (uids.iter())
                .filter(|(_, uid)| owner_of(&before, uid) == victim)
                .map(|(k, _)| k.clone())
                .take(SAMPLE)
                .collect();
            let after_kill = Converged::watch(&client, cpu + 100).await;
            let killed = Instant::now();
            hosts.remove(0).kill();
            set_cpu(&client, &theirs, cpu + 100).await;
            let survivors: Vec<String> = live[1..].to_vec();
            settled(&client, &survivors).await;
            takeover = Some(killed.elapsed());
            after_kill.wait(&theirs, Duration::from_secs(300)).await;
            sample = Some(killed.elapsed());
            // A replica joins the survivors.
            let claims_before = settled(&client, &survivors).await;
            let joiner = member(&kubeconfig, &plugins, log());
            let mut all = survivors.clone();
            all.push(lease_of(&joiner));
            hosts.push(joiner);
            let claims_after = settled(&client, &all).await;
            let changed = (uids.values())
                .filter(|uid| owner_of(&claims_before, uid) != owner_of(&claims_after, uid))
                .count();
            moved = changed as f64 / objects as f64;
        }
        for host in hosts {
            host.terminate();
        }
        rounds.push(Round {
            replicas,
            convergence,
            each,
            takeover,
            sample,
            moved,
        });
    }
    report(&rounds, objects, list_bytes);
    drop(server);
}

fn report(rounds: &[Round], objects: usize, list_bytes: f64) {
    let single = rounds.iter().find(|r| r.replicas == 1);
    let base = single.map(|r| (r.each[0].cached, r.each[0].rss));
    println!(
        "  {:>8} {:>12} {:>22} {:>22} {:>10} {:>10} {:>8}",
        "replicas",
        "converge s",
        "cached/replica (max)",
        "RSS MiB/replica (max)",
        "takeover s",
        "1,000 s",
        "moved"
    );
    for r in rounds {
        let max_cached = r.each.iter().map(|e| e.cached).fold(0.0, f64::max);
        let max_rss = r.each.iter().map(|e| e.rss).fold(0.0, f64::max);
        let ratio = |v: f64, b: Option<f64>| b.map_or(String::new(), |b| format!(" {:.2}x", v / b));
        println!(
            "  {:>8} {:>12.1} {:>13.0}{:<9} {:>13.1}{:<9} {:>10} {:>10} {:>7.1}%",
            r.replicas,
            r.convergence.as_secs_f64(),
            max_cached,
            ratio(max_cached, base.map(|b| b.0)),
            mib(max_rss),
            ratio(max_rss, base.map(|b| b.1)),
            r.takeover
                .map_or("-".into(), |d| format!("{:.1}", d.as_secs_f64())),
            r.sample
                .map_or("-".into(), |d| format!("{:.1}", d.as_secs_f64())),
            r.moved * 100.0,
        );
        for (i, e) in r.each.iter().enumerate() {
            println!(
                "           replica {i}: {:.0} cached, {:.0} owned, {:.1} MiB",
                e.cached,
                e.owned,
                mib(e.rss)
            );
        }
    }
    // Resident bytes = fixed + per object x cached, fitted over every replica measured.
    let points: Vec<(f64, f64)> = (rounds.iter())
        .flat_map(|r| r.each.iter().map(|e| (e.cached, e.rss)))
        .collect();
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    if sxx > 0.0 {
        let per_object = sxy / sxx;
        let fixed = my - per_object * mx;
        let share = 1_000_000.0 / 16.0;
        println!(
            "  fit: resident = {:.1} MiB + {per_object:.0} bytes x cached objects ({objects} objects measured)",
            mib(fixed)
        );
        println!(
            "  estimate, 1,000,000 such objects over 16 replicas: {share:.0} cached each, {:.0} MiB resident each; its initial list {:.0} MiB; at 1,000 changes/s cluster-wide, {:.0} events/s and {:.0} KiB/s of watch per replica",
            mib(fixed + per_object * share),
            mib(share * list_bytes),
            1000.0 / 16.0,
            1000.0 / 16.0 * list_bytes / 1024.0
        );
    }
}
