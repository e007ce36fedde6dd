//! `--leader-elect`: several real hosts against one API server. Only the holder of the Lease
//! reconciles; standbys keep their caches and queues warm; a killed leader's Lease passes on
//! when it runs out, a stopped leader's at once; and through handovers no key is ever
//! reconciled by two hosts at overlapping times.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::http;
use common::process::{Cluster, Process, plugin_dir, wait_for};
use common::reconciles;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

const LEADING: &str = r#"leader_election_master_status{name="wasmctrl"}"#;
const SUCCESSES: &str =
    r#"controller_runtime_reconcile_total{controller="trivial",result="success"}"#;
const DEPTH: &str = r#"workqueue_depth{name="trivial"}"#;

/// An API server with the Thing CRD, a plugin directory of the trivial plugin, and the Things.
async fn setup() -> (tempfile::TempDir, Cluster, PathBuf, Api<DynamicObject>) {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    common::things::install(&client).await;
    let plugins = plugin_dir(dir.path(), &[("trivial", None)]);
    (dir, cluster, plugins, common::things::api(&client))
}

/// A host of the trivial plugin campaigning for the default Lease.
fn replica(cluster: &Cluster, plugins: &Path, extra: &[&str]) -> Process {
    let args = [&["--leader-elect"], extra].concat();
    cluster.run_host(plugins, &args, &[])
}

/// Waits until `host` has logged that it leads.
fn wait_leading(host: &Process, secs: u64) {
    wait_for(secs, "a host to become leader", || {
        host.log().contains("became leader")
    });
}

/// Waits until `host`'s caches have synced (`/readyz` 200): a standby is as ready as a leader.
fn wait_ready(host: &Process) {
    let addr = host.address("health probes");
    wait_for(60, "readyz", || {
        http::try_get(&addr, "/readyz").is_ok_and(|code| code == 200)
    });
}

/// Sets `spec.replicas` of Thing `name`.
async fn set_replicas(api: &Api<DynamicObject>, name: &str, replicas: i64) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

/// `status.replicas` of Thing `name`, as the plugin last reported it.
async fn reported(api: &Api<DynamicObject>, name: &str) -> Option<i64> {
    let thing = api.get(name).await.unwrap();
    thing.data["status"]["replicas"].as_i64()
}

/// Waits until the plugin has reported `replicas` for Thing `name`; how long that took.
async fn wait_reported(api: &Api<DynamicObject>, name: &str, replicas: i64) -> Duration {
    let started = Instant::now();
    common::eventually(
        60,
        &format!("{name} to report {replicas} replicas"),
        || async { (reported(api, name).await == Some(replicas)).then_some(()) },
    )
    .await;
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_reconciles_and_a_standby_takes_over_a_killed_or_stopped_one() {
    let (_dir, cluster, plugins, api) = setup().await;

    let first = replica(&cluster, &plugins, &[]);
    wait_leading(&first, 30);
    let second = replica(&cluster, &plugins, &[]);
    wait_ready(&second);
    let names: Vec<String> = (0..5).map(|i| format!("t{i}")).collect();
    for name in &names {
        common::things::create(&api, name, json!({})).await;
    }
    for name in &names {
        wait_reported(&api, name, 1).await;
    }
    // The standby has every key queued (its caches and queue are warm) and has reconciled
    // none of them; the leader reconciled each.
    wait_for(30, "the standby to queue the five keys", || {
        second.sample(DEPTH) == Some(5.0)
    });
    assert_eq!(second.sample(SUCCESSES), Some(0.0));
    assert_eq!(second.sample(LEADING), Some(0.0));
    assert_eq!(first.sample(LEADING), Some(1.0));
    assert!(first.sample(SUCCESSES).unwrap() >= 5.0);
    assert!(!second.log().contains("reconciled"), "{}", second.log());

    // SIGKILL: the Lease is not released; the standby takes it once it runs out (15 s).
    let killed = Instant::now();
    first.kill();
    set_replicas(&api, "t0", 2).await;
    wait_reported(&api, "t0", 2).await;
    let took = killed.elapsed();
    assert!(
        took <= Duration::from_secs(15 + 5),
        "a killed leader's standby took {took:?} to reconcile a new change"
    );
    assert_eq!(second.sample(LEADING), Some(1.0));
    println!("after SIGKILL of the leader, the standby reconciled a change in {took:?}");

    // SIGTERM: the leader finishes, releases the Lease, and the standby takes over at once.
    let third = replica(&cluster, &plugins, &[]);
    wait_ready(&third);
    let stopped = Instant::now();
    let status = second.terminate();
    assert!(status.success(), "exit {status}");
    set_replicas(&api, "t1", 3).await;
    wait_reported(&api, "t1", 3).await;
    let took = stopped.elapsed();
    assert!(
        took <= Duration::from_secs(5),
        "a stopped leader's standby took {took:?} to reconcile a new change"
    );
    println!("after SIGTERM of the leader, the standby reconciled a change in {took:?}");
    let lease = cluster
        .get_json(&["lease", "wasmctrl", "-n", "default"])
        .unwrap();
    assert_eq!(lease["spec"]["leaseTransitions"], 2, "{lease}");
    assert!(
        (lease["spec"]["holderIdentity"].as_str().unwrap()).contains('_'),
        "identity is <hostname>_<uuid>: {lease}"
    );
    third.assert_quiet("new leader");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_patched_through_three_handovers_converge_without_overlapping_reconciles() {
    let (dir, cluster, plugins, api) = setup().await;
    let json_logs = ["--log-format", "json"];

    let names: Vec<String> = (0..200).map(|i| format!("t{i:03}")).collect();
    for name in &names {
        common::things::create(&api, name, json!({})).await;
    }
    let mut hosts = vec![replica(&cluster, &plugins, &json_logs)];
    wait_leading(&hosts[0], 30);
    hosts.push(replica(&cluster, &plugins, &json_logs));
    let mut logs = Vec::new();
    // Each round patches every object; halfway through, the leader is stopped (SIGTERM) and a
    // new standby joins, so patches land before, during and after each handover.
    for round in 1..=3 {
        wait_ready(hosts.last().unwrap());
        let (before, after) = names.split_at(names.len() / 2);
        for name in before {
            set_replicas(&api, name, round + 1).await;
        }
        let leader = hosts.remove(0);
        let status = leader.terminate();
        assert!(status.success(), "exit {status}");
        logs.push(std::fs::read_to_string(dir.path().join(format!("host-{round}.log"))).unwrap());
        for name in after {
            set_replicas(&api, name, round + 1).await;
        }
        wait_leading(&hosts[0], 30);
        hosts.push(replica(&cluster, &plugins, &json_logs));
    }
    for name in &names {
        wait_reported(&api, name, 4).await;
        let thing = api.get(name).await.unwrap();
        assert_eq!(
            thing.data["status"]["observedGeneration"],
            json!(thing.metadata.generation.unwrap()),
            "{name} converged on its latest generation"
        );
    }
    // The hosts still running stop gracefully too, so every reconcile has its end record.
    wait_ready(hosts.last().unwrap());
    for (n, host) in hosts.into_iter().enumerate() {
        let status = host.terminate();
        assert!(status.success(), "exit {status}");
        logs.push(std::fs::read_to_string(dir.path().join(format!("host-{}.log", n + 4))).unwrap());
    }
    let spans = (logs.iter().enumerate())
        .flat_map(|(host, log)| reconciles::spans(host, log, None))
        .collect();
    let by_key = reconciles::assert_no_overlap(spans);
    let reconciled_by: std::collections::BTreeSet<usize> =
        by_key.values().flatten().map(|s| s.host).collect();
    assert!(
        reconciled_by.len() >= 4,
        "the leaders of all four terms reconciled: {reconciled_by:?}"
    );
    assert_eq!(by_key.len(), names.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_before_its_lease_runs_out_and_sends_nothing_after() {
    use std::sync::Arc;
    use wasmctrl::apiserver::ApiServer;
    use wasmctrl::observe::metrics::Metrics;
    use wasmctrl::reconcile::controller::{Manager, Tuning};
    use wasmctrl::runtime::Runtime;

    let server = ApiServer::new().unwrap();
    let client = server.client();
    common::things::install(&client).await;
    let api = common::things::api(&client);
    let config = common::short_lease("fenced");
    let (mut leadership, election) = wasmctrl::replicas::leader::campaign(client.clone(), config);
    let host = Manager::led(client.clone(), Arc::new(Metrics::new()), leadership.clone());
    let runtime = Runtime::new(wasmctrl::runtime::Config::default()).unwrap();
    let plugin = runtime
        .load("trivial.wasm", &common::plugin_bytes("trivial"), "")
        .unwrap();
    host.upsert(Arc::new(plugin), Tuning::default()).await;
    assert_eq!(leadership.changed().await, Some(true));
    common::things::create(&api, "a", json!({})).await;
    wait_reported(&api, "a", 1).await;

    // Every renewal fails from now on.
    server
        .faults()
        .fail(Some("update"), Some("leases"), 500, u32::MAX);
    assert_eq!(leadership.changed().await, Some(false));
    let stopped = k8s_openapi::jiff::Timestamp::now();
    assert!(!leadership.fence().holds());
    let lease = cluster_lease(&client).await;
    let renewed = lease.spec.as_ref().unwrap().renew_time.clone().unwrap().0;
    let duration = lease.spec.unwrap().lease_duration_seconds.unwrap();
    let runs_out = renewed + k8s_openapi::jiff::SignedDuration::from_secs(duration.into());
    assert!(
        stopped < runs_out,
        "stopped at {stopped}, after the lease ran out at {runs_out}"
    );

    // A change while it does not lead is queued, not reconciled, and nothing is sent for it.
    let sent_before = server.requests().len();
    set_replicas(&api, "a", 5).await;
    let queued = || {
        host.refresh_metrics();
        host.metrics()
            .encode(false)
            .contains("workqueue_depth{name=\"trivial\"} 1")
    };
    common::eventually(30, "the change to be queued", || async {
        queued().then_some(())
    })
    .await;
    let writes: Vec<_> = server.requests()[sent_before..]
        .iter()
        .filter(|r| {
            r.resource == "things" && r.verb != "get" && r.verb != "list" && r.verb != "watch"
        })
        .map(|r| format!("{} {}/{}", r.verb, r.resource, r.subresource))
        .collect();
    assert_eq!(writes, ["patch things/"], "only the test's own patch");
    assert_eq!(reported(&api, "a").await, Some(1));

    // Renewals work again: it leads again and catches up.
    server.faults().reset();
    assert_eq!(leadership.changed().await, Some(true));
    wait_reported(&api, "a", 5).await;
    host.shutdown(Duration::from_secs(5)).await;
    election.resign().await;
    let lease = cluster_lease(&client).await;
    assert_eq!(lease.spec.unwrap().holder_identity, None, "released");
}

/// The `fenced` Lease in `default`.
async fn cluster_lease(client: &kube::Client) -> k8s_openapi::api::coordination::v1::Lease {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    leases.get("fenced").await.unwrap()
}
