//! `--data-dir`: the real binary killed with SIGKILL keeps every acknowledged write.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config, ResourceExt};
use serde_json::json;

/// The server process, killed when dropped: a failed assertion must not leave it running.
struct Server(Child);

impl Server {
    /// SIGKILL, as a crash.
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn start(data: &std::path::Path, kubeconfig: &std::path::Path) -> Server {
    let _ = std::fs::remove_file(kubeconfig);
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(["apiserver", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(kubeconfig)
        .arg("--data-dir")
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening on"), "{line}");
    Server(child)
}

async fn client(kubeconfig: &std::path::Path) -> Client {
    let start = Instant::now();
    loop {
        if let Ok(kc) = Kubeconfig::read_from(kubeconfig) {
            let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .unwrap();
            return Client::try_from(cfg).unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "kubeconfig never written"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn sigkill_keeps_acknowledged_writes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let kc = dir.path().join("kubeconfig");
    let mut child = start(&data, &kc);
    let api: Api<ConfigMap> = Api::default_namespaced(client(&kc).await);
    for i in 0..50 {
        let c: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("p{i}")}, "data": {"i": i.to_string()}}),
        )
        .unwrap();
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    api.delete("p0", &DeleteParams::default()).await.unwrap();
    // A CRD and one of its objects: the resource must be served again after the restart.
    let crds: Api<CustomResourceDefinition> = Api::all(api.clone().into_client());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::default_namespaced_with(api.clone().into_client(), &ar);
    let w: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"n": 1}})).unwrap();
    widgets.create(&PostParams::default(), &w).await.unwrap();
    // The namespace's root CA ConfigMap is the server's own, not one of the writes.
    let written = ListParams::default().fields("metadata.name!=kube-root-ca.crt");
    let before = api.list(&written).await.unwrap();
    child.kill();

    let mut child = start(&data, &kc);
    let api: Api<ConfigMap> = Api::default_namespaced(client(&kc).await);
    let after = api.list(&written).await.unwrap();
    let names = |l: &kube::api::ObjectList<ConfigMap>| -> Vec<(String, Option<String>)> {
        l.items
            .iter()
            .map(|c| (c.name_any(), c.resource_version()))
            .collect()
    };
    assert_eq!(names(&before), names(&after));
    assert_eq!(after.items.len(), 49);
    let widgets: Api<DynamicObject> = Api::default_namespaced_with(api.clone().into_client(), &ar);
    assert_eq!(widgets.get("w").await.unwrap().data["spec"]["n"], 1);
    // resourceVersions keep growing after the restart.
    let c: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "after"}})).unwrap();
    let created = api.create(&PostParams::default(), &c).await.unwrap();
    let rv: u64 = created.resource_version().unwrap().parse().unwrap();
    let old: u64 = before.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv > old);
    child.kill();
}
