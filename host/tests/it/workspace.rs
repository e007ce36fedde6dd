//! The workspace plugin through the real binary: `wasmctrl apiserver` (its scheduler and kubelet
//! stand-in running the Pods, each held in `ContainerCreating` until the test lets it start, as
//! a slow image pull would) and `wasmctrl run` as processes, kubectl as the user. A Workspace
//! gets an owned IDE Pod, reports Ready once the Pod runs, has its Pod replaced when its spec
//! changes and takes it along when deleted; `wasmctrl test` shows the same reconcile offline.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::process::{Cluster, plugin_dir, wait_for, wasmctrl_test_report};
use serde_json::{Value, json};

/// Polls `get` until it yields a value, failing the test after 30 s.
fn poll<T>(what: &str, mut get: impl FnMut() -> Option<T>) -> T {
    let mut found = None;
    wait_for(30, what, || {
        found = get();
        found.is_some()
    });
    found.unwrap()
}

fn ready_condition(ws: &Value) -> Value {
    ws["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap_or(Value::Null)
}

fn controller_owner(pod: &Value) -> Value {
    pod["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["controller"] == true)
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn a_workspace_runs_in_an_owned_pod_that_follows_its_spec_and_is_collected_with_it() {
    let dir = tempfile::tempdir().unwrap();
    // Containers take an hour to start unless a Pod's annotation says otherwise.
    let cluster = Cluster::start_with(dir.path(), &["--pods=auto", "--pod-start-seconds=3600"]);
    let plugins = plugin_dir(dir.path(), &[("workspace", None)]);
    let host = cluster.run_host_rbac(&plugins, &[], &[]);

    cluster.kubectl_ok(&["apply", "-f", "examples/workspace/crd.yaml"]);
    wait_for(30, "the Workspace CRD to be served", || {
        cluster.kubectl(&["get", "ws"]).0
    });
    cluster.kubectl_ok(&["apply", "-f", "examples/workspace/sample.yaml"]);
    let uid = cluster.get_json(&["workspace", "alice"]).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();

    // The Pod: image, port, limits, pull policy, labels and the Workspace as its controller.
    let pod = poll("the workspace's Pod", || {
        cluster.get_json(&["pod", "alice"])
    });
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["name"], "ide");
    assert_eq!(container["image"], "codercom/code-server:4.8.3");
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        container["ports"][0],
        json!({"name": "http", "containerPort": 8080, "protocol": "TCP"})
    );
    assert_eq!(
        container["resources"]["limits"],
        json!({"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2Gi"})
    );
    assert_eq!(
        pod["metadata"]["labels"]["ide.wasmctrl.io/workspace"],
        "alice"
    );
    assert_eq!(
        pod["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "wasmctrl"
    );
    let owner = controller_owner(&pod);
    assert_eq!(owner["uid"], uid.as_str(), "{pod}");
    assert_eq!(owner["kind"], "Workspace");
    assert_eq!(owner["apiVersion"], "ide.wasmctrl.io/v1alpha1");
    assert_eq!(owner["name"], "alice");
    let first_pod_uid = pod["metadata"]["uid"].clone();

    wait_for(30, "status Pending with Ready False (PodPending)", || {
        cluster.get_json(&["workspace", "alice"]).is_some_and(|ws| {
            ws["status"]["phase"] == "Pending" && ready_condition(&ws)["reason"] == "PodPending"
        })
    });
    let (ready, _) = cluster.kubectl(&[
        "wait",
        "--for=condition=Ready",
        "workspace/alice",
        "--timeout=1s",
    ]);
    assert!(!ready, "Ready before the Pod runs");

    // The Pod was scheduled to a fake Node; its containers start once the test lets them.
    let scheduled = poll("alice scheduled", || {
        cluster
            .get_json(&["pod", "alice"])
            .filter(|p| p["spec"]["nodeName"].is_string())
    });
    assert_eq!(scheduled["status"]["phase"], "Pending", "{scheduled}");
    let node = scheduled["spec"]["nodeName"].as_str().unwrap().to_string();
    assert!(node.starts_with("wasmctrl-node-"), "{node}");
    cluster.kubectl_ok(&[
        "annotate",
        "pod",
        "alice",
        "kubelet.wasmctrl.dev/start-seconds=0",
    ]);
    cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "workspace/alice",
        "--timeout=30s",
    ]);
    let running = cluster.get_json(&["pod", "alice"]).unwrap();
    assert_eq!(running["status"]["phase"], "Running", "{running}");
    let ip = running["status"]["podIP"].as_str().unwrap().to_string();
    let ws = cluster.get_json(&["workspace", "alice"]).unwrap();
    assert_eq!(ws["status"]["phase"], "Running", "{ws}");
    assert_eq!(ws["status"]["podIP"], ip.as_str());
    assert_eq!(ws["status"]["nodeName"], node.as_str());
    assert_eq!(ws["status"]["observedGeneration"], 1);
    assert_eq!(ready_condition(&ws)["reason"], "PodRunning");
    let table = cluster.kubectl_ok(&["get", "ws", "alice"]);
    for column in ["PHASE", "POD IP", "NODE", "Running", &ip, &node] {
        assert!(table.contains(column), "{column} missing from:\n{table}");
    }

    // A new image cannot be patched into a Pod: the Pod is replaced.
    cluster.kubectl_ok(&[
        "patch",
        "ws",
        "alice",
        "--type=merge",
        "-p",
        r#"{"spec":{"image":"codercom/code-server:4.9.0"}}"#,
    ]);
    let pod = poll("a Pod with the new image", || {
        cluster
            .get_json(&["pod", "alice"])
            .filter(|p| p["spec"]["containers"][0]["image"] == "codercom/code-server:4.9.0")
    });
    assert_ne!(
        pod["metadata"]["uid"], first_pod_uid,
        "the Pod was re-created"
    );
    assert_eq!(controller_owner(&pod)["uid"], uid.as_str());
    wait_for(30, "status of the new Pod for generation 2", || {
        cluster.get_json(&["workspace", "alice"]).is_some_and(|ws| {
            let ready = ready_condition(&ws);
            ws["status"]["observedGeneration"] == 2
                && ws["status"]["phase"] == "Pending"
                && ws["status"]["podIP"].is_null()
                && ready["status"] == "False"
                && ready["reason"] == "PodPending"
        })
    });

    // Deleting the Workspace takes its Pod along (garbage collection of the owned child).
    let before = host.reconciles("default/alice");
    cluster.kubectl_ok(&["delete", "workspace", "alice", "--wait=true"]);
    wait_for(30, "the Pod to be garbage collected", || {
        let (ok, out) = cluster.kubectl(&["get", "pod", "alice"]);
        !ok && out.contains("NotFound")
    });
    // The host has seen the deletions (a reconcile of the gone key) before it is stopped, so a
    // complaint about them would be in its log.
    host.wait_reconciled("default/alice", before);

    host.assert_quiet("host's");
    let log = host.log();
    let status = host.terminate();
    assert!(status.success(), "exit {status}; log:\n{log}");
}

fn action<'a>(report: &'a Value, name: &str) -> Option<&'a Value> {
    report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == name)
}

#[test]
fn wasmctrl_test_shows_the_pod_to_apply_and_the_status_to_report() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = common::plugin_path("workspace").display().to_string();
    // As the API server would hand it over: with a uid, which the owner reference points at.
    let mut ws = common::yaml_objects("examples/workspace/sample.yaml").remove(0);
    ws["metadata"]["uid"] = json!("6c1f2b9e-31a4-4d8e-9b1c-7a2f0e5d4c3b");
    ws["metadata"]["generation"] = json!(1);
    let object = dir.path().join("alice.json");
    std::fs::write(&object, ws.to_string()).unwrap();
    let object = object.display().to_string();

    let report = wasmctrl_test_report(&[
        &plugin,
        "--object",
        &object,
        "--now",
        "2026-11-22T10:00:00Z",
    ]);
    assert_eq!(report["plugin"], "workspace");
    assert_eq!(report["key"], "default/alice");
    assert_eq!(report["result"], "ok");
    let apply = action(&report, "apply").expect("an apply of the Pod");
    assert_eq!(
        apply["target"],
        json!({"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "alice"})
    );
    let pod = &apply["object"];
    assert_eq!(
        pod["metadata"]["ownerReferences"],
        json!([{"apiVersion": "ide.wasmctrl.io/v1alpha1", "kind": "Workspace", "name": "alice",
            "uid": "6c1f2b9e-31a4-4d8e-9b1c-7a2f0e5d4c3b", "controller": true,
            "blockOwnerDeletion": true}])
    );
    assert_eq!(
        pod["spec"]["containers"][0]["image"],
        "codercom/code-server:4.8.3"
    );
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["limits"]["ephemeral-storage"],
        "2Gi"
    );
    assert!(
        pod["metadata"]["annotations"]["ide.wasmctrl.io/spec-hash"].is_string(),
        "{pod}"
    );
    let status = &action(&report, "updateStatus").expect("a status update")["status"];
    assert_eq!(status["phase"], "Pending");
    assert_eq!(status["observedGeneration"], 1);
    assert_eq!(
        status["conditions"][0],
        json!({"type": "Ready", "status": "False", "reason": "PodMissing",
            "message": "creating Pod alice", "lastTransitionTime": "2026-11-22T10:00:00Z",
            "observedGeneration": 1})
    );

    // With that Pod in the cache, scheduled and running, the Workspace reports Ready.
    let mut running = pod.clone();
    running["metadata"]["uid"] = json!("pod-uid-1");
    running["spec"]["nodeName"] = json!("node-1");
    running["status"] = json!({"phase": "Running", "podIP": "10.244.0.7"});
    let cache = dir.path().join("pod.json");
    std::fs::write(&cache, running.to_string()).unwrap();
    let report = wasmctrl_test_report(&[
        &plugin,
        "--object",
        &object,
        "--cache",
        &cache.display().to_string(),
        "--now",
        "2026-11-22T10:01:00Z",
    ]);
    assert!(action(&report, "delete").is_none(), "{report}");
    assert_eq!(action(&report, "apply").unwrap()["object"], *pod);
    let status = &action(&report, "updateStatus").unwrap()["status"];
    assert_eq!(status["phase"], "Running");
    assert_eq!(status["podIP"], "10.244.0.7");
    assert_eq!(status["nodeName"], "node-1");
    assert_eq!(status["conditions"][0]["status"], "True");
    assert_eq!(status["conditions"][0]["reason"], "PodRunning");
    let event = action(&report, "event").expect("a PodRunning event");
    assert_eq!(event["reason"], "PodRunning");
    assert_eq!(event["type"], "Normal");
}
