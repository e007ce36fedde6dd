//! Plugin status a person sees with kubectl: with the downward API's POD_NAME/POD_NAMESPACE
//! set, the host leaves a Warning `PluginLoadFailed` event on its own Pod for a plugin file it
//! refuses, and a Normal `PluginLoaded` one for each plugin it serves.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use kube::api::{Api, DynamicObject};
use serde_json::json;

use common::process::{Cluster, plugin_dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_plugin_leaves_a_warning_on_the_hosts_pod() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    let pod = serde_json::from_value(json!({"metadata": {"name": "wasmctrl-7d9f"},
        "spec": {"containers": [{"name": "wasmctrl", "image": "wasmctrl"}]}}))
    .unwrap();
    let pod = pods.create(&Default::default(), &pod).await.unwrap();
    let plugins = plugin_dir(dir.path(), &[("trivial", None)]);
    std::fs::write(plugins.join("broken.wasm"), b"\0asm, but not really").unwrap();
    let env = [("POD_NAME", "wasmctrl-7d9f"), ("POD_NAMESPACE", "default")];
    let host = cluster.run_host(&plugins, &[], &env);

    let events = common::events(&client, "default");
    let about_pod = || async {
        let list = events.list(&Default::default()).await.unwrap();
        let mine: Vec<DynamicObject> = (list.items.into_iter())
            .filter(|e| e.data["regarding"]["name"] == "wasmctrl-7d9f")
            .collect();
        let has = |reason: &str| mine.iter().any(|e| e.data["reason"] == reason);
        (has("PluginLoadFailed") && has("PluginLoaded")).then_some(mine)
    };
    let mine = common::eventually(30, "both events on the host's Pod", about_pod).await;
    let failed = mine
        .iter()
        .find(|e| e.data["reason"] == "PluginLoadFailed")
        .unwrap();
    assert_eq!(failed.data["type"], "Warning");
    let note = failed.data["note"].as_str().unwrap();
    assert!(note.starts_with("broken.wasm: "), "{note}");
    assert!(
        note.contains("not a loadable WebAssembly component"),
        "{note}"
    );
    assert_eq!(failed.data["regarding"]["kind"], "Pod");
    assert_eq!(
        failed.data["regarding"]["uid"],
        json!(pod.metadata.uid.unwrap())
    );
    assert_eq!(failed.data["reportingController"], "wasmctrl");
    let loaded = mine
        .iter()
        .find(|e| e.data["reason"] == "PluginLoaded")
        .unwrap();
    assert_eq!(loaded.data["type"], "Normal");
    assert!(
        loaded.data["note"]
            .as_str()
            .unwrap()
            .starts_with("plugin trivial ")
    );
    drop(host);
}

/// The permission preflight of a file plugin: a host without the RBAC its plugin needs says
/// which requests it may not make, in its log, its metrics and an event on its Pod, and serves
/// the plugin regardless.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_plugin_the_host_lacks_rights_for_is_reported_on_its_pod() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    common::things::install(&client).await;
    // The host's own RBAC only, for a directory without plugins.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    cluster.apply_yaml(&common::process::rbac_yaml(&empty));
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "wasmctrl");
    let pod = serde_json::from_value(json!({"metadata": {"name": "wasmctrl-0"},
        "spec": {"containers": [{"name": "wasmctrl", "image": "wasmctrl"}]}}))
    .unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    let plugins = plugin_dir(dir.path(), &[("trivial", None)]);
    let kubeconfig = cluster.service_account_kubeconfig("wasmctrl", "wasmctrl");
    let env = [("POD_NAME", "wasmctrl-0"), ("POD_NAMESPACE", "wasmctrl")];
    let host = cluster.run_host_with(&kubeconfig, &plugins, &[], &env);

    let events = common::events(&client, "wasmctrl");
    let note = common::eventually(30, "the MissingPermissions event", || async {
        let list = events.list(&Default::default()).await.unwrap();
        (list.items.into_iter())
            .find(|e| {
                e.data["regarding"]["name"] == "wasmctrl-0"
                    && e.data["reason"] == "MissingPermissions"
            })
            .map(|e| e.data["note"].as_str().unwrap_or_default().to_string())
    })
    .await;
    for rule in [
        "list things.example.com cluster-wide",
        "watch things.example.com cluster-wide",
        "patch things.example.com/status cluster-wide",
    ] {
        assert!(note.contains(rule), "{rule} in: {note}");
    }
    assert!(note.starts_with("plugin trivial: "), "{note}");
    let missing = host.sample(r#"wasmctrl_plugin_missing_permissions{controller="trivial"}"#);
    assert!(missing.is_some_and(|n| n >= 3.0), "{missing:?}");
    assert!(
        host.log()
            .contains("the host lacks permissions this plugin needs"),
        "{}",
        host.log()
    );
}
