//! WasmPlugin and ClusterWasmPlugin: their generated CRDs install on the embedded API server,
//! objects of both kinds round-trip through typed clients, and the schema refuses what the
//! types say is wrong.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use wasmctrl::apiserver::ApiServer;
use wasmctrl::plugins::resources::{
    ClusterWasmPlugin, ClusterWasmPluginSpec, PluginSource, WasmPlugin, WasmPluginSpec,
};

fn source(module: &str) -> PluginSource {
    let settings = serde_json::json!({"deployment": "tools", "nested": {"a": [1, {"b": true}]}});
    PluginSource {
        module: module.into(),
        settings: settings.as_object().cloned(),
        memory_mib: Some(64),
        ..PluginSource::default()
    }
}

/// `error` is the API server's 422 Invalid, naming `field`.
fn invalid(error: kube::Error, field: &str) {
    let kube::Error::Api(status) = error else {
        panic!("{error:?}")
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(status.message.contains(field), "{}", status.message);
}

#[tokio::test]
async fn the_crds_install_and_both_kinds_round_trip() {
    let server = ApiServer::new().unwrap();
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let yaml = wasmctrl::plugins::resources::crds_yaml().unwrap();
    for document in serde_yaml::Deserializer::from_str(&yaml) {
        let crd: CustomResourceDefinition = serde::Deserialize::deserialize(document).unwrap();
        let name = crd.metadata.name.clone().unwrap();
        let created = crds.create(&PostParams::default(), &crd).await.unwrap();
        let established = (created.status.and_then(|s| s.conditions))
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        assert!(established, "{name} is not established");
    }

    let cluster: Api<ClusterWasmPlugin> = Api::all(client.clone());
    let mut vm = ClusterWasmPlugin::new(
        "virtualmachine",
        ClusterWasmPluginSpec {
            source: source("oci://registry.example.com/plugins/virtualmachine:0.1.0"),
            namespaces: Some(vec!["team-a".into()]),
            approve: vec!["apply v1/ConfigMap in all namespaces (beside the owner)".into()],
        },
    );
    let created = cluster.create(&PostParams::default(), &vm).await.unwrap();
    assert_eq!(
        created.spec, vm.spec,
        "the settings object and every field survive"
    );

    let team: Api<WasmPlugin> = Api::namespaced(client.clone(), "default");
    let own = WasmPlugin::new(
        "restarter",
        WasmPluginSpec {
            source: source("oci://registry.example.com/plugins/pod-restarter@sha256:0123"),
            service_account_name: Some("restarter".into()),
        },
    );
    let created = team.create(&PostParams::default(), &own).await.unwrap();
    assert_eq!(created.spec, own.spec);

    // A module that is not an oci:// reference is refused by the schema.
    vm.metadata.name = Some("from-a-file".into());
    vm.spec.source.module = "/plugins/vm.wasm".into();
    let refused = cluster.create(&PostParams::default(), &vm).await;
    invalid(refused.unwrap_err(), "spec.module");

    // A ServiceAccount name that is not one, and `approve` on a tenant's (pruned: only the
    // operator's kind has it).
    let mut other = own.clone();
    other.metadata.name = Some("colon".into());
    other.spec.service_account_name = Some("a:b".into());
    let refused = team.create(&PostParams::default(), &other).await;
    invalid(refused.unwrap_err(), "spec.serviceAccountName");
    let raw: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource::erase::<WasmPlugin>(&()),
    );
    let approving: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "wasmctrl.io/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": "self-approving", "namespace": "default"},
        "spec": {"module": "oci://registry.example.com/plugins/p:1", "approve": ["get v1/Secret"]},
    }))
    .unwrap();
    let created = raw
        .create(&PostParams::default(), &approving)
        .await
        .unwrap();
    assert!(
        created.data["spec"].get("approve").is_none(),
        "{:?}",
        created.data
    );
}
