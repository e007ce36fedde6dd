//! `wasmctrl inspect` on each seed plugin: its declaration and the permissions it implies, for
//! an operator to review before the plugin serves, in both output formats.

use crate::common;

use std::process::Command;

use serde_json::Value;

fn inspect(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .arg("inspect")
        .args(args)
        .current_dir(common::repo_root())
        .output()
        .expect("run wasmctrl");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

fn report(plugin: &str, extra: &[&str]) -> Value {
    let path = common::plugin_path(plugin);
    let mut args = vec![path.to_str().expect("utf-8 path"), "-o", "json"];
    args.extend_from_slice(extra);
    let (ok, stdout, stderr) = inspect(&args);
    assert!(ok, "inspect {plugin} failed: {stderr}");
    serde_json::from_str(&stdout).expect("a JSON report")
}

fn permissions(report: &Value) -> Vec<&str> {
    report["permissions"]
        .as_array()
        .expect("a list of permissions")
        .iter()
        .map(|p| p.as_str().expect("a string"))
        .collect()
}

/// Every permission named is present, and nothing else names the kinds of `absent`.
fn assert_permissions(report: &Value, present: &[&str], absent: &[&str]) {
    let all = permissions(report);
    for p in present {
        assert!(all.contains(p), "missing {p:?} in {all:#?}");
    }
    for kind in absent {
        assert!(!all.iter().any(|p| p.contains(kind)), "{kind} in {all:#?}");
    }
}

#[test]
fn virtualmachine() {
    let r = report("virtualmachine", &[]);
    assert_eq!(r["plugin"], "virtualmachine");
    assert_eq!(r["namespaces"], "all");
    assert_eq!(
        r["manifest"]["watches"]["predicates"][0],
        "generation-changed"
    );
    let vm = "cloudnative.tw/v1alpha1/VirtualMachine";
    assert_permissions(
        &r,
        &[
            &format!("list {vm} in all namespaces"),
            &format!("update-status {vm} in all namespaces"),
            &format!("emit-event {vm} in all namespaces"),
        ],
        &["v1/Pod", "Deployment", "Secret"],
    );
    assert!(r["digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(r["contract"], "wasmctrl:plugin@0.3.1");
}

#[test]
fn postgres_writer() {
    let r = report("postgres-writer", &[]);
    assert_eq!(r["manifest"]["capabilities"][0], "sql:students");
    assert_permissions(
        &r,
        &[
            "use sql:students",
            "add-finalizer demo.yash.com/v1/PostgresWriter in all namespaces",
            "remove-finalizer demo.yash.com/v1/PostgresWriter in all namespaces",
        ],
        &["v1/Pod", "Deployment"],
    );
}

#[test]
fn workspace() {
    let r = report("workspace", &[]);
    assert_eq!(r["manifest"]["owns"][0], "v1/Pod");
    assert_permissions(
        &r,
        &[
            "apply v1/Pod in all namespaces (beside the owner)",
            "delete v1/Pod in all namespaces (beside the owner)",
            "list v1/Pod in all namespaces",
        ],
        &["Deployment", "Secret", "sql:"],
    );
}

/// The pod-restarter narrows itself to one namespace; a config beside it changes what it
/// declares, and `inspect` reads that config as the host would.
#[test]
fn pod_restarter_with_and_without_its_config() {
    let r = report("pod-restarter", &[]);
    assert_eq!(r["namespaces"][0], "default");
    assert_permissions(
        &r,
        &[
            "patch apps/v1/Deployment in [default]",
            "list v1/Pod in [default] where app=nginx",
            "list v1/Pod in [default]",
        ],
        &["all namespaces", "Secret"],
    );

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("team-a.toml");
    std::fs::write(
        &config,
        "[settings]\nnamespace = \"team-a\"\nlabelSelector = \"role=web\"\n",
    )
    .unwrap();
    let r = report("pod-restarter", &["--config", config.to_str().unwrap()]);
    assert_eq!(r["config"], config.to_str().unwrap());
    assert_permissions(
        &r,
        &[
            "patch apps/v1/Deployment in [team-a]",
            "get v1/Pod in [team-a] where role=web",
        ],
        &["[default]"],
    );

    // For people: one fact per line, then the permissions.
    let path = common::plugin_path("pod-restarter");
    let (ok, text, stderr) = inspect(&[path.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(text.contains("plugin:       pod-restarter "), "{text}");
    assert!(text.contains("writes:       apps/v1/Deployment"), "{text}");
    assert!(
        text.contains("\n  patch apps/v1/Deployment in [default]\n"),
        "{text}"
    );
}

#[test]
fn a_file_that_is_not_a_plugin_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"not wasm").unwrap();
    let (ok, _, stderr) = inspect(&[junk.to_str().unwrap()]);
    assert!(!ok);
    assert!(stderr.contains("junk.wasm"), "{stderr}");
}
