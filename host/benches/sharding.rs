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
//! - **Native**: as many processes of the controller one would otherwise write (this binary
//!   again, running `support::native_vm`'s kube-runtime controller, 4 workers each), sharing the
//!   keys by the same rule: process `i` of `n` takes the `i`-th `n`th of the slots and lists and
//!   watches with their `shardSelector`, fixed (no membership). Every VM's spec changed again,
//!   then they start; the same figures. Each pass flips every VM between `start` and `stop`, so
//!   every reconcile of either side is a status patch and one Event, as in `convergence`.
//!   Controller CPU is the processes' own (start-up included), API server CPU this process's.
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
use common::vms::{merge_spec, resource, set_cpu};
use support::native_vm::{Events, start_native};
use support::{anon, cpu_seconds, env_or, mib, process_cpu_seconds, rss, run_host_with, serve};

const NAMESPACES: usize = 1000;
const GROUP: &str = "sharding.wasmctrl.dev/group=wasmctrl";
const CACHED: &str = r#"wasmctrl_cached_objects{kind="cloudnative.tw/v1alpha1/VirtualMachine"}"#;
const OWNED: &str = r#"wasmctrl_shard_owned_keys{controller="virtualmachine"}"#;
const SAMPLE: usize = 1000;
/// Concurrent reconciles of a native process (the host's default).
const NATIVE_WORKERS: u16 = 4;
/// Set in a native process's environment: `<i>/<n>`, its place among `n`.
const NATIVE_SHARD: &str = "WASMCTRL_BENCH_NATIVE_SHARD";

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
/// would cost the host more than its work), serving no webhooks (replicas on one machine
/// cannot all bind `:9443`).
fn member(kubeconfig: &Path, plugins: &Path, log: std::path::PathBuf) -> Process {
    let args = [
        "--metrics-secure=false",
        "--sharding",
        "--webhook-bind-address",
        "0",
    ];
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
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "{claims:?} of {live:?}"
        );
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

/// Gives every VM in `which` CPU `cpu` and the action its parity picks (even: `start`, odd:
/// `stop`), so that each pass changes every VM's phase: its reconcile patches the status and
/// records an Event.
async fn change(client: &kube::Client, which: &[Key], cpu: i64) {
    let action = if cpu % 2 == 0 { "start" } else { "stop" };
    merge_spec(
        client,
        which,
        json!({"resource": {"cpu": cpu}, "action": action}),
    )
    .await;
}

/// The slots native process `i` of `n` takes: the `i`-th of `n` equal runs.
fn native_slots(i: usize, n: usize) -> SlotSet {
    let mut slots = SlotSet::default();
    (i * SLOTS / n..(i + 1) * SLOTS / n).for_each(|s| slots.insert(s));
    slots
}

/// Native process `i` of `n` over the API server `kubeconfig` names, logging to `log`.
fn native_member(kubeconfig: &Path, i: usize, n: usize, log: std::path::PathBuf) -> Process {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .env(NATIVE_SHARD, format!("{i}/{n}"))
        .env("KUBECONFIG", kubeconfig);
    Process::spawn(command, log)
}

/// The body of a native process (`WASMCTRL_BENCH_NATIVE_SHARD=<i>/<n>`): the native controller
/// over its slots' share of the VMs, until killed. Its lists and watches carry the slots'
/// `shardSelector`, added to every GET as a native author would (kube-rs has no field for it).
async fn native_process(place: &str) {
    let (i, n) = place.split_once('/').unwrap();
    let (i, n): (usize, usize) = (i.parse().unwrap(), n.parse().unwrap());
    let selector = native_slots(i, n)
        .selector(wasmctrl_core::shard::Field::Uid)
        .unwrap()
        .to_string();
    let with_selector = move |mut request: http::Request<kube::client::Body>| {
        if request.method() == http::Method::GET {
            let added = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("shardSelector", &selector)
                .finish();
            let uri = request.uri();
            let joined = match uri.query() {
                Some(query) => format!("{}?{query}&{added}", uri.path()),
                None => format!("{}?{added}", uri.path()),
            };
            let mut parts = uri.clone().into_parts();
            parts.path_and_query = Some(joined.parse().unwrap());
            *request.uri_mut() = http::Uri::from_parts(parts).unwrap();
        }
        request
    };
    let config = kube::Config::infer().await.unwrap();
    let client = kube::client::ClientBuilder::try_from(config)
        .unwrap()
        .with_layer(&tower::util::MapRequestLayer::new(with_selector))
        .build();
    let (native, _) = start_native(client, Events::Direct, NATIVE_WORKERS);
    // Freed memory handed back every 10 s, as the host does.
    tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_secs(10)).await;
            wasmctrl::memory::trim();
        }
    });
    native.await.unwrap();
}

/// One replica's figures once converged.
struct Replica {
    cached: f64,
    owned: f64,
    rss: f64,
    /// Of `rss`, the anonymous part (without the binary's code pages).
    anon: f64,
}

struct Round {
    replicas: usize,
    convergence: Duration,
    /// CPU seconds of the replicas together (start-up included) and of this process (the API
    /// server, the driver's watch) from their start until converged; of the first, what the
    /// replicas spent before serving their plugins (compiling them; 0 for native processes).
    cpu: f64,
    startup_cpu: f64,
    server_cpu: f64,
    each: Vec<Replica>,
    /// The native processes' figures, for the same count.
    native: Option<Box<Round>>,
    takeover: Option<Duration>,
    sample: Option<Duration>,
    moved: f64,
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    match std::env::var(NATIVE_SHARD) {
        Ok(place) => rt.block_on(native_process(&place)),
        Err(_) => rt.block_on(bench()),
    }
}

/// CPU seconds `processes` have used so far, together.
fn cpu_of(processes: &[Process]) -> f64 {
    (processes.iter())
        .map(|p| process_cpu_seconds(&p.pid().unwrap().to_string()))
        .sum()
}

/// CPU seconds `hosts` had used, together, when each began serving its plugins (compiled
/// them): what a replica spends before its first reconcile.
async fn startup_cpu(hosts: &[Process]) -> f64 {
    let mut at: Vec<Option<f64>> = vec![None; hosts.len()];
    let started = Instant::now();
    while at.iter().any(Option::is_none) {
        for (host, at) in hosts.iter().zip(&mut at) {
            if at.is_none() && host.log().contains("serving plugins") {
                *at = Some(process_cpu_seconds(&host.pid().unwrap().to_string()));
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "plugins not served"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    at.into_iter().flatten().sum()
}

/// `n` native processes converging every VM after a pass that changed them to `cpu`; their
/// figures.
async fn native_round(
    client: &kube::Client,
    kubeconfig: &Path,
    keys: &[Key],
    n: usize,
    cpu: i64,
    mut log: impl FnMut() -> std::path::PathBuf,
) -> Round {
    change(client, keys, cpu).await;
    let converged = Converged::watch(client, cpu).await;
    let server_before = cpu_seconds();
    let started = Instant::now();
    let natives: Vec<Process> = (0..n)
        .map(|i| native_member(kubeconfig, i, n, log()))
        .collect();
    converged.wait(keys, Duration::from_secs(1800)).await;
    let convergence = started.elapsed();
    let (cpu, server_cpu) = (cpu_of(&natives), cpu_seconds() - server_before);
    tokio::time::sleep(Duration::from_secs(12)).await;
    let each = (natives.iter())
        .map(|p| Replica {
            cached: f64::NAN,
            owned: f64::NAN,
            rss: rss(&p.pid().unwrap().to_string()) as f64,
            anon: anon(&p.pid().unwrap().to_string()) as f64,
        })
        .collect();
    println!(
        "  {n} native process(es): converged in {:.1} s after start, {cpu:.1} s CPU",
        convergence.as_secs_f64()
    );
    natives.into_iter().for_each(Process::kill);
    Round {
        replicas: n,
        convergence,
        cpu,
        startup_cpu: 0.0,
        server_cpu,
        each,
        native: None,
        takeover: None,
        sample: None,
        moved: 0.0,
    }
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
        // Two passes a round (the host's, the native processes'), each flipping every VM.
        let cpu = 10 + 2 * round as i64;
        change(&client, &keys, cpu).await;
        let converged = Converged::watch(&client, cpu).await;
        let server_before = cpu_seconds();
        let started = Instant::now();
        let mut hosts: Vec<Process> = (0..replicas)
            .map(|_| member(&kubeconfig, &plugins, log()))
            .collect();
        let startup_cpu = startup_cpu(&hosts).await;
        converged.wait(&keys, Duration::from_secs(1800)).await;
        let convergence = started.elapsed();
        let (host_cpu, server_cpu) = (cpu_of(&hosts), cpu_seconds() - server_before);
        let live: Vec<String> = hosts.iter().map(lease_of).collect();
        settled(&client, &live).await;
        // Freed memory handed back (the host does so every 10 s) before it is read.
        tokio::time::sleep(Duration::from_secs(12)).await;
        let each: Vec<Replica> = (hosts.iter())
            .map(|h| Replica {
                cached: h.sample(CACHED).unwrap_or(0.0),
                owned: h.sample(OWNED).unwrap_or(0.0),
                rss: rss(&h.pid().unwrap().to_string()) as f64,
                anon: anon(&h.pid().unwrap().to_string()) as f64,
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
        let native = native_round(&client, &kubeconfig, &keys, replicas, cpu + 1, &mut log).await;
        rounds.push(Round {
            replicas,
            convergence,
            cpu: host_cpu,
            startup_cpu,
            server_cpu,
            each,
            native: Some(Box::new(native)),
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
    let base = single.map(|r| (r.each[0].cached, r.each[0].rss, r.each[0].anon));
    println!(
        "  {:>8} {:>12} {:>22} {:>22} {:>22} {:>10} {:>10} {:>8}",
        "replicas",
        "converge s",
        "cached/replica (max)",
        "RSS MiB/replica (max)",
        "anon MiB/replica (max)",
        "takeover s",
        "1,000 s",
        "moved"
    );
    for r in rounds {
        let max_cached = r.each.iter().map(|e| e.cached).fold(0.0, f64::max);
        let max_rss = r.each.iter().map(|e| e.rss).fold(0.0, f64::max);
        let max_anon = r.each.iter().map(|e| e.anon).fold(0.0, f64::max);
        let ratio = |v: f64, b: Option<f64>| b.map_or(String::new(), |b| format!(" {:.2}x", v / b));
        println!(
            "  {:>8} {:>12.1} {:>13.0}{:<9} {:>13.1}{:<9} {:>13.1}{:<9} {:>10} {:>10} {:>7.1}%",
            r.replicas,
            r.convergence.as_secs_f64(),
            max_cached,
            ratio(max_cached, base.map(|b| b.0)),
            mib(max_rss),
            ratio(max_rss, base.map(|b| b.1)),
            mib(max_anon),
            ratio(max_anon, base.map(|b| b.2)),
            r.takeover
                .map_or("-".into(), |d| format!("{:.1}", d.as_secs_f64())),
            r.sample
                .map_or("-".into(), |d| format!("{:.1}", d.as_secs_f64())),
            r.moved * 100.0,
        );
        for (i, e) in r.each.iter().enumerate() {
            println!(
                "           replica {i}: {:.0} cached, {:.0} owned, {:.1} MiB ({:.1} MiB anonymous)",
                e.cached,
                e.owned,
                mib(e.rss),
                mib(e.anon)
            );
        }
    }
    println!("  against as many native processes (the same slots each, fixed; start-up included):");
    println!(
        "  {:>8} {:>24} {:>24} {:>16} {:>24} {:>24} {:>24}",
        "replicas",
        "converge s (ratio)",
        "controller CPU s",
        "of which start",
        "API server CPU s",
        "RSS MiB/process (max)",
        "anon MiB/process (max)"
    );
    for r in rounds {
        let Some(n) = &r.native else { continue };
        let max_rss = |r: &Round| mib(r.each.iter().map(|e| e.rss).fold(0.0, f64::max));
        let max_anon = |r: &Round| mib(r.each.iter().map(|e| e.anon).fold(0.0, f64::max));
        let pair = |w: f64, n: f64| format!("{w:.1} / {n:.1} ({:.2}x)", w / n);
        println!(
            "  {:>8} {:>24} {:>24} {:>16.1} {:>24} {:>24} {:>24}",
            r.replicas,
            pair(r.convergence.as_secs_f64(), n.convergence.as_secs_f64()),
            pair(r.cpu, n.cpu),
            r.startup_cpu,
            pair(r.server_cpu, n.server_cpu),
            pair(max_rss(r), max_rss(n)),
            pair(max_anon(r), max_anon(n)),
        );
    }
    // Resident bytes = fixed + per object x cached, fitted over every replica measured.
    let replicas = || rounds.iter().flat_map(|r| r.each.iter());
    if let Some((fixed, per_object)) = fit(replicas().map(|e| (e.cached, e.rss))) {
        let share = 1_000_000.0 / 16.0;
        println!(
            "  fit: resident = {:.1} MiB + {per_object:.0} bytes x cached objects ({objects} objects measured)",
            mib(fixed)
        );
        if let Some((fixed, per_object)) = fit(replicas().map(|e| (e.cached, e.anon))) {
            println!(
                "  fit: anonymous = {:.1} MiB + {per_object:.0} bytes x cached objects",
                mib(fixed)
            );
        }
        println!(
            "  estimate, 1,000,000 such objects over 16 replicas: {share:.0} cached each, {:.0} MiB resident each; its initial list {:.0} MiB; at 1,000 changes/s cluster-wide, {:.0} events/s and {:.0} KiB/s of watch per replica",
            mib(fixed + per_object * share),
            mib(share * list_bytes),
            1000.0 / 16.0,
            1000.0 / 16.0 * list_bytes / 1024.0
        );
    }
}

/// The least-squares line `y = fixed + slope * x` through `points`: `(fixed, slope)`, or `None`
/// when every `x` is the same.
fn fit(points: impl Iterator<Item = (f64, f64)>) -> Option<(f64, f64)> {
    let points: Vec<(f64, f64)> = points.collect();
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    (sxx > 0.0).then(|| {
        let slope = sxy / sxx;
        (my - slope * mx, slope)
    })
}
