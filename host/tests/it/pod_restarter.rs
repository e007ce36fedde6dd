//! The pod-restarter plugin through the real binaries: `wasmctrl apiserver` (its fake Nodes and
//! kubelet stand-in running the Pods, its Deployment controller rolling `backend` out) and
//! `wasmctrl run` as processes, kubectl as the user. Each Pod is held in `ContainerCreating`
//! (annotation `kubelet.wasmctrl.dev/start-seconds`) until the test lets it start. Every write
//! the plugin makes to the Deployment is counted through a watch, so a second restart for the
//! same Pod would show even within the same second; the host is restarted in between to show
//! the record survives it. `wasmctrl test` shows the same reconcile offline on the examples.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::io::BufReader;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use common::process::{Cluster, assert_quiet, plugin_dir, wait_for, wasmctrl_test_report};
use serde_json::{Value, json};

/// Non-default settings, so the test proves they are honoured.
const CONFIG: &str = r#"
[settings]
labelSelector = "role=web"
namespace = "team-a"
deployment = "backend"
"#;

const HANDLED: &str = "pod-restarter.wasmctrl.io/handled-pods";
const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";

/// Every change to one object as `kubectl get --watch` reports it: the first event is the object
/// when the watch began, each later one is one write that changed it. A watch delivers every
/// such write, even several within a second; a patch that changes nothing restarts nothing and
/// makes no event.
struct Changes {
    kubectl: Mutex<Child>,
    events: Arc<Mutex<Vec<Value>>>,
}

impl Changes {
    fn watch(cluster: &Cluster, namespace: &str, resource: &str) -> Self {
        let mut kubectl = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&cluster.kubeconfig)
            .args(["get", resource, "-n", namespace])
            .args(["--watch", "--output-watch-events", "-o", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl is installed (make deps)");
        let stdout = kubectl.stdout.take().unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        std::thread::spawn(move || {
            for event in
                serde_json::Deserializer::from_reader(BufReader::new(stdout)).into_iter::<Value>()
            {
                let event =
                    event.unwrap_or_else(|e| json!({"type": "UNPARSABLE", "error": e.to_string()}));
                sink.lock().unwrap().push(event);
            }
        });
        let changes = Self {
            kubectl: Mutex::new(kubectl),
            events,
        };
        wait_for(30, "the watch's initial ADDED event", || {
            !changes.events.lock().unwrap().is_empty()
        });
        assert_eq!(changes.events.lock().unwrap()[0]["type"], "ADDED");
        changes
    }

    /// The object after each write of the plugin's since the watch began (the Deployment
    /// controller's writes, of the status and the revision, change neither the record nor the
    /// template).
    fn writes(&self) -> Vec<Value> {
        // A watch that ended would make "no more writes" hold vacuously.
        let ended = self.kubectl.lock().unwrap().try_wait().unwrap();
        assert!(ended.is_none(), "the watch ended: {ended:?}");
        let events = self.events.lock().unwrap();
        let mut last = plugin_state(&events[0]["object"]);
        let mut writes = Vec::new();
        for e in &events[1..] {
            assert_eq!(e["type"], "MODIFIED", "unexpected watch event {e}");
            let state = plugin_state(&e["object"]);
            if state != last {
                writes.push(e["object"].clone());
                last = state;
            }
        }
        writes
    }

    /// Waits for write number `n` and returns the object it produced.
    fn wait_for_write(&self, n: usize) -> Value {
        wait_for(30, &format!("write {n} to the Deployment"), || {
            self.writes().len() >= n
        });
        let writes = self.writes();
        assert_eq!(writes.len(), n, "more writes than expected: {writes:#?}");
        writes[n - 1].clone()
    }
}

impl Drop for Changes {
    fn drop(&mut self) {
        let kubectl = self.kubectl.get_mut().unwrap_or_else(|p| p.into_inner());
        let _ = kubectl.kill();
        let _ = kubectl.wait();
    }
}

/// What the plugin writes to a Deployment: its record and the Pod template (which a restart
/// annotates).
fn plugin_state(deployment: &Value) -> Value {
    json!([
        deployment["metadata"]["annotations"][HANDLED],
        deployment["spec"]["template"]
    ])
}

/// The handled Pod UIDs the Deployment records.
fn record(deployment: &Value) -> Vec<String> {
    let raw = deployment["metadata"]["annotations"][HANDLED]
        .as_str()
        .unwrap_or_else(|| panic!("no {HANDLED} on {deployment}"));
    serde_json::from_str(raw).unwrap()
}

fn sorted(uids: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = uids.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

fn apply(cluster: &Cluster, dir: &Path, name: &str, object: &Value) {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, object.to_string()).unwrap();
    cluster.kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
}

/// The annotation holding a Pod's containers in `ContainerCreating` for that many seconds.
const START_SECONDS: &str = "kubelet.wasmctrl.dev/start-seconds";

/// Creates a Pod labelled `role=<role>`, which the kubelet stand-in holds in `Pending` (its
/// containers being created) until [`run_pod`]; returns its UID.
fn create_pod(cluster: &Cluster, dir: &Path, namespace: &str, name: &str, role: &str) -> String {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"role": role},
            "annotations": {START_SECONDS: "3600", "kubelet.wasmctrl.dev/ready": "false"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
    });
    apply(cluster, dir, &format!("pod-{namespace}-{name}"), &pod);
    let pod = cluster.get_json(&["pod", name, "-n", namespace]).unwrap();
    pod["metadata"]["uid"].as_str().unwrap().to_string()
}

/// Lets the kubelet stand-in start the Pod's containers: it runs (not yet Ready).
fn run_pod(cluster: &Cluster, namespace: &str, name: &str) {
    let start = format!("{START_SECONDS}=0");
    cluster.kubectl_ok(&[
        "annotate",
        "pod",
        name,
        "-n",
        namespace,
        &start,
        "--overwrite",
    ]);
}

/// What the plugin has written to the Deployment (its record and the template).
fn version(cluster: &Cluster) -> Value {
    plugin_state(
        &cluster
            .get_json(&["deployment", "backend", "-n", "team-a"])
            .unwrap(),
    )
}

/// Relabels a Pod (no new Pod, so no restart) and waits for the host to reconcile it.
fn touch_and_wait(cluster: &Cluster, host: &common::process::Process, pod: &str, label: &str) {
    let key = format!("team-a/{pod}");
    let before = host.reconciles(&key);
    cluster.kubectl_ok(&["label", "pod", pod, "-n", "team-a", label, "--overwrite"]);
    host.wait_reconciled(&key, before);
}

fn wait_until_started(host: &common::process::Process) {
    wait_for(60, "the host to start pod-restarter", || {
        host.log()
            .lines()
            .any(|l| l.contains("plugin started") && l.contains("pod-restarter"))
    });
}

#[test]
fn each_new_running_pod_restarts_the_deployment_exactly_once_across_host_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start_with(dir.path(), &["--pods=auto"]);
    let plugins = plugin_dir(dir.path(), &[("pod-restarter", Some(CONFIG))]);

    cluster.kubectl_ok(&["create", "namespace", "team-a"]);
    let backend = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "backend", "namespace": "team-a"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "backend"}},
            "template": {
                "metadata": {"labels": {"app": "backend"}},
                "spec": {"containers": [{"name": "backend", "image": "busybox:1.36"}]},
            },
        },
    });
    // `create`, not `apply`: no last-applied annotation, so the first write has to create the
    // annotations maps (behind a `test` that they are still absent) and later ones extend them.
    let file = dir.path().join("backend.json");
    std::fs::write(&file, backend.to_string()).unwrap();
    cluster.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let changes = Changes::watch(&cluster, "team-a", "deployment/backend");
    let initial = changes.events.lock().unwrap()[0]["object"].clone();
    assert!(
        initial["spec"]["template"]["metadata"]["annotations"].is_null(),
        "{initial}"
    );
    assert!(
        initial["metadata"]["annotations"][HANDLED].is_null(),
        "{initial}"
    );

    let host = cluster.run_host_rbac(&plugins, &[], &[]);
    wait_until_started(&host);

    // A matching Pod that is still Pending (scheduled, its containers being created): nothing.
    // (Each "nothing" below is checked once the host has reconciled the change, against the
    // Deployment as the server has it.)
    let unchanged = version(&cluster);
    let web1 = create_pod(&cluster, dir.path(), "team-a", "web-1", "web");
    wait_for(
        30,
        "web-1 scheduled and its containers being created",
        || {
            cluster
                .get_json(&["pod", "web-1", "-n", "team-a"])
                .is_some_and(|p| {
                    p["status"]["phase"] == "Pending"
                        && p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                            == "ContainerCreating"
                })
        },
    );
    touch_and_wait(&cluster, &host, "web-1", "version=1");
    assert_eq!(version(&cluster), unchanged, "restarted for a Pending Pod");

    // Running: exactly one restart, recording the Pod in the same write.
    run_pod(&cluster, "team-a", "web-1");
    let first = changes.wait_for_write(1);
    assert_eq!(record(&first), sorted(&[&web1]));
    let restarted_at = first["spec"]["template"]["metadata"]["annotations"][RESTARTED_AT].clone();
    assert!(restarted_at.is_string(), "{first}");
    // The template's other metadata is untouched.
    assert_eq!(
        first["spec"]["template"]["metadata"]["labels"],
        json!({"app": "backend"})
    );

    // More changes to the same Pod (labels, status: it becomes Ready) are not new Pods.
    let unchanged = version(&cluster);
    touch_and_wait(&cluster, &host, "web-1", "version=2");
    cluster.kubectl_ok(&[
        "annotate",
        "pod",
        "web-1",
        "-n",
        "team-a",
        "kubelet.wasmctrl.dev/ready=true",
        "--overwrite",
    ]);
    cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/web-1",
        "-n",
        "team-a",
        "--timeout=30s",
    ]);
    // Reconciled after the change to Ready (the host takes a Pod's changes in order).
    touch_and_wait(&cluster, &host, "web-1", "version=3");
    assert_eq!(
        version(&cluster),
        unchanged,
        "restarted again for an old Pod"
    );
    assert_eq!(changes.writes().len(), 1);

    // A new host process starts from nothing but the cluster: the record keeps it from
    // restarting for web-1 again.
    let status = host.terminate();
    let log1 = std::fs::read_to_string(dir.path().join("host-1.log")).unwrap();
    assert!(status.success(), "exit {status}; log:\n{log1}");
    assert_quiet(&log1, "first host's");
    let unchanged = version(&cluster);
    let host = cluster.run_host_rbac(&plugins, &[], &[]);
    wait_until_started(&host);
    host.wait_reconciled("team-a/web-1", 0);
    assert_eq!(
        version(&cluster),
        unchanged,
        "restarted again after the host restarted"
    );

    // A second new matching Pod: exactly one more restart, both Pods recorded.
    let web2 = create_pod(&cluster, dir.path(), "team-a", "web-2", "web");
    run_pod(&cluster, "team-a", "web-2");
    let second = changes.wait_for_write(2);
    assert_eq!(record(&second), sorted(&[&web1, &web2]));

    // Pods outside the selector or the namespace: nothing. They are never even queued; a
    // change to a matching Pod made after them, once reconciled, shows the host is past them.
    let unchanged = version(&cluster);
    create_pod(&cluster, dir.path(), "team-a", "db-1", "db");
    run_pod(&cluster, "team-a", "db-1");
    create_pod(&cluster, dir.path(), "default", "web-1", "web");
    run_pod(&cluster, "default", "web-1");
    touch_and_wait(&cluster, &host, "web-2", "seen=after-db-1");
    assert_eq!(
        version(&cluster),
        unchanged,
        "restarted for a Pod the settings exclude"
    );
    assert_eq!(host.reconciles("team-a/db-1"), 0);
    assert_eq!(host.reconciles("default/web-1"), 0);

    // A Pod that is gone drops out of the record on the next write.
    cluster.kubectl_ok(&["delete", "pod", "web-1", "-n", "team-a", "--wait=true"]);
    let web3 = create_pod(&cluster, dir.path(), "team-a", "web-3", "web");
    run_pod(&cluster, "team-a", "web-3");
    let third = changes.wait_for_write(3);
    assert_eq!(record(&third), sorted(&[&web2, &web3]));

    // Two Pods running at the same moment: one restart each, neither record lost (whichever
    // patch loses the race fails its `test` and is decided again).
    let web4 = create_pod(&cluster, dir.path(), "team-a", "web-4", "web");
    let web5 = create_pod(&cluster, dir.path(), "team-a", "web-5", "web");
    std::thread::scope(|s| {
        s.spawn(|| run_pod(&cluster, "team-a", "web-4"));
        s.spawn(|| run_pod(&cluster, "team-a", "web-5"));
    });
    changes.wait_for_write(5);
    // Whichever lost the race was decided again; a later change to each Pod is reconciled after
    // that, and writes nothing more.
    let settled = version(&cluster);
    touch_and_wait(&cluster, &host, "web-4", "seen=after-race");
    touch_and_wait(&cluster, &host, "web-5", "seen=after-race");
    assert_eq!(version(&cluster), settled);
    let writes = changes.writes();
    assert_eq!(writes.len(), 5, "{writes:#?}");
    assert_eq!(record(&writes[4]), sorted(&[&web2, &web3, &web4, &web5]));

    // Each restart told the Pod about it.
    wait_for(30, "a DeploymentRestarted event per new Pod", || {
        let Some(events) = cluster.get_json(&["events.events.k8s.io", "-n", "team-a"]) else {
            return false;
        };
        let mut regarding: Vec<String> = events["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["reason"] == "DeploymentRestarted")
            .map(|e| {
                e["regarding"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        regarding.sort();
        regarding == ["web-1", "web-2", "web-3", "web-4", "web-5"]
    });

    assert_eq!(changes.writes().len(), 5);
    host.assert_quiet("second host's");
    let status = host.terminate();
    assert!(status.success(), "exit {status}");
}

#[test]
fn wasmctrl_test_shows_the_restart_patch_for_the_examples() {
    let plugin = common::plugin_path("pod-restarter").display().to_string();
    let pod = "examples/pod-restarter/nginx-pod.yaml";
    let deployment = "examples/pod-restarter/tools-deployment.yaml";

    // The sample Pod as written is Pending: nothing to do.
    let pending = wasmctrl_test_report(&[&plugin, "--object", pod, "--cache", deployment]);
    assert_eq!(pending["plugin"], "pod-restarter");
    assert_eq!(pending["key"], "default/nginx");
    assert_eq!(pending["result"], "ok");
    assert_eq!(pending["actions"], json!([]));

    // Once a kubelet has it running (and the API server has given it a UID): one restart.
    let dir = tempfile::tempdir().unwrap();
    let mut running = common::yaml_objects(pod).remove(0);
    running["metadata"]["uid"] = json!("6b1c2f3e-0000-4000-8000-000000000001");
    running["status"] = json!({"phase": "Running"});
    let running_file = dir.path().join("running.json");
    std::fs::write(&running_file, running.to_string()).unwrap();
    let now = "2026-11-22T10:00:00Z";
    let out = wasmctrl_test_report(&[
        &plugin,
        "--object",
        running_file.to_str().unwrap(),
        "--cache",
        deployment,
        "--now",
        now,
    ]);
    let actions = out["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 2, "{out:#}");
    assert_eq!(actions[0]["action"], "jsonPatch");
    assert_eq!(
        actions[0]["target"],
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "tools"})
    );
    assert_eq!(
        actions[0]["patch"],
        json!([
            {"op": "test", "path": "/metadata/annotations", "value": null},
            {"op": "add", "path": "/metadata/annotations",
                "value": {HANDLED: "[\"6b1c2f3e-0000-4000-8000-000000000001\"]"}},
            {"op": "test", "path": "/spec/template/metadata/annotations", "value": null},
            {"op": "add", "path": "/spec/template/metadata/annotations",
                "value": {RESTARTED_AT: now}},
        ])
    );
    assert_eq!(actions[1]["action"], "event");
    assert_eq!(actions[1]["reason"], "DeploymentRestarted");
}
