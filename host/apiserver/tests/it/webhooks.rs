//! Admission webhooks, called by the embedded server as kube-apiserver calls them: a test
//! webhook server over HTTPS (its own CA in the configurations' `caBundle`) refuses, patches,
//! answers late or not at all, and records every review it is sent.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use base64::Engine as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use wasmctrl_apiserver::ApiServer;

use crate::common;

/// The reviews the test webhooks were sent: (path, review).
#[derive(Default)]
struct Seen(Mutex<Vec<(String, Value)>>);

impl Seen {
    fn to(&self, path: &str) -> Vec<Value> {
        let seen = self.0.lock().unwrap();
        (seen.iter().filter(|(p, _)| p == path))
            .map(|(_, r)| r.clone())
            .collect()
    }

    fn names_to(&self, path: &str) -> Vec<String> {
        (self.to(path).iter())
            .map(|r| {
                r["request"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    }
}

/// The test webhooks, by path:
/// - `validate`: refuses a ConfigMap whose `data.size` is over 10 (403, a message), warns;
/// - `label`: patches the label `mutated: "yes"` in;
/// - `late`: patches `data.late: "1"` in;
/// - `slow`: allows after 3 s;
/// - `garbled`: answers something that is not a review;
/// - `unloaded`: answers 404, as the host does for a plugin that is not loaded.
async fn webhook(
    State(seen): State<Arc<Seen>>,
    Path(path): Path<String>,
    Json(review): Json<Value>,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    seen.0.lock().unwrap().push((path.clone(), review.clone()));
    let uid = review["request"]["uid"].clone();
    let object = &review["request"]["object"];
    let mut response = json!({"uid": uid, "allowed": true});
    match path.as_str() {
        "validate" => {
            let size: i64 = object["data"]["size"]
                .as_str()
                .unwrap_or("0")
                .parse()
                .unwrap_or(0);
            response["warnings"] = json!(["size checked by the test webhook"]);
            if size > 10 {
                response["allowed"] = json!(false);
                response["status"] =
                    json!({"code": 403, "message": format!("size {size} is over 10")});
            }
        }
        "label" | "late" => {
            let patch = if path == "label" {
                if object["metadata"]["labels"].is_object() {
                    json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
                } else {
                    json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
                }
            } else if object["data"].is_object() {
                json!([{"op": "add", "path": "/data/late", "value": "1"}])
            } else {
                json!([{"op": "add", "path": "/data", "value": {"late": "1"}}])
            };
            let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
            response["patch"] = json!(patch);
            response["patchType"] = json!("JSONPatch");
        }
        "slow" => tokio::time::sleep(Duration::from_secs(3)).await,
        "garbled" => return "this is not a review".into_response(),
        // What the host answers for a plugin that is not loaded.
        "unloaded" => {
            return (
                axum::http::StatusCode::NOT_FOUND,
                "no plugin serves /unloaded",
            )
                .into_response();
        }
        _ => {}
    }
    Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}))
        .into_response()
}

/// Serves the test webhooks on loopback: their base URL, the CA bundle (base64 PEM) that
/// verifies them, what they saw, and the server (dropping it stops serving).
async fn webhooks() -> (String, String, Arc<Seen>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Seen::default());
    let app = axum::Router::new()
        .route("/{path}", axum::routing::post(webhook))
        .with_state(seen.clone());
    let (base, bundle, served) = common::https(app).await;
    (base, bundle, seen, served)
}

/// A webhook of `kind` (`Validating` or `Mutating`) on ConfigMaps' creates and updates at
/// `url`, with `extra` fields merged in.
fn configuration(
    kind: &str,
    name: &str,
    hook: &str,
    url: &str,
    bundle: &str,
    extra: Value,
) -> Value {
    let mut webhook = json!({
        "name": hook,
        "clientConfig": {"url": url, "caBundle": bundle},
        "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""],
            "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (k, v) in extra.as_object().unwrap() {
        webhook[k] = v.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": format!("{kind}WebhookConfiguration"),
        "metadata": {"name": name}, "webhooks": [webhook]})
}

fn config_map(name: &str, size: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels},
        "data": {"size": size}}))
    .unwrap()
}

async fn register(client: &kube::Client, config: Value) {
    let plural = match config["kind"].as_str().unwrap() {
        "ValidatingWebhookConfiguration" => "validatingwebhookconfigurations",
        _ => "mutatingwebhookconfigurations",
    };
    let request = http::Request::post(format!("/apis/admissionregistration.k8s.io/v1/{plural}"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&config).unwrap())
        .unwrap();
    let created: Value = client.request(request).await.unwrap();
    assert_eq!(created["metadata"]["name"], config["metadata"]["name"]);
}

/// POSTs `cm` into `default` and returns the response's status, body and `Warning` headers.
async fn create_raw(
    client: &kube::Client,
    cm: &ConfigMap,
    query: &str,
) -> (u16, Value, Vec<String>) {
    let request = http::Request::post(format!("/api/v1/namespaces/default/configmaps{query}"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(cm).unwrap())
        .unwrap();
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap();
    let warnings = (response.headers().get_all("warning").iter())
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let code = response.status().as_u16();
    let body = response.into_body().collect_bytes().await.unwrap();
    (code, serde_json::from_slice(&body).unwrap(), warnings)
}

#[tokio::test]
async fn a_validating_webhook_refuses_with_its_message_warns_and_sees_dry_runs() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let (base, bundle, seen, _served) = webhooks().await;
    let url = format!("{base}/validate");
    register(
        &client,
        configuration(
            "Validating",
            "sizes",
            "size.example.com",
            &url,
            &bundle,
            json!({}),
        ),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let status = common::refusal(
        cms.create(&PostParams::default(), &config_map("big", "20", json!({})))
            .await,
    );
    assert_eq!(status.code, 403, "{status:?}");
    assert_eq!(
        status.message,
        "admission webhook \"size.example.com\" denied the request: size 20 is over 10"
    );
    assert!(cms.get_opt("big").await.unwrap().is_none());

    let (code, _, warnings) = create_raw(&client, &config_map("small", "5", json!({})), "").await;
    assert_eq!(code, 201);
    assert_eq!(warnings, ["299 - \"size checked by the test webhook\""]);
    let review = seen.to("validate").pop().unwrap();
    assert_eq!(review["request"]["operation"], "CREATE");
    assert_eq!(
        review["request"]["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(review["request"]["namespace"], "default");
    assert_eq!(review["request"]["userInfo"]["username"], "wasmctrl-admin");
    assert!(
        review["request"]["object"]["metadata"]["uid"].is_string(),
        "validating webhooks see the object as stored"
    );

    let (code, _, _) = create_raw(&client, &config_map("dry", "5", json!({})), "?dryRun=All").await;
    assert_eq!(code, 201);
    let review = seen.to("validate").pop().unwrap();
    assert_eq!(
        (
            review["request"]["name"].as_str(),
            review["request"]["dryRun"].as_bool()
        ),
        (Some("dry"), Some(true))
    );
    assert!(
        cms.get_opt("dry").await.unwrap().is_none(),
        "a dry run stores nothing"
    );

    let mut small = cms.get("small").await.unwrap();
    small
        .data
        .as_mut()
        .unwrap()
        .insert("size".into(), "30".into());
    let status = common::refusal(cms.replace("small", &PostParams::default(), &small).await);
    assert_eq!(status.code, 403, "{status:?}");
    let review = seen.to("validate").pop().unwrap();
    assert_eq!(review["request"]["operation"], "UPDATE");
    assert_eq!(review["request"]["oldObject"]["data"]["size"], "5");
}

#[tokio::test]
async fn mutating_webhooks_patch_in_order_and_one_is_called_again_after_a_later_change() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let (base, bundle, seen, _served) = webhooks().await;
    let again = json!({"reinvocationPolicy": "IfNeeded"});
    let label = configuration(
        "Mutating",
        "a-label",
        "label.example.com",
        &format!("{base}/label"),
        &bundle,
        again,
    );
    register(&client, label).await;
    let late = configuration(
        "Mutating",
        "b-late",
        "late.example.com",
        &format!("{base}/late"),
        &bundle,
        json!({}),
    );
    register(&client, late).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let created = cms
        .create(&PostParams::default(), &config_map("m", "1", json!(null)))
        .await
        .unwrap();
    assert_eq!(created.metadata.labels.unwrap()["mutated"], "yes");
    assert_eq!(created.data.as_ref().unwrap()["late"], "1");
    assert_eq!(
        seen.names_to("label"),
        ["m", "m"],
        "called again after `late` changed the object"
    );
    assert_eq!(seen.names_to("late"), ["m"]);
    let second = &seen.to("label")[1];
    assert_eq!(
        second["request"]["object"]["data"]["late"], "1",
        "the second call sees the later patch"
    );
    let stored = cms.get("m").await.unwrap();
    assert_eq!(stored.metadata.labels.unwrap()["mutated"], "yes");
}

#[tokio::test]
async fn the_failure_policy_decides_for_a_webhook_that_is_down_late_or_garbled() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let (base, bundle, _seen, _served) = webhooks().await;
    let closed = {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.local_addr().unwrap()
    };
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cases = [
        ("down", format!("https://{closed}/validate"), "connect"),
        ("late", format!("{base}/slow"), "context deadline exceeded"),
        (
            "garbled",
            format!("{base}/garbled"),
            "not an AdmissionReview",
        ),
        ("unloaded", format!("{base}/unloaded"), "status code 404"),
    ];
    for (i, (what, url, why)) in cases.iter().enumerate() {
        let fail = configuration(
            "Validating",
            &format!("fail-{what}"),
            &format!("{what}.fail.example.com"),
            url,
            &bundle,
            json!({"failurePolicy": "Fail", "timeoutSeconds": 1}),
        );
        register(&client, fail).await;
        let status = common::refusal(
            cms.create(
                &PostParams::default(),
                &config_map(&format!("f{i}"), "1", json!({})),
            )
            .await,
        );
        assert_eq!(
            (status.code, status.reason.as_str()),
            (500, "InternalError"),
            "{what}: {status:?}"
        );
        assert!(
            status.message.starts_with(&format!("Internal error occurred: failed calling webhook \"{what}.fail.example.com\": failed to call webhook")),
            "{what}: {}", status.message
        );
        assert!(status.message.contains(why), "{what}: {}", status.message);
        let configs: Api<kube::api::DynamicObject> = Api::all_with(
            client.clone(),
            &kube::api::ApiResource {
                group: "admissionregistration.k8s.io".into(),
                version: "v1".into(),
                api_version: "admissionregistration.k8s.io/v1".into(),
                kind: "ValidatingWebhookConfiguration".into(),
                plural: "validatingwebhookconfigurations".into(),
            },
        );
        configs
            .delete(&format!("fail-{what}"), &DeleteParams::default())
            .await
            .unwrap();

        let ignore = configuration(
            "Validating",
            &format!("ignore-{what}"),
            &format!("{what}.ignore.example.com"),
            url,
            &bundle,
            json!({"failurePolicy": "Ignore", "timeoutSeconds": 1}),
        );
        register(&client, ignore).await;
        cms.create(
            &PostParams::default(),
            &config_map(&format!("i{i}"), "1", json!({})),
        )
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn selectors_and_match_conditions_skip_what_they_exclude_and_deletes_are_admitted() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let (base, bundle, seen, _served) = webhooks().await;
    let url = format!("{base}/validate");
    let extra = json!({
        "objectSelector": {"matchLabels": {"checked": "yes"}},
        "matchConditions": [{"name": "not-exempt", "expression": "object == null || object.metadata.name != 'exempt'"}],
    });
    register(
        &client,
        configuration(
            "Validating",
            "sizes",
            "size.example.com",
            &url,
            &bundle,
            extra,
        ),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    cms.create(
        &PostParams::default(),
        &config_map("unlabelled", "20", json!({})),
    )
    .await
    .unwrap();
    let checked = json!({"checked": "yes"});
    cms.create(
        &PostParams::default(),
        &config_map("exempt", "20", checked.clone()),
    )
    .await
    .unwrap();
    assert!(
        seen.names_to("validate").is_empty(),
        "neither was sent: {:?}",
        seen.names_to("validate")
    );
    let status = common::refusal(
        cms.create(
            &PostParams::default(),
            &config_map("checked", "20", checked.clone()),
        )
        .await,
    );
    assert_eq!(status.code, 403);
    assert_eq!(seen.names_to("validate"), ["checked"]);

    // A delete is sent with the stored object as `oldObject`, and refused as the webhook says.
    cms.create(&PostParams::default(), &config_map("small", "3", checked))
        .await
        .unwrap();
    let before = seen.to("validate").len();
    cms.delete("small", &DeleteParams::default()).await.unwrap();
    let review = &seen.to("validate")[before];
    assert_eq!(review["request"]["operation"], "DELETE");
    assert_eq!(review["request"]["oldObject"]["data"]["size"], "3");
    assert!(review["request"]["object"].is_null());
    assert_eq!(review["request"]["options"]["kind"], "DeleteOptions");
}

#[tokio::test]
async fn webhook_configurations_are_refused_where_kube_refuses_them() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let bad = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bad"}, "webhooks": [{
            "name": "short",
            "clientConfig": {"url": "http://127.0.0.1:1/x?y=z"},
            "rules": [{"operations": ["*", "CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*/*", "pods"]}],
            "timeoutSeconds": 31,
            "admissionReviewVersions": ["v2"]}]});
    let request = http::Request::post(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    )
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&bad).unwrap())
    .unwrap();
    let status = common::refusal(client.request::<Value>(request).await);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let causes: Vec<(String, String)> = (status.details.unwrap().causes.into_iter())
        .map(|c| (c.field, c.message))
        .collect();
    let expected = [
        (
            "webhooks[0].name",
            "Invalid value: \"short\": should be a domain with at least three segments separated by dots",
        ),
        (
            "webhooks[0].rules[0].operations",
            "Invalid value: []admissionregistration.OperationType{\"*\", \"CREATE\"}: if '*' is present, must not specify other operations",
        ),
        (
            "webhooks[0].rules[0].resources",
            "Invalid value: []string{\"*/*\", \"pods\"}: if '*/*' is present, must not specify other resources",
        ),
        (
            "webhooks[0].sideEffects",
            "Required value: must specify one of None, NoneOnDryRun",
        ),
        (
            "webhooks[0].timeoutSeconds",
            "Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        ),
        (
            "webhooks[0].clientConfig.url",
            "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
        ),
        (
            "webhooks[0].clientConfig.url",
            "Invalid value: \"y=z\": query parameters are not permitted in the URL",
        ),
        (
            "webhooks[0].admissionReviewVersions",
            "Invalid value: []string{\"v2\"}: must include at least one of v1, v1beta1",
        ),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(f, m)| (f.to_string(), m.to_string()))
        .collect();
    assert_eq!(causes, expected);
}
