//! `/metrics` of the real host, scraped as Prometheus scrapes it: over HTTPS with a
//! ServiceAccount's token. It parses with a real Prometheus exposition parser (the Python
//! `prometheus_client`'s), controller-runtime's reconcile counter agrees with the reconciles the
//! host's JSON log shows, and each kind of sandbox failure counts under its own label. The
//! secure endpoint serves only tokens allowed to get `/metrics` (401 without one, 403 for a
//! user without the metrics-reader role), and `--metrics-secure=false` serves plain HTTP.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use common::process::{Cluster, wait_for};
use serde_json::{Value, json};

/// Each hostile mode and the failure kind it must count as.
const FAILURES: [(&str, &str); 6] = [
    ("loop", "timeout"),
    ("alloc", "memory"),
    ("panic", "trap"),
    ("huge", "result_too_large"),
    ("undeclared", "undeclared"),
    ("terminal", "plugin_error"),
];

/// `GET /metrics` over HTTPS with `token` (the certificate taken unverified, as a scrape
/// config with `insecure_skip_verify` takes a self-signed one), which must answer 200 in the
/// Prometheus text format: the body.
fn scrape(addr: &str, token: &str) -> String {
    let (code, head, body) = common::http::get_tls(addr, "/metrics", Some(token), None);
    assert_eq!(code, 200, "{body}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    body
}

/// Every sample, as the Python client's Prometheus text parser reads them: `name{labels}` ->
/// value. Fails on anything the parser rejects.
fn parse(text: &str) -> BTreeMap<String, f64> {
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        out[f"{s.name}{{{labels}}}"] = s.value
print(json.dumps(out))
"#;
    let mut python = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("Debian's python3 (make deps installs python3-prometheus-client)");
    python
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = python.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the exposition does not parse: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Successful reconciles of `plugin` in the host's JSON log.
fn logged_successes(host: &common::process::Process, plugin: &str) -> f64 {
    host.log()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| {
            l["fields"]["message"] == "reconciled"
                && l["span"]["plugin.name"] == plugin
                && l["span"]["outcome"] == "Success"
        })
        .count() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_agree_with_the_log_and_count_each_sandbox_failure() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    common::things::install(&client).await;
    for crd in common::yaml_objects("examples/virtualmachine/crd.yaml") {
        common::install_crd(&client, crd).await;
    }
    // The virtualmachine plugin, and the hostile one once per failure mode (file names differ,
    // so do manifest names: hostile-<mode>).
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(
        common::plugin_path("virtualmachine"),
        plugins.join("virtualmachine.wasm"),
    )
    .unwrap();
    for (mode, _) in FAILURES {
        std::fs::copy(
            common::plugin_path("hostile"),
            plugins.join(format!("{mode}.wasm")),
        )
        .unwrap();
        let config = format!("deadline_ms = 200\n[settings]\nmode = \"{mode}\"\n");
        std::fs::write(plugins.join(format!("{mode}.toml")), config).unwrap();
    }
    let host = cluster.run_host(&plugins, &["--log-format", "json", "--metrics-secure"], &[]);
    let addr = host.address("metrics");
    let token = cluster.scraper_token("prometheus", true);

    let vms = common::yaml_objects("examples/virtualmachine/test-vm.yaml").remove(0);
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("cloudnative.tw", "v1alpha1", "VirtualMachine"),
            "virtualmachines",
        ),
    );
    for i in 0..5 {
        let mut vm = vms.clone();
        vm["metadata"]["name"] = json!(format!("vm-{i}"));
        api.create(&Default::default(), &serde_json::from_value(vm).unwrap())
            .await
            .unwrap();
    }
    common::things::create(&common::things::api(&client), "victim", json!({})).await;

    // Every failure kind counted, and the success counter equal to the log's successes.
    let success =
        r#"controller_runtime_reconcile_total{controller="virtualmachine",result="success"}"#;
    wait_for(60, "metrics that agree with the log", || {
        let samples = parse(&scrape(&addr, &token));
        let failures_seen = FAILURES.iter().all(|(mode, kind)| {
            let key = format!(
                r#"wasmctrl_sandbox_failures_total{{controller="hostile-{mode}",kind="{kind}"}}"#
            );
            samples.get(&key).is_some_and(|v| *v >= 1.0)
        });
        let logged = logged_successes(&host, "virtualmachine");
        failures_seen && logged >= 5.0 && samples.get(success) == Some(&logged)
    });

    let samples = parse(&scrape(&addr, &token));
    let get = |key: &str| {
        samples
            .get(key)
            .copied()
            .unwrap_or_else(|| panic!("no {key}"))
    };
    assert_eq!(
        get(r#"controller_runtime_max_concurrent_reconciles{controller="virtualmachine"}"#),
        4.0
    );
    assert!(get(r#"workqueue_adds_total{name="virtualmachine"}"#) >= 5.0);
    assert!(
        get(r#"controller_runtime_reconcile_time_seconds_count{controller="virtualmachine"}"#)
            >= 5.0
    );
    assert!(get(r#"workqueue_queue_duration_seconds_count{name="virtualmachine"}"#) >= 5.0);
    assert!(get(r#"wasmctrl_sandbox_call_seconds_count{controller="virtualmachine"}"#) >= 5.0);
    assert_eq!(get(r#"wasmctrl_plugin_loads_total{result="loaded"}"#), 7.0);
    assert_eq!(
        get(r#"wasmctrl_cached_objects{kind="cloudnative.tw/v1alpha1/VirtualMachine"}"#),
        5.0
    );
    assert!(get(r#"wasmctrl_guest_memory_peak_bytes{controller="virtualmachine"}"#) > 0.0);
    // Exported per controller (its value depends on how the echoes raced the queue).
    get(r#"wasmctrl_reconciles_held_total{controller="virtualmachine"}"#);
    let info = samples
        .keys()
        .find(|k| k.starts_with("wasmctrl_plugin_info{") && k.contains(r#"name="virtualmachine""#))
        .expect("plugin info");
    assert!(
        info.contains("digest=\"") && info.contains("version=\"0.1.0\""),
        "{info}"
    );
    // The host's own API requests, as client-go counts them.
    let requests: f64 = samples
        .iter()
        .filter(|(k, _)| k.starts_with("rest_client_requests_total{code=\"201\""))
        .map(|(_, v)| v)
        .sum();
    assert!(
        requests >= 1.0,
        "no created events or status writes counted"
    );
    let gets = samples.keys().find(|k| {
        k.starts_with("rest_client_requests_total{code=\"200\",host=\"127.0.0.1:")
            && k.contains("method=\"GET\"")
    });
    assert!(
        gets.is_some(),
        "{:?}",
        samples
            .keys()
            .filter(|k| k.starts_with("rest"))
            .collect::<Vec<_>>()
    );
    assert!(
        samples
            .keys()
            .any(|k| k.starts_with("rest_client_request_duration_seconds_count{"))
    );
    // Terminal errors are errors too, and counted apart.
    assert!(
        get(r#"controller_runtime_terminal_reconcile_errors_total{controller="hostile-terminal"}"#)
            >= 1.0
    );
    assert!(get(r#"controller_runtime_reconcile_errors_total{controller="hostile-loop"}"#) >= 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secure_endpoint_serves_only_tokens_allowed_to_get_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    let plugins = common::process::plugin_dir(dir.path(), &[]);
    let certs = dir.path().join("certs");
    let ca = common::certificates(&certs);
    // As ServiceAccount wasmctrl/wasmctrl with only what `wasmctrl rbac` grants it: its
    // ClusterRole lets it review its scrapers' tokens and access.
    let host = cluster.run_host_rbac(
        &plugins,
        &[
            "--metrics-secure=true",
            "--metrics-cert-dir",
            certs.to_str().unwrap(),
        ],
        &[],
    );
    let addr = host.address("metrics");
    let reader = cluster.scraper_token("prometheus", true);
    let nobody = cluster.scraper_token("nobody", false);

    // The certificate is the one in the directory: it verifies against its CA.
    let get = |token: Option<&str>| common::http::get_tls(&addr, "/metrics", token, Some(&ca));
    let (code, _, body) = get(None);
    assert_eq!((code, body.trim()), (401, "Unauthorized"));
    let (code, _, body) = get(Some("not-a-token"));
    assert_eq!((code, body.trim()), (401, "Unauthorized"));
    let (code, _, body) = get(Some(&nobody));
    assert_eq!(
        (code, body.trim()),
        (
            403,
            "Authorization denied for user system:serviceaccount:monitoring:nobody"
        )
    );
    for _ in 0..3 {
        let (code, head, body) = get(Some(&reader));
        assert_eq!(code, 200, "{body}");
        assert!(head.contains("text/plain; version=0.0.4"), "{head}");
        // The host's own reviews, as client-go counts requests.
        assert!(
            body.contains(r#"rest_client_requests_total{code="201",method="POST""#),
            "{body}"
        );
    }
    // Each token was reviewed once: the later scrapes were answered from the cache.
    let requests = cluster.requests().await;
    let reviews = |resource: &str| {
        (requests.iter())
            .filter(|r| r["resource"] == resource && r["verb"] == "create")
            .count()
    };
    assert_eq!(reviews("tokenreviews"), 3);
    assert_eq!(reviews("subjectaccessreviews"), 2);
    host.assert_quiet("host");

    // --metrics-secure=false: plain HTTP, no token needed, as before.
    let plain = cluster.run_host(&plugins, &["--metrics-secure=false"], &[]);
    let (code, body) = common::http::get(&plain.address("metrics"), "/metrics");
    assert_eq!(code, 200, "{body}");
}
