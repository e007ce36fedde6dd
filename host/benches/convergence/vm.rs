//! The VirtualMachine workload, as a user comparing wasmctrl with the controller they would
//! otherwise write measures it: N VirtualMachines (default 5,000; `WASMCTRL_BENCH_VMS`) are
//! created first, then the controller is started; the clock runs from its start until every VM
//! reports `Active`. (a) the host with the seed `virtualmachine` plugin; (b) a plain kube-runtime
//! `Controller` over a `watcher` + `reflector` with the `generation` predicate and
//! `concurrency(4)`, doing per VM what the plugin does, with the plugin's own `desired_status`:
//! a JSON Patch `add /status` on the status subresource and one events.k8s.io/v1 Event, created
//! directly (`native-linear`: one POST, as the host's first Event of a series is), or (c) through
//! kube-runtime's `Recorder` (`native`), whose cache sweep is O(n) per Event: quadratic at
//! scale, it flatters the host's ratios, so the linear baseline is quoted first. Rounds rotate
//! the three sides. Each side gets a fresh `wasmctrl apiserver` process over HTTPS
//! (objects in memory, its default), so the API server's CPU is measured apart from the
//! controller's (this process: the controller, the driver creating VMs and the observer, the
//! same for both sides).
//!
//! At scale (`WASMCTRL_BENCH_VMS_LARGE`, default 100,000; 0 skips it;
//! `WASMCTRL_BENCH_LARGE_ROUNDS`, default 1: a native round takes minutes) the same comparison
//! also reports the time until the controller's cache held the first (paginated) list, and the
//! resident memory the controller added to this process: trimmed (`malloc_trim`) before it
//! started and again once every VM was `Active`, with the controller still running, so it is
//! what the controller holds (cache, queue, event series, the host's memory of its writes), per
//! VM.
//!
//! To profile one side, `WASMCTRL_BENCH_VM_SIDES` names the sides to run (`wasmctrl`,
//! `native-linear`, `native`; comma-separated): each round then also prints its converging
//! window as Unix seconds, for `perf record -k realtime` and `perf report --time <window>`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use virtualmachine::VirtualMachine;
use wasmctrl::runtime::Plugin;

use super::common::process::Cluster;
use super::support::native_vm::{Events, start_native};
use super::support::{Figure, cpu_seconds, mib, process_cpu_seconds, rss, spread};
use super::{Requests, Tally, WORKERS, counting, start_host};

/// Who converges the VMs in a round.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum VmSide {
    /// The host with the seed plugin.
    Wasmctrl,
    /// The native controller, recording its Events this way.
    Native(Events),
}

impl VmSide {
    /// The three sides, in the order the first round runs them.
    const ALL: [VmSide; 3] = [
        VmSide::Wasmctrl,
        VmSide::Native(Events::Direct),
        VmSide::Native(Events::Recorder),
    ];

    fn label(self) -> &'static str {
        match self {
            VmSide::Wasmctrl => "wasmctrl",
            VmSide::Native(Events::Direct) => "native-linear",
            VmSide::Native(Events::Recorder) => "native",
        }
    }

    /// The sides `WASMCTRL_BENCH_VM_SIDES` names (labels, comma-separated; default all three):
    /// one side alone is what a profiler is pointed at.
    fn chosen() -> Vec<VmSide> {
        let Ok(names) = std::env::var("WASMCTRL_BENCH_VM_SIDES") else {
            return VmSide::ALL.to_vec();
        };
        names
            .split(',')
            .map(|name| {
                let side = VmSide::ALL.into_iter().find(|s| s.label() == name.trim());
                side.unwrap_or_else(|| {
                    panic!("WASMCTRL_BENCH_VM_SIDES: no side {name:?} (wasmctrl, native-linear, native)")
                })
            })
            .collect()
    }
}

/// What one round of one side measured.
pub struct Round {
    /// Controller start to every VM `Active`, seconds.
    pub converge: f64,
    /// CPU seconds of this process (controller, driver, observer) while converging.
    pub controller_cpu: f64,
    /// CPU seconds of the API server process while converging.
    pub server_cpu: f64,
    /// Seconds from controller start until each VM was seen `Active`: p50, p90, p99.
    pub latency: (f64, f64, f64),
    /// Controller start until its cache held the first full list, seconds.
    pub synced: f64,
    /// Resident bytes the controller added to this process, once converged.
    pub resident: f64,
    /// What the controller sent, by verb and path shape.
    pub requests: std::collections::BTreeMap<(String, String), Tally>,
}

async fn create_vms(client: &kube::Client, n: usize) {
    let api: Api<VirtualMachine> = Api::namespaced(client.clone(), "default");
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move {
                let vm = json!({"apiVersion": "cloudnative.tw/v1alpha1", "kind": "VirtualMachine",
                    "metadata": {"name": format!("vm-{i}"), "namespace": "default"},
                    "spec": {"resource": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"}}});
                api.create(&Default::default(), &serde_json::from_value(vm).unwrap())
                    .await
                    .unwrap();
            }
        })
        .await;
}

/// Watches VMs and returns, once all `n` are `Active`, when each was first seen so.
async fn all_active(client: &kube::Client, n: usize, started: Instant) -> Vec<f64> {
    let api: Api<VirtualMachine> = Api::namespaced(client.clone(), "default");
    let mut seen = std::collections::HashMap::with_capacity(n);
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    let deadline = started + Duration::from_secs(1800);
    while seen.len() < n {
        let next = tokio::time::timeout_at(deadline.into(), events.next()).await;
        let vm = match next {
            Ok(Some(Ok(vm))) => vm,
            Ok(Some(Err(_))) => continue,
            _ => panic!("VMs not Active after 30 min: {} of {n}", seen.len()),
        };
        if vm.status.as_ref().is_some_and(|s| s.phase == "Active") {
            seen.entry(vm.name_any())
                .or_insert_with(|| started.elapsed().as_secs_f64());
        }
    }
    seen.into_values().collect()
}

/// Seconds from `started` until the host's caches hold their first full lists.
async fn host_synced(host: &wasmctrl::reconcile::controller::Manager, started: Instant) -> f64 {
    // The host says which caches are still listing; a 5 ms poll is well under the times read.
    while !host.unsynced().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed().as_secs_f64()
}

/// Seconds from `started` until the native controller's store holds the first full list.
async fn native_synced(reader: &reflector::Store<VirtualMachine>, started: Instant) -> f64 {
    // Polled as the host's is: kube-runtime's `wait_until_ready` wakes only the last of
    // several waiters (a oneshot receiver keeps one waker), and the controller waits on it too.
    while futures::FutureExt::now_or_never(reader.wait_until_ready()).is_none() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed().as_secs_f64()
}

/// `at` as seconds since the Unix epoch.
fn unix_seconds(at: std::time::SystemTime) -> f64 {
    let since = at.duration_since(std::time::UNIX_EPOCH);
    since.map_or(0.0, |d| d.as_secs_f64())
}

/// This process's resident bytes with the allocator's free pages returned first.
fn held() -> f64 {
    wasmctrl::memory::trim();
    rss("self") as f64
}

/// One round of one side against a fresh API server process.
pub async fn round(side: VmSide, plugin: &Arc<Plugin>, n: usize) -> Round {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    let server_pid = cluster.server_pid().to_string();
    let driver = cluster.client().await;
    super::common::install_crd(
        &driver,
        super::common::yaml_objects("examples/virtualmachine/crd.yaml").remove(0),
    )
    .await;
    create_vms(&driver, n).await;
    let requests = Arc::new(Requests::default());
    let client = counting(cluster.client_config().await, requests.clone());

    let before = held();
    let started = Instant::now();
    let (cpu, server_cpu) = (cpu_seconds(), process_cpu_seconds(&server_pid));
    let observer = tokio::spawn({
        let driver = driver.clone();
        async move { all_active(&driver, n, started).await }
    });
    let (host, native, synced) = match side {
        VmSide::Wasmctrl => {
            let host = start_host(client, plugin).await;
            let synced = host_synced(&host, started).await;
            (Some(host), None, synced)
        }
        VmSide::Native(events) => {
            let (native, reader) = start_native(client, events, WORKERS);
            let synced = native_synced(&reader, started).await;
            (None, Some(native), synced)
        }
    };
    let mut latencies = observer.await.unwrap();
    let converge = started.elapsed().as_secs_f64();
    if std::env::var_os("WASMCTRL_BENCH_VM_SIDES").is_some() {
        // For a profiler's time filter (`perf record -k realtime`, then `perf report --time`).
        let end = unix_seconds(std::time::SystemTime::now());
        println!("  profile window: {:.6},{end:.6}", end - converge);
    }
    let controller_cpu = cpu_seconds() - cpu;
    let server_cpu = process_cpu_seconds(&server_pid) - server_cpu;
    let resident = held() - before;
    if let Some(host) = host {
        host.shutdown(Duration::from_secs(5)).await;
    }
    if let Some(native) = native {
        // Wait until the task is dropped, its cache with it: freed later, during the next
        // round, that memory would come off the next round's resident figure (after a
        // 100,000-VM native round, the 5,000-VM host's read -387 MiB).
        native.abort();
        let _ = native.await;
    }
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    // A side whose writes the server refused did less work than the others: its figures
    // would flatter it (the linear baseline's Events were once all refused, unseen).
    let requests = requests.snapshot();
    let failed: Vec<_> = requests.iter().filter(|(_, t)| t.failed > 0).collect();
    assert!(
        failed.is_empty(),
        "{}: requests refused by the API server: {failed:?}",
        side.label()
    );
    Round {
        converge,
        controller_cpu,
        server_cpu,
        latency: (at(0.5), at(0.9), at(0.99)),
        synced,
        resident,
        requests,
    }
}

/// Runs `rounds` rounds of the three sides over `n` VMs, the order rotated each round, and
/// prints the comparison, ending with `<tag>: wasmctrl <s> s, native-linear <s> s, ratio <r>;
/// native (Recorder) <s> s, ratio <r>`.
pub async fn compare(tag: &str, plugin: &Arc<Plugin>, n: usize, rounds: usize) {
    println!(
        "{tag}: {n} VirtualMachines created first, then the controller started; \
         {WORKERS} workers, {rounds} rounds, the sides' order rotated, a wasmctrl apiserver \
         process per round"
    );
    let sides = VmSide::chosen();
    let mut results: BTreeMap<&'static str, Vec<Round>> = BTreeMap::new();
    for r in 0..rounds {
        for i in 0..sides.len() {
            let side = sides[(i + r) % sides.len()];
            let result = round(side, plugin, n).await;
            println!(
                "  round {}: {}: cache synced in {:.2} s, all Active in {:.2} s, controller CPU {:.2} s, API server CPU {:.2} s, latency p50/p90/p99 {:.2}/{:.2}/{:.2} s, controller resident +{:.1} MiB",
                r + 1,
                side.label(),
                result.synced,
                result.converge,
                result.controller_cpu,
                result.server_cpu,
                result.latency.0,
                result.latency.1,
                result.latency.2,
                mib(result.resident)
            );
            results.entry(side.label()).or_default().push(result);
        }
    }
    if sides.len() < VmSide::ALL.len() {
        // A side alone (profiling): its own figures, no comparison.
        for (label, rounds) in &results {
            super::print_requests(label, rounds.last().map(|r| &r.requests));
            for &(what, f) in &FIGURES {
                let (min, med, max) = spread(rounds.iter().map(f).collect());
                println!("  {what:<20} {label} {med:>9.2} ({min:.2}..{max:.2})");
            }
        }
        return;
    }
    print_three(&results, &FIGURES);
    for side in VmSide::ALL {
        super::print_requests(
            side.label(),
            results[side.label()].last().map(|r| &r.requests),
        );
    }
    let median =
        |label: &str, f: fn(&Round) -> f64| spread(results[label].iter().map(f).collect()).1;
    let per_vm = |label: &str| median(label, |r| r.resident) / n as f64;
    println!(
        "  resident per VM: wasmctrl {:.0} B, native-linear {:.0} B, native {:.0} B (median)",
        per_vm("wasmctrl"),
        per_vm("native-linear"),
        per_vm("native")
    );
    let time = |label: &str| median(label, |r| r.converge);
    let (w, lin, rec) = (time("wasmctrl"), time("native-linear"), time("native"));
    println!(
        "{tag}: wasmctrl {w:.2} s, native-linear {lin:.2} s, ratio {:.2}; native (Recorder) {rec:.2} s, ratio {:.2}",
        w / lin,
        w / rec
    );
}

/// The figures compared, and how each is read off a round.
const FIGURES: [Figure<'static, Round>; 10] = [
    ("cache synced s", |r| r.synced),
    ("all Active s", |r| r.converge),
    ("controller CPU s", |r| r.controller_cpu),
    ("API server CPU s", |r| r.server_cpu),
    ("latency p50 s", |r| r.latency.0),
    ("latency p90 s", |r| r.latency.1),
    ("latency p99 s", |r| r.latency.2),
    ("resident MiB", |r| mib(r.resident)),
    ("requests", |r| super::requests_sent(&r.requests).0),
    ("request bytes sent", |r| {
        super::requests_sent(&r.requests).1
    }),
];

/// Each figure's median (min..max) for the three sides, and the host's ratio to each native
/// baseline, the linear one first.
fn print_three(results: &BTreeMap<&'static str, Vec<Round>>, rows: &[Figure<'_, Round>]) {
    let rounds = results.values().map(Vec::len).max().unwrap_or(0);
    println!(
        "  figures: median (min..max) over {rounds} rounds; ratios wasmctrl / native-linear, wasmctrl / native"
    );
    for &(what, f) in rows {
        let stat = |label: &str| spread(results[label].iter().map(f).collect());
        let cell = |(min, med, max): (f64, f64, f64)| format!("{med:>9.2} ({min:.2}..{max:.2})");
        let (w, lin, rec) = (stat("wasmctrl"), stat("native-linear"), stat("native"));
        println!(
            "  {what:<20} wasmctrl {}   native-linear {}   native {}   ratio {:.2}, {:.2}",
            cell(w),
            cell(lin),
            cell(rec),
            w.1 / lin.1,
            w.1 / rec.1
        );
    }
}
