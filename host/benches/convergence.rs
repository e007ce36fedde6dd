//! Whole-controller convergence, wasmctrl against the controller one would otherwise write with
//! kube-runtime. N `Thing`s (default 10,000; `WASMCTRL_BENCH_OBJECTS`) are created, then a
//! controller is started that gives each one owned ConfigMap (server-side apply, field manager
//! `<side>/converge`, a controller owner reference) and a status (`phase`, `observedGeneration`,
//! a JSON Patch on the status subresource): (a) the host with the `converge` test plugin, (b) a
//! native kube-runtime `Controller` sending the same requests. Each runs against its own fresh
//! embedded API server in this process, 4 workers each, rounds interleaved
//! (`WASMCTRL_BENCH_ROUNDS`, default 5). Timed: controller start to every object converged, then
//! an update storm (10 spec changes per object, `WASMCTRL_BENCH_STORM`; 0 skips it) to every
//! object converged again. A round ends
//! only once its API server is freed, so that the next round does not pay for its teardown.
//!
//! Every request each controller sends is counted on its client (method, path shape, query
//! keys, patch type, body bytes) and the two are printed side by side, with the CPU time the
//! whole process (API server, driver, observer and controller alike) used in each phase.
//!
//! Then the VirtualMachine workload ([`vm`]): the seed plugin against a plain kube-runtime
//! controller doing what it does, each against its own API server process, at 100,000 VMs and
//! at 5,000; and the VirtualMachine seed in each language the SDKs serve ([`languages`]): per
//! reconcile and converging 5,000 VMs. `WASMCTRL_BENCH_WORKLOADS` (default
//! `things,languages,vm`) picks the workloads.
//!
//! The native controller is written as kube-rs users write one: it applies its child on every
//! reconcile (server-side apply is idempotent) and patches its status only when it differs from
//! what it read, as the host does.

// Bench helpers may unwrap (clippy.toml covers only tests).
#![allow(clippy::unwrap_used)]

#[path = "../tests/it/common/mod.rs"]
mod common;
#[path = "convergence/languages.rs"]
mod languages;
mod support;
#[path = "convergence/vm.rs"]
mod vm;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hyper::body::Body as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use wasmctrl::apiserver::ApiServer;
use wasmctrl::reconcile::controller::{Manager, Tuning};
use wasmctrl::runtime::{Config, Plugin, Runtime};

use support::{cpu_seconds, env_or, print_figures, spread};

const WORKERS: u16 = 4;
/// Spec changes per object in the update storm, unless `WASMCTRL_BENCH_STORM` says otherwise
/// (0 skips it: at 100,000 objects a storm is a million patches per side).
const STORM: usize = 10;

// ---------------------------------------------------------------------------------------------
// Counting what a client sends.

/// Requests of one kind: how many, request and response body bytes, how many the server
/// answered with an error, and the seconds spent waiting for their responses' heads.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    count: u64,
    sent: u64,
    received: u64,
    failed: u64,
    waited: f64,
}

/// Requests by (verb, path shape with query keys).
#[derive(Debug, Default)]
struct Requests(Mutex<BTreeMap<(String, String), Tally>>);

impl Requests {
    fn record(&self, key: (String, String), sent: u64, received: u64, failed: bool, waited: f64) {
        let mut map = self.0.lock().unwrap();
        let t = map.entry(key).or_default();
        t.count += 1;
        t.failed += u64::from(failed);
        t.waited += waited;
        t.sent += sent;
        t.received += received;
    }

    fn snapshot(&self) -> BTreeMap<(String, String), Tally> {
        self.0.lock().unwrap().clone()
    }
}

/// `/api/v1/namespaces/default/configmaps/x-child?fieldManager=..&force=true` ->
/// `/api/v1/namespaces/{ns}/configmaps/{name}?fieldManager&force`.
fn shape(uri: &http::Uri) -> String {
    let segs: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let prefix = match segs.first() {
        Some(&"api") => 2,
        Some(&"apis") => 3,
        _ => segs.len(),
    };
    let (head, rest) = segs.split_at(prefix.min(segs.len()));
    let mut out: Vec<String> = head.iter().map(|s| s.to_string()).collect();
    let rest = match rest {
        ["namespaces", _, more @ ..] if !more.is_empty() => {
            out.extend(["namespaces".into(), "{ns}".into()]);
            more
        }
        r => r,
    };
    for (i, s) in rest.iter().enumerate() {
        out.push(if i == 1 {
            "{name}".into()
        } else {
            s.to_string()
        });
    }
    let mut keys: Vec<&str> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split('=').next().unwrap_or(p))
        .collect();
    keys.sort_unstable();
    let query = if keys.is_empty() {
        String::new()
    } else {
        format!("?{}", keys.join("&"))
    };
    format!("/{}{query}", out.join("/"))
}

fn verb(req: &http::Request<kube::client::Body>) -> String {
    let watch = req.uri().query().is_some_and(|q| q.contains("watch=true"));
    let patch = |ct: &str| match ct {
        "application/apply-patch+yaml" => "APPLY",
        "application/json-patch+json" => "PATCH(json)",
        "application/merge-patch+json" => "PATCH(merge)",
        _ => "PATCH",
    };
    match req.method().as_str() {
        "GET" if watch => "WATCH".into(),
        "PATCH" => patch(
            req.headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or(""),
        )
        .into(),
        m => m.into(),
    }
}

/// A client service that counts every request it sends into `requests` (response bytes only
/// where the body's length is known up front, as in-process; over HTTP bodies stream).
#[derive(Clone)]
struct Counting<S> {
    inner: S,
    requests: Arc<Requests>,
}

impl<S, B> tower::Service<http::Request<kube::client::Body>> for Counting<S>
where
    S: tower::Service<http::Request<kube::client::Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: hyper::body::Body + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
        let key = (verb(&req), shape(req.uri()));
        let sent = req.body().size_hint().exact().unwrap_or(0);
        let requests = self.requests.clone();
        let response = self.inner.call(req);
        let start = std::time::Instant::now();
        Box::pin(async move {
            let resp = response.await?;
            let received = resp.body().size_hint().exact().unwrap_or(0);
            let failed = !resp.status().is_success();
            requests.record(key, sent, received, failed, start.elapsed().as_secs_f64());
            Ok(resp)
        })
    }
}

/// An in-process admin client of `server` that counts every request into `requests`.
fn counting_client(server: &ApiServer, requests: Arc<Requests>) -> kube::Client {
    let inner = server.service_with_token(server.admin_token());
    kube::Client::new(Counting { inner, requests }, "default")
}

/// A client over HTTP(S) with `config` that counts every request into `requests`.
fn counting(config: kube::Config, requests: Arc<Requests>) -> kube::Client {
    let layer = tower::layer::layer_fn(move |inner| Counting {
        inner,
        requests: requests.clone(),
    });
    kube::client::ClientBuilder::try_from(config)
        .unwrap()
        .with_layer(&layer)
        .build()
}

// ---------------------------------------------------------------------------------------------
// The objects and the convergence check.

fn thing_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Thing"),
        "things",
    )
}

/// Every Thing has the status of its generation and a child with its value; `false` until the
/// stores hold `n` Things.
fn converged(
    things: &reflector::Store<DynamicObject>,
    children: &reflector::Store<ConfigMap>,
    n: usize,
) -> bool {
    let all = things.state();
    all.len() == n
        && all.iter().all(|t| {
            let generation = t.metadata.generation.unwrap_or(0);
            if t.data["status"]["observedGeneration"] != generation {
                return false;
            }
            let value = t.data["spec"]["value"].as_i64().unwrap_or(0).to_string();
            let key = reflector::ObjectRef::new(&format!(
                "{}-child",
                t.metadata.name.as_deref().unwrap_or("")
            ))
            .within("default");
            children
                .get(&key)
                .is_some_and(|c| c.data.as_ref().and_then(|d| d.get("value")) == Some(&value))
        })
}

/// Watches Things and ConfigMaps from the bench's own client (the same cost for both sides)
/// and returns once everything has converged.
struct Observer {
    things: reflector::Store<DynamicObject>,
    children: reflector::Store<ConfigMap>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Observer {
    fn start(client: &kube::Client) -> Self {
        let ar = thing_resource();
        let writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
        let things = writer.as_reader();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
        let stream =
            reflector::reflector(writer, watcher::watcher(api, watcher::Config::default()));
        let t1 = tokio::spawn(stream.default_backoff().for_each(|_| async {}));
        let (children, writer) = reflector::store();
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let stream =
            reflector::reflector(writer, watcher::watcher(api, watcher::Config::default()));
        let t2 = tokio::spawn(stream.default_backoff().for_each(|_| async {}));
        Self {
            things,
            children,
            tasks: vec![t1, t2],
        }
    }

    async fn converged(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(1800);
        while !converged(&self.things, &self.children, n) {
            assert!(Instant::now() < deadline, "not converged after 30 min");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn create_things(client: &kube::Client, n: usize) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &thing_resource());
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move {
                let thing = json!({"apiVersion": "example.com/v1", "kind": "Thing",
                    "metadata": {"name": format!("thing-{i}"), "namespace": "default"},
                    "spec": {"value": 0}});
                api.create(&Default::default(), &serde_json::from_value(thing).unwrap())
                    .await
                    .unwrap();
            }
        })
        .await;
}

/// `changes` spec changes per object, each a merge patch, 32 in flight.
async fn storm(client: &kube::Client, n: usize, changes: usize) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &thing_resource());
    let patches = (1..=changes).flat_map(|v| (0..n).map(move |i| (i, v)));
    futures::stream::iter(patches)
        .for_each_concurrent(32, |(i, v)| {
            let api = api.clone();
            async move {
                let patch = json!({"spec": {"value": v}});
                api.patch(
                    &format!("thing-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .unwrap();
            }
        })
        .await;
}

// ---------------------------------------------------------------------------------------------
// The native controller.

struct Native {
    things: Api<DynamicObject>,
    children: Api<ConfigMap>,
    reconciles: AtomicU64,
}

const NATIVE_MANAGER: &str = "native/converge";

async fn native_reconcile(
    thing: Arc<DynamicObject>,
    ctx: Arc<Native>,
) -> Result<Action, kube::Error> {
    ctx.reconciles.fetch_add(1, Ordering::Relaxed);
    let name = thing.metadata.name.clone().unwrap_or_default();
    let namespace = thing.metadata.namespace.clone().unwrap_or_default();
    let generation = thing.metadata.generation.unwrap_or(0);
    let value = thing.data["spec"]["value"].as_i64().unwrap_or(0);
    let owner = json!({"apiVersion": "example.com/v1", "kind": "Thing", "name": name,
        "uid": thing.metadata.uid, "controller": true, "blockOwnerDeletion": true});
    let child_name = format!("{name}-child");
    let child = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": child_name, "namespace": namespace, "ownerReferences": [owner]},
        "data": {"owner": name, "value": value.to_string()}});
    let apply = PatchParams::apply(NATIVE_MANAGER).force();
    ctx.children
        .patch(&child_name, &apply, &Patch::Apply(&child))
        .await?;
    let status = json!({"phase": "Ready", "observedGeneration": generation});
    if thing.data.get("status") != Some(&status) {
        let ops: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/status", "value": status}]))
                .unwrap();
        let params = PatchParams {
            field_manager: Some(NATIVE_MANAGER.into()),
            ..Default::default()
        };
        ctx.things
            .patch_status(&name, &params, &Patch::<()>::Json(ops))
            .await?;
    }
    Ok(Action::await_change())
}

fn native_error(_: Arc<DynamicObject>, _: &kube::Error, _: Arc<Native>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

/// A running native controller; stops when dropped.
struct NativeRun {
    task: tokio::task::JoinHandle<()>,
    ctx: Arc<Native>,
}

fn start_native(client: kube::Client) -> NativeRun {
    let ar = thing_resource();
    let things: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let ctx = Arc::new(Native {
        things: Api::namespaced_with(client.clone(), "default", &ar),
        children: Api::namespaced(client.clone(), "default"),
        reconciles: AtomicU64::new(0),
    });
    let config = watcher::Config::default().any_semantic();
    let run = Controller::new_with(things, config.clone(), ar)
        .owns(Api::<ConfigMap>::all(client), config)
        .with_config(controller::Config::default().concurrency(WORKERS))
        .run(native_reconcile, native_error, ctx.clone())
        .for_each(|_| async {});
    NativeRun {
        task: tokio::spawn(run),
        ctx,
    }
}

impl Drop for NativeRun {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// One round of one side.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Wasmctrl,
    Native,
}

impl Side {
    fn label(self) -> &'static str {
        match self {
            Side::Wasmctrl => "wasmctrl",
            Side::Native => "native",
        }
    }
}

/// The host running `plugin` over `client`, with the benchmark's workers.
async fn start_host(client: kube::Client, plugin: &Arc<Plugin>) -> Manager {
    let host = Manager::new(client);
    let tuning = Tuning {
        concurrency: Some(WORKERS as usize),
        ..Tuning::default()
    };
    host.upsert(plugin.clone(), tuning).await;
    host
}

/// Runs `rounds` rounds of both sides, alternating which goes first so that drift in the
/// machine's speed hits both alike; `run` measures one side's round and says what to print of
/// it. The results by side label.
async fn interleaved<R, F, Fut>(rounds: usize, mut run: F) -> BTreeMap<&'static str, Vec<R>>
where
    F: FnMut(Side) -> Fut,
    Fut: std::future::Future<Output = (R, String)>,
{
    let mut results: BTreeMap<&str, Vec<R>> = BTreeMap::new();
    for r in 0..rounds {
        let order = if r % 2 == 0 {
            [Side::Wasmctrl, Side::Native]
        } else {
            [Side::Native, Side::Wasmctrl]
        };
        for side in order {
            let (result, line) = run(side).await;
            println!("  round {}: {side:?}: {line}", r + 1);
            results.entry(side.label()).or_default().push(result);
        }
    }
    results
}

struct Round {
    converge: f64,
    storm: f64,
    /// CPU seconds of the whole process while converging, and during the storm.
    converge_cpu: f64,
    storm_cpu: f64,
    /// Plugin calls by the end of the initial convergence, and in all.
    initial_reconciles: u64,
    reconciles: u64,
    /// Keys the host held back until the caches showed their last writes (0 for native).
    held: u64,
    requests: BTreeMap<(String, String), Tally>,
}

async fn round(side: Side, plugin: &Arc<Plugin>, n: usize, changes: usize) -> Round {
    let server = ApiServer::builder().history(100_000).build().unwrap();
    let driver = server.client();
    common::things::install(&driver).await;
    create_things(&driver, n).await;
    let observer = Observer::start(&driver);
    let requests = Arc::new(Requests::default());
    let client = counting_client(&server, requests.clone());

    let started = Instant::now();
    let cpu = cpu_seconds();
    let (host, native) = match side {
        Side::Wasmctrl => (Some(start_host(client, plugin).await), None),
        Side::Native => (None, Some(start_native(client))),
    };
    observer.converged(n).await;
    let converge = started.elapsed().as_secs_f64();
    let converge_cpu = cpu_seconds() - cpu;
    let reconciles_now = |host: &Option<Manager>, native: &Option<NativeRun>| match (host, native) {
        (Some(host), _) => host.counts("converge").unwrap().total(),
        (_, Some(native)) => native.ctx.reconciles.load(Ordering::Relaxed),
        _ => unreachable!(),
    };
    let initial_reconciles = reconciles_now(&host, &native);

    let started = Instant::now();
    let cpu = cpu_seconds();
    if changes > 0 {
        storm(&driver, n, changes).await;
        observer.converged(n).await;
    }
    let storm = started.elapsed().as_secs_f64();
    let storm_cpu = cpu_seconds() - cpu;

    let reconciles = reconciles_now(&host, &native);
    let held = host
        .as_ref()
        .map_or(0, |h| h.counts("converge").unwrap().held);
    if let Some(host) = host {
        host.shutdown(Duration::from_secs(5)).await;
    }
    drop(native);
    drop(observer);
    drop(driver);
    // Freeing the server's objects and 100,000-event history inside the next round made that
    // round take up to twice the CPU (glibc's malloc and free at 40% of its profile), and the
    // rounds' spread wider than the ratios they were to show: the aborted watchers used to let
    // go of it only at their watches' next bookmark tick, up to 5 s later.
    server.released().await;
    Round {
        converge,
        storm,
        converge_cpu,
        storm_cpu,
        initial_reconciles,
        reconciles,
        held,
        requests: requests.snapshot(),
    }
}

/// Requests and request body bytes in all.
fn requests_sent(requests: &BTreeMap<(String, String), Tally>) -> (f64, f64) {
    let (count, sent) = requests
        .values()
        .fold((0, 0), |(c, s), t| (c + t.count, s + t.sent));
    (count as f64, sent as f64)
}

/// What one side sent in one round (its last), by verb and path shape.
fn print_requests(label: &str, last: Option<&BTreeMap<(String, String), Tally>>) {
    let Some(last) = last else { return };
    let (count, sent, received) = last.values().fold((0, 0, 0), |(c, s, r), t| {
        (c + t.count, s + t.sent, r + t.received)
    });
    println!(
        "  {label}: {count} requests, {sent} bytes sent, {received} bytes received (last round)"
    );
    for ((verb, shape), t) in last {
        println!(
            "    {:>7} {:>9} B {:>11} B {:>5} failed {:>8.3} ms mean  {verb:<12} {shape}",
            t.count,
            t.sent,
            t.received,
            t.failed,
            t.waited * 1e3 / t.count.max(1) as f64
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = env_or("WASMCTRL_BENCH_OBJECTS", 10_000);
    let rounds = env_or("WASMCTRL_BENCH_ROUNDS", 5).max(1);
    let workloads =
        std::env::var("WASMCTRL_BENCH_WORKLOADS").unwrap_or("things,languages,vm".into());
    let runtime = Runtime::new(Config::default()).unwrap();
    if workloads.split(',').any(|w| w == "things") {
        things(&runtime, n, rounds).await;
    }
    let vms = env_or("WASMCTRL_BENCH_VMS", 5_000);
    if workloads.split(',').any(|w| w == "languages") {
        languages::compare(vms, rounds.min(3)).await;
    }
    if workloads.split(',').any(|w| w == "vm") {
        let vm_plugin = Arc::new(
            runtime
                .load(
                    "virtualmachine.wasm",
                    &common::plugin_bytes("virtualmachine"),
                    "{}",
                )
                .unwrap(),
        );
        // The large run first, so that the output ends with the standard comparison's line.
        let large = env_or("WASMCTRL_BENCH_VMS_LARGE", 100_000);
        if large > 0 {
            let large_rounds = env_or("WASMCTRL_BENCH_LARGE_ROUNDS", 1).max(1);
            let tag = format!("convergence(vm, {large} VMs)");
            vm::compare(&tag, &vm_plugin, large, large_rounds).await;
        }
        vm::compare("convergence(vm)", &vm_plugin, vms, rounds).await;
    }
}

/// The `Thing` workload: `n` objects, `rounds` rounds of each side.
async fn things(runtime: &Runtime, n: usize, rounds: usize) {
    let changes = env_or("WASMCTRL_BENCH_STORM", STORM);
    let plugin = Arc::new(
        runtime
            .load("converge.wasm", &common::plugin_bytes("converge"), "{}")
            .unwrap(),
    );
    println!(
        "convergence: {n} Things, each one owned ConfigMap (SSA) + status, {WORKERS} workers, \
         {rounds} rounds interleaved, then {changes} spec changes per object"
    );
    let results = interleaved(rounds, |side| {
        let plugin = &plugin;
        async move {
            let result = round(side, plugin, n, changes).await;
            let line = format!(
                "converged in {:.2} s ({:.2} s CPU), storm {:.2} s ({:.2} s CPU), {} reconciles in all ({} converging), {} keys held for their echoes",
                result.converge,
                result.converge_cpu,
                result.storm,
                result.storm_cpu,
                result.reconciles,
                result.initial_reconciles,
                result.held
            );
            (result, line)
        }
    })
    .await;
    let figures: [support::Figure<'_, Round>; 7] = [
        ("initial convergence s", |r| r.converge),
        ("update storm s", |r| r.storm),
        ("convergence CPU s", |r| r.converge_cpu),
        ("storm CPU s", |r| r.storm_cpu),
        ("reconciles", |r| r.reconciles as f64),
        ("requests", |r| requests_sent(&r.requests).0),
        ("request bytes sent", |r| requests_sent(&r.requests).1),
    ];
    let figures: Vec<_> = figures
        .into_iter()
        .filter(|(what, _)| changes > 0 || !what.contains("storm"))
        .collect();
    print_figures(&results, &figures);
    print_requests("wasmctrl", results["wasmctrl"].last().map(|r| &r.requests));
    print_requests("native", results["native"].last().map(|r| &r.requests));
    let median = |label: &str| spread(results[label].iter().map(|r| r.converge).collect()).1;
    let (w, nat) = (median("wasmctrl"), median("native"));
    println!(
        "convergence: wasmctrl {w:.2} s, native {nat:.2} s, ratio {:.2}",
        w / nat
    );
}
