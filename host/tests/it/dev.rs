//! `wasmctrl dev` through the real binary and kubectl: the virtualmachine plugin reports status
//! for `kubectl apply` and an Event `kubectl describe` shows, follows a spec edit, handles
//! deletion without complaint, its metrics are served over plain HTTP, and the process shuts
//! down cleanly on SIGTERM.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::process::{Process, kubectl, wait_for};
use serde_json::Value;

fn vm_status(kubeconfig: &Path) -> Value {
    let (ok, out) = kubectl(kubeconfig, &["get", "vm", "test-vm", "-o", "json"]);
    if !ok {
        return Value::Null;
    }
    serde_json::from_str::<Value>(&out)
        .map(|v| v["status"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn kubectl_drives_the_virtualmachine_plugin_and_sigterm_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = common::process::plugin_dir(dir.path(), &[("virtualmachine", None)]);
    let kubeconfig = dir.path().join("kubeconfig");
    let host = Process::dev(&plugins, &kubeconfig, dir.path().join("host.log"));
    wait_for(30, "the kubeconfig", || kubeconfig.exists());

    let (ok, out) = kubectl(
        &kubeconfig,
        &["apply", "-f", "examples/virtualmachine/crd.yaml"],
    );
    assert!(ok, "{out}");
    wait_for(30, "the CRD to be served", || {
        kubectl(&kubeconfig, &["get", "vm"]).0
    });
    let (ok, out) = kubectl(
        &kubeconfig,
        &["apply", "-f", "examples/virtualmachine/test-vm.yaml"],
    );
    assert!(ok, "{out}");
    wait_for(30, "status.phase Active", || {
        vm_status(&kubeconfig)["phase"] == "Active"
    });
    assert_eq!(vm_status(&kubeconfig)["server"]["cpu"], 2);
    // The plugin's Event, as the real kubectl shows it (recorded through events.k8s.io/v1 by
    // kube-runtime's recorder, which a real kube-apiserver accepts).
    wait_for(30, "the Active event in kubectl describe", || {
        let (ok, out) = kubectl(&kubeconfig, &["describe", "vm", "test-vm"]);
        ok && out.lines().any(|l| {
            l.contains("Normal") && l.contains("Active") && l.contains("test-vm is Active")
        })
    });
    // ... emitted by a reconcile that succeeded at once.
    let errors = r#"controller_runtime_reconcile_errors_total{controller="virtualmachine"}"#;
    assert_eq!(host.sample(errors), Some(0.0), "{}", host.log());
    assert!(!host.log().contains("reconcile failed"), "{}", host.log());
    // dev serves its metrics over plain HTTP (on loopback), without a token.
    let loaded = host.sample(r#"wasmctrl_plugin_loads_total{result="loaded"}"#);
    assert_eq!(loaded, Some(1.0));

    let (ok, out) = kubectl(
        &kubeconfig,
        &[
            "patch",
            "vm",
            "test-vm",
            "--type=merge",
            "-p",
            r#"{"spec":{"resource":{"cpu":8}}}"#,
        ],
    );
    assert!(ok, "{out}");
    wait_for(30, "the spec edit to be reconciled", || {
        vm_status(&kubeconfig)["server"]["cpu"] == 8
    });

    let before = host.reconciles("default/test-vm");
    let (ok, out) = kubectl(&kubeconfig, &["delete", "vm", "test-vm", "--wait=true"]);
    assert!(ok, "{out}");
    // The host reconciles the gone key before it is stopped: its log covers the deletion.
    host.wait_reconciled("default/test-vm", before);

    // SIGTERM: stop taking keys, finish in-flight reconciles, exit 0.
    let log_path = dir.path().join("host.log");
    let status = host.terminate();
    let log = std::fs::read_to_string(log_path).unwrap();
    assert!(status.success(), "exit {status}; log:\n{log}");
    assert!(log.contains("shutting down"), "{log}");
    common::process::assert_quiet(&log, "host's");
}
