//! WASI-target plugins: `tests/plugins/wasi-probe` is built for `wasm32-wasip1` and adapted to
//! `wasi:*@0.2` (the interfaces a `wasm32-wasip2` plugin imports). In the host's deny-all context
//! its clocks and random work; opening a file, reading the environment and connecting a socket
//! fail; stdout and stderr land in the host's log; and the host carries on serving.
//!
//! Needs `make plugins test-plugins` first.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use wasmctrl::plugin::{Intent, wit};
use wasmctrl::runtime::{Config, Plugin, Runtime};
use wasmctrl::view::{EmptyView, View};

fn request() -> wit::Request {
    common::things::request(1, "2026-11-22T00:00:00Z")
}

fn view() -> Arc<dyn View> {
    Arc::new(EmptyView)
}

/// The status the probe reported.
fn status(plugin: &Plugin) -> Value {
    let done = plugin
        .reconcile(request(), view())
        .expect("the probe reconciles");
    match done.intents.as_slice() {
        [Intent::UpdateStatus { status }] => status.clone(),
        other => panic!("expected one status update, got {other:?}"),
    }
}

#[test]
fn a_wasi_plugin_has_clocks_and_random_and_no_files_environment_or_sockets() {
    let bytes = common::plugin_bytes("wasi-probe");
    // It really is a WASI component (a wasm32-unknown-unknown build would import none of this).
    for import in ["wasi:cli/environment@0.2", "wasi:filesystem/preopens@0.2"] {
        assert!(
            bytes.windows(import.len()).any(|w| w == import.as_bytes()),
            "wasi-probe.wasm does not import {import}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let escaped = dir.path().join("escaped.txt");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    // The host process has PATH; the plugin must not see it.
    assert!(std::env::var("PATH").is_ok());
    let settings = json!({
        "file": secret,
        "create": escaped,
        "env": "PATH",
        "connect": listener.local_addr().unwrap().to_string(),
    });

    let rt = Runtime::new(Config::default()).unwrap();
    let probe = rt
        .load("wasi-probe.wasm", &bytes, &settings.to_string())
        .expect("a wasm32-wasip1 plugin loads");
    assert_eq!(probe.manifest().name, "wasi-probe");

    let log = common::Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let first = tracing::subscriber::with_default(subscriber, || status(&probe));

    // The wall clock is the host's.
    let host_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let guest_ms = first["clockMs"]["ok"]
        .as_i64()
        .unwrap_or_else(|| panic!("no clock: {first}"));
    assert!(
        (host_ms - guest_ms).abs() < 60_000,
        "{guest_ms} vs {host_ms}"
    );
    assert!(first["monotonicNs"].is_u64(), "{first}");
    // Random: a fresh instance seeds its hasher anew, so two calls hash differently only if the
    // random source is random.
    let second = status(&probe);
    assert_ne!(first["random"], second["random"], "{first} / {second}");

    // Denied: the file, a new file, the environment, the socket.
    for probe in ["file", "create", "env", "connect"] {
        assert!(
            first[probe]["error"].is_string(),
            "{probe} should have failed: {first}"
        );
    }
    assert!(!escaped.exists(), "the plugin created a file");
    assert_eq!(first["vars"], 0, "{first}");
    assert_eq!(first["args"], 0, "{first}");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the plugin connected to the host's listener"
    );

    // Stdout and stderr are log lines of the plugin, with its key.
    let log = log.text();
    for line in [
        "wasi-probe stdout default/t1",
        "wasi-probe stderr default/t1",
    ] {
        let found = log
            .lines()
            .find(|l| l.contains(line))
            .unwrap_or_else(|| panic!("{line:?} not in the host log:\n{log}"));
        assert!(found.contains("plugin.name=\"wasi-probe\""), "{found}");
        assert!(found.contains("object.key=\"default/t1\""), "{found}");
    }
    assert!(log.contains("INFO") && log.contains("WARN"), "{log}");

    // The host is unharmed: a wasm32-unknown-unknown plugin in the same runtime reconciles.
    let hostile = rt
        .load(
            "hostile.wasm",
            &common::plugin_bytes("hostile"),
            &json!({"mode": "ok"}).to_string(),
        )
        .unwrap();
    let done = hostile.reconcile(request(), view()).unwrap();
    assert_eq!(
        done.intents,
        vec![Intent::UpdateStatus {
            status: json!({"phase": "Ready"})
        }]
    );
}

/// The host runs a plugin's short calls directly on a runtime worker thread, inside the worker's
/// task (`reconcile/controller/worker.rs`). wasmtime-wasi serves a blocking WASI call (a write to
/// stdout, dropping the stream) by blocking on the runtime, which tokio refuses on a thread that
/// is driving tasks: the call must still complete, and its output still be logged.
#[test]
fn a_wasi_plugin_writes_its_output_when_called_on_a_runtime_worker_thread() {
    let rt = Runtime::new(Config::default()).unwrap();
    let probe = Arc::new(
        rt.load("wasi-probe.wasm", &common::plugin_bytes("wasi-probe"), "{}")
            .expect("the probe loads"),
    );
    let log = common::Captured::default();
    let writer = log.clone();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Inside a task, as a worker runs a call in place: not handed to another thread.
    let task = tokio.spawn(async move {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            probe.reconcile(request(), view()).map(|_| ())
        })
    });
    let called = tokio.block_on(task);
    assert!(
        matches!(called, Ok(Ok(()))),
        "the call on a worker thread: {called:?}"
    );
    let log = log.text();
    assert!(
        log.contains("wasi-probe stdout default/t1"),
        "not in the host log:\n{log}"
    );
}

/// A worker runs a plugin's short calls in place and counts them, leaving one runtime thread to
/// the other tasks; a plugin whose calls may wait in WASI moves each call off the worker itself,
/// so the worker must be able to tell it apart and not count that call as one in place.
#[test]
fn a_plugin_says_whether_its_calls_may_wait_in_wasi() {
    let rt = Runtime::new(Config::default()).unwrap();
    let load = |name: &str| {
        rt.load(&format!("{name}.wasm"), &common::plugin_bytes(name), "{}")
            .unwrap_or_else(|e| panic!("{name} loads: {e}"))
    };
    assert!(
        load("wasi-probe").waits_in_wasi(),
        "wasi-probe imports wasi:io streams"
    );
    assert!(
        !load("trivial").waits_in_wasi(),
        "trivial is built for wasm32-unknown-unknown and imports no WASI"
    );
}
