//! Deadlines hold through host calls, and instances are shared fairly: a plugin sleeping in
//! WASI (`tests/plugins/wasi-probe` with `sleepMs`) has each call ended at its deadline while
//! another plugin's reconciles go on.
//!
//! Apart from `tests/wasi.rs`: its log test reads a thread's own tracing subscriber, and this
//! test's plugins log on other threads with none, which would leave the shared call sites
//! disabled for it.
//!
//! Needs `make plugins test-plugins` first.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use wasmctrl::plugin::wit;
use wasmctrl::runtime::{Config, Runtime};
use wasmctrl::view::{EmptyView, View};

fn request() -> wit::Request {
    common::things::request(1, "2026-11-22T00:00:00Z")
}

fn view() -> Arc<dyn View> {
    Arc::new(EmptyView)
}

/// A plugin sleeping in WASI (a host call, which the epoch deadline does not interrupt) has
/// its call ended at its deadline, returning its instance; meanwhile another plugin's
/// reconciles go on, however many calls the sleeper has waiting for instances.
#[test]
fn a_plugin_sleeping_past_its_deadline_is_ended_at_it_while_another_goes_on() {
    use std::time::{Duration, Instant};
    use wasmctrl::runtime::{ErrorKind, Overrides};
    let bytes = common::plugin_bytes("wasi-probe");
    let deadline = Duration::from_millis(1500);
    let rt = Runtime::new(Config {
        deadline,
        max_instances: 4,
        ..Config::default()
    })
    .unwrap();
    let load = |name: &str, settings: &str| {
        let overrides = Overrides {
            settings: settings.to_string(),
            name: Some(name.to_string()),
            ..Overrides::default()
        };
        Arc::new(rt.load_with(name, &bytes, &overrides).unwrap())
    };
    let sleeper = load("sleeper", r#"{"sleepMs": 600000}"#);
    let quick = load("quick", "{}");
    let until = Instant::now() + Duration::from_secs(5);
    std::thread::scope(|s| {
        // Eight callers of the sleeper, twice the instances there are.
        let sleepers: Vec<_> = (0..8)
            .map(|_| {
                let sleeper = sleeper.clone();
                s.spawn(move || {
                    let mut ended = Vec::new();
                    while Instant::now() < until {
                        let started = Instant::now();
                        let error = sleeper.reconcile(request(), view()).unwrap_err();
                        assert!(matches!(error.kind, ErrorKind::Timeout(_)), "{error}");
                        ended.push(started.elapsed());
                    }
                    ended
                })
            })
            .collect();
        // Let the sleepers take every instance they may first: all but the one left for the
        // other plugin loaded.
        while rt.instances() < 3 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut latencies = Vec::new();
        while Instant::now() < until {
            let started = Instant::now();
            quick
                .reconcile(request(), view())
                .expect("the quick plugin reconciles");
            latencies.push(started.elapsed());
        }
        let calls: Vec<Duration> = sleepers
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        // A sleeping call ends at its deadline (it asked for ten minutes): with the wait for
        // an instance among eight callers, a few deadlines at most.
        let longest = calls.iter().max().unwrap();
        assert!(*longest < deadline * 20, "a sleeping call took {longest:?}");
        latencies.sort();
        let p99 = latencies[(latencies.len() * 99 / 100).min(latencies.len() - 1)];
        eprintln!(
            "quick: {} reconciles, p99 {p99:?}, max {:?}; sleeper: {} calls ended, longest {longest:?}",
            latencies.len(),
            latencies.last().unwrap(),
            calls.len()
        );
        assert!(
            p99 < Duration::from_secs(1),
            "the quick plugin's p99 is {p99:?}"
        );
    });
}
