//! A workload-owning plugin in dev mode, as most operators are: the `webapp` test plugin owns a
//! StatefulSet, a headless Service and a PersistentVolumeClaim per WebApp, under the RBAC
//! generated from its manifest, against the embedded API server. Its status reports what it
//! reads back of its children, typed, so kube's defaults and canonical quantities are seen
//! reaching a plugin as they would on a cluster. Its own test binary because it captures the
//! process's warnings and errors.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use wasmctrl::apiserver::ApiServer;

fn crd() -> Value {
    let spec = json!({"type": "object", "required": ["image"], "properties": {
        "replicas": {"type": "integer", "minimum": 0},
        "image": {"type": "string"},
        "storage": {"x-kubernetes-int-or-string": true}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "webapps.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "WebApp", "plural": "webapps", "singular": "webapp", "listKind": "WebAppList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": spec,
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_owning_a_statefulset_service_and_claim_reconciles_in_dev_mode() {
    let complaints = common::Captured::global(tracing::Level::WARN);
    // With the garbage collector, as `wasmctrl dev` runs it.
    let server = ApiServer::builder().gc(true).build().unwrap();
    let client = server.client();
    common::install_crd(&client, crd()).await;
    let gvk = GroupVersionKind::gvk("example.com", "v1", "WebApp");
    let apps: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "webapps"),
    );
    let app = json!({"apiVersion": "example.com/v1", "kind": "WebApp", "metadata": {"name": "shop"},
        "spec": {"replicas": 2, "image": "nginx:1.27", "storage": "2048Mi"}});
    apps.create(
        &PostParams::default(),
        &serde_json::from_value(app).unwrap(),
    )
    .await
    .unwrap();

    // The host holds only the RBAC generated from what the plugin declares.
    let host = common::host_of(&server, "webapp", &json!({})).await;

    // The status is what the plugin read back of its children: the Service's cluster IP, the
    // claim's phase and the StatefulSet's defaults and quantities, as the server stores them.
    let status = common::eventually(30, "the children read back", || async {
        common::status_of(&apps, "shop")
            .await
            .filter(|s| s["claimPhase"] == "Pending" && s["replicas"] == 2)
    })
    .await;
    assert_eq!(
        status,
        json!({"observedGeneration": 1, "serviceClusterIP": "None", "claimPhase": "Pending",
            "replicas": 2, "podManagementPolicy": "OrderedReady", "claimStorage": "2Gi"})
    );
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let set = sets.get("shop").await.unwrap();
    let owner = &set.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("WebApp", "shop")
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(
        set.spec.as_ref().unwrap().service_name.as_deref(),
        Some("shop")
    );
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service = services.get("shop").await.unwrap();
    assert_eq!(service.spec.unwrap().cluster_ip.as_deref(), Some("None"));
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let claim = claims.get("shop-shared").await.unwrap();
    let requests = claim.spec.unwrap().resources.unwrap().requests.unwrap();
    assert_eq!(requests["storage"].0, "2Gi");

    let patch = json!({"spec": {"replicas": 3}});
    apps.patch("shop", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let status = common::eventually(30, "three replicas", || async {
        common::status_of(&apps, "shop")
            .await
            .filter(|s| s["replicas"] == 3 && s["observedGeneration"] == 2)
    })
    .await;
    assert_eq!(status["claimStorage"], "2Gi");
    assert_eq!(
        sets.get("shop").await.unwrap().spec.unwrap().replicas,
        Some(3)
    );

    // Deleted, its children go with it through their owner references.
    apps.delete("shop", &DeleteParams::default()).await.unwrap();
    common::eventually(30, "the children to be collected", || async {
        let gone = sets.get_opt("shop").await.unwrap().is_none()
            && services.get_opt("shop").await.unwrap().is_none()
            && claims.get_opt("shop-shared").await.unwrap().is_none();
        gone.then_some(())
    })
    .await;
    host.shutdown(Duration::from_secs(5)).await;
    let logged = complaints.text();
    assert!(
        logged.is_empty(),
        "the host logged warnings or errors:\n{logged}"
    );
}
