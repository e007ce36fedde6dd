//! A plugin built for `wasm32-wasip1` (see its `Cargo.toml`) that probes the host's WASI context
//! and reports what it found in its status, so `host/tests/it/wasi.rs` can check that clocks and
//! random work while files, the environment and sockets are denied.
//!
//! Settings: `{"file": <path to read>, "create": <path to create>, "env": <variable>, "connect":
//! <host:port>, "sleepMs": <ms>}`; each probe reports `{"ok": ...}` or `{"error": ...}`; with
//! `sleepMs` it first sleeps that long (a WASI wait on a clock, which the host must end at the
//! call's deadline). It also prints one line to
//! stdout and one to stderr, which the host puts in its log.
//!
//! Written against the contract with `wit-bindgen` alone, not the SDK: what it probes is the
//! host's WASI context, and the SDK's typed objects would compile k8s-openapi once more for this
//! target alone (a minute of every cold `make test`).

#![allow(missing_docs, unsafe_code, clippy::all)]

wit_bindgen::generate!({
    path: "../../../wit",
    world: "plugin",
});

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use exports::wasmctrl::plugin::reconciler::{Error, Guest, Outcome, PluginManifest, Request};
use serde_json::{Value, json};
use wasmctrl::plugin::types::{Action, Gvk, Selector, Watch};

struct WasiProbe;

/// `{"ok": value}` or `{"error": message}`.
fn report<T: Into<Value>, E: std::fmt::Display>(result: Result<T, E>) -> Value {
    match result {
        Ok(value) => json!({ "ok": value.into() }),
        Err(e) => json!({ "error": e.to_string() }),
    }
}

/// Where each probe points: `file`, `create`, `env`, `connect`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Settings {
    file: String,
    create: String,
    env: String,
    connect: String,
    #[serde(rename = "sleepMs")]
    sleep_ms: u64,
}

impl Guest for WasiProbe {
    fn manifest(_settings: String) -> Result<PluginManifest, String> {
        Ok(PluginManifest {
            name: "wasi-probe".into(),
            version: "0.0.0".into(),
            watches: Watch {
                kind: Gvk {
                    group: "example.com".into(),
                    version: "v1".into(),
                    kind: "Thing".into(),
                },
                selector: Selector {
                    namespaces: Vec::new(),
                    labels: String::new(),
                },
                predicates: Vec::new(),
            },
            owns: Vec::new(),
            reads: Vec::new(),
            writes: Vec::new(),
            capabilities: Vec::new(),
        })
    }

    fn reconcile(request: Request) -> Result<Outcome, Error> {
        let s: Settings = match request.settings.trim() {
            "" | "null" => Settings::default(),
            json => serde_json::from_str(json).map_err(|e| Error {
                message: format!("invalid settings: {e}"),
                retryable: false,
            })?,
        };
        let key = format!("{}/{}", request.namespace, request.name);

        if s.sleep_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(s.sleep_ms));
        }
        let started = Instant::now();
        let clock = report(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64),
        );
        // RandomState seeds itself from the platform's random source (random_get); a fresh
        // instance per call means a different hash per call only if that source is random.
        let random = RandomState::new().hash_one("wasi-probe");
        let file = report(std::fs::read_to_string(&s.file));
        let create = report(std::fs::write(&s.create, b"escaped").map(|()| true));
        let env = report(std::env::var(&s.env));
        let vars = std::env::vars().count();
        let args = std::env::args().count();
        let connect = report(std::net::TcpStream::connect(s.connect.as_str()).map(|_| true));
        println!("wasi-probe stdout {key}");
        eprintln!("wasi-probe stderr {key}");
        let monotonic = started.elapsed().as_nanos() as u64;

        let status = json!({
            "clockMs": clock,
            "monotonicNs": monotonic,
            "random": random.to_string(),
            "file": file,
            "create": create,
            "env": env,
            "vars": vars,
            "args": args,
            "connect": connect,
        });
        Ok(Outcome {
            actions: vec![Action::UpdateStatus(status.to_string())],
            requeue_after_ms: None,
            best_effort: Vec::new(),
        })
    }
}

// Natively (`cargo build --workspace`) nothing is exported: export names such as
// `wasmctrl:plugin/reconciler@0.3.0#reconcile` are not valid native symbols.
#[cfg(target_arch = "wasm32")]
export!(WasiProbe);
