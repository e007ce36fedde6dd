//! The VirtualMachine seed in each language the SDKs serve (Rust, Python, TypeScript; each found among
//! the built plugins), side by side in one run:
//!
//! - **per reconcile**: one VM reconciled `WASMCTRL_BENCH_CALLS` times (default 300) on one
//!   thread, each call in a fresh instance as the host makes them: p50 and p99 of a call
//!   (instantiation included), the page faults it took, the largest linear memory an instance
//!   grew to, the component's size and its compile time; with the host's pools (each plugin in
//!   the one its memory image needs), or once per size of the memory every slot keeps resident
//!   between calls (`WASMCTRL_BENCH_KEEP_RESIDENT`, MiB: `1,2,4,8` compares);
//! - **convergence**: 5,000 VMs (`WASMCTRL_BENCH_VMS`) driven to `Active` by the host with each
//!   seed, as `vm::round` measures the Rust seed against native code, rounds rotated so that
//!   drift in the machine's speed hits every language alike.
//!
//! `WASMCTRL_BENCH_LANGUAGES` (comma-separated: `Rust,Python,TypeScript`) runs only those, to
//! profile one; ratios are then to the first named.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use wasmctrl::plugin::wit;
use wasmctrl::runtime::{Plugin, Runtime};
use wasmctrl::view::{EmptyView, View};

use super::support::{env_or, mib, minor_faults, percentile, sorted, spread};
use super::vm;

/// The seeds, by the language they are written in.
const SEEDS: [(&str, &str); 3] = [
    ("Rust", "virtualmachine"),
    ("Python", "virtualmachine-py"),
    ("TypeScript", "virtualmachine-ts"),
];

/// A seed loaded, with what loading it cost.
struct Seed {
    language: &'static str,
    plugin: Arc<Plugin>,
    bytes: usize,
    compile: f64,
}

/// The built seeds (a seed not built is said and skipped) in a runtime keeping `keep_resident`
/// bytes of each slot of either pool resident (`None`: the host's defaults), each compiled
/// afresh (or read from `cache`) and timed.
fn seeds(keep_resident: Option<usize>, cache: &std::path::Path) -> Vec<Seed> {
    let defaults = wasmctrl::runtime::Config::default();
    let runtime = Runtime::new(wasmctrl::runtime::Config {
        keep_resident: keep_resident.unwrap_or(defaults.keep_resident),
        keep_resident_snapshot: keep_resident.unwrap_or(defaults.keep_resident_snapshot),
        cache_dir: Some(cache.to_path_buf()),
        ..defaults
    })
    .unwrap();
    let dirs = super::common::plugin_dirs();
    let chosen = std::env::var("WASMCTRL_BENCH_LANGUAGES").ok();
    SEEDS
        .iter()
        .filter(|(language, _)| {
            (chosen.as_deref()).is_none_or(|list| list.split(',').any(|l| l.trim() == *language))
        })
        .filter_map(|&(language, name)| {
            let Some(path) = dirs
                .iter()
                .map(|d| d.join(format!("{name}.wasm")))
                .find(|p| p.exists())
            else {
                println!("languages: {name}.wasm is not built; {language} skipped");
                return None;
            };
            let bytes = std::fs::read(path).unwrap();
            let started = Instant::now();
            let plugin = runtime.load(&format!("{name}.wasm"), &bytes, "{}").unwrap();
            let compile = started.elapsed().as_secs_f64();
            Some(Seed {
                language,
                plugin: Arc::new(plugin),
                bytes: bytes.len(),
                compile,
            })
        })
        .collect()
}

fn request() -> wit::Request {
    let vm = json!({"apiVersion": "cloudnative.tw/v1alpha1", "kind": "VirtualMachine",
        "metadata": {"name": "vm-0", "namespace": "default", "uid": "u-0", "generation": 1,
            "resourceVersion": "1", "creationTimestamp": "2026-11-22T00:00:00Z"},
        "spec": {"resource": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"}}});
    wit::Request {
        namespace: "default".into(),
        name: "vm-0".into(),
        object: Some(vm.to_string()),
        deleting: false,
        settings: String::new(),
        now: wit::Timestamp::parse("2026-11-22T00:00:00Z").unwrap(),
        previous: Vec::new(),
    }
}

/// Milliseconds of each of `calls` reconciles of one VM, in order, and the page faults they
/// took in all.
fn call_times(plugin: &Plugin, calls: usize) -> (Vec<f64>, u64) {
    let view: Arc<dyn View> = Arc::new(EmptyView);
    let faults = minor_faults();
    let times = (0..calls)
        .map(|_| {
            let started = Instant::now();
            let done = plugin.reconcile(request(), view.clone()).unwrap();
            assert_eq!(done.intents.len(), 2, "a status and an Event");
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    (times, minor_faults() - faults)
}

/// Prints the per-reconcile table for each size kept resident, then the convergence table
/// (with the host's default).
pub async fn compare(n: usize, rounds: usize) {
    let calls = env_or("WASMCTRL_BENCH_CALLS", 300);
    let cache = tempfile::tempdir().unwrap();
    let sizes: Vec<Option<usize>> = match std::env::var("WASMCTRL_BENCH_KEEP_RESIDENT") {
        Ok(list) => (list.split(','))
            .filter_map(|s| s.trim().parse::<usize>().ok())
            .map(|mib| Some(mib << 20))
            .collect(),
        Err(_) => vec![None],
    };
    for kept in sizes {
        let pools = match kept {
            Some(bytes) => format!("{} MiB kept resident per slot", bytes >> 20),
            None => "the host's pools".to_string(),
        };
        println!(
            "languages: the VirtualMachine seed per language; per reconcile: {calls} calls of \
             one VM on one thread, a fresh instance each, {pools}"
        );
        per_reconcile(&seeds(kept, cache.path()), calls);
    }
    if n > 0 {
        converge(&seeds(None, cache.path()), n, rounds).await;
    }
}

fn per_reconcile(seeds: &[Seed], calls: usize) {
    println!(
        "  {:<10} {:>8} {:>8} {:>14} {:>11} {:>9} {:>10}",
        "", "p50 ms", "p99 ms", "faults/call", "memory MiB", "size MiB", "compile s"
    );
    for seed in seeds {
        call_times(&seed.plugin, calls / 10 + 1);
        let (times, faults) = call_times(&seed.plugin, calls);
        let times = sorted(times);
        println!(
            "  {:<10} {:>8.3} {:>8.3} {:>14.0} {:>11.1} {:>9.1} {:>10.1}",
            seed.language,
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            faults as f64 / calls as f64,
            mib(seed.plugin.memory_peak() as f64),
            mib(seed.bytes as f64),
            seed.compile,
        );
    }
}

/// `rounds` rounds of each seed converging `n` VMs, the order rotated each round; prints the
/// medians and each language's ratio to the first (Rust).
async fn converge(seeds: &[Seed], n: usize, rounds: usize) {
    println!("languages: {n} VirtualMachines to Active, {rounds} rounds, order rotated");
    let mut results: Vec<Vec<vm::Round>> = seeds.iter().map(|_| Vec::new()).collect();
    for r in 0..rounds {
        for i in (0..seeds.len()).map(|i| (i + r) % seeds.len()) {
            let round = vm::round(vm::VmSide::Wasmctrl, &seeds[i].plugin, n).await;
            println!(
                "  round {}: {}: all Active in {:.2} s, controller CPU {:.2} s, API server CPU {:.2} s, \
                 resident +{:.1} MiB",
                r + 1,
                seeds[i].language,
                round.converge,
                round.controller_cpu,
                round.server_cpu,
                mib(round.resident)
            );
            results[i].push(round);
        }
    }
    let median = |i: usize, f: fn(&vm::Round) -> f64| spread(results[i].iter().map(f).collect()).1;
    println!(
        "  {:<10} {:>14} {:>18} {:>14} {:>10} {:>10}",
        "", "all Active s", "controller CPU s", "resident MiB", "time x", "CPU x"
    );
    for (i, seed) in seeds.iter().enumerate() {
        let (time, cpu) = (median(i, |r| r.converge), median(i, |r| r.controller_cpu));
        println!(
            "  {:<10} {time:>14.2} {cpu:>18.2} {:>14.1} {:>10.2} {:>10.2}",
            seed.language,
            median(i, |r| mib(r.resident)),
            time / median(0, |r| r.converge),
            cpu / median(0, |r| r.controller_cpu),
        );
    }
}
