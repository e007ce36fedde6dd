//! A CRD's `default`s are checked against their schema as kube-apiserver checks them (422
//! `Invalid` with kube's causes), and valid ones are applied to its objects.

#![allow(clippy::unwrap_used)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use wasmctrl_apiserver::ApiServer;

use crate::common;

fn crd(size: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "boxes.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "boxes", "singular": "box", "kind": "Box", "listKind": "BoxList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": size}}}}}}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_crd_whose_default_breaks_its_schema_is_refused_and_a_valid_one_applies() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());

    let bad = crd(json!({"type": "integer", "minimum": 1, "default": 0}));
    let status = common::refusal(crds.create(&PostParams::default(), &bad).await);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let causes = status.details.unwrap().causes;
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(
        causes[0].field,
        "spec.validation.openAPIV3Schema.properties[spec].properties[size].default"
    );
    assert_eq!(
        causes[0].message,
        "Invalid value: 0:  in body should be greater than or equal to 1"
    );
    assert_eq!(causes[0].reason, "FieldValueInvalid");
    assert!(crds.get_opt("boxes.example.com").await.unwrap().is_none());

    let good = crd(json!({"type": "integer", "minimum": 1, "default": 3}));
    crds.create(&PostParams::default(), &good).await.unwrap();
    let ar = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Box".into(),
        plural: "boxes".into(),
    };
    let boxes: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let object: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1",
        "kind": "Box", "metadata": {"name": "b"}, "spec": {}}))
    .unwrap();
    let created = boxes.create(&PostParams::default(), &object).await.unwrap();
    assert_eq!(created.data["spec"]["size"], 3);
}
