//! Admission latency of the VirtualMachine validator, as a client of the API server sees it:
//! server-side dry-run creates of VirtualMachines (`?dryRun=All`: the whole admission path, no
//! object stored, so every round starts from the same store) sent to an embedded API server over
//! HTTPS at a fixed rate (200 and 1,000 per second, `WASMCTRL_BENCH_ADMISSION_RATES`; 10 s each,
//! `WASMCTRL_BENCH_ADMISSION_SECONDS`), the server calling one validating webhook:
//!
//! - **wasmctrl**: the real `wasmctrl run` (bench-profile binary) serving the seed
//!   `virtualmachine` plugin's validator on its webhook server (`--webhook-bind-address`, a
//!   certificate made here), a fresh sandbox per review;
//! - **native**: the same validation (the plugin crate's own `invalid`) in an axum handler over
//!   HTTPS, as a controller-runtime webhook is a handler in the manager; in a process of its
//!   own (this benchmark's binary started again), as the host is.
//!
//! The load is open-loop: request `i` is due at `i / rate`, and its latency counts from then,
//! so a slow answer delays nothing it should not (no coordinated omission). The sides alternate,
//! `WASMCTRL_BENCH_ROUNDS` (default 3) rounds per rate. Reports p50 and p99 per side and rate
//! (median over the rounds) and the p99 difference; the goal is a p99 within 1 ms of native.

// Bench helpers may unwrap (clippy.toml covers only tests).
#![allow(clippy::unwrap_used)]

#[path = "../tests/it/common/mod.rs"]
mod common;
mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use base64::Engine as _;
use serde_json::{Value, json};

use common::process::{Process, wait_for};
use support::{env_or, percentile, run_host_with, serve, sorted, spread};

/// The goal: wasmctrl's p99 at most this much above native's.
const GOAL_MS: f64 = 1.0;

/// The seed plugin's validating webhook path (kubebuilder's form).
const VALIDATE: &str = "/validate-cloudnative-tw-v1alpha1-virtualmachine";

/// The native validator: the AdmissionReview's VirtualMachine judged by the plugin crate's own
/// `invalid`, answered as controller-runtime's webhook answers.
async fn native_validate(Json(review): Json<Value>) -> Json<Value> {
    let request = &review["request"];
    let vm: Result<virtualmachine::VirtualMachine, _> =
        serde_json::from_value(request["object"].clone());
    let refusal = match vm {
        Ok(vm) => virtualmachine::invalid(&vm.spec).map(|m| (403, m)),
        Err(e) => Some((400, format!("the object does not decode: {e}"))),
    };
    let mut response = json!({"uid": request["uid"], "allowed": refusal.is_none()});
    if let Some((code, message)) = refusal {
        response["status"] = json!({"code": code, "message": message});
    }
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": response}),
    )
}

/// The environment variable that makes this binary the native webhook's process: the
/// directory of its certificate.
const NATIVE: &str = "WASMCTRL_BENCH_NATIVE_WEBHOOK";

/// The native webhook in a process of its own, with the certificate in `dir`: the process
/// (killed when dropped) and its base URL.
fn native_process(dir: &Path) -> (KillOnDrop, String) {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .env(NATIVE, dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (KillOnDrop(child), line.trim().to_string())
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Serves [`native_validate`] over HTTPS with the certificate in `dir`: its base URL.
async fn native_server(dir: &Path) -> String {
    let tls = wasmctrl_tls::Server::from_files(
        &dir.join("tls.crt"),
        &dir.join("tls.key"),
        wasmctrl_tls::HTTP1,
    )
    .unwrap();
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let app = axum::Router::new().route(VALIDATE, axum::routing::post(native_validate));
    let listener = tls.listener(tcp).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("https://{addr}")
}

/// The host serving the plugin's webhooks on a free port with the certificate in `dir`: the
/// process and its base URL, once it answers.
fn host_server(dir: &Path, kubeconfig: &Path, plugins: &Path) -> (Process, String) {
    let bind = common::free_address();
    let certs = dir.to_str().unwrap();
    let extra = [
        "--webhook-bind-address",
        &bind,
        "--webhook-cert-path",
        certs,
    ];
    let host = run_host_with(kubeconfig, plugins, &extra, &[], dir.join("host.log"));
    wait_for(60, "the host's webhook server", || {
        std::net::TcpStream::connect(&bind).is_ok()
    });
    (host, format!("https://{bind}"))
}

/// The one validating webhook configuration, pointing at `base`.
async fn register(client: &kube::Client, base: &str, pem: &str) {
    let bundle = base64::engine::general_purpose::STANDARD.encode(pem);
    let config = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "vm-validator"},
        "webhooks": [{"name": "vvirtualmachine.cloudnative.tw",
            "clientConfig": {"url": format!("{base}{VALIDATE}"), "caBundle": bundle},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["cloudnative.tw"],
                "apiVersions": ["v1alpha1"], "resources": ["virtualmachines"]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail"}]});
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingWebhookConfiguration",
            ),
            "validatingwebhookconfigurations",
        ),
    );
    let _ = api.delete("vm-validator", &Default::default()).await;
    let config = serde_json::from_value(config).unwrap();
    api.create(&Default::default(), &config).await.unwrap();
}

/// One dry-run create of a VirtualMachine: `Err` with the answer unless it was allowed.
async fn dry_run_create(client: &kube::Client, body: Arc<Vec<u8>>) -> Result<(), String> {
    let request = http::Request::post(
        "/apis/cloudnative.tw/v1alpha1/namespaces/default/virtualmachines?dryRun=All",
    )
    .header("content-type", "application/json")
    .body((*body).clone())
    .unwrap();
    let response =
        (client.send(request.map(kube::client::Body::from)).await).map_err(|e| e.to_string())?;
    if response.status().as_u16() == 201 {
        return Ok(());
    }
    let code = response.status();
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .unwrap_or_default();
    Err(format!("{code}: {}", String::from_utf8_lossy(&body)))
}

/// Waits until the webhook allows a create (the host answers 404 until its plugin is loaded).
async fn ready(client: &kube::Client) {
    let body = Arc::new(vm_body());
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Err(e) = dry_run_create(client, body.clone()).await {
        assert!(
            Instant::now() < deadline,
            "the webhook never allowed a create: {e}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A valid VirtualMachine, as JSON.
fn vm_body() -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "cloudnative.tw/v1alpha1",
        "kind": "VirtualMachine", "metadata": {"generateName": "vm-"},
        "spec": {"resource": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"}}}))
    .unwrap()
}

/// Latencies (ms) of `rate` requests a second for `seconds`, open-loop, counted from when each
/// was due.
async fn load(client: &kube::Client, rate: usize, seconds: usize) -> Vec<f64> {
    let body = Arc::new(vm_body());
    let every = Duration::from_secs_f64(1.0 / rate as f64);
    let start = Instant::now() + Duration::from_millis(100);
    let mut tasks = Vec::with_capacity(rate * seconds);
    for i in 0..rate * seconds {
        let due = start + every * i as u32;
        tokio::time::sleep_until(due.into()).await;
        let (client, body) = (client.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = dry_run_create(&client, body).await {
                panic!("a valid VirtualMachine was refused: {e}");
            }
            due.elapsed().as_secs_f64() * 1000.0
        }));
    }
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// p50 and p99 of one round.
struct Round {
    p50: f64,
    p99: f64,
}

fn main() {
    if let Some(dir) = std::env::var_os(NATIVE) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            println!("{}", native_server(Path::new(&dir)).await);
            std::future::pending::<()>().await;
        });
        return;
    }
    let rates: Vec<usize> = std::env::var("WASMCTRL_BENCH_ADMISSION_RATES")
        .unwrap_or_else(|_| "200,1000".into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let seconds = env_or("WASMCTRL_BENCH_ADMISSION_SECONDS", 10);
    let rounds = env_or("WASMCTRL_BENCH_ROUNDS", 3);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (_server, _http, kubeconfig) = serve(dir.path()).await;
        let config = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        common::process::kubectl(&kubeconfig, &["apply", "-f", "examples/virtualmachine/crd.yaml"]);
        let certs = dir.path().join("certs");
        let pem = common::certificates(&certs);
        let plugins = common::process::plugin_dir(dir.path(), &[("virtualmachine", None)]);
        let (_host, host_url) = host_server(&certs, &kubeconfig, &plugins);
        let (_native, native_url) = native_process(&certs);
        println!(
            "admission latency: dry-run VirtualMachine creates through the embedded API server, \
             one validating webhook; {seconds} s per round, {rounds} rounds per rate, sides alternating"
        );
        for &rate in &rates {
            let mut results: std::collections::BTreeMap<&str, Vec<Round>> = Default::default();
            for round in 0..rounds {
                for (side, url) in [("wasmctrl", &host_url), ("native", &native_url)] {
                    register(&client, url, &pem).await;
                    ready(&client).await;
                    // Warm the connections and the webhook before the measured load.
                    let _ = load(&client, rate, 1).await;
                    let samples = sorted(load(&client, rate, seconds).await);
                    let (p50, p99) = (percentile(&samples, 0.5), percentile(&samples, 0.99));
                    println!(
                        "  {rate:>5}/s round {round} {side:<8} p50 {p50:>6.2} ms  p99 {p99:>6.2} ms  max {:>6.2} ms",
                        samples[samples.len() - 1]
                    );
                    results.entry(side).or_default().push(Round { p50, p99 });
                }
            }
            let median = |side: &str, f: fn(&Round) -> f64| {
                spread(results[side].iter().map(f).collect()).1
            };
            let (w50, w99) = (median("wasmctrl", |r| r.p50), median("wasmctrl", |r| r.p99));
            let (n50, n99) = (median("native", |r| r.p50), median("native", |r| r.p99));
            println!(
                "{rate:>5}/s (median of rounds): wasmctrl p50 {w50:.2} ms p99 {w99:.2} ms | native p50 {n50:.2} ms p99 {n99:.2} ms | p99 difference {:+.2} ms (goal at most {GOAL_MS:+.2})",
                w99 - n99
            );
        }
    });
}
