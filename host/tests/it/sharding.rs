//! `--sharding`: several real hosts against one API server share the reconciling. Each holds a
//! membership Lease, reconciles only the keys of its slots and caches only their objects (the
//! embedded server applies `shardSelector`); a killed host's keys move to the others once its
//! Lease runs out, a joining host takes about its share, a stopped host hands its keys over at
//! once, and through it all no key is reconciled by two hosts at overlapping times.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::http;
use common::process::{Cluster, Process, plugin_dir, wait_for};
use common::reconciles;
use common::vms::{self, resource, set_cpu};
use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wasmctrl::replicas::sharding::{self, SlotSet};

/// Short Lease timings with controller-runtime's proportions, so the test takes seconds.
const LEASE: u64 = 6;
const RETRY: u64 = 1;
const TIMINGS: [&str; 3] = [
    "--leader-elect-lease-duration=6",
    "--leader-elect-renew-deadline=4",
    "--leader-elect-retry-period=1",
];
const NAMESPACES: usize = 100;
const PER_NAMESPACE: usize = 30;
const CACHED: &str = r#"wasmctrl_cached_objects{kind="cloudnative.tw/v1alpha1/VirtualMachine"}"#;
const OWNED: &str = r#"wasmctrl_shard_owned_keys{controller="virtualmachine"}"#;

fn keys() -> Vec<(String, String)> {
    keys_in(NAMESPACES, PER_NAMESPACE)
}

fn keys_in(namespaces: usize, each: usize) -> Vec<(String, String)> {
    (0..namespaces)
        .flat_map(|n| (0..each).map(move |i| (format!("vm-{n:03}"), format!("vm-{i:02}"))))
        .collect()
}

/// A host of the virtualmachine plugin in the shard group, logging JSON.
fn member(cluster: &Cluster, plugins: &Path) -> Process {
    let args = [&["--sharding", "--log-format", "json"], &TIMINGS[..]].concat();
    cluster.run_host(plugins, &args, &[])
}

/// Waits until `host` is ready: plugins loaded, caches synced, its share taken up.
fn wait_ready(host: &Process) {
    let addr = host.address("health probes");
    wait_for(90, "readyz", || {
        http::try_get(&addr, "/readyz").is_ok_and(|code| code == 200)
    });
}

/// The name of `host`'s membership Lease, from its log.
fn lease_of(host: &Process) -> String {
    let mut name = String::new();
    wait_for(30, "the host to join its shard group", || {
        let log = host.log();
        let line = log.lines().find(|l| l.contains("joining the shard group"));
        name = line
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .and_then(|l| l["fields"]["lease"].as_str().map(String::from))
            .unwrap_or_default();
        !name.is_empty()
    });
    name
}

/// Which of `leases` claims each VM, from the Leases' slots and the VMs' uids; panics if two
/// claim one.
async fn owners(client: &kube::Client, leases: &[String]) -> BTreeMap<(String, String), String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    let listed = api
        .list(&ListParams::default().labels("sharding.wasmctrl.dev/group=wasmctrl"))
        .await
        .unwrap();
    let mut claims: Vec<(String, SlotSet)> = Vec::new();
    for lease in listed.items {
        let name = lease.metadata.name.clone().unwrap();
        if !leases.contains(&name) {
            continue;
        }
        let slots = &lease.metadata.annotations.unwrap()["sharding.wasmctrl.dev/slots"];
        claims.push((name, SlotSet::parse(slots).unwrap()));
    }
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
    let mut owners = BTreeMap::new();
    for vm in all.list(&ListParams::default()).await.unwrap().items {
        let (ns, name) = (vm.metadata.namespace.unwrap(), vm.metadata.name.unwrap());
        let uid = vm.metadata.uid.unwrap();
        let slot = sharding::slot_of(wasmctrl_core::shard::hash(&uid));
        let claimed: Vec<&String> = (claims.iter())
            .filter(|(_, s)| s.contains(slot))
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            claimed.len(),
            1,
            "{ns}/{name} (slot {slot}) claimed by {claimed:?}"
        );
        owners.insert((ns, name), claimed[0].clone());
    }
    assert_eq!(owners.len(), NAMESPACES * PER_NAMESPACE);
    owners
}

/// A host's JSON log's records of slots taken up.
struct TakenUp {
    at: jiff::Timestamp,
    /// Keys queued again.
    keys: u64,
    /// Of those, keys whose objects changed since the slots' last holder was seen.
    changed: u64,
}

/// A host's JSON log's records whose message starts with `prefix`.
fn records(log: &str, prefix: &str) -> Vec<Value> {
    (log.lines())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| (l["fields"]["message"].as_str()).is_some_and(|m| m.starts_with(prefix)))
        .collect()
}

fn at(record: &Value) -> jiff::Timestamp {
    record["timestamp"].as_str().unwrap().parse().unwrap()
}

fn slots_taken_up(log: &str) -> Vec<TakenUp> {
    (records(log, "took slots up").into_iter())
        .map(|l| TakenUp {
            at: at(&l),
            keys: l["fields"]["keys"].as_u64().unwrap(),
            changed: l["fields"]["changed"].as_u64().unwrap(),
        })
        .collect()
}

/// Waits until every VM in `which` reports `cpu` for its latest generation.
async fn wait_converged(client: &kube::Client, which: &[(String, String)], cpu: i64, secs: u64) {
    let wanted: BTreeSet<(String, String)> = which.iter().cloned().collect();
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
    common::eventually(
        secs,
        &format!("{} VMs at {cpu} CPUs", wanted.len()),
        || async {
            let list = all.list(&ListParams::default()).await.unwrap();
            let done = (list.items.iter())
                .filter(|vm| {
                    let key = (
                        vm.metadata.namespace.clone().unwrap(),
                        vm.metadata.name.clone().unwrap(),
                    );
                    let status = &vm.data["status"];
                    wanted.contains(&key)
                        && status["server"]["cpu"] == cpu
                        && status["observedGeneration"] == json!(vm.metadata.generation.unwrap())
                })
                .count();
            (done == wanted.len()).then_some(())
        },
    )
    .await;
}

/// Installs the VirtualMachine CRD and creates the VMs `keys` names, with their namespaces.
async fn create_vms(client: &kube::Client, keys: &[(String, String)]) {
    common::install_crd(
        client,
        common::yaml_objects("examples/virtualmachine/crd.yaml").remove(0),
    )
    .await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let names: BTreeSet<&String> = keys.iter().map(|(ns, _)| ns).collect();
    for name in names {
        let ns = json!({"metadata": {"name": name}});
        namespaces
            .create(&PostParams::default(), &serde_json::from_value(ns).unwrap())
            .await
            .unwrap();
    }
    let vm = common::yaml_objects("examples/virtualmachine/test-vm.yaml").remove(0);
    futures::stream::iter(keys.iter().cloned())
        .map(|(ns, name)| {
            let (api, mut vm) = (vms::api(client, &ns), vm.clone());
            vm["metadata"] = json!({"name": name, "namespace": ns});
            async move {
                api.create(&PostParams::default(), &serde_json::from_value(vm).unwrap())
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<()>()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_server_side_sharding_hosts_filter_their_caches_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory_with(dir.path(), &["--shard-selectors=false"]);
    let client = cluster.client().await;
    let plugins = plugin_dir(dir.path(), &[("virtualmachine", None)]);
    let keys = keys_in(20, 15);
    create_vms(&client, &keys).await;
    let hosts = [member(&cluster, &plugins), member(&cluster, &plugins)];
    for host in &hosts {
        wait_ready(host);
    }
    wait_converged(&client, &keys, 2, 60).await;
    let total = keys.len() as f64;
    let mut owned_sum = 0.0;
    for host in &hosts {
        wait_for(30, "the metrics to show two members", || {
            host.sample("wasmctrl_shard_members") == Some(2.0)
        });
        assert_eq!(host.sample("wasmctrl_shard_server_side"), Some(0.0));
        assert!(
            host.log()
                .contains("the API server does not shard lists and watches")
        );
        // Every object came over the wire; the cache kept only this host's.
        let owned = host.sample(OWNED).unwrap();
        assert_eq!(host.sample(CACHED), Some(owned));
        assert!(owned >= 0.3 * total, "{owned} of {total}");
        owned_sum += owned;
    }
    assert_eq!(owned_sum, total);
    set_cpu(&client, &keys, 3).await;
    wait_converged(&client, &keys, 3, 60).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_run_under_the_rbac_wasmctrl_rbac_sharding_generates() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    let client = cluster.client().await;
    let plugins = plugin_dir(dir.path(), &[("virtualmachine", None)]);
    let keys = keys_in(10, 4);
    create_vms(&client, &keys).await;
    cluster.apply_yaml(&common::process::rbac_yaml_with(&plugins, &["--sharding"]));
    let kubeconfig = cluster.service_account_kubeconfig("wasmctrl", "wasmctrl");
    let args = [
        &["--sharding", "--leader-election-namespace", "wasmctrl"],
        &TIMINGS[..],
    ]
    .concat();
    let hosts = [
        cluster.run_host_with(&kubeconfig, &plugins, &args, &[]),
        cluster.run_host_with(&kubeconfig, &plugins, &args, &[]),
    ];
    for host in &hosts {
        wait_ready(host);
    }
    wait_converged(&client, &keys, 2, 60).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "wasmctrl");
    let members = leases
        .list(&ListParams::default().labels("sharding.wasmctrl.dev/group=wasmctrl"))
        .await
        .unwrap();
    assert_eq!(members.items.len(), 2);
    for host in hosts {
        assert!(host.terminate().success());
    }
    let left = leases
        .list(&ListParams::default().labels("sharding.wasmctrl.dev/group=wasmctrl"))
        .await
        .unwrap();
    assert!(left.items.is_empty(), "each deleted its Lease on leaving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_share_the_keys_and_hand_them_over_without_overlapping_reconciles() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    let client = cluster.client().await;
    let plugins = plugin_dir(dir.path(), &[("virtualmachine", None)]);
    let keys = keys();
    create_vms(&client, &keys).await;

    // Three hosts: each reconciles and caches about a third.
    let mut hosts: Vec<Option<Process>> =
        (0..3).map(|_| Some(member(&cluster, &plugins))).collect();
    let mut leases: Vec<String> = hosts
        .iter()
        .map(|h| lease_of(h.as_ref().unwrap()))
        .collect();
    for host in hosts.iter().flatten() {
        wait_ready(host);
    }
    wait_converged(&client, &keys, 2, 120).await;
    let total = keys.len() as f64;
    let mut owned_sum = 0.0;
    for (i, host) in hosts.iter().flatten().enumerate() {
        wait_for(30, "the metrics to show three members", || {
            host.sample("wasmctrl_shard_members") == Some(3.0)
        });
        let cached = host.sample(CACHED).unwrap();
        let owned = host.sample(OWNED).unwrap();
        println!("host {i}: {owned} keys owned, {cached} VMs cached of {total}");
        assert!(
            owned >= 0.2 * total,
            "host {i} owns {owned} of {total} keys"
        );
        assert!(cached <= 0.4 * total, "host {i} caches {cached} of {total}");
        assert_eq!(host.sample("wasmctrl_shard_server_side"), Some(1.0));
        owned_sum += owned;
    }
    assert_eq!(owned_sum, total, "every key owned once");
    let before_kill = owners(&client, &leases).await;

    // SIGKILL: its Lease stays behind; the others take its slots once it has run out.
    let victim = leases[0].clone();
    let orphaned: Vec<(String, String)> = (before_kill.iter())
        .filter(|(_, owner)| **owner == victim)
        .map(|(key, _)| key.clone())
        .collect();
    let killed_at = jiff::Timestamp::now();
    let killed = Instant::now();
    hosts[0].take().unwrap().kill();
    set_cpu(&client, &orphaned, 3).await;
    let patched_at = jiff::Timestamp::now();
    wait_converged(&client, &orphaned, 3, 60).await;
    let took = killed.elapsed();
    println!(
        "{} keys of the SIGKILLed host converged elsewhere {took:?} after the kill (Lease {LEASE} s, retry {RETRY} s)",
        orphaned.len()
    );
    assert!(
        took <= Duration::from_secs(LEASE + RETRY + 5),
        "the killed host's keys took {took:?}"
    );
    // When the survivors took the killed host's slots up, from their logs.
    let taken: Vec<TakenUp> = (hosts.iter().flatten())
        .flat_map(|h| slots_taken_up(&h.log()))
        .filter(|t| t.at > killed_at)
        .collect();
    let took_up = taken
        .iter()
        .map(|t| t.at)
        .max()
        .expect("the survivors took slots up");
    // Every key of the killed host was queued again; those patched after the kill first, as
    // changed since it was last seen (all of them, when the patches landed before the take-up).
    let requeued: u64 = taken.iter().map(|t| t.keys).sum();
    let changed: u64 = taken.iter().map(|t| t.changed).sum();
    assert_eq!(requeued, orphaned.len() as u64, "keys queued on take-up");
    println!("{changed} of them queued first, as changed since the killed host was last seen");
    if taken.iter().all(|t| t.at > patched_at) {
        assert_eq!(
            changed, requeued,
            "keys patched after the kill count as changed"
        );
    }
    // Each survivor that took slots up had listed them ahead, once the killed host's Lease
    // went unrenewed for the renew deadline, before it ran out.
    for host in hosts.iter().flatten() {
        let log = host.log();
        let Some(first) = (slots_taken_up(&log).iter().map(|t| t.at)).find(|t| *t > killed_at)
        else {
            continue;
        };
        let foreseen = records(&log, "members overdue");
        assert!(
            foreseen.iter().any(|r| at(r) > killed_at && at(r) < first),
            "no slots listed ahead before the take-up at {first}"
        );
    }
    let takeover = std::time::Duration::try_from(took_up.duration_since(killed_at)).unwrap();
    println!("the survivors took the killed host's slots up {takeover:?} after the kill");
    // The Lease runs out LEASE s after its last renewal, at most a retry period before the
    // kill; the retry period is the time the survivors have to claim the slots and list their
    // objects. Two more seconds for a loaded machine: the figure is printed above.
    assert!(
        takeover <= Duration::from_secs(LEASE + RETRY + 2),
        "took {takeover:?}, well over the Lease duration and a retry period"
    );
    let live: Vec<String> = leases[1..].to_vec();
    let after_kill = owners(&client, &live).await;

    // A fourth host joins: it takes about a quarter of the keys, and no more than 35% move.
    hosts.push(Some(member(&cluster, &plugins)));
    leases.push(lease_of(hosts[3].as_ref().unwrap()));
    wait_ready(hosts[3].as_ref().unwrap());
    let joined: Vec<String> = leases[1..].to_vec();
    let after_join = common::eventually(60, "the slots to settle on three members", || async {
        let api: Api<Lease> = Api::namespaced(client.clone(), "default");
        let claimed: usize = (joined.iter())
            .map(|l| async { api.get(l).await.unwrap() })
            .collect::<futures::stream::FuturesOrdered<_>>()
            .map(|lease| {
                let slots = &lease.metadata.annotations.unwrap()["sharding.wasmctrl.dev/slots"];
                SlotSet::parse(slots).unwrap().len()
            })
            .collect::<Vec<_>>()
            .await
            .iter()
            .sum();
        if claimed != sharding::SLOTS {
            return None;
        }
        Some(owners(&client, &joined).await)
    })
    .await;
    let moved = (keys.iter())
        .filter(|k| after_kill[*k] != after_join[*k])
        .count() as f64
        / total;
    println!(
        "a fourth host joined: {:.1}% of the keys moved",
        moved * 100.0
    );
    assert!(moved <= 0.35, "{:.1}% of the keys moved", moved * 100.0);
    assert!(moved > 0.0, "the new host took some keys");
    set_cpu(&client, &keys, 4).await;
    wait_converged(&client, &keys, 4, 120).await;

    // SIGTERM: the stopped host finishes, deletes its Lease, and the others take over at once.
    let stopped = hosts[1].take().unwrap();
    let status = stopped.terminate();
    assert!(status.success(), "exit {status}");
    set_cpu(&client, &keys, 5).await;
    wait_converged(&client, &keys, 5, 120).await;

    // Every host stops gracefully, so every reconcile has its end record; then no key has two
    // hosts' reconciles overlapping.
    for host in hosts.iter_mut().filter_map(Option::take) {
        let status = host.terminate();
        assert!(status.success(), "exit {status}");
    }
    let spans = (1..=4)
        .flat_map(|n| {
            let log = std::fs::read_to_string(dir.path().join(format!("host-{n}.log"))).unwrap();
            reconciles::spans(n - 1, &log, (n == 1).then_some(killed_at))
        })
        .collect();
    let by_key = reconciles::assert_no_overlap(spans);
    assert_eq!(by_key.len(), keys.len(), "every key reconciled");
    let by_host = (by_key.values().flatten()).fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.host).or_insert(0usize) += 1;
        m
    });
    println!("reconciles by host: {by_host:?}");
    assert_eq!(by_host.len(), 4, "all four hosts reconciled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_cannot_renew_stops_before_its_lease_runs_out_and_sends_nothing_after() {
    use std::sync::Arc;
    use wasmctrl::apiserver::ApiServer;
    use wasmctrl::observe::metrics::Metrics;
    use wasmctrl::reconcile::controller::{Manager, Tuning};
    use wasmctrl::replicas::sharding::Shards;
    use wasmctrl::runtime::Runtime;

    let server = ApiServer::new().unwrap();
    let client = server.client();
    common::things::install(&client).await;
    let api = common::things::api(&client);
    let config = common::short_lease("fenced");
    let shards = Shards::new(wasmctrl_core::shard::Field::Uid);
    let (mut membership, member) =
        wasmctrl::replicas::membership::join(client.clone(), config, shards.clone());
    let host = Arc::new(Manager::sharded(
        client.clone(),
        Arc::new(Metrics::new()),
        membership.clone(),
        shards.clone(),
    ));
    let runtime = Runtime::new(wasmctrl::runtime::Config::default()).unwrap();
    let plugin = runtime
        .load("trivial.wasm", &common::plugin_bytes("trivial"), "")
        .unwrap();
    host.upsert(Arc::new(plugin), Tuning::default()).await;
    let running = member.start(host.clone());
    assert_eq!(membership.changed().await, Some(true));
    common::eventually(30, "the member to take up every slot", || async {
        (shards.settled() && shards.active().len() == sharding::SLOTS).then_some(())
    })
    .await;
    common::things::create(&api, "a", json!({})).await;
    common::eventually(30, "a reconciled", || async {
        let thing = api.get("a").await.unwrap();
        (thing.data["status"]["replicas"] == 1).then_some(())
    })
    .await;

    // Every renewal fails from now on.
    server
        .faults()
        .fail(Some("update"), Some("leases"), 500, u32::MAX);
    assert_eq!(membership.changed().await, Some(false));
    let stopped = k8s_openapi::jiff::Timestamp::now();
    assert!(!membership.fence().holds());
    assert!(shards.active().is_empty(), "no slot is reconciled");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let lease = (leases.list(&ListParams::default().labels("sharding.wasmctrl.dev/group=fenced")))
        .await
        .unwrap()
        .items
        .remove(0);
    let spec = lease.spec.unwrap();
    let runs_out = spec.renew_time.unwrap().0
        + k8s_openapi::jiff::SignedDuration::from_secs(spec.lease_duration_seconds.unwrap().into());
    assert!(
        stopped < runs_out,
        "stopped at {stopped}, after the lease ran out at {runs_out}"
    );

    // A change while it is out is queued, not reconciled, and nothing is sent for it.
    let sent_before = server.requests().len();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    common::eventually(30, "the change to be queued", || async {
        host.refresh_metrics();
        (host.metrics().encode(false))
            .contains("workqueue_depth{name=\"trivial\"} 1")
            .then_some(())
    })
    .await;
    let writes: Vec<_> = server.requests()[sent_before..]
        .iter()
        .filter(|r| r.resource == "things" && !["get", "list", "watch"].contains(&r.verb.as_str()))
        .map(|r| format!("{} {}/{}", r.verb, r.resource, r.subresource))
        .collect();
    assert_eq!(writes, ["patch things/"], "only the test's own patch");

    // Renewals work again: it rejoins with no claims, takes its slots up again, catches up.
    server.faults().reset();
    assert_eq!(membership.changed().await, Some(true));
    common::eventually(30, "a reconciled again", || async {
        let thing = api.get("a").await.unwrap();
        (thing.data["status"]["replicas"] == 5).then_some(())
    })
    .await;
    host.shutdown(Duration::from_secs(5)).await;
    running.leave().await;
    let left = leases
        .list(&ListParams::default().labels("sharding.wasmctrl.dev/group=fenced"))
        .await
        .unwrap();
    assert!(left.items.is_empty(), "the Lease is deleted on leaving");
}

/// Times a name is deleted and created again in the test below.
const FLIPS: usize = 20;

/// The hostile plugin as `slow`: every reconcile, `Gone` included, spins long enough (a
/// hundred milliseconds or so) for another host's reconcile of the same name to start meanwhile.
const SLOW: &str = "[settings]\nmode = \"spin\"\niterations = 100000000\nname = \"slow\"\n";

/// Sharding by uid places an object deleted and created again under the same name in another
/// slot, most likely another host's: the old object's last reconcile (`Gone`) runs on the
/// host whose cache saw the deletion while the new object's first one (`Apply`) runs on the
/// other. A single host runs them one after the other on one key; so must two. Each flip
/// deletes the name and creates it again at once, while the old object's `Gone` is still
/// queued or running; every new object must be reconciled, and no two reconciles of the name
/// may overlap across the hosts' logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_deleted_and_created_again_is_reconciled_by_one_host_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    let client = cluster.client().await;
    common::things::install(&client).await;
    let plugins = plugin_dir(dir.path(), &[("hostile", Some(SLOW))]);
    let args = [
        &["--sharding", "--shard-key", "uid", "--log-format", "json"],
        &TIMINGS[..],
    ]
    .concat();
    let hosts = [
        cluster.run_host(&plugins, &args, &[]),
        cluster.run_host(&plugins, &args, &[]),
    ];
    for host in &hosts {
        wait_ready(host);
        wait_for(30, "the metrics to show two members", || {
            host.sample("wasmctrl_shard_members") == Some(2.0)
        });
    }
    let api = common::things::api(&client);
    let mut uids = Vec::new();
    for flip in 0..=FLIPS {
        if flip > 0 {
            api.delete("flip", &Default::default()).await.unwrap();
            // Deleted at once (no finalizers): the name is free.
            common::eventually(30, "flip deleted", || async {
                api.get_opt("flip").await.unwrap().is_none().then_some(())
            })
            .await;
        }
        common::things::create(&api, "flip", json!({})).await;
        let uid = api.get("flip").await.unwrap().metadata.uid.unwrap();
        // The new object's own reconcile: its status, under its uid.
        common::eventually(30, &format!("flip {flip} reconciled"), || async {
            let thing = api.get_opt("flip").await.unwrap()?;
            (thing.metadata.uid.as_deref() == Some(uid.as_str())
                && thing.data["status"]["observedGeneration"] == 1)
                .then_some(())
        })
        .await;
        uids.push(uid);
    }
    let slots: BTreeSet<usize> = (uids.iter())
        .map(|u| sharding::slot_of(wasmctrl_core::shard::hash(u)))
        .collect();
    println!("{} objects in {} slots", uids.len(), slots.len());
    api.delete("flip", &Default::default()).await.unwrap();
    for host in hosts {
        let status = host.terminate();
        assert!(status.success(), "exit {status}");
    }
    let spans: Vec<reconciles::Span> = (1..=2)
        .flat_map(|n| {
            let log = std::fs::read_to_string(dir.path().join(format!("host-{n}.log"))).unwrap();
            reconciles::spans(n - 1, &log, None)
        })
        .filter(|s| s.key == "default/flip")
        .collect();
    let by_host = (spans.iter()).fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.host).or_insert(0usize) += 1;
        m
    });
    // The old objects' `Gone`s: each time the name moved to the other host, the host it left
    // ran the old object's `Gone` first (unless it found the name back and folded it into
    // the new object's reconciles). A host that holds both objects runs one reconcile for a
    // deletion and creation that arrive while it is busy with the key, as a single host does.
    let mut runs = Vec::new();
    let mut folded = 0;
    for n in 1..=2 {
        let log = std::fs::read_to_string(dir.path().join(format!("host-{n}.log"))).unwrap();
        runs.extend(
            (records(&log, "reconciling").into_iter())
                .filter(|r| r["span"]["object.key"] == "default/flip")
                .map(|r| (at(&r), n, r["fields"]["gone"] == true)),
        );
        folded += records(&log, "not reconciling the deleted object").len();
    }
    runs.sort_by_key(|(at, ..)| *at);
    let gones = runs.iter().filter(|(.., gone)| *gone).count();
    let moves: Vec<bool> = (runs.windows(2))
        .filter(|w| w[0].1 != w[1].1)
        .map(|w| w[0].2)
        .collect();
    let overlapping = reconciles::overlapping(&spans);
    println!(
        "reconciles of default/flip by host: {by_host:?} ({gones} of deleted objects, \
         {folded} deletions folded into the next object's); the name moved between the hosts \
         {} times; {overlapping} overlapping pairs",
        moves.len()
    );
    assert_eq!(by_host.len(), 2, "both hosts reconciled the name");
    assert!(
        folded > 0 || moves.iter().all(|gone| *gone),
        "a host took the name over without the other's Gone first: {runs:?}"
    );
    reconciles::assert_no_overlap(spans);
}
