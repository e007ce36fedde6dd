//! Reconcile tests through the native harness: the cache holds the Deployment and the Pods.

use serde_json::{Value, json};
use wasmctrl_sdk::action::{EventType, PatchBody};
use wasmctrl_sdk::testing::Harness;
use wasmctrl_sdk::{Action, Gvk};

use super::*;
use crate::restart::{HANDLED, RESTARTED_AT};

const NOW: &str = "2026-11-22T10:00:00Z";
const RECORD_PATH: &str = "/metadata/annotations/pod-restarter.wasmctrl.io~1handled-pods";
const RESTART_PATH: &str = "/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt";

fn pod(name: &str, uid: &str, phase: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid, "labels": {"app": "nginx"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
        "status": {"phase": phase},
    })
}

fn tools(handled: Option<&str>) -> Value {
    let mut annotations = json!({"deployment.kubernetes.io/revision": "1"});
    if let Some(h) = handled {
        annotations[HANDLED] = json!(h);
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "tools", "namespace": "default", "annotations": annotations},
        "spec": {"selector": {}, "template": {"metadata": {"labels": {"app": "tools"},
            "annotations": {RESTARTED_AT: "2026-01-01T00:00:00Z"}}}},
    })
}

/// The single JSON patch of the outcome: its target and operations.
fn json_patch(outcome: &Outcome) -> (ObjectRef, Vec<Value>) {
    let patches: Vec<_> = outcome
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Patch(p) => Some(p),
            _ => None,
        })
        .collect();
    assert_eq!(
        patches.len(),
        1,
        "expected one patch: {:?}",
        outcome.actions
    );
    let PatchBody::Json(ops) = &patches[0].body else {
        panic!("expected a JSON patch, got {:?}", patches[0].body);
    };
    (
        patches[0].target.clone(),
        serde_json::from_str(ops).unwrap(),
    )
}

fn recorded(ops: &[Value]) -> Vec<String> {
    let op = ops
        .iter()
        .find(|o| o["op"] == "add" && o["path"] == RECORD_PATH)
        .expect("the record is written");
    serde_json::from_str(op["value"].as_str().unwrap()).unwrap()
}

#[test]
fn a_new_running_pod_restarts_the_deployment_once_and_records_itself() {
    let p = pod("web-1", "uid-1", "Running");
    let h = Harness::new()
        .now(NOW)
        .object(tools(None))
        .object(p.clone());
    let outcome = h.reconcile::<PodRestarter>(&p).unwrap();
    let (target, ops) = json_patch(&outcome);
    assert_eq!(target, ObjectRef::of::<Deployment>("default", "tools"));
    assert_eq!(
        ops,
        vec![
            json!({"op": "test", "path": RECORD_PATH, "value": null}),
            json!({"op": "add", "path": RECORD_PATH, "value": "[\"uid-1\"]"}),
            json!({"op": "add", "path": RESTART_PATH, "value": NOW}),
        ]
    );
    let Some(Action::EmitEvent(event)) = outcome.actions.last() else {
        panic!("expected an event last: {:?}", outcome.actions);
    };
    assert_eq!(event.type_, EventType::Normal);
    assert!(event.note.contains("default/tools"), "{}", event.note);
    assert_eq!(outcome.actions.len(), 2);
    assert_eq!(outcome.requeue_after, None);
}

#[test]
fn the_record_is_tested_at_the_value_read_and_extended() {
    let p = pod("web-2", "uid-2", "Running");
    let h = Harness::new()
        .now(NOW)
        .object(tools(Some("[\"uid-1\"]")))
        .object(pod("web-1", "uid-1", "Running"))
        .object(p.clone());
    let (_, ops) = json_patch(&h.reconcile::<PodRestarter>(&p).unwrap());
    assert_eq!(
        ops[0],
        json!({"op": "test", "path": RECORD_PATH, "value": "[\"uid-1\"]"})
    );
    assert_eq!(recorded(&ops), ["uid-1", "uid-2"]);
}

#[test]
fn pods_that_are_not_running_need_nothing() {
    for phase in ["Pending", "Succeeded", "Failed"] {
        let p = pod("web-1", "uid-1", phase);
        let h = Harness::new().object(tools(None)).object(p.clone());
        assert_eq!(h.reconcile::<PodRestarter>(&p).unwrap(), Outcome::done());
    }
    let mut no_status = pod("web-1", "uid-1", "Running");
    no_status["status"] = Value::Null;
    let h = Harness::new().object(tools(None));
    assert_eq!(
        h.reconcile::<PodRestarter>(&no_status).unwrap(),
        Outcome::done()
    );
}

#[test]
fn an_already_handled_pod_needs_nothing() {
    let p = pod("web-1", "uid-1", "Running");
    let h = Harness::new()
        .object(tools(Some("[\"uid-0\",\"uid-1\"]")))
        .object(p.clone());
    assert_eq!(h.reconcile::<PodRestarter>(&p).unwrap(), Outcome::done());
}

#[test]
fn deleted_and_terminating_pods_need_nothing() {
    let h = Harness::new().object(tools(None));
    assert_eq!(
        h.reconcile_deleted::<PodRestarter>("default", "web-1")
            .unwrap(),
        Outcome::done()
    );
    let mut terminating = pod("web-1", "uid-1", "Running");
    terminating["metadata"]["deletionTimestamp"] = json!(NOW);
    assert_eq!(
        h.reconcile::<PodRestarter>(&terminating).unwrap(),
        Outcome::done()
    );
}

#[test]
fn uids_of_pods_that_no_longer_exist_are_pruned() {
    let p = pod("web-3", "uid-3", "Running");
    // uid-1 still exists, though relabelled out of the selector; uid-2 is gone.
    let mut relabelled = pod("web-1", "uid-1", "Running");
    relabelled["metadata"]["labels"] = json!({"app": "other"});
    let h = Harness::new()
        .now(NOW)
        .object(tools(Some("[\"uid-1\",\"uid-2\"]")))
        .object(relabelled)
        .object(p.clone());
    let (_, ops) = json_patch(&h.reconcile::<PodRestarter>(&p).unwrap());
    assert_eq!(
        ops[0],
        json!({"op": "test", "path": RECORD_PATH, "value": "[\"uid-1\",\"uid-2\"]"})
    );
    assert_eq!(recorded(&ops), ["uid-1", "uid-3"]);
}

#[test]
fn a_missing_deployment_is_a_retryable_error_naming_it() {
    let p = pod("web-1", "uid-1", "Running");
    let h = Harness::new().object(p.clone());
    let err = h.reconcile::<PodRestarter>(&p).unwrap_err();
    assert!(err.retryable);
    assert!(err.message.contains("default/tools"), "{}", err.message);
}

#[test]
fn a_mangled_record_is_a_terminal_error() {
    let p = pod("web-1", "uid-1", "Running");
    let h = Harness::new()
        .object(tools(Some("uid-0")))
        .object(p.clone());
    let err = h.reconcile::<PodRestarter>(&p).unwrap_err();
    assert!(!err.retryable);
    assert!(err.message.contains(HANDLED), "{}", err.message);
}

#[test]
fn pods_of_the_target_deployment_itself_are_ignored() {
    let mut own = pod("tools-5d4f8-abcde", "uid-9", "Running");
    own["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "tools-5d4f8", "uid": "rs"}]);
    let h = Harness::new().object(tools(None)).object(own.clone());
    assert_eq!(h.reconcile::<PodRestarter>(&own).unwrap(), Outcome::done());

    // Another Deployment whose name merely starts with ours does not count.
    own["metadata"]["ownerReferences"][0]["name"] = json!("tools-extra-5d4f8");
    assert_eq!(
        json_patch(&h.reconcile::<PodRestarter>(&own).unwrap())
            .1
            .len(),
        3
    );
}

#[test]
fn settings_choose_the_namespace_selector_and_deployment() {
    let p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "api-1", "namespace": "team-a", "uid": "uid-a", "labels": {"tier": "api"}},
        "status": {"phase": "Running"},
    });
    let backend = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "backend", "namespace": "team-a"},
        "spec": {"selector": {}, "template": {"metadata": {"labels": {"app": "backend"}}}},
    });
    let h = Harness::new()
        .settings(
            json!({"labelSelector": "tier=api", "namespace": "team-a", "deployment": "backend"}),
        )
        .now(NOW)
        .object(tools(None))
        .object(backend)
        .object(p.clone());
    let m = h.manifest::<PodRestarter>().unwrap();
    assert_eq!(m.watches.selector.labels, "tier=api");
    assert_eq!(m.watches.selector.namespaces, ["team-a"]);
    let (target, ops) = json_patch(&h.reconcile::<PodRestarter>(&p).unwrap());
    assert_eq!(target, ObjectRef::of::<Deployment>("team-a", "backend"));
    assert_eq!(
        ops[0],
        json!({"op": "test", "path": "/metadata/annotations", "value": null})
    );
    assert_eq!(
        ops[1],
        json!({"op": "add", "path": "/metadata/annotations", "value": {HANDLED: "[\"uid-a\"]"}})
    );
}

#[test]
fn the_default_manifest_watches_nginx_pods_and_writes_deployments() {
    let m = Harness::new().manifest::<PodRestarter>().unwrap();
    assert_eq!(m.name, "pod-restarter");
    assert_eq!(m.watches.kind, Gvk::of::<Pod>());
    assert_eq!(m.watches.selector.labels, "app=nginx");
    assert_eq!(m.watches.selector.namespaces, ["default"]);
    assert_eq!(m.reads.len(), 2);
    assert_eq!(m.reads[0].kind, Gvk::of::<Pod>());
    assert_eq!(
        m.reads[0].selector.labels, "",
        "every Pod, to prune the record"
    );
    assert_eq!(m.reads[1].kind, Gvk::of::<Deployment>());
    for read in &m.reads {
        assert_eq!(read.selector.namespaces, ["default"]);
        assert!(read.trigger.is_none());
    }
    assert_eq!(m.writes, [Gvk::of::<Deployment>()]);
    assert!(m.owns.is_empty());
}

#[test]
fn bad_settings_are_rejected_with_a_clear_message() {
    let cases = [
        (json!({"labelSelector": ""}), "settings.labelSelector"),
        (json!({"namespace": "Team_A"}), "settings.namespace"),
        (json!({"deployment": "no/slash"}), "settings.deployment"),
        (json!({"deploymnet": "tools"}), "unknown field `deploymnet`"),
        (json!({"namespace": 7}), "invalid settings"),
    ];
    for (settings, needle) in cases {
        let err = Harness::new()
            .settings(settings.clone())
            .manifest::<PodRestarter>()
            .unwrap_err();
        assert!(err.contains(needle), "{settings}: {err}");
    }
}
