//! A plugin built for `wasm32-wasip1` (see its `Cargo.toml`) that probes the host's WASI context
//! and reports what it found in its status, so `host/tests/wasi.rs` can check that clocks and
//! random work while files, the environment and sockets are denied.
//!
//! Settings: `{"file": <path to read>, "create": <path to create>, "env": <variable>, "connect":
//! <host:port>}`; each probe reports `{"ok": ...}` or `{"error": ...}`. It also prints one line to
//! stdout and one to stderr, which the host puts in its log.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use wasmctrl_sdk::{
    Action, Context, Error, Gvk, Manifest, Outcome, Reconciler, Request, Value, json,
};

/// The plugin.
pub struct WasiProbe;

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
pub struct Settings {
    file: String,
    create: String,
    env: String,
    connect: String,
}

impl Reconciler for WasiProbe {
    type Settings = Settings;

    fn manifest(_settings: &Settings) -> Result<Manifest, String> {
        Ok(Manifest::new(
            "wasi-probe",
            Gvk::new("example.com", "v1", "Thing"),
        ))
    }

    fn reconcile(req: &Request, ctx: &Context<'_, Settings>) -> Result<Outcome, Error> {
        let s = ctx.settings();

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
        println!("wasi-probe stdout {}", req.key());
        eprintln!("wasi-probe stderr {}", req.key());
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
        Ok(Outcome::with(vec![Action::update_status(&status)?]))
    }
}

wasmctrl_sdk::export!(WasiProbe);
