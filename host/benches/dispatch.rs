//! Reconciles per second of a trivial plugin on a ~4 KB object through the dispatch runtime
//! (fresh instance per call), single thread and all cores, next to the same logic compiled
//! natively, both reading the object as the SDK suggests (a type of the fields it needs). Prints
//! medians of several rounds, interleaved with the native runs (min..max beside them), and the
//! ratios.
//!
//! Run with `make bench` (it builds `target/test-plugins/trivial.wasm` first).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmctrl::plugin::wit;
use wasmctrl::runtime::{Config, Plugin, Runtime};
use wasmctrl::view::{EmptyView, View};
use wasmctrl_sdk::Reconciler;

#[path = "dispatch/breakdown.rs"]
mod breakdown;

const ROUNDS: usize = 7;
const ROUND_TIME: Duration = Duration::from_millis(700);

/// A realistic ~4 KB object: labels, annotations, a spec with a container list.
fn object() -> Value {
    let containers: Vec<Value> = (0..9)
        .map(|i| {
            json!({"name": format!("container-{i}"), "image": format!("registry.example.com/team/app-{i}:v1.2.{i}"),
                "ports": [{"containerPort": 8080 + i, "protocol": "TCP", "name": format!("http-{i}")}],
                "env": (0..4).map(|j| json!({"name": format!("VAR_{i}_{j}"), "value": format!("value-{i}-{j}")})).collect::<Vec<_>>(),
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}})
        })
        .collect();
    json!({
        "apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "bench-object", "namespace": "default", "uid": "6f1d6c1e-0000-4000-8000-000000000001",
            "generation": 7, "resourceVersion": "123456", "creationTimestamp": "2026-11-22T00:00:00Z",
            "labels": {"app": "bench", "tier": "backend", "team": "platform", "env": "production"},
            "annotations": {"example.com/description": "an object about four kilobytes long, for measuring dispatch"}},
        "spec": {"replicas": 3, "containers": containers},
        "status": {"phase": "Pending"},
    })
}

/// What the SDK does for one reconcile in the sandbox, natively: parse the settings, ask the
/// manifest (for its finalizer), decode the object, reconcile it against a context.
fn native_reconcile(object: &str) -> Result<wasmctrl_sdk::Outcome, wasmctrl_sdk::Error> {
    let host = wasmctrl_sdk::testing::Harness::new();
    let request = wasmctrl_sdk::request::Request {
        namespace: "default".into(),
        name: "bench-object".into(),
        object: Some(object.to_string()),
        deleting: false,
        now: wasmctrl_sdk::jiff::Timestamp::UNIX_EPOCH,
        previous: Vec::new(),
    };
    let settings: trivial::Settings = serde_json::from_str("{}")?;
    trivial::Trivial::manifest(&settings).map_err(wasmctrl_sdk::Error::terminal)?;
    let thing: trivial::Thing = serde_json::from_str(object)?;
    let ctx = wasmctrl_sdk::Context::new(&host, &settings, &request);
    trivial::Trivial::reconcile(wasmctrl_sdk::Reconcile::Apply(thing), &ctx)
}

fn request(object: &str) -> wit::Request {
    wit::Request {
        namespace: "default".into(),
        name: "bench-object".into(),
        object: Some(object.to_string()),
        deleting: false,
        settings: String::new(),
        now: wit::Timestamp::parse("2026-11-22T00:00:00Z").expect("RFC 3339"),
        previous: Vec::new(),
    }
}

/// Runs `op` on `threads` threads for a round; returns operations per second.
fn rate(threads: usize, op: Arc<dyn Fn() + Send + Sync>) -> f64 {
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let op = op.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while started.elapsed() < ROUND_TIME {
                    for _ in 0..32 {
                        op();
                    }
                    n += 32;
                }
                n
            })
        })
        .collect();
    let total: u64 = handles
        .into_iter()
        .map(|h| h.join().expect("bench thread"))
        .sum();
    total as f64 / started.elapsed().as_secs_f64()
}

/// Median, min and max of the rounds' rates.
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

fn spread(mut xs: Vec<f64>) -> Spread {
    xs.sort_by(f64::total_cmp);
    Spread {
        median: xs[xs.len() / 2],
        min: xs[0],
        max: xs[xs.len() - 1],
    }
}

/// A fresh instance and a call that returns at once (no object).
fn empty_call(plugin: &Arc<Plugin>, view: &Arc<dyn View>) -> Arc<dyn Fn() + Send + Sync> {
    let (plugin, view) = (plugin.clone(), view.clone());
    Arc::new(move || {
        let mut req = request("");
        req.object = None;
        std::hint::black_box(plugin.reconcile(req, view.clone()).expect("reconcile"));
    })
}

fn main() {
    let dir = std::env::var_os("WASMCTRL_TEST_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-plugins")
        });
    let wasm = dir.join("trivial.wasm");
    let bytes = std::fs::read(&wasm).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run `make bench`, which builds it)",
            wasm.display()
        )
    });
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = Runtime::new(Config::default()).expect("runtime");
    let text = object().to_string();
    let view: Arc<dyn View> = Arc::new(EmptyView);
    println!(
        "dispatch benchmark: object {} bytes, {cores} cores, pooling allocator: {}, {ROUNDS} rounds of {ROUND_TIME:?}",
        text.len(),
        runtime.pooling()
    );

    let plugin = Arc::new(
        runtime
            .load("trivial.wasm", &bytes, "{}")
            .expect("load trivial"),
    );
    let wasm_op: Arc<dyn Fn() + Send + Sync> = {
        let (plugin, text, view) = (plugin.clone(), text.clone(), view.clone());
        Arc::new(move || {
            let done = plugin
                .reconcile(request(&text), view.clone())
                .expect("reconcile");
            std::hint::black_box(done);
        })
    };
    let native_op: Arc<dyn Fn() + Send + Sync> = {
        let text = text.clone();
        Arc::new(move || {
            std::hint::black_box(native_reconcile(&text).expect("native reconcile"));
        })
    };
    let mut single = 0.0;
    for (label, threads) in [("1 thread", 1), ("all cores", cores)] {
        let (mut w, mut n) = (Vec::new(), Vec::new());
        // Interleave rounds so both sides see the same machine noise.
        for _ in 0..ROUNDS {
            w.push(rate(threads, wasm_op.clone()));
            n.push(rate(threads, native_op.clone()));
        }
        let (ws, ns) = (spread(w), spread(n));
        let (w, n) = (ws.median, ns.median);
        println!(
            "{label:>11}: wasm {w:>10.0} reconciles/s ({:.0}..{:.0}; {:>7.0}/s per core) | native {n:>10.0}/s ({:.0}..{:.0}) | native/wasm {:.2}x",
            ws.min,
            ws.max,
            w / threads as f64,
            ns.min,
            ns.max,
            n / w
        );
        if threads == 1 {
            single = w;
        }
    }
    println!(
        "{:>11}  wasm single-thread latency: {:.1} µs per reconcile (instantiate + call + checks)",
        "",
        1e6 / single
    );

    // The sandbox's fixed cost: a fresh instance and a call that returns at once (no object),
    // in rounds interleaved with the steps from wasmtime's own floor up to it.
    let empty = breakdown::run(runtime.engine(), &bytes, empty_call(&plugin, &view));
    println!(
        "sandbox overhead (fresh instance + empty call): {:.1} µs ({:.1}..{:.1}; {:.0} calls/s, 1 thread)",
        1e6 / empty.median,
        1e6 / empty.max,
        1e6 / empty.min,
        empty.median
    );

    // The same after one call that grew its instance's memory to a few MiB: a pool slot keeps
    // the pages it wrote (up to `KEEP_RESIDENT`), and resetting the slot after each later call
    // resets all of them.
    let grown_op = empty_call(&plugin, &view);
    let before = spread((0..ROUNDS).map(|_| rate(1, grown_op.clone())).collect());
    let big = json!({"apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "big", "namespace": "default", "generation": 1},
        "spec": {"items": (0..20_000).map(|i| json!({"name": format!("item-{i}"), "value": i})).collect::<Vec<_>>()}})
    .to_string();
    plugin
        .reconcile(request(&big), view.clone())
        .expect("reconcile the big object");
    let after = spread((0..ROUNDS).map(|_| rate(1, grown_op.clone())).collect());
    println!(
        "sandbox overhead again: {:.1} µs ({:.1}..{:.1}); after one call that grew its memory to {:.1} MiB ({} KB object): {:.1} µs ({:.1}..{:.1})",
        1e6 / before.median,
        1e6 / before.max,
        1e6 / before.min,
        plugin.memory_peak() as f64 / f64::from(1 << 20),
        big.len() / 1000,
        1e6 / after.median,
        1e6 / after.max,
        1e6 / after.min,
    );
}
