//! The dispatch runtime contains misbehaving plugins: each failure is a typed error naming the
//! plugin and key, and the next reconcile in the same process still works.

use crate::common;

use std::sync::Arc;

use serde_json::json;
use wasmctrl::plugin::{Intent, wit};
use wasmctrl::runtime::{Config, ErrorKind, LoadError, Overrides, Plugin, Runtime};
use wasmctrl::view::{EmptyView, View};

fn runtime() -> Runtime {
    Runtime::new(Config::default()).expect("runtime")
}

fn hostile(rt: &Runtime, mode: &str) -> Plugin {
    rt.load(
        "hostile.wasm",
        &common::plugin_bytes("hostile"),
        &json!({ "mode": mode }).to_string(),
    )
    .expect("load hostile plugin")
}

fn request() -> wit::Request {
    common::things::request(1, "2026-11-22T00:00:00Z")
}

fn view() -> Arc<dyn View> {
    Arc::new(EmptyView)
}

/// After any failure, a well-behaved plugin in the same runtime still reconciles.
fn assert_still_serving(rt: &Runtime) {
    let ok = hostile(rt, "ok");
    let done = ok
        .reconcile(request(), view())
        .expect("well-behaved plugin after a failure");
    assert_eq!(
        done.intents,
        vec![Intent::UpdateStatus {
            status: json!({"phase": "Ready"})
        }]
    );
}

/// A plugin that never returns is interrupted by its deadline (epoch interruption): the call
/// ends, as a timeout naming that deadline. How soon after the deadline is a benchmark's
/// question (`make bench`), not a timed assertion on a shared machine.
#[test]
fn an_infinite_loop_is_ended_by_the_deadline() {
    let rt = runtime();
    let deadline = rt.config().deadline;
    let err = hostile(&rt, "loop")
        .reconcile(request(), view())
        .unwrap_err();
    assert!(
        matches!(err.kind, ErrorKind::Timeout(d) if d == deadline),
        "{err}"
    );
    assert_eq!(err.plugin, "hostile-loop");
    assert_eq!(err.key, "default/t1");
    assert_eq!(err.kind.label(), "timeout");
    assert_still_serving(&rt);
}

#[test]
fn unbounded_allocation_is_a_memory_error() {
    let rt = runtime();
    let err = hostile(&rt, "alloc")
        .reconcile(request(), view())
        .unwrap_err();
    assert!(
        matches!(err.kind, ErrorKind::Memory { limit } if limit == 64 << 20),
        "{err}"
    );
    assert!(err.to_string().contains("hostile-alloc") && err.to_string().contains("default/t1"));
    assert_still_serving(&rt);
}

#[test]
fn a_plugins_own_memory_cap_lowers_the_runtimes_and_never_raises_it() {
    let rt = runtime();
    let bytes = common::plugin_bytes("hostile");
    let capped = |mib: usize| {
        let overrides = Overrides {
            settings: json!({"mode": "alloc"}).to_string(),
            memory_limit: Some(mib << 20),
            ..Overrides::default()
        };
        let plugin = rt.load_with("hostile.wasm", &bytes, &overrides).unwrap();
        plugin.reconcile(request(), view()).unwrap_err()
    };
    let err = capped(16);
    assert!(
        matches!(err.kind, ErrorKind::Memory { limit } if limit == 16 << 20),
        "{err}"
    );
    let err = capped(1024);
    assert!(
        matches!(err.kind, ErrorKind::Memory { limit } if limit == 64 << 20),
        "the runtime's 64 MiB stands: {err}"
    );
}

#[test]
fn panic_is_a_trap_error_carrying_the_panic_message() {
    let rt = runtime();
    let err = hostile(&rt, "panic")
        .reconcile(request(), view())
        .unwrap_err();
    let ErrorKind::Trap(message) = &err.kind else {
        panic!("expected a trap, got {err}")
    };
    assert!(message.contains("panicked on purpose"), "{message}");
    assert!(err.kind.retryable());
    assert_still_serving(&rt);
}

#[test]
fn oversized_result_is_rejected() {
    let rt = runtime();
    let err = hostile(&rt, "huge")
        .reconcile(request(), view())
        .unwrap_err();
    assert!(
        matches!(err.kind, ErrorKind::ResultTooLarge { limit, .. } if limit == 4 << 20),
        "{err}"
    );
    assert_still_serving(&rt);
}

#[test]
fn action_on_an_undeclared_kind_is_rejected() {
    let rt = runtime();
    let err = hostile(&rt, "undeclared")
        .reconcile(request(), view())
        .unwrap_err();
    assert_eq!(err.kind.label(), "undeclared", "{err}");
    assert!(!err.kind.retryable(), "a declaration error is terminal");
    assert!(
        err.to_string()
            .contains("apply v1/Secret default/stolen refused"),
        "{err}"
    );
    assert_still_serving(&rt);
}

#[test]
fn reconciles_never_share_guest_state() {
    let rt = runtime();
    let counter = hostile(&rt, "count");
    for _ in 0..5 {
        let done = counter.reconcile(request(), view()).unwrap();
        assert_eq!(
            done.intents,
            vec![Intent::UpdateStatus {
                status: json!({"calls": 1})
            }]
        );
    }
}

#[test]
fn concurrent_reconciles_are_isolated_and_bounded() {
    let rt = Runtime::new(Config {
        max_instances: 3,
        ..Config::default()
    })
    .unwrap();
    let counter = Arc::new(hostile(&rt, "count"));
    // Calls long enough (a few milliseconds) that eight threads keep every instance busy.
    let spin = rt
        .load(
            "hostile.wasm",
            &common::plugin_bytes("hostile"),
            &json!({"mode": "spin", "iterations": 2_000_000}).to_string(),
        )
        .map(Arc::new)
        .unwrap();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (counter, spin) = (counter.clone(), spin.clone());
            std::thread::spawn(move || {
                for _ in 0..20 {
                    let done = counter.reconcile(request(), view()).unwrap();
                    assert_eq!(
                        done.intents[0],
                        Intent::UpdateStatus {
                            status: json!({"calls": 1})
                        }
                    );
                    spin.reconcile(request(), view()).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Never more than three instances at once, and more than one: the bound, not a lack of
    // concurrency, is what held them.
    let peak = rt.peak_instances();
    assert!(
        (2..=3).contains(&peak),
        "peak of {peak} instances with a bound of 3"
    );
}

#[test]
fn a_plugin_error_keeps_its_retryability() {
    // The virtualmachine plugin returns a terminal error for an object it cannot parse.
    let rt = runtime();
    let vm = rt
        .load("vm", &common::plugin_bytes("virtualmachine"), "{}")
        .unwrap();
    let mut req = request();
    req.object = Some(json!({"metadata": {"name": 5}}).to_string());
    let err = vm.reconcile(req, view()).unwrap_err();
    assert!(
        matches!(
            err.kind,
            ErrorKind::Plugin {
                retryable: false,
                ..
            }
        ),
        "{err}"
    );
    assert!(!err.kind.retryable());
}

#[test]
fn loading_rejects_what_is_not_a_plugin() {
    let rt = runtime();
    let err = rt
        .load("junk.wasm", b"definitely not wasm", "{}")
        .unwrap_err();
    assert!(matches!(err, LoadError::Compile { .. }), "{err}");
    assert!(err.to_string().starts_with("junk.wasm: "), "{err}");

    // A valid component (wasmtime accepts the text format) that exports nothing of the contract.
    let err = rt.load("empty.wasm", b"(component)", "{}").unwrap_err();
    assert!(matches!(err, LoadError::Contract { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("does not implement a wasmctrl:plugin contract this host serves"),
        "{err}"
    );
}

#[test]
fn compiled_artifacts_are_cached_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        cache_dir: Some(dir.path().to_path_buf()),
        ..Config::default()
    };
    let bytes = common::plugin_bytes("virtualmachine");
    let first_rt = Runtime::new(config.clone()).unwrap();
    let first = first_rt.load("vm", &bytes, "{}").unwrap();
    assert_eq!(first_rt.artifact_stats().compiled, 1);
    let cached: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(cached.len(), 1, "one artifact per content hash");
    // A second process (runtime) loads from the artifact instead of compiling.
    let second_rt = Runtime::new(config).unwrap();
    let second = second_rt.load("vm", &bytes, "{}").unwrap();
    let stats = second_rt.artifact_stats();
    assert_eq!((stats.compiled, stats.from_disk), (0, 1), "{stats:?}");
    assert_eq!(first.digest(), second.digest());
    assert_eq!(second.manifest().name, "virtualmachine");
    // The virtualmachine plugin reads a VirtualMachine (its spec is required).
    let vm = json!({"apiVersion": "cloudnative.tw/v1alpha1", "kind": "VirtualMachine",
        "metadata": {"namespace": "default", "name": "t1", "uid": "u1", "generation": 1},
        "spec": {"resource": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"}}});
    let request = wit::Request {
        object: Some(vm.to_string()),
        ..request()
    };
    let done = second.reconcile(request, view());
    assert!(done.is_ok(), "{done:?}");
}

#[test]
fn a_plugins_own_deadline_and_namespaces_come_from_its_overrides() {
    let rt = runtime();
    let overrides = |mode: &str, deadline_ms: u64| Overrides {
        settings: json!({ "mode": mode }).to_string(),
        namespaces: Some(vec!["team-a".into()]),
        deadline: Some(std::time::Duration::from_millis(deadline_ms)),
        ..Overrides::default()
    };
    let bytes = common::plugin_bytes("hostile");
    let looping = rt
        .load_with("hostile.wasm", &bytes, &overrides("loop", 100))
        .unwrap();
    let err = looping.reconcile(request(), view()).unwrap_err();
    // The runtime's default is 2 s; the plugin's own 100 ms is what ended the call.
    assert!(
        matches!(err.kind, ErrorKind::Timeout(d) if d.as_millis() == 100),
        "{err}"
    );
    let narrowed = rt
        .load_with("hostile.wasm", &bytes, &overrides("ok", 100))
        .unwrap();
    assert_eq!(narrowed.scope().namespaces().to_string(), "[team-a]");
    // `request()` is in namespace default: outside the operator's narrowing.
    let err = narrowed.reconcile(request(), view()).unwrap_err();
    assert_eq!(err.kind.label(), "undeclared", "{err}");
}

#[test]
fn the_operator_can_serve_one_plugin_under_several_names() {
    let rt = runtime();
    let bytes = common::plugin_bytes("trivial");
    let named = |name: &str| Overrides {
        name: Some(name.into()),
        ..Overrides::default()
    };
    let a = rt.load_with("a.wasm", &bytes, &named("trivial-a")).unwrap();
    let b = rt.load_with("b.wasm", &bytes, &named("trivial-b")).unwrap();
    assert_eq!(a.manifest().name, "trivial-a");
    assert_eq!(b.manifest().field_manager(), "wasmctrl/trivial-b");
    assert_eq!(a.manifest().kind(), b.manifest().kind());
    let err = rt
        .load_with("c.wasm", &bytes, &named("Not_A_Label"))
        .unwrap_err();
    assert!(err.to_string().contains("Not_A_Label"), "{err}");
}
