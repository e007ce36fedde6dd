//! Workqueue semantics through the whole controller loop (embedded API server, informers, sandbox,
//! applier), driven by the hostile test plugin.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;
use wasmctrl::apiserver::ApiServer;
use wasmctrl::reconcile::controller::{Manager, Tuning};
use wasmctrl::runtime::{Config, Runtime};

mod things {
    //! The hostile plugin over `Thing`s in an in-process server.

    use super::*;
    pub use common::things::{api, create, install};

    /// An in-process server with the CRD, and the hostile plugin in `mode` running in a host.
    pub async fn setup(
        settings: serde_json::Value,
        tuning: Tuning,
    ) -> (ApiServer, Manager, Api<DynamicObject>) {
        let server = ApiServer::new().unwrap();
        let client = server.client();
        install(&client).await;
        let runtime = Runtime::new(Config::default()).unwrap();
        let plugin = common::load_plugin(&runtime, "hostile", &settings);
        let host = Manager::new(client.clone());
        host.upsert(Arc::new(plugin), tuning).await;
        (server, host, api(&client))
    }
}

/// The Warning Event with `reason` about Thing `name`, once the host has recorded it.
async fn warning(client: &kube::Client, name: &str, reason: &str) -> DynamicObject {
    let events = common::events(client, "default");
    common::eventually(20, &format!("a {reason} warning"), || async {
        events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| e.data["reason"] == reason && e.data["regarding"]["name"] == name)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeclared_action_fails_the_key_with_a_warning_event_and_no_request() {
    let (server, host, api) = things::setup(json!({"mode": "undeclared"}), Tuning::default()).await;
    things::create(&api, "t1", json!({})).await;
    let event = warning(&server.client(), "t1", "ActionRejected").await;
    assert_eq!(event.data["type"], "Warning");
    assert_eq!(event.data["regarding"]["name"], "t1");
    assert!(
        event.data["note"].as_str().unwrap().contains("v1/Secret"),
        "{}",
        event.data["note"]
    );
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(server.client(), "default");
    assert!(
        secrets.get_opt("stolen").await.unwrap().is_none(),
        "the host must not send the undeclared action"
    );
    // A declaration error is terminal: retrying the same object cannot make it declared. (The
    // Warning is recorded while the reconcile ends; its tally follows.)
    common::eventually(20, "the terminal error counted", || async {
        (host.counts("hostile-undeclared").unwrap().terminal >= 1).then_some(())
    })
    .await;
    host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_updates_to_a_slow_key_runs_few_reconciles_never_concurrently() {
    let settings = json!({"mode": "spin", "iterations": 60_000_000u64});
    let (_server, host, api) = things::setup(
        settings,
        Tuning {
            concurrency: Some(4),
            ..Tuning::default()
        },
    )
    .await;
    things::create(&api, "busy", json!({})).await;
    for n in 1..=1000 {
        let patch = json!({"spec": {"n": n}});
        api.patch("busy", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let generation = api.get("busy").await.unwrap().metadata.generation.unwrap();
    assert_eq!(generation, 1001);
    common::eventually(60, "the last generation to be reconciled", || async {
        let status = common::status_of(&api, "busy").await?;
        (status["observedGeneration"] == generation).then_some(())
    })
    .await;
    let counts = host.counts("hostile-spin").unwrap();
    assert_eq!(counts.overlaps, 0, "a key was reconciled concurrently");
    assert!(
        counts.total() <= 60,
        "1000 updates caused {} reconciles",
        counts.total()
    );
    host.shutdown(Duration::from_secs(5)).await;
}

/// Action outcomes (contract 0.3.0) through the whole loop: a child's create the API server
/// refuses (a 422 injected) reaches the plugin's next reconcile, which reports it as a
/// condition; the best-effort delete of an object that does not exist is `unchanged`, and
/// neither it nor the failed create (best effort too) stops the status write after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_create_reaches_the_next_reconcile_and_best_effort_failures_stop_nothing() {
    use futures::{StreamExt, TryStreamExt};
    use kube::api::{WatchEvent, WatchParams};

    let (server, _host, api) = things::setup(json!({"mode": "outcomes"}), Tuning::default()).await;
    // Server-side apply is a patch: the child's first apply is refused as invalid.
    server
        .faults()
        .fail(Some("patch"), Some("configmaps"), 422, 1);
    let mut events = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    things::create(&api, "t", json!({})).await;

    // Every status the plugin writes, in order, until one reports the failure and a later one
    // the child created.
    let refused = json!({"type": "ChildReady", "status": "False", "reason": "CreateFailed",
        "message": "422 Invalid: injected fault: invalid"});
    let ready = json!({"type": "ChildReady", "status": "True", "reason": "Created"});
    let mut statuses: Vec<serde_json::Value> = Vec::new();
    let watched = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = events.try_next().await.unwrap() {
            let (WatchEvent::Added(thing) | WatchEvent::Modified(thing)) = event else {
                continue;
            };
            let Some(status) = thing.data.get("status") else {
                continue;
            };
            if statuses.last() != Some(status) {
                statuses.push(status.clone());
            }
            let failure = statuses.iter().position(|s| s["conditions"][0] == refused);
            if failure.is_some_and(|i| {
                statuses[i + 1..]
                    .iter()
                    .any(|s| s["conditions"][0] == ready)
            }) {
                return;
            }
        }
    })
    .await;
    assert!(watched.is_ok(), "statuses written: {statuses:#?}");

    // The first reconcile: nothing before it; its status write went through although the
    // create before it failed.
    assert_eq!(statuses[0]["previous"], json!([]), "{statuses:#?}");
    // The next one read what each action of the first did: the delete of the missing object
    // unchanged, the create refused with the server's code and reason, the status applied.
    let second = statuses
        .iter()
        .find(|s| s["conditions"][0] == refused)
        .unwrap();
    assert_eq!(
        second["previous"],
        json!(["unchanged", "failed 422 Invalid", "applied"]),
        "{statuses:#?}"
    );
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(server.client(), "default");
    let child = config_maps.get_opt("t-child").await.unwrap();
    assert!(child.is_some(), "the retried create succeeds");
    // The plugin lists its children through the host's owner index (`cache.children`).
    let children = statuses.last().unwrap()["children"].clone();
    assert_eq!(children, json!(["t-child"]), "{statuses:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_key_backs_off_while_others_proceed_and_terminal_errors_stop() {
    let (_server, host, api) = things::setup(json!({"mode": "fail"}), Tuning::default()).await;
    things::create(&api, "bad", json!({"fail": "yes"})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    things::create(&api, "good", json!({})).await;
    common::eventually(20, "the good key to be reconciled", || async {
        common::status_of(&api, "good")
            .await
            .filter(|s| s["phase"] == "Ready")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Backoff 5 ms doubling: about ten attempts fit in two seconds, a hot loop would make thousands.
    let errors = host.counts("hostile-fail").unwrap().error;
    assert!(
        (3..=14).contains(&errors),
        "{errors} attempts on the failing key"
    );
    assert!(common::status_of(&api, "bad").await.is_none());
    host.shutdown(Duration::from_secs(5)).await;

    let (server, host, api) = things::setup(json!({"mode": "terminal"}), Tuning::default()).await;
    things::create(&api, "doomed", json!({})).await;
    common::eventually(20, "the terminal failure", || async {
        (host.counts("hostile-terminal").unwrap().terminal == 1).then_some(())
    })
    .await;
    // Nobody reads host logs on a cluster: the reason is on the object.
    let event = warning(&server.client(), "doomed", "ReconcileFailed").await;
    assert_eq!(event.data["type"], "Warning");
    assert!(
        event.data["note"]
            .as_str()
            .unwrap()
            .contains("hostile-terminal"),
        "{}",
        event.data["note"]
    );
    // A retry would come after 5 ms; by the time a key created later is done, it would have.
    things::create(&api, "later", json!({})).await;
    common::eventually(20, "the later key's failure", || async {
        (host.counts("hostile-terminal").unwrap().terminal == 2).then_some(())
    })
    .await;
    assert_eq!(
        host.counts("hostile-terminal").unwrap().total(),
        2,
        "a terminal error was retried"
    );
    host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_in_flight_reconciles() {
    // A few hundred milliseconds of work per reconcile: long enough to shut down in the middle of one.
    let settings = json!({"mode": "spin", "iterations": 200_000_000u64});
    let (_server, host, api) = things::setup(settings, Tuning::default()).await;
    things::create(&api, "slow", json!({})).await;
    common::eventually(20, "the reconcile to start", || async {
        (host.counts("hostile-spin").unwrap().in_flight == 1).then_some(())
    })
    .await;
    host.shutdown(Duration::from_secs(30)).await;
    let status = common::status_of(&api, "slow").await;
    assert_eq!(
        status.map(|s| s["observedGeneration"].clone()),
        Some(json!(1)),
        "the in-flight reconcile was cut off"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_children_get_owner_references_and_their_events_reconcile_the_owner() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let (server, host, api) = things::setup(json!({"mode": "own"}), Tuning::default()).await;
    things::create(&api, "parent", json!({})).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let child = common::eventually(20, "the owned ConfigMap", || async {
        configmaps.get_opt("parent-child").await.unwrap()
    })
    .await;
    let owner = &child.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Thing", "parent", Some(true))
    );
    let parent_uid = api.get("parent").await.unwrap().metadata.uid.unwrap();
    assert_eq!(owner.uid, parent_uid);
    let managers: Vec<_> = child
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, ["wasmctrl/hostile-own"]);

    // The owner changes without changing what the plugin wants: it is reconciled again, and the
    // identical intent sends no write (the child keeps its resourceVersion).
    let reconciles = host.counts("hostile-own").unwrap().total();
    let relabel = json!({"metadata": {"labels": {"touched": "yes"}}});
    api.patch("parent", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
    common::eventually(20, "the owner's next reconcile", || async {
        (host.counts("hostile-own").unwrap().total() > reconciles).then_some(())
    })
    .await;
    let after = configmaps.get("parent-child").await.unwrap();
    assert_eq!(
        after.metadata.resource_version, child.metadata.resource_version,
        "an unchanged intent was written again"
    );

    // The child is deleted behind the controller's back: its event maps to the owner, whose
    // reconcile puts it back although the plugin's intent has not changed.
    configmaps
        .delete("parent-child", &Default::default())
        .await
        .unwrap();
    common::eventually(20, "the ConfigMap to come back", || async {
        configmaps
            .get_opt("parent-child")
            .await
            .unwrap()
            .filter(|c| c.metadata.uid != child.metadata.uid)
    })
    .await;
    host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_after_fires_on_time() {
    let (_server, host, api) = things::setup(
        json!({"mode": "requeue", "afterMs": 1000}),
        Tuning::default(),
    )
    .await;
    things::create(&api, "periodic", json!({})).await;
    let mut at = Vec::new();
    for n in 1..=4 {
        common::eventually(20, "the next requeue", || async {
            (host.counts("hostile-requeue").unwrap().requeue >= n).then_some(())
        })
        .await;
        at.push(std::time::Instant::now());
    }
    let mut gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort();
    let median = gaps[1];
    // Within 10% of the asked delay (polling adds up to 20 ms on either side).
    assert!(
        median >= Duration::from_millis(900) && median <= Duration::from_millis(1100),
        "requeue intervals {gaps:?}"
    );
    host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_at_once_never_exceed_the_plugins_concurrency() {
    // Long enough (tens of milliseconds) that workers overlap, so the bound is what limits them.
    let settings = json!({"mode": "spin", "iterations": 8_000_000u64});
    let (_server, host, api) = things::setup(
        settings,
        Tuning {
            concurrency: Some(2),
            ..Tuning::default()
        },
    )
    .await;
    for i in 0..12 {
        things::create(&api, &format!("busy-{i}"), json!({})).await;
    }
    let mut most = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let counts = host.counts("hostile-spin").unwrap();
        most = most.max(counts.in_flight);
        if counts.success >= 12 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "12 reconciles did not finish: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(
        most, 2,
        "at most 2 reconciles at once, and both workers used"
    );
    assert_eq!(host.counts("hostile-spin").unwrap().overlaps, 0);
    host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_precondition_that_always_fails_backs_off_while_other_keys_converge() {
    let (server, host, api) =
        things::setup(json!({"mode": "precondition"}), Tuning::default()).await;
    things::create(&api, "stuck", json!({"stuck": "yes"})).await;
    let started = tokio::time::Instant::now();
    for i in 0..100 {
        things::create(&api, &format!("fine-{i}"), json!({})).await;
    }
    common::eventually(30, "100 keys to converge", || async {
        let list = api.list(&Default::default()).await.unwrap();
        let ready = list
            .items
            .iter()
            .filter(|t| t.data["status"]["phase"] == "Ready")
            .count();
        (ready == 100).then_some(())
    })
    .await;
    let event = warning(&server.client(), "stuck", "ConflictRetrying").await;
    assert!(
        event.data["note"]
            .as_str()
            .unwrap()
            .contains("Thing.example.com default/stuck"),
        "{}",
        event.data["note"]
    );
    // Count the stuck key's patches over ten seconds from its first attempt.
    tokio::time::sleep_until(started + Duration::from_secs(10)).await;
    let patches = server
        .requests()
        .iter()
        .filter(|r| r.verb == "patch" && r.resource == "things" && r.name == "stuck")
        .count();
    eprintln!("{patches} patches of the stuck key in 10 s");
    // 5 ms doubling: attempts at 0, 5, 15, 35, ... 5115 ms, 10235 ms; about a dozen in 10 s.
    assert!(
        (5..=15).contains(&patches),
        "{patches} patches of a key whose precondition always fails"
    );
    assert_eq!(host.counts("hostile-precondition").unwrap().overlaps, 0);
    host.shutdown(Duration::from_secs(5)).await;
}

/// Things created and then deleted in bulk; returns when every owned child is gone too.
async fn churn(api: &Api<DynamicObject>, client: &kube::Client, n: usize) {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| async move {
            things::create(api, &format!("churn-{i}"), json!({})).await;
        })
        .await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let count = |list: kube::core::ObjectList<ConfigMap>| list.items.len();
    common::eventually(600, &format!("{n} owned children"), || async {
        let children = count(configmaps.list(&Default::default()).await.unwrap());
        (children == n).then_some(())
    })
    .await;
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| async move {
            api.delete(&format!("churn-{i}"), &Default::default())
                .await
                .unwrap();
        })
        .await;
    common::eventually(600, "every child collected", || async {
        let children = count(configmaps.list(&Default::default()).await.unwrap());
        (children == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_objects_leave_nothing_behind_in_the_host() {
    let server = ApiServer::builder().gc(true).build().unwrap();
    let client = server.client();
    things::install(&client).await;
    let runtime = Runtime::new(Config::default()).unwrap();
    let settings = json!({"mode": "own"}).to_string();
    let plugin = runtime
        .load("hostile.wasm", &common::plugin_bytes("hostile"), &settings)
        .unwrap();
    let host = Manager::new(client.clone());
    host.upsert(
        Arc::new(plugin),
        Tuning {
            concurrency: Some(8),
            ..Tuning::default()
        },
    )
    .await;
    let api = things::api(&client);
    // Every Thing's trace in the host must be gone after, whatever the count. 3,000 is well
    // past the limits on the way (32 requests in flight, 8 reconciles, the API server's 256
    // kept snapshots); what a larger churn does to memory is `cargo bench --bench churn`'s
    // (20,000 Things). 20,000 here took 200 s of CI's test time.
    churn(&api, &client, 3_000).await;
    // The informers deliver the last deletions before the applier forgets them, and the keys'
    // last reconciles (which forget what their actions did) come after: wait for all three.
    common::eventually(60, "the host's caches and memory to empty", || async {
        let sizes: Vec<(String, (usize, usize))> = (host.informers().running().iter())
            .map(|i| (i.watch().to_string(), i.sizes()))
            .collect();
        let empty = sizes.len() == 2
            && sizes.iter().all(|(_, s)| *s == (0, 0))
            && host.applier().remembered() == 0
            && host.counts("hostile-own").unwrap().outcomes_kept == 0;
        empty.then_some(sizes)
    })
    .await;
    let counts = host.counts("hostile-own").unwrap();
    assert_eq!(
        (counts.error, counts.terminal, counts.overlaps),
        (0, 0, 0),
        "{counts:?}"
    );
    // With no plugin left, no informer is left either.
    host.remove("hostile-own", Duration::from_secs(5)).await;
    let running: Vec<String> = (host.informers().running().iter())
        .map(|i| i.watch().to_string())
        .collect();
    assert!(running.is_empty(), "{running:?}");
}

/// A restart (here: new concurrency) gives in-flight reconciles the grace period, then cancels
/// them: the old version's result is never applied once the new version serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_grace_the_old_versions_work_is_cancelled_and_never_applied() {
    use wasmctrl::plugins::loader::{Change, PluginConfig};
    let server = ApiServer::new().unwrap();
    let client = server.client();
    things::install(&client).await;
    let runtime = Runtime::new(Config {
        deadline: Duration::from_secs(60),
        ..Config::default()
    })
    .unwrap();
    let load = |settings: serde_json::Value| {
        let plugin = common::load_plugin(&runtime, "hostile", &settings);
        Arc::new(plugin)
    };
    // Version 1 spins for seconds; version 2 answers at once.
    let v1 = load(json!({"mode": "version", "version": 1, "iterations": 4_000_000_000u64}));
    let v2 = load(json!({"mode": "version", "version": 2}));
    let host = Manager::new(client.clone());
    let config = |concurrency| PluginConfig {
        concurrency: Some(concurrency),
        ..PluginConfig::default()
    };
    Change::Added(v1.clone(), config(1))
        .deliver(&host, 4, Duration::from_millis(100))
        .await;
    let api = things::api(&client);
    things::create(&api, "t", json!({})).await;
    common::eventually(20, "version 1 reconciling", || async {
        (host.counts("hostile-version").unwrap().in_flight == 1).then_some(())
    })
    .await;

    let replaced = Change::Replaced {
        old: v1,
        new: v2,
        config: config(2),
    };
    replaced.deliver(&host, 4, Duration::from_millis(100)).await;
    let status = common::eventually(20, "version 2's status", || async {
        common::status_of(&api, "t")
            .await
            .filter(|s| s["version"] == 2)
    })
    .await;
    assert_eq!(status, json!({"version": 2}));
    // Version 1's call runs on in its sandbox until it ends (its instance is then freed); its
    // result goes nowhere.
    common::eventually(60, "version 1's call to end", || async {
        (runtime.instances() == 0).then_some(())
    })
    .await;
    assert_eq!(
        common::status_of(&api, "t").await.unwrap(),
        json!({"version": 2})
    );
    host.shutdown(Duration::from_secs(5)).await;
}

/// Declarative children: a set {a, b} then {b} deletes `a` and keeps `b`; ConfigMaps the Thing
/// does not control (a non-controller owner reference, or none) are never deleted, even though
/// the first sits in the owner index beside `a` and `b`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_children_set_prunes_the_children_it_leaves_out_and_nothing_else() {
    let (server, _host, api) = things::setup(json!({"mode": "children"}), Tuning::default()).await;
    let client = server.client();
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    let thing = json!({"apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "t1", "namespace": "default"}, "spec": {"children": ["a", "b"]}});
    api.create(&Default::default(), &serde_json::from_value(thing).unwrap())
        .await
        .unwrap();
    let observed = |generation: i64| {
        let api = api.clone();
        async move {
            let status = common::status_of(&api, "t1").await?;
            (status["observedGeneration"] == generation).then_some(())
        }
    };
    common::eventually(20, "the first set applied", || observed(1)).await;
    let uid = api.get("t1").await.unwrap().metadata.uid.unwrap();
    for name in ["a", "b"] {
        let cm = config_maps.get(name).await.unwrap();
        let owner = &cm.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            (uid.as_str(), Some(true))
        );
    }
    // Beside them: one the Thing owns but does not control, and one nobody owns.
    for (name, owners) in [
        (
            "shared",
            json!([{"apiVersion": "example.com/v1", "kind": "Thing", "name": "t1",
            "uid": uid, "controller": false}]),
        ),
        ("unrelated", json!([])),
    ] {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "ownerReferences": owners}});
        config_maps
            .create(&Default::default(), &serde_json::from_value(cm).unwrap())
            .await
            .unwrap();
    }

    let patch = json!({"spec": {"children": ["b"]}});
    api.patch("t1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    // The status is written after the whole set (applies and prunes) was carried out.
    common::eventually(20, "the second set applied", || observed(2)).await;
    let left = |name: &'static str| {
        let config_maps = config_maps.clone();
        async move { config_maps.get_opt(name).await.unwrap().is_some() }
    };
    assert!(!left("a").await, "a, left out of the set, is deleted");
    assert!(left("b").await, "b, still in the set, stays");
    assert!(
        left("shared").await,
        "a child the Thing does not control stays"
    );
    assert!(left("unrelated").await, "a ConfigMap nobody owns stays");
}

/// A client of `server` whose watches of Things hold back every event that contains `needle`
/// (`"status"`: every event that carries a status) until `gate` opens: the host's cache of
/// Things then lags behind those writes, while its cache of ConfigMaps keeps up.
fn lagging_client(
    server: &ApiServer,
    gate: tokio::sync::watch::Receiver<bool>,
    needle: &'static [u8],
) -> kube::Client {
    use futures::StreamExt;
    use http_body_util::{StreamBody, combinators::UnsyncBoxBody};
    type BoxError = Box<dyn std::error::Error + Send + Sync>;
    let inner = server.service_with_token(server.admin_token());
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        let gate = gate.clone();
        let gated = req.uri().path().ends_with("/things")
            && req.uri().query().is_some_and(|q| q.contains("watch=true"));
        async move {
            let resp = tower::ServiceExt::oneshot(inner, req).await?;
            Ok::<_, std::convert::Infallible>(resp.map(move |body| {
                let frames = body.into_data_stream().then(move |chunk| {
                    let mut gate = gate.clone();
                    async move {
                        let chunk = chunk.map_err(BoxError::from)?;
                        if gated && chunk.windows(needle.len()).any(|w| w == needle) {
                            let _ = gate.wait_for(|open| *open).await;
                        }
                        Ok::<_, BoxError>(hyper::body::Frame::data(chunk))
                    }
                });
                UnsyncBoxBody::new(StreamBody::new(Box::pin(frames)))
            }))
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_not_reconciled_again_until_the_caches_show_its_own_writes() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let server = ApiServer::new().unwrap();
    let driver = server.client();
    things::install(&driver).await;
    let (open, gate) = tokio::sync::watch::channel(false);
    let runtime = Runtime::new(Config::default()).unwrap();
    let plugin = runtime
        .load("converge.wasm", &common::plugin_bytes("converge"), "{}")
        .unwrap();
    let host = Manager::new(lagging_client(&server, gate, b"\"status\""));
    host.upsert(Arc::new(plugin), Tuning::default()).await;
    let api = things::api(&driver);
    things::create(&api, "t", json!({})).await;

    // The first reconcile creates the child and writes the status. The child's echo queues the
    // key at once; the status echo is held back, so the key is taken and put back, and the
    // plugin is not run on a cache that lacks its own status write.
    let counts = common::eventually(20, "the child's echo taken from the queue", || async {
        host.counts("converge")
            .filter(|c| c.held > 0 || c.total() > 1)
    })
    .await;
    assert_eq!(
        counts.total(),
        1,
        "reconciled on a cache without its own write"
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(driver.clone(), "default");
    assert!(configmaps.get_opt("t-child").await.unwrap().is_some());
    assert!(
        common::status_of(&api, "t").await.is_some(),
        "the status was written"
    );

    // Once the cache shows the status, the key runs once more, on a complete view, and writes
    // nothing: the status and the child are as the plugin wants them.
    open.send_replace(true);
    let counts = common::eventually(20, "the reconcile after the echoes", || async {
        host.counts("converge").filter(|c| c.total() == 2)
    })
    .await;
    assert_eq!(counts.error + counts.terminal, 0);
    host.shutdown(Duration::from_secs(5)).await;
    let patches: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "patch")
        .map(|r| format!("{} {} {}", r.resource, r.subresource, r.name))
        .collect();
    assert_eq!(patches, ["configmaps  t-child", "things status t"]);
}

/// A reconcile that writes its object twice (operator-sdk's Memcached cleanup: the status, a
/// Warning, the finalizer removed) is not run again until the cache shows its last write: with
/// the object's deletion held back from the host's cache, the status write's echo alone does not
/// release the key, so the cleanup runs once and records one event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanup_that_writes_its_object_twice_runs_once() {
    let server = ApiServer::new().unwrap();
    let driver = server.client();
    things::install(&driver).await;
    let (open, gate) = tokio::sync::watch::channel(false);
    let runtime = Runtime::new(Config::default()).unwrap();
    let settings = json!({"mode": "cleanup"});
    let plugin = common::load_plugin(&runtime, "hostile", &settings);
    let host = Manager::new(lagging_client(&server, gate, b"\"DELETED\""));
    host.upsert(Arc::new(plugin), Tuning::default()).await;
    let api = things::api(&driver);
    things::create(&api, "memcached", json!({})).await;
    common::eventually(20, "the finalizer added and the status Ready", || async {
        let thing = api.get("memcached").await.ok()?;
        (thing.data["status"]["phase"] == "Ready").then_some(())
    })
    .await;
    // Three reconciles: the finalizer added, the status written, and the one the status echo
    // queues, which writes nothing; then the key rests.
    let before = common::eventually(20, "the live object's reconciles done", || async {
        host.counts("hostile-cleanup")
            .filter(|c| c.total() == 3 && c.in_flight == 0)
    })
    .await;

    api.delete("memcached", &Default::default()).await.unwrap();
    let counts = common::eventually(20, "the key taken again after the cleanup", || async {
        host.counts("hostile-cleanup")
            .filter(|c| c.held > before.held || c.total() > before.total() + 1)
    })
    .await;
    assert_eq!(
        counts.total(),
        before.total() + 1,
        "cleaned up again on a cache without its own finalizer removal"
    );
    assert!(api.get_opt("memcached").await.unwrap().is_none(), "gone");

    open.send_replace(true);
    let counts = common::eventually(20, "the deletion seen by the host", || async {
        let cached = (host.informers().running().iter()).any(|i| i.sizes().0 > 0);
        let counts = host.counts("hostile-cleanup")?;
        (!cached && counts.in_flight == 0).then_some(counts)
    })
    .await;
    assert_eq!(counts.error + counts.terminal, 0, "{counts:?}");
    let events = common::events(&driver, "default")
        .list(&Default::default())
        .await
        .unwrap();
    let warnings: Vec<_> = (events.items.iter())
        .filter(|e| e.data["reason"] == "Finalizing")
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].data["series"].is_null(),
        "{:?}",
        warnings[0].data
    );
    host.shutdown(Duration::from_secs(5)).await;
}
