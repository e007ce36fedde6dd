//! The plugins' webhooks end to end: `wasmctrl dev` serves the virtualmachine plugin's
//! validating and defaulting webhooks and registers them with its embedded API server, which
//! calls them as kube-apiserver does; the real kubectl sees the plugin's refusal, its default,
//! its warning, and a server-side dry run reaching the webhook.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::process::{Process, kubectl, wait_for};
use serde_json::Value;

const VALIDATOR: &str = "vvirtualmachine-v1alpha1.virtualmachine.wasmctrl.io";

fn vm(name: &str, cpu: i64, memory: &str) -> String {
    format!(
        "apiVersion: cloudnative.tw/v1alpha1\nkind: VirtualMachine\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  resource:\n    cpu: {cpu}\n    memory: {memory}\n    rootDisk: 40Gi\n"
    )
}

#[test]
fn kubectl_meets_the_virtualmachine_plugins_webhooks_in_dev_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (host, kubeconfig) = Process::dev_with_crd(
        dir.path(),
        "virtualmachine",
        "examples/virtualmachine/crd.yaml",
    );
    wait_for(30, "the plugin's webhooks to be registered", || {
        let (ok, out) = kubectl(
            &kubeconfig,
            &["get", "validatingwebhookconfigurations", "-o", "name"],
        );
        ok && out.contains("wasmctrl-validating-webhook-configuration")
    });
    let file = |name: &str, yaml: String| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        path.to_str().unwrap().to_string()
    };

    // Refused with the plugin's message, as kube words a webhook's denial (a memory the CRD's
    // schema lets through: a CPU below 1 the schema itself refuses, before any validating
    // webhook, as kube-apiserver orders them).
    let bad = file("bad", vm("bad", 2, "lots"));
    let (ok, out) = kubectl(&kubeconfig, &["apply", "-f", &bad]);
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "admission webhook \"{VALIDATOR}\" denied the request: spec.resource.memory is not a quantity: \"lots\""
        )),
        "{out}\n{}",
        host.log()
    );
    assert!(
        !kubectl(&kubeconfig, &["get", "vm", "bad"]).0,
        "nothing stored"
    );

    // A server-side dry run reaches the webhooks and stores nothing.
    let (ok, out) = kubectl(&kubeconfig, &["apply", "--dry-run=server", "-f", &bad]);
    assert!(!ok && out.contains("denied the request"), "{out}");
    let dry = file("dry", vm("dry", 2, "4Gi"));
    let (ok, out) = kubectl(&kubeconfig, &["apply", "--dry-run=server", "-f", &dry]);
    assert!(ok && out.contains("(server dry run)"), "{out}");
    assert!(
        !kubectl(&kubeconfig, &["get", "vm", "dry"]).0,
        "a dry run stores nothing"
    );

    // Defaulted: the action the manifest leaves out reads back as the plugin set it.
    let good = file("good", vm("test-vm", 2, "4Gi"));
    let (ok, out) = kubectl(&kubeconfig, &["apply", "-f", &good]);
    assert!(ok, "{out}");
    let (ok, out) = kubectl(&kubeconfig, &["get", "vm", "test-vm", "-o", "json"]);
    assert!(ok, "{out}");
    let stored: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stored["spec"]["action"], "start", "{stored}");

    // The validator's warning, printed by kubectl.
    let fewer = file("fewer", vm("test-vm", 1, "4Gi"));
    let (ok, out) = kubectl(&kubeconfig, &["apply", "-f", &fewer]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Warning: test-vm: fewer CPUs (2 -> 1) take effect at the next restart"),
        "{out}"
    );

    // controller-runtime's webhook metrics.
    let answered = host.sample(
        r#"controller_runtime_webhook_requests_total{webhook="/validate-cloudnative-tw-v1alpha1-virtualmachine",code="200"}"#,
    );
    assert!(answered.is_some_and(|n| n >= 4.0), "{answered:?}");
    let latency = host.sample(
        r#"controller_runtime_webhook_latency_seconds_count{webhook="/mutate-cloudnative-tw-v1alpha1-virtualmachine"}"#,
    );
    assert!(latency.is_some_and(|n| n >= 1.0), "{latency:?}");
}

#[test]
fn the_checked_in_webhook_configurations_are_what_wasmctrl_webhooks_prints() {
    let plugins = common::plugin_dirs()[0].clone();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(["webhooks", "--plugins"])
        .arg(&plugins)
        .args(["--crds", "examples", "--namespace", "wasmctrl"])
        .current_dir(common::repo_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let checked_in =
        std::fs::read_to_string(common::repo_root().join("examples/deploy-webhooks/webhooks.yaml"))
            .unwrap();
    let checked_in: String = (checked_in.lines())
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        checked_in == printed,
        "examples/deploy-webhooks/webhooks.yaml is not what the example plugins serve: run make deploy-manifests\n{printed}"
    );
    // The virtualmachine plugin's two webhooks, behind the host's Service, with cert-manager's CA.
    assert!(
        printed.contains("path: /validate-cloudnative-tw-v1alpha1-virtualmachine"),
        "{printed}"
    );
    assert!(
        printed.contains("path: /mutate-cloudnative-tw-v1alpha1-virtualmachine"),
        "{printed}"
    );
    assert!(
        printed.contains("cert-manager.io/inject-ca-from: wasmctrl/wasmctrl-serving-cert"),
        "{printed}"
    );
}

#[test]
fn wasmctrl_test_answers_an_admission_review_offline() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let plugin = common::plugin_dirs()[0].join("virtualmachine.wasm");
    let review = |cpu: i64| {
        let path = dir.path().join(format!("review-{cpu}.yaml"));
        let object = serde_json::json!({"apiVersion": "cloudnative.tw/v1alpha1", "kind": "VirtualMachine",
            "metadata": {"name": "vm", "namespace": "default"},
            "spec": {"resource": {"cpu": cpu, "memory": "4Gi", "rootDisk": "40Gi"}}});
        let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "operation": "CREATE",
                "kind": {"group": "cloudnative.tw", "version": "v1alpha1", "kind": "VirtualMachine"},
                "resource": {"group": "cloudnative.tw", "version": "v1alpha1", "resource": "virtualmachines"},
                "name": "vm", "namespace": "default", "userInfo": {"username": "alice"},
                "object": object}});
        std::fs::write(&path, serde_yaml::to_string(&review).unwrap()).unwrap();
        path.to_str().unwrap().to_string()
    };
    let run = |review: String| {
        let out =
            common::process::wasmctrl_test(&[plugin.to_str().unwrap(), "--admission", &review]);
        let answer: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), answer)
    };

    let (code, answer) = run(review(2));
    assert_eq!(code, Some(0), "{answer}");
    let response = &answer["response"];
    assert_eq!(
        (response["uid"].as_str(), response["allowed"].as_bool()),
        (Some("u-1"), Some(true))
    );
    assert_eq!(response["patchType"], "JSONPatch");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().unwrap())
        .unwrap();
    let patch: Value = serde_json::from_slice(&patch).unwrap();
    assert_eq!(
        patch,
        serde_json::json!([{"op": "add", "path": "/spec/action", "value": "start"}])
    );

    let (code, answer) = run(review(0));
    assert_eq!(code, Some(1), "{answer}");
    let response = &answer["response"];
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(
        response["status"]["message"],
        "spec.resource.cpu must be positive, got 0"
    );
}

/// A line read from a child's stdout, or `None` when it ended.
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead as _;
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

#[test]
fn kubectl_reads_and_writes_memcacheds_through_both_versions_in_dev_mode() {
    const ALPHA: &str = "memcacheds.v1alpha1.cache.example.com";
    const BETA: &str = "memcacheds.v1beta1.cache.example.com";
    let dir = tempfile::tempdir().unwrap();
    let (host, kubeconfig) =
        Process::dev_with_crd(dir.path(), "memcached", "examples/memcached/crd.yaml");
    wait_for(60, "the plugin's conversion webhook on the CRD", || {
        let path = "jsonpath={.spec.conversion.strategy}";
        let (ok, out) = kubectl(
            &kubeconfig,
            &["get", "crd", "memcacheds.cache.example.com", "-o", path],
        );
        ok && out.trim() == "Webhook"
    });

    // Written through v1beta1, stored as v1alpha1 (read back at the storage version's field).
    let beta = dir.path().join("beta.yaml");
    std::fs::write(
        &beta,
        "apiVersion: cache.example.com/v1beta1\nkind: Memcached\nmetadata:\n  name: beta\n  namespace: default\nspec:\n  replicas: 2\n",
    )
    .unwrap();
    let (ok, out) = kubectl(&kubeconfig, &["apply", "-f", beta.to_str().unwrap()]);
    assert!(ok, "{out}\n{}", host.log());
    let field = |resource: &str, path: &str| {
        let (ok, out) = kubectl(
            &kubeconfig,
            &[
                "get",
                resource,
                "beta",
                "-o",
                &format!("jsonpath={{{path}}}"),
            ],
        );
        assert!(ok, "{out}");
        out.trim().to_string()
    };
    assert_eq!(field(ALPHA, ".spec.size"), "2");
    assert_eq!(field(BETA, ".spec.replicas"), "2");
    assert_eq!(field(BETA, ".apiVersion"), "cache.example.com/v1beta1");

    // Listed through v1beta1 with that version's columns.
    let (ok, out) = kubectl(&kubeconfig, &["get", BETA]);
    assert!(ok, "{out}");
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "REPLICAS", "AVAILABLE", "AGE"], "{out}");
    assert!(out.lines().nth(1).unwrap().starts_with("beta "), "{out}");

    // The controller reconciles it at v1alpha1, whatever version it was written through.
    wait_for(60, "the Deployment of 2 replicas", || {
        let (ok, out) = kubectl(
            &kubeconfig,
            &[
                "get",
                "deployment",
                "beta",
                "-o",
                "jsonpath={.spec.replicas}",
            ],
        );
        ok && out.trim() == "2"
    });

    // Watched through v1beta1: a change made through v1alpha1 arrives converted.
    let mut watch = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "get",
            BETA,
            "beta",
            "--watch",
            "-o",
            "jsonpath={.spec.replicas}{\"\\n\"}",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(&mut watch);
    let first = lines.recv_timeout(std::time::Duration::from_secs(30));
    assert_eq!(first.as_deref(), Ok("2"), "the watch's first event");
    let (ok, out) = kubectl(
        &kubeconfig,
        &[
            "patch",
            ALPHA,
            "beta",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"size":3}}"#,
        ],
    );
    assert!(ok, "{out}");
    let next = loop {
        match lines.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok(line) if line == "2" => continue,
            other => break other,
        }
    };
    let _ = watch.kill();
    assert_eq!(next.as_deref(), Ok("3"), "{}", host.log());
    let converted =
        host.sample(r#"controller_runtime_webhook_requests_total{webhook="/convert",code="200"}"#);
    assert!(converted.is_some_and(|n| n >= 3.0), "{converted:?}");
}
