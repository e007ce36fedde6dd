//! `wasmctrl test`: one offline reconcile through the real binary, and one-line errors for bad input.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::process::Output;

use common::process::wasmctrl_test;
use serde_json::Value;

fn vm_plugin() -> String {
    common::plugin_path("virtualmachine").display().to_string()
}

/// Exit status is failure and stderr is exactly one line mentioning `needle`.
fn assert_one_line_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, stderr: {stderr}");
    let lines: Vec<_> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(lines[0].contains(needle), "expected {needle:?} in {stderr}");
}

#[test]
fn reconciling_the_sample_vm_prints_a_status_update_with_a_phase() {
    let out = wasmctrl_test(&[
        &vm_plugin(),
        "--object",
        "examples/virtualmachine/test-vm.yaml",
        "--now",
        "2026-11-22T10:00:00Z",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(report["plugin"], "virtualmachine");
    assert_eq!(report["key"], "default/test-vm");
    assert_eq!(report["result"], "ok");
    let status = report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "updateStatus")
        .expect("a status update");
    assert_eq!(status["status"]["phase"], "Active");
    assert_eq!(status["status"]["lastUpdateTime"], "2026-11-22T10:00:00Z");
    assert_eq!(status["status"]["server"]["cpu"], 2);
}

#[test]
fn a_deleted_object_is_handled_quietly() {
    let out = wasmctrl_test(&[
        &vm_plugin(),
        "--object",
        "examples/virtualmachine/test-vm.yaml",
        "--deleted",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["actions"], serde_json::json!([]));
}

#[test]
fn bad_input_exits_non_zero_with_a_one_line_reason() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let vm = "examples/virtualmachine/test-vm.yaml";

    let out = wasmctrl_test(&[&vm_plugin(), "--object", "no/such/file.yaml"]);
    assert_one_line_error(&out, "no/such/file.yaml");

    let bad_yaml = write("bad.yaml", "metadata: [unclosed\n  name: x");
    let out = wasmctrl_test(&[&vm_plugin(), "--object", &bad_yaml]);
    assert_one_line_error(&out, "invalid YAML/JSON");

    let nameless = write(
        "nameless.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
    );
    let out = wasmctrl_test(&[&vm_plugin(), "--object", &nameless]);
    assert_one_line_error(&out, "metadata.name");

    let junk = write("junk.wasm", "this is not webassembly");
    let out = wasmctrl_test(&[&junk, "--object", vm]);
    assert_one_line_error(&out, "not a loadable WebAssembly component");

    let out = wasmctrl_test(&["no-such-plugin.wasm", "--object", vm]);
    assert_one_line_error(&out, "no-such-plugin.wasm");

    // A component that does not implement this contract version (here: exports nothing).
    let other = write("other.wasm", "(component)");
    let out = wasmctrl_test(&[&other, "--object", vm]);
    assert_one_line_error(
        &out,
        "does not implement a wasmctrl:plugin contract this host serves",
    );
    assert!(Path::new(&other).exists());
}

#[test]
fn a_reader_that_goes_away_is_not_a_crash() {
    // As `wasmctrl test ... | head -1`: the pipe is closed before the report is written.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args([
            "test",
            &vm_plugin(),
            "--object",
            "examples/virtualmachine/test-vm.yaml",
        ])
        .current_dir(common::repo_root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run wasmctrl");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `path` without its `metadata.namespace` line, written under `dir`.
fn without_namespace(dir: &Path, path: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(common::repo_root().join(path)).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("namespace:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let out = dir.join("sample.yaml");
    std::fs::write(&out, text).unwrap();
    out
}

#[test]
fn a_sample_without_a_namespace_is_in_default_and_children_show_what_the_host_adds() {
    let dir = tempfile::tempdir().unwrap();
    let sample = without_namespace(dir.path(), "examples/workspace/sample.yaml");
    let plugin = common::plugin_path("workspace").display().to_string();
    let report =
        common::process::wasmctrl_test_report(&[&plugin, "--object", sample.to_str().unwrap()]);
    assert_eq!(report["key"], "default/alice");
    assert_eq!(report["fieldManager"], "wasmctrl/workspace");
    let apply = report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "apply")
        .unwrap_or_else(|| panic!("an apply of the child: {report}"));
    let child = &apply["object"]["metadata"];
    assert_eq!(child["namespace"], "default", "{apply}");
    let owner = &child["ownerReferences"][0];
    assert_eq!(owner["kind"], "Workspace", "{apply}");
    assert_eq!(owner["name"], "alice");
    assert_eq!(owner["controller"], true);
    assert_eq!(owner["uid"], "00000000-0000-0000-0000-000000000000");
}

#[test]
fn deleting_holds_the_object_with_the_finalizer_the_plugin_itself_adds() {
    let plugin = common::plugin_path("postgres-writer").display().to_string();
    let out = wasmctrl_test(&[
        &plugin,
        "--object",
        "examples/postgres-writer/sample.yaml",
        "--deleting",
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(
        report["simulatedFinalizers"],
        serde_json::json!(["demo.yash.com/row-cleanup"]),
        "{report}"
    );
    // Held by its own finalizer, the plugin runs its cleanup and lets the object go (its row
    // was never written, the sample having no status); without the finalizer it would have had
    // nothing to do.
    assert_eq!(report["result"], "ok", "{report}");
    assert_eq!(
        report["actions"],
        serde_json::json!([{"action": "removeFinalizer", "finalizer": "demo.yash.com/row-cleanup"}]),
        "{report}"
    );
}

#[test]
fn an_action_the_api_server_would_refuse_is_reported_with_the_server_s_words() {
    let dir = tempfile::tempdir().unwrap();
    // The hostile plugin's `own` mode applies a ConfigMap named `<object>-child`: from a Thing
    // named with capitals, a name kube-apiserver refuses.
    let thing = dir.path().join("thing.yaml");
    std::fs::write(
        &thing,
        "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: Big.Thing\n  namespace: default\n",
    )
    .unwrap();
    let settings = dir.path().join("settings.yaml");
    std::fs::write(&settings, "mode: own\n").unwrap();
    let plugin = common::plugin_path("hostile").display().to_string();
    let out = common::process::wasmctrl_test(&[
        &plugin,
        "--object",
        thing.to_str().unwrap(),
        "--settings",
        settings.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["result"], "error", "{report}");
    assert_eq!(report["error"]["retryable"], false, "{report}");
    let message = report["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "the API server would refuse ConfigMap Big.Thing-child: metadata.name: Invalid value: \
             \"Big.Thing-child\": a lowercase RFC 1123 subdomain must consist of lower case"
        ),
        "{message}"
    );
}

/// The status the hostile plugin's `outcomes` mode writes for `thing` when told `previous`:
/// it reports what it was told of its previous reconcile.
fn outcomes_status(thing: &str, previous: &str) -> Value {
    let actions = outcomes_actions(thing, previous);
    let status = actions.iter().find(|a| a["action"] == "updateStatus");
    status.expect("a status update")["status"].clone()
}

/// The actions `wasmctrl test` prints for the hostile plugin's `outcomes` mode.
fn outcomes_actions(thing: &str, previous: &str) -> Vec<Value> {
    let settings = Path::new(thing).with_file_name("settings.yaml");
    std::fs::write(&settings, "mode: outcomes\n").unwrap();
    let plugin = common::plugin_path("hostile").display().to_string();
    let settings = settings.display().to_string();
    let report = common::process::wasmctrl_test_report(&[
        &plugin,
        "--object",
        thing,
        "--settings",
        &settings,
        "--previous",
        previous,
    ]);
    report["actions"].as_array().unwrap().clone()
}

#[test]
fn best_effort_actions_are_marked_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let thing = dir.path().join("thing.yaml");
    std::fs::write(
        &thing,
        "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t, namespace: default, uid: u-1}\n",
    )
    .unwrap();
    let previous = dir.path().join("previous.yaml");
    std::fs::write(&previous, "[]\n").unwrap();
    // The `outcomes` mode deletes a stale child and applies one, both best effort, then writes
    // its status, which is not.
    let actions = outcomes_actions(thing.to_str().unwrap(), previous.to_str().unwrap());
    let marked: Vec<(&str, bool)> = actions
        .iter()
        .map(|a| (a["action"].as_str().unwrap(), a["bestEffort"] == true))
        .collect();
    assert_eq!(
        marked,
        [("delete", true), ("apply", true), ("updateStatus", false)],
        "{actions:#?}"
    );
    assert!(actions[2].get("bestEffort").is_none(), "{:#}", actions[2]);
}

#[test]
fn previous_action_results_reach_the_plugin_as_the_next_reconcile_would_see_them() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let thing = write(
        "thing.yaml",
        "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t, namespace: default, uid: u-1}\n",
    );
    let previous = write(
        "previous.yaml",
        "- unchanged\n- failed:\n    code: 422\n    reason: Invalid\n    message: no\n    \
         target: {apiVersion: v1, kind: ConfigMap, namespace: default, name: t-child}\n",
    );
    let status = outcomes_status(&thing, &previous);
    assert_eq!(
        status["previous"],
        serde_json::json!(["unchanged", "failed 422 Invalid"])
    );
    assert_eq!(status["conditions"][0]["message"], "422 Invalid: no");

    // Without a target, a failure is about the reconciled object; a misspelt status is an error.
    let about_itself = write("itself.yaml", "[{failed: {code: 409, reason: Conflict}}]\n");
    let status = outcomes_status(&thing, &about_itself);
    assert_eq!(
        status["previous"],
        serde_json::json!(["failed 409 Conflict"])
    );
    let misspelt = write("misspelt.yaml", "[applyed]\n");
    let plugin = common::plugin_path("hostile").display().to_string();
    let out = wasmctrl_test(&[&plugin, "--object", &thing, "--previous", &misspelt]);
    assert_one_line_error(&out, "not a list of action results");
}
