//! `wasmctrl dev` through the real binary and kubectl: the virtualmachine plugin reports status
//! for `kubectl apply`, follows a spec edit, handles deletion without complaint, and the process
//! shuts down cleanly on SIGTERM.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .current_dir(common::repo_root())
        .output()
        .expect("kubectl is installed (make deps)");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

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
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::copy(
        common::plugin_path("virtualmachine"),
        plugins.join("virtualmachine.wasm"),
    )
    .unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let log = std::fs::File::create(dir.path().join("host.log")).unwrap();

    let mut host = Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(["dev", "--listen", "127.0.0.1:0", "--plugins"])
        .arg(&plugins)
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    wait_for("the kubeconfig", || kubeconfig.exists());

    let (ok, out) = kubectl(
        &kubeconfig,
        &["apply", "-f", "examples/virtualmachine/crd.yaml"],
    );
    assert!(ok, "{out}");
    wait_for("the CRD to be served", || {
        kubectl(&kubeconfig, &["get", "vm"]).0
    });
    let (ok, out) = kubectl(
        &kubeconfig,
        &["apply", "-f", "examples/virtualmachine/test-vm.yaml"],
    );
    assert!(ok, "{out}");
    wait_for("status.phase Active", || {
        vm_status(&kubeconfig)["phase"] == "Active"
    });
    assert_eq!(vm_status(&kubeconfig)["server"]["cpu"], 2);

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
    wait_for("the spec edit to be reconciled", || {
        vm_status(&kubeconfig)["server"]["cpu"] == 8
    });

    let (ok, out) = kubectl(&kubeconfig, &["delete", "vm", "test-vm", "--wait=true"]);
    assert!(ok, "{out}");
    std::thread::sleep(Duration::from_millis(500));

    // SIGTERM: stop taking keys, finish in-flight reconciles, exit 0.
    let killed = Command::new("kill")
        .args(["-TERM", &host.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = host.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "wasmctrl dev did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(dir.path().join("host.log")).unwrap();
    assert!(status.success(), "exit {status}; log:\n{log}");
    assert!(log.contains("shutting down"), "{log}");
    let complaints: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    assert!(
        complaints.is_empty(),
        "warnings or errors in the host's log:\n{}",
        complaints.join("\n")
    );
}
