//! Plugins written in Python and TypeScript run under the same contract and the same sandbox as
//! Rust ones: the
//! VirtualMachine seed written in each language drives the same objects to the same statuses
//! and Events through the whole host (embedded API server, informers, queue, sandbox, applier),
//! and a hostile plugin in each language is stopped as the Rust one is.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wasmctrl::apiserver::ApiServer;
use wasmctrl::plugin::wit;
use wasmctrl::runtime::{ErrorKind, KEEP_RESIDENT, KEEP_RESIDENT_SNAPSHOT, Plugin, Runtime};
use wasmctrl::view::{EmptyView, View};

/// The VirtualMachine seed in each language (its component's name, which its manifest also
/// gives).
const SEEDS: [&str; 3] = ["virtualmachine", "virtualmachine-py", "virtualmachine-ts"];

fn vm(name: &str, memory: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "cloudnative.tw/v1alpha1", "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"resource": {"cpu": 2, "memory": memory, "rootDisk": "40Gi"}},
    }))
    .unwrap()
}

/// Waits until `name`'s status satisfies `ready`, and returns it.
async fn status_when(
    vms: &Api<DynamicObject>,
    name: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    common::eventually(60, what, || async {
        common::status_of(vms, name).await.filter(|s| ready(s))
    })
    .await
}

/// What a seed did to the cluster, with its own name taken out: the VMs' statuses (their
/// `lastUpdateTime` checked, then dropped: it is the host's clock) and the Events about them,
/// sorted.
#[derive(Debug, PartialEq)]
struct Transcript {
    statuses: Vec<(String, Value)>,
    events: Vec<Value>,
}

/// Runs `seed` against a fresh embedded API server through a VM's life: created valid and
/// invalid, its CPUs changed, stopped, deleted.
async fn transcript_of(seed: &str) -> Transcript {
    let complaints = common::Captured::global(tracing::Level::WARN);
    let server = ApiServer::new().unwrap();
    let client = server.client();
    common::install_crd(
        &client,
        common::yaml_objects("examples/virtualmachine/crd.yaml").remove(0),
    )
    .await;
    let vms = common::vms::api(&client, "default");
    // The CRD's schema refuses a CPU count below 1; a memory that is no quantity is the
    // controller's to fail.
    for (name, memory) in [("good", "4Gi"), ("bad", "lots")] {
        vms.create(&PostParams::default(), &vm(name, memory))
            .await
            .unwrap();
    }
    let host = common::host_of(&server, seed, &json!({})).await;

    status_when(&vms, "good", "good Active", |s| s["phase"] == "Active").await;
    status_when(&vms, "bad", "bad Failed", |s| s["phase"] == "Failed").await;
    let patch = json!({"spec": {"resource": {"cpu": 4}}});
    (vms.patch("good", &PatchParams::default(), &Patch::Merge(&patch))
        .await)
        .unwrap();
    status_when(&vms, "good", "good with 4 CPUs", |s| {
        s["server"]["cpu"] == 4
    })
    .await;
    let patch = json!({"spec": {"action": "stop"}});
    (vms.patch("good", &PatchParams::default(), &Patch::Merge(&patch))
        .await)
        .unwrap();
    status_when(&vms, "good", "good Stopped", |s| s["phase"] == "Stopped").await;

    let mut statuses = Vec::new();
    for name in ["bad", "good"] {
        let mut status = common::status_of(&vms, name).await.unwrap();
        let time = status["lastUpdateTime"].as_str().unwrap_or_default();
        assert!(
            time.parse::<jiff::Timestamp>().is_ok(),
            "{seed}: {name}'s lastUpdateTime {time:?}"
        );
        status.as_object_mut().unwrap().remove("lastUpdateTime");
        statuses.push((name.to_string(), status));
    }
    let events = common::eventually(20, "three Events", || async {
        let events = events_about_vms(&client, seed).await;
        (events.len() >= 3).then_some(events)
    })
    .await;

    let before = host.counts(seed).unwrap().total();
    (vms.delete("good", &DeleteParams::default()).await).unwrap();
    common::eventually(20, "the reconcile of the deleted VM", || async {
        (host.counts(seed).unwrap().total() > before).then_some(())
    })
    .await;
    host.shutdown(Duration::from_secs(5)).await;
    let logged = complaints.text();
    assert!(logged.is_empty(), "{seed}: the host complained:\n{logged}");
    Transcript { statuses, events }
}

/// The Events about VirtualMachines, as (object, type, reason, note, action, controller with
/// the seed's name replaced), sorted.
async fn events_about_vms(client: &kube::Client, seed: &str) -> Vec<Value> {
    let list = common::events(client, "default")
        .list(&Default::default())
        .await
        .unwrap();
    let mut events: Vec<Value> = (list.items.into_iter())
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| e["regarding"]["kind"] == "VirtualMachine")
        .map(|e| {
            let controller = e["reportingController"].as_str().unwrap_or_default();
            json!({
                "object": e["regarding"]["name"], "type": e["type"], "reason": e["reason"],
                "note": e["note"], "action": e["action"],
                "controller": controller.replace(seed, "<seed>"),
            })
        })
        .collect();
    events.sort_by_key(Value::to_string);
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_virtualmachine_seed_does_the_same_in_every_language() {
    let rust = transcript_of(SEEDS[0]).await;
    assert_eq!(
        rust.events.iter().map(|e| &e["reason"]).collect::<Vec<_>>(),
        ["Failed", "Active", "Stopped"],
        "{rust:#?}"
    );
    for seed in &SEEDS[1..] {
        assert_eq!(
            transcript_of(seed).await,
            rust,
            "{seed} against the Rust seed"
        );
    }
}

/// A runtime whose compiled components are kept on disk for the whole test run: a language
/// runtime's component takes tens of seconds to compile.
fn runtime() -> Runtime {
    Runtime::new(wasmctrl::runtime::Config {
        cache_dir: Some(common::artifact_cache()),
        ..Default::default()
    })
    .unwrap()
}

fn hostile(rt: &Runtime, plugin: &str, mode: &str) -> Plugin {
    let settings = json!({ "mode": mode }).to_string();
    (rt.load(
        &format!("{plugin}.wasm"),
        &common::plugin_bytes(plugin),
        &settings,
    ))
    .unwrap_or_else(|e| panic!("{plugin} ({mode}) loads: {e}"))
}

/// A reconcile of ConfigMap `team-a/probe`, where the hostile plugins are declared.
fn request() -> wit::Request {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "probe", "namespace": "team-a", "uid": "u1"}});
    wit::Request {
        namespace: "team-a".into(),
        name: "probe".into(),
        object: Some(object.to_string()),
        deleting: false,
        settings: String::new(),
        now: wit::Timestamp {
            seconds: 1_795_000_000,
            nanoseconds: 0,
        },
        previous: Vec::new(),
    }
}

/// Every misbehaviour of `plugin` (a hostile plugin in some language) ends its call with the
/// error the Rust one gets, and the runtime goes on serving.
fn is_stopped_as_rust_is(plugin: &str) {
    let rt = runtime();
    let view = || -> Arc<dyn View> { Arc::new(EmptyView) };
    let err = hostile(&rt, plugin, "loop")
        .reconcile(request(), view())
        .unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Timeout(_)), "loop: {err}");
    assert_eq!(err.plugin, format!("{plugin}-loop"));
    assert_eq!(err.key, "team-a/probe");

    let err = hostile(&rt, plugin, "alloc")
        .reconcile(request(), view())
        .unwrap_err();
    assert!(
        matches!(err.kind, ErrorKind::Memory { limit } if limit == 64 << 20),
        "alloc: {err}"
    );

    let err = hostile(&rt, plugin, "patch-other")
        .reconcile(request(), view())
        .unwrap_err();
    assert!(
        matches!(err.kind, ErrorKind::Action(_)),
        "patch-other: {err}"
    );
    let message = err.to_string();
    assert!(message.contains("patch v1/ConfigMap other/"), "{message}");

    let err = hostile(&rt, plugin, "get-other")
        .reconcile(request(), view())
        .unwrap_err();
    let ErrorKind::Read(refusal) = &err.kind else {
        panic!("get-other: {err}");
    };
    assert_eq!(refusal.namespace, "other", "{err}");

    let done = hostile(&rt, plugin, "ok")
        .reconcile(request(), view())
        .expect("a well-behaved call after the others");
    assert!(done.intents.is_empty(), "{:?}", done.intents);
}

#[test]
fn a_hostile_python_plugin_is_stopped_as_a_rust_one_is() {
    is_stopped_as_rust_is("hostile-py");
}

#[test]
fn a_hostile_typescript_plugin_is_stopped_as_a_rust_one_is() {
    is_stopped_as_rust_is("hostile-ts");
}

/// The Python SDK's marker and `wasmctrl build`'s reading of it agree: the seed `make
/// test-plugins` built lists its snapshot's objects, and every one the build could write is
/// immortal already (a second pass finds nothing left to write and changes no byte).
#[test]
fn the_python_seeds_snapshot_objects_are_immortal() {
    let mut bytes = common::plugin_bytes("virtualmachine-py");
    let built = bytes.clone();
    let again = wasmctrl::build::immortal::immortalize(&mut bytes)
        .expect("the component parses")
        .expect("the SDK's marker is in the snapshot");
    assert_eq!(again.objects, 0, "objects the build left mortal: {again:?}");
    assert!(again.already > 10_000, "too few objects listed: {again:?}");
    assert!(again.unheld < again.already / 100, "{again:?}");
    assert!(bytes == built, "a second pass changed the component");
}

/// A plugin that starts from a language runtime's snapshot (megabytes of initialised memory)
/// runs in the pool that keeps more of each slot resident, where the pages its interpreter
/// writes in every call are reset in place instead of faulted in again; a Rust plugin's small
/// image runs in the other. Either way the next instance starts from the image as built: the
/// same call gives the same answer however many times it runs in one slot.
#[test]
fn each_plugin_runs_in_the_pool_its_memory_image_needs() {
    let rt = runtime();
    let view = || -> Arc<dyn View> { Arc::new(EmptyView) };
    for (plugin, kept) in [
        ("hostile", KEEP_RESIDENT),
        ("hostile-py", KEEP_RESIDENT_SNAPSHOT),
        ("hostile-ts", KEEP_RESIDENT_SNAPSHOT),
    ] {
        let loaded = hostile(&rt, plugin, "ok");
        assert_eq!(loaded.keep_resident(), kept, "{plugin}");
        let answer = |call: usize| {
            let done = (loaded.reconcile(request(), view()))
                .unwrap_or_else(|e| panic!("{plugin}, call {call}: {e}"));
            format!("{:?}", done.intents)
        };
        let first = answer(0);
        for call in 1..20 {
            assert_eq!(answer(call), first, "{plugin}, call {call}");
        }
    }
}

/// The pools' code differs (bounds checked by the code in one, by guard pages in the other), so
/// each compiles and caches its plugins for its own engine: a Rust and a Python plugin leave
/// artifacts of two engine tags, and a second runtime loads both from the disk and runs them.
#[test]
fn each_pool_compiles_and_caches_its_plugins_for_its_own_engine() {
    let dir = tempfile::tempdir().unwrap();
    let config = wasmctrl::runtime::Config {
        cache_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let plugins = ["hostile", "hostile-py"];
    let first = Runtime::new(config.clone()).unwrap();
    for plugin in plugins {
        hostile(&first, plugin, "ok");
    }
    assert_eq!(first.artifact_stats().compiled, 2);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    // `<digest>-<engine tag>.cwasm`
    let tags: std::collections::BTreeSet<&str> = (names.iter())
        .filter_map(|name| name.strip_suffix(".cwasm")?.rsplit_once('-'))
        .map(|(_, tag)| tag)
        .collect();
    assert_eq!(tags.len(), 2, "one engine tag per pool: {names:?}");

    let second = Runtime::new(config).unwrap();
    for plugin in plugins {
        let loaded = hostile(&second, plugin, "ok");
        let done = loaded.reconcile(request(), Arc::new(EmptyView));
        assert!(done.is_ok(), "{plugin}: {done:?}");
    }
    let stats = second.artifact_stats();
    assert_eq!((stats.compiled, stats.from_disk), (0, 2), "{stats:?}");
}
