//! CRD conversion webhooks, called by the embedded server as kube-apiserver calls them: a
//! `Box` stored as `v1alpha1` (`spec.size`) and served as `v1beta1` too (`spec.replicas`),
//! converted by a test webhook over HTTPS that records every review it is sent.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Path, State};
use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams, WatchParams};
use kube::core::{GroupVersionKind, WatchEvent};
use serde_json::{Value, json};
use wasmctrl_apiserver::ApiServer;

use crate::common;

/// The reviews the webhook was sent.
#[derive(Default)]
struct Seen(Mutex<Vec<Value>>);

impl Seen {
    fn requests(&self) -> Vec<Value> {
        let seen = self.0.lock().unwrap();
        seen.iter().map(|r| r["request"].clone()).collect()
    }
}

/// The test conversion webhook: `/convert` renames `spec.size` (v1alpha1) to `spec.replicas`
/// (v1beta1) and back; `/refuse` answers a failed review.
async fn convert(
    State(seen): State<Arc<Seen>>,
    Path(path): Path<String>,
    Json(review): Json<Value>,
) -> Json<Value> {
    seen.0.lock().unwrap().push(review.clone());
    let request = &review["request"];
    if review["kind"] == "AdmissionReview" {
        return Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": request["uid"], "allowed": true}}),
        );
    }
    let desired = request["desiredAPIVersion"].as_str().unwrap().to_string();
    let mut response = json!({"uid": request["uid"], "result": {"status": "Success"}});
    if path == "refuse" {
        response["result"] = json!({"status": "Failure", "message": "no conversion today"});
    } else {
        let converted: Vec<Value> = (request["objects"].as_array().unwrap().iter())
            .map(|o| {
                let mut o = o.clone();
                let (from, to) = if desired.ends_with("/v1beta1") {
                    ("size", "replicas")
                } else {
                    ("replicas", "size")
                };
                if let Some(n) = o["spec"].as_object_mut().and_then(|s| s.remove(from)) {
                    o["spec"][to] = n;
                }
                o["apiVersion"] = json!(desired);
                o
            })
            .collect();
        response["convertedObjects"] = json!(converted);
    }
    Json(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": response}),
    )
}

/// The Box CRD, converted by the webhook at `url`.
fn crd(url: &str, bundle: &str) -> Value {
    let version = |name: &str, field: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}},
            "additionalPrinterColumns": [{"name": field, "type": "integer",
                "jsonPath": format!(".spec.{field}")}]})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "boxes.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "boxes", "singular": "box", "kind": "Box"},
            "versions": [version("v1alpha1", "size", true), version("v1beta1", "replicas", false)],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": url, "caBundle": bundle},
                "conversionReviewVersions": ["v1"]}}}})
}

/// The test webhook served, the CRD registered with its `path`: the client, what the
/// webhook saw, its base URL and CA bundle, and what keeps both running.
async fn setup(path: &str) -> (kube::Client, Arc<Seen>, (String, String), impl Drop) {
    let server = ApiServer::new().unwrap();
    let (client, http) = common::http_client(&server).await;
    let seen = Arc::new(Seen::default());
    let app = axum::Router::new()
        .route("/{path}", axum::routing::post(convert))
        .with_state(seen.clone());
    let (base, bundle, served) = common::https(app).await;
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &crd_resource());
    let crd: DynamicObject =
        serde_json::from_value(crd(&format!("{base}/{path}"), &bundle)).unwrap();
    let created = crds.create(&PostParams::default(), &crd).await.unwrap();
    assert_eq!(
        created.data["spec"]["conversion"]["strategy"], "Webhook",
        "{created:?}"
    );
    let keep = Keep(server, http, served);
    (client, seen, (base, bundle), keep)
}

struct Keep<A, B>(A, B, tokio::task::JoinHandle<()>);

impl<A, B> Drop for Keep<A, B> {
    fn drop(&mut self) {
        self.2.abort();
    }
}

fn crd_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    ApiResource::from_gvk_with_plural(&gvk, "customresourcedefinitions")
}

fn boxes(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", version, "Box");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "boxes");
    Api::namespaced_with(client.clone(), "default", &resource)
}

fn a_box(version: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": format!("example.com/{version}"), "kind": "Box",
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}

#[tokio::test]
async fn objects_stored_as_one_version_are_read_and_written_through_another() {
    let (client, seen, _, _keep) = setup("convert").await;
    let (alpha, beta) = (boxes(&client, "v1alpha1"), boxes(&client, "v1beta1"));
    let pp = PostParams::default();

    // At the storage version, nothing is converted.
    alpha
        .create(&pp, &a_box("v1alpha1", "a", json!({"size": 2})))
        .await
        .unwrap();
    assert!(seen.requests().is_empty(), "{:?}", seen.requests());

    // Read through the other version: converted, metadata kept.
    let a = beta.get("a").await.unwrap();
    assert_eq!(a.data["spec"], json!({"replicas": 2}));
    assert_eq!(a.types.as_ref().unwrap().api_version, "example.com/v1beta1");
    assert!(a.metadata.uid.is_some() && a.metadata.resource_version.is_some());
    let asked = seen.requests().pop().unwrap();
    assert_eq!(asked["desiredAPIVersion"], "example.com/v1beta1");

    // Written through the other version: stored as the storage version, answered as asked.
    let b = beta
        .create(&pp, &a_box("v1beta1", "b", json!({"replicas": 3})))
        .await
        .unwrap();
    assert_eq!(b.data["spec"], json!({"replicas": 3}));
    let stored = seen.requests();
    assert!(
        stored
            .iter()
            .any(|r| r["desiredAPIVersion"] == "example.com/v1alpha1"),
        "the write was converted to the storage version: {stored:?}"
    );
    let before = seen.requests().len();
    let b = alpha.get("b").await.unwrap();
    assert_eq!(b.data["spec"], json!({"size": 3}));
    assert_eq!(
        seen.requests().len(),
        before,
        "an object stored as v1alpha1 reads as v1alpha1 without a conversion"
    );

    // A list is converted in one review.
    let listed = beta.list(&Default::default()).await.unwrap();
    let specs: Vec<&Value> = listed.items.iter().map(|o| &o.data["spec"]).collect();
    assert_eq!(specs, [&json!({"replicas": 2}), &json!({"replicas": 3})]);
    let review = seen.requests().pop().unwrap();
    assert_eq!(review["objects"].as_array().unwrap().len(), 2);

    // A patch through the other version lands in the storage version's field.
    let patch = Patch::Merge(json!({"spec": {"replicas": 5}}));
    let patched = beta
        .patch("a", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(patched.data["spec"], json!({"replicas": 5}));
    assert_eq!(
        alpha.get("a").await.unwrap().data["spec"],
        json!({"size": 5})
    );

    // A watch through the other version sees its events converted.
    let rv = patched.metadata.resource_version.clone().unwrap();
    let mut events = beta
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let patch = Patch::Merge(json!({"spec": {"size": 1}}));
    alpha
        .patch("a", &PatchParams::default(), &patch)
        .await
        .unwrap();
    match events.try_next().await.unwrap().unwrap() {
        WatchEvent::Modified(o) => {
            assert_eq!(o.data["spec"], json!({"replicas": 1}));
            assert_eq!(o.types.unwrap().api_version, "example.com/v1beta1");
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }
}

#[tokio::test]
async fn an_equivalent_admission_webhook_is_sent_the_object_converted_to_its_version() {
    let (client, seen, (base, bundle), _keep) = setup("convert").await;
    let config = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "beta-boxes"},
        "webhooks": [{"name": "boxes.example.com",
            "clientConfig": {"url": format!("{base}/admit"), "caBundle": bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"],
                "apiVersions": ["v1beta1"], "resources": ["boxes"]}],
            "matchPolicy": "Equivalent",
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}]});
    let request = http::Request::post(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    )
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&config).unwrap())
    .unwrap();
    let _: Value = client.request(request).await.unwrap();
    boxes(&client, "v1alpha1")
        .create(
            &PostParams::default(),
            &a_box("v1alpha1", "a", json!({"size": 2})),
        )
        .await
        .unwrap();
    let seen = seen.0.lock().unwrap().clone();
    let admitted = (seen.iter())
        .find(|r| r["kind"] == "AdmissionReview")
        .expect("the webhook was called");
    let object = &admitted["request"]["object"];
    assert_eq!(object["apiVersion"], "example.com/v1beta1");
    assert_eq!(object["spec"], json!({"replicas": 2}));
    assert_eq!(admitted["request"]["kind"]["version"], "v1beta1");
}

#[tokio::test]
async fn a_table_of_a_version_prints_that_versions_columns() {
    let (client, _, _, _keep) = setup("convert").await;
    boxes(&client, "v1alpha1")
        .create(
            &PostParams::default(),
            &a_box("v1alpha1", "a", json!({"size": 4})),
        )
        .await
        .unwrap();
    let request = http::Request::get("/apis/example.com/v1beta1/namespaces/default/boxes")
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(request).await.unwrap();
    let columns: Vec<&str> = (table["columnDefinitions"].as_array().unwrap().iter())
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "replicas"]);
    assert_eq!(table["rows"][0]["cells"], json!(["a", 4]));
}

#[tokio::test]
async fn a_failed_conversion_answers_as_kube_does() {
    let (client, seen, _, _keep) = setup("refuse").await;
    let (alpha, beta) = (boxes(&client, "v1alpha1"), boxes(&client, "v1beta1"));
    alpha
        .create(
            &PostParams::default(),
            &a_box("v1alpha1", "a", json!({"size": 2})),
        )
        .await
        .unwrap();
    let status = common::refusal(beta.get("a").await);
    assert_eq!(status.code, 500, "{status:?}");
    assert_eq!(status.reason, "");
    assert_eq!(
        status.message,
        "conversion webhook for example.com/v1alpha1, Kind=Box failed: no conversion today"
    );
    let status = common::refusal(beta.list(&Default::default()).await);
    assert_eq!(
        status.message,
        "conversion webhook for example.com/v1alpha1, Kind=BoxList failed: no conversion today"
    );
    let status = common::refusal(
        beta.create(
            &PostParams::default(),
            &a_box("v1beta1", "b", json!({"replicas": 1})),
        )
        .await,
    );
    assert_eq!(
        status.message,
        "conversion webhook for example.com/v1beta1, Kind=Box failed: no conversion today"
    );
    assert!(
        alpha.get_opt("b").await.unwrap().is_none(),
        "nothing is stored when its conversion fails"
    );
    assert!(!seen.requests().is_empty());
    // The storage version needs no webhook and still serves.
    assert_eq!(
        alpha.get("a").await.unwrap().data["spec"],
        json!({"size": 2})
    );
}

#[tokio::test]
async fn a_crd_whose_conversion_kube_refuses_is_refused() {
    let server = ApiServer::new().unwrap();
    let client = server.client();
    let crds: Api<DynamicObject> = Api::all_with(client, &crd_resource());
    let mut crd = crd("https://127.0.0.1:1/convert", "");
    crd["spec"]["conversion"] = json!({"strategy": "Webhook"});
    let crd: DynamicObject = serde_json::from_value(crd).unwrap();
    let status = common::refusal(crds.create(&PostParams::default(), &crd).await);
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains(
            "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook"
        ),
        "{}",
        status.message
    );
    let plain: DynamicObject = serde_json::from_value({
        let mut c = self::crd("https://127.0.0.1:1/convert", "");
        c["spec"].as_object_mut().unwrap().remove("conversion");
        c
    })
    .unwrap();
    let created = crds.create(&PostParams::default(), &plain).await.unwrap();
    assert_eq!(
        created.data["spec"]["conversion"],
        json!({"strategy": "None"}),
        "kube's default"
    );
}
