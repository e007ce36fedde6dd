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
    let plugins = common::process::plugin_dir(dir.path(), &[("virtualmachine", None)]);
    let kubeconfig = dir.path().join("kubeconfig");
    let host = Process::dev(&plugins, &kubeconfig, dir.path().join("host.log"));
    wait_for(30, "the kubeconfig", || kubeconfig.exists());
    let (ok, out) = kubectl(
        &kubeconfig,
        &["apply", "-f", "examples/virtualmachine/crd.yaml"],
    );
    assert!(ok, "{out}");
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
