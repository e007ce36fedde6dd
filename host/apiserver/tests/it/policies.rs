//! ValidatingAdmissionPolicies and their bindings, enforced by the embedded server as
//! kube-apiserver enforces them: kube's denial, a message or message expression, params, a
//! binding's own resources, `Warn`, and what kube refuses of a policy.

#![allow(clippy::unwrap_used)]

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use wasmctrl_apiserver::ApiServer;

use crate::common;

async fn post(client: &kube::Client, plural: &str, body: Value) -> Result<Value, kube::Error> {
    let request = http::Request::post(format!("/apis/admissionregistration.k8s.io/v1/{plural}"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    client.request(request).await
}

fn policy(name: &str, validation: Value, extra: Value) -> Value {
    let mut spec = json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
        "validations": [validation],
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, policy: &str, spec: Value) -> Value {
    let mut body = json!({"policyName": policy, "validationActions": ["Deny"]});
    for (k, v) in spec.as_object().unwrap() {
        body[k] = v.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name}, "spec": body})
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    )
    .unwrap()
}

#[tokio::test]
async fn a_bound_policy_refuses_what_its_expression_refuses_with_kubes_message() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let limit = json!({"expression": "object.spec.replicas <= 5"});
    post(
        &client,
        "validatingadmissionpolicies",
        policy("replicas.example.com", limit, json!({})),
    )
    .await
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    // Not bound yet: admitted.
    deployments
        .create(&PostParams::default(), &deployment("before", 9))
        .await
        .unwrap();

    post(
        &client,
        "validatingadmissionpolicybindings",
        binding("replicas-binding", "replicas.example.com", json!({})),
    )
    .await
    .unwrap();
    let status = common::refusal(
        deployments
            .create(&PostParams::default(), &deployment("web", 6))
            .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (422, "Invalid"),
        "{status:?}"
    );
    let message = "ValidatingAdmissionPolicy 'replicas.example.com' with binding 'replicas-binding' denied request: failed expression: object.spec.replicas <= 5";
    assert_eq!(
        status.message,
        format!("deployments.apps \"web\" is forbidden: {message}")
    );
    let details = status.details.unwrap();
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("web", "apps", "deployments")
    );
    assert_eq!(details.causes[0].message, message);
    deployments
        .create(&PostParams::default(), &deployment("small", 5))
        .await
        .unwrap();

    // An update is judged too, with the stored object as oldObject.
    let mut before = deployments.get("before").await.unwrap();
    before.spec.as_mut().unwrap().replicas = Some(8);
    let status = common::refusal(
        deployments
            .replace("before", &PostParams::default(), &before)
            .await,
    );
    assert_eq!(status.code, 422);
}

#[tokio::test]
async fn params_messages_warnings_and_a_bindings_own_resources() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for (name, tier) in [("prod", "prod"), ("dev", "dev")] {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"tier": tier}}}))
                .unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
    }
    let limits: Api<ConfigMap> = Api::namespaced(client.clone(), "prod");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "limits"}, "data": {"max": "3"}}))
            .unwrap();
    limits.create(&PostParams::default(), &cm).await.unwrap();

    let validation = json!({
        "expression": "object.spec.replicas <= int(params.data.max)",
        "messageExpression": "'at most ' + params.data.max + ' replicas in ' + namespaceObject.metadata.name",
        "reason": "Forbidden",
    });
    let extra = json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}});
    post(
        &client,
        "validatingadmissionpolicies",
        policy("limit.example.com", validation, extra),
    )
    .await
    .unwrap();
    let only_prod = json!({
        "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"},
        "matchResources": {"namespaceSelector": {"matchLabels": {"tier": "prod"}}},
    });
    post(
        &client,
        "validatingadmissionpolicybindings",
        binding("limit-prod", "limit.example.com", only_prod),
    )
    .await
    .unwrap();

    let prod: Api<Deployment> = Api::namespaced(client.clone(), "prod");
    let status = common::refusal(
        prod.create(&PostParams::default(), &deployment("web", 4))
            .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (403, "Forbidden"),
        "{status:?}"
    );
    assert!(
        status
            .message
            .ends_with("denied request: at most 3 replicas in prod"),
        "{}",
        status.message
    );
    prod.create(&PostParams::default(), &deployment("ok", 3))
        .await
        .unwrap();
    // The binding selects prod only.
    let dev: Api<Deployment> = Api::namespaced(client.clone(), "dev");
    dev.create(&PostParams::default(), &deployment("web", 4))
        .await
        .unwrap();

    // A binding that warns: the write lands, the client is told.
    let warn_dev = json!({
        "validationActions": ["Warn"],
        "paramRef": {"name": "limits", "namespace": "prod", "parameterNotFoundAction": "Deny"},
        "matchResources": {"namespaceSelector": {"matchLabels": {"tier": "dev"}}},
    });
    post(
        &client,
        "validatingadmissionpolicybindings",
        binding("limit-dev", "limit.example.com", warn_dev),
    )
    .await
    .unwrap();
    let request = http::Request::post("/apis/apps/v1/namespaces/dev/deployments")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&deployment("big", 7)).unwrap())
        .unwrap();
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let warnings: Vec<&str> = (response.headers().get_all("warning").iter())
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(
        warnings,
        [
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'limit.example.com' with binding 'limit-dev': at most 3 replicas in dev\""
        ]
    );

    // Params that are missing deny under `Deny`.
    let missing = json!({"paramRef": {"name": "nothing", "parameterNotFoundAction": "Deny"}});
    post(
        &client,
        "validatingadmissionpolicybindings",
        binding("limit-missing", "limit.example.com", missing),
    )
    .await
    .unwrap();
    let status = common::refusal(
        dev.create(&PostParams::default(), &deployment("again", 1))
            .await,
    );
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.ends_with("denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{}", status.message
    );
}

#[tokio::test]
async fn policies_and_bindings_are_refused_where_kube_refuses_them() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let bad = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "bad.example.com"}, "spec": {"failurePolicy": "Sometimes",
            "validations": [{"expression": "object.spec.replicas <=", "reason": "Teapot"}]}});
    let status = common::refusal(post(&client, "validatingadmissionpolicies", bad).await);
    assert_eq!(status.code, 422);
    let fields: Vec<String> = status
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(
        fields,
        [
            "spec.failurePolicy",
            "spec.matchConstraints",
            "spec.validations[0].expression",
            "spec.validations[0].reason",
        ]
    );
    let bad = binding(
        "b",
        "p.example.com",
        json!({"validationActions": ["Deny", "Warn"]}),
    );
    let status = common::refusal(post(&client, "validatingadmissionpolicybindings", bad).await);
    assert_eq!(status.code, 422);
    let causes = status.details.unwrap().causes;
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(causes[0].field, "spec.validationActions");
    assert!(
        causes[0]
            .message
            .contains("must not contain both Deny and Warn"),
        "{}",
        causes[0].message
    );
}
