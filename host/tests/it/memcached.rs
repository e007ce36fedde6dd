//! operator-sdk's Memcached tutorial, ported (`plugins/memcached`, `examples/memcached`), in
//! `wasmctrl dev` as its user runs it, with kubectl: the CRD refuses sizes out of bounds, the
//! Deployment becomes available with three Ready Pods on the fake Nodes, `size` scales it, and a
//! deletion runs the cleanup once (one `Deleting` Warning, no conflict) before garbage collection
//! removes the Deployment and its Pods.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::process::{Process, kubectl, wait_for};
use serde_json::Value;

fn get_json(kubeconfig: &Path, args: &[&str]) -> Option<Value> {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    let (ok, out) = kubectl(kubeconfig, &args);
    ok.then(|| serde_json::from_str(&out).ok()).flatten()
}

/// The Memcached's condition of `type_`, as `(status, reason, message)`.
fn condition(kubeconfig: &Path, type_: &str) -> Option<(String, String, String)> {
    let memcached = get_json(kubeconfig, &["get", "memcached", "memcached-sample"])?;
    let conditions = memcached["status"]["conditions"].as_array()?.clone();
    let found = conditions.into_iter().find(|c| c["type"] == type_)?;
    let text = |k: &str| found[k].as_str().unwrap_or_default().to_string();
    Some((text("status"), text("reason"), text("message")))
}

/// The Deployment's `(replicas, readyReplicas, availableReplicas)`.
fn deployment(kubeconfig: &Path) -> Option<(i64, i64, i64)> {
    let d = get_json(kubeconfig, &["get", "deployment", "memcached-sample"])?;
    let n = |v: &Value| v.as_i64().unwrap_or(0);
    Some((
        n(&d["spec"]["replicas"]),
        n(&d["status"]["readyReplicas"]),
        n(&d["status"]["availableReplicas"]),
    ))
}

/// The Memcached's Pods that are Running and Ready.
fn ready_pods(kubeconfig: &Path) -> Vec<String> {
    let selector = "app.kubernetes.io/instance=memcached-sample";
    let Some(pods) = get_json(kubeconfig, &["get", "pods", "-l", selector]) else {
        return Vec::new();
    };
    let ready = |p: &Value| {
        p["status"]["phase"] == "Running"
            && (p["status"]["conditions"].as_array().into_iter().flatten())
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
    };
    (pods["items"].as_array().into_iter().flatten())
        .filter(|p| ready(p) && p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .collect()
}

fn apply_memcached(kubeconfig: &Path, dir: &Path, size: &str) -> (bool, String) {
    let path = dir.join(format!("memcached-{size}.yaml"));
    let sample =
        std::fs::read_to_string(common::repo_root().join("examples/memcached/sample.yaml"))
            .unwrap();
    std::fs::write(&path, sample.replace("size: 3", &format!("size: {size}"))).unwrap();
    kubectl(kubeconfig, &["apply", "-f", path.to_str().unwrap()])
}

#[test]
fn the_memcached_tutorial_runs_end_to_end_in_dev_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (host, kubeconfig) =
        Process::dev_with_crd(dir.path(), "memcached", "examples/memcached/crd.yaml");
    wait_for(30, "the CRD to be served", || {
        kubectl(&kubeconfig, &["get", "memcached"]).0
    });

    // The CRD's bounds, as a real cluster enforces them.
    for (size, message) in [
        (
            "0",
            "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
        ),
        (
            "4",
            "spec.size: Invalid value: 4: spec.size in body should be less than or equal to 3",
        ),
    ] {
        let (ok, out) = apply_memcached(&kubeconfig, dir.path(), size);
        assert!(!ok && out.contains(message), "size {size}: {out}");
    }

    let (ok, out) = kubectl(
        &kubeconfig,
        &["apply", "-f", "examples/memcached/sample.yaml"],
    );
    assert!(ok, "{out}");
    wait_for(60, "a Deployment with 3 available replicas", || {
        deployment(&kubeconfig) == Some((3, 3, 3))
    });
    wait_for(30, "three Running, Ready Pods", || {
        ready_pods(&kubeconfig).len() == 3
    });
    wait_for(30, "Available=True", || {
        condition(&kubeconfig, "Available").is_some_and(|(status, ..)| status == "True")
    });
    let (_, reason, message) = condition(&kubeconfig, "Available").unwrap();
    assert_eq!(reason, "Reconciling");
    assert_eq!(
        message,
        "Deployment for custom resource (memcached-sample) with 3 replicas is available"
    );
    let memcached = get_json(&kubeconfig, &["get", "memcached", "memcached-sample"]).unwrap();
    let finalizers = &memcached["metadata"]["finalizers"];
    assert_eq!(
        finalizers,
        &serde_json::json!(["cache.example.com/finalizer"])
    );

    // Scaling follows `size`.
    let (ok, out) = apply_memcached(&kubeconfig, dir.path(), "1");
    assert!(ok, "{out}");
    wait_for(60, "the Deployment scaled to 1", || {
        deployment(&kubeconfig) == Some((1, 1, 1))
    });
    wait_for(60, "one Ready Pod left", || {
        ready_pods(&kubeconfig).len() == 1
    });
    wait_for(30, "Available for 1 replica", || {
        condition(&kubeconfig, "Available").is_some_and(|(_, _, m)| m.contains("with 1 replicas"))
    });

    // Deletion: the cleanup runs once, then garbage collection takes the Deployment and Pods.
    let before = host.reconciles("default/memcached-sample");
    let (ok, out) = kubectl(
        &kubeconfig,
        &["delete", "memcached", "memcached-sample", "--wait=true"],
    );
    assert!(ok, "{out}");
    host.wait_reconciled("default/memcached-sample", before);
    wait_for(60, "the Deployment garbage-collected", || {
        !kubectl(&kubeconfig, &["get", "deployment", "memcached-sample"]).0
    });
    wait_for(60, "its Pods gone", || {
        let selector = "app.kubernetes.io/instance=memcached-sample";
        get_json(&kubeconfig, &["get", "pods", "-l", selector])
            .is_some_and(|p| p["items"].as_array().is_some_and(Vec::is_empty))
    });
    let events = get_json(&kubeconfig, &["get", "events.events.k8s.io"]).unwrap();
    let events: Vec<&Value> = (events["items"].as_array().into_iter().flatten())
        .filter(|e| e["reason"] == "Deleting")
        .collect();
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(event["type"], "Warning");
    assert_eq!(
        event["note"],
        "Custom Resource memcached-sample is being deleted from the namespace default"
    );
    assert!(
        event["series"].is_null(),
        "recorded more than once: {event:#}"
    );
    let log = host.log();
    assert!(!log.contains("conflict"), "{log}");
    assert_eq!(
        host.sample(r#"controller_runtime_reconcile_errors_total{controller="memcached"}"#),
        Some(0.0),
        "{log}"
    );
    host.assert_quiet("host's");
}
