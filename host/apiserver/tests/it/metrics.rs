//! The server's own `/metrics`: kube-apiserver's request, storage and etcd series, readable
//! by whoever RBAC lets `get` the non-resource URL `/metrics`.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use wasmctrl_apiserver::ApiServer;

use crate::common;

async fn scrape(client: &Client) -> Result<String, kube::Error> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    client.request_text(request).await
}

/// The value of the sample `series` (name and labels exactly), if the text has it.
fn sample(text: &str, series: &str) -> Option<f64> {
    (text.lines())
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

fn request_total(verb: &str, resource: &str, scope: &str, code: u16) -> String {
    format!(
        r#"apiserver_request_total{{verb="{verb}",dry_run="",group="",version="v1",resource="{resource}",subresource="",scope="{scope}",component="apiserver",code="{code}"}}"#
    )
}

#[tokio::test]
async fn an_admin_scrape_shows_the_requests_the_stored_objects_and_the_latencies() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b"] {
        let cm = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        configmaps
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.list(&ListParams::default()).await.unwrap();
    let stored = Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len();

    let text = scrape(&client).await.unwrap();
    let posts = request_total("POST", "configmaps", "resource", 201);
    assert_eq!(sample(&text, &posts), Some(2.0), "{text}");
    let lists = request_total("LIST", "pods", "namespace", 200);
    assert_eq!(sample(&text, &lists), Some(1.0), "{text}");
    let all = request_total("LIST", "configmaps", "cluster", 200);
    assert_eq!(sample(&text, &all), Some(1.0), "{text}");
    let objects = r#"apiserver_storage_objects{resource="configmaps"}"#;
    assert_eq!(sample(&text, objects), Some(stored as f64), "{text}");
    assert_eq!(stored, 2);
    let durations = r#"apiserver_request_duration_seconds_count{verb="POST",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver"}"#;
    assert_eq!(sample(&text, durations), Some(2.0), "{text}");
    for le in ["0.005", "0.025", "45.0", "60.0", "+Inf"] {
        let bucket = format!(r#"apiserver_request_duration_seconds_bucket{{le="{le}",verb="POST""#);
        assert!(text.contains(&bucket), "kube's bucket {le}: {text}");
    }
    let creates = r#"etcd_request_duration_seconds_count{operation="create",type="configmaps"}"#;
    assert_eq!(sample(&text, creates), Some(2.0), "{text}");
}

#[tokio::test]
async fn metrics_need_get_on_the_non_resource_url() {
    let server = ApiServer::new().unwrap();
    let (admin, http) = common::http_client(&server).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    let account = serde_json::from_value(json!({"metadata": {"name": "scraper"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let token = server
        .token("default", "scraper", Duration::from_secs(3600))
        .unwrap();
    let scraper = common::client_of(&http.kubeconfig_with_token("scraper", &token)).await;

    let status = common::refusal(scrape(&scraper).await);
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert!(
        status
            .message
            .contains(r#"User "system:serviceaccount:default:scraper" cannot get path "/metrics""#),
        "{}",
        status.message
    );

    let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": "metrics-reader"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "scraper-reads-metrics"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": "default"}]}))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let text = scrape(&scraper).await.unwrap();
    assert!(text.contains("apiserver_request_total{"), "{text}");
}

#[tokio::test]
async fn the_system_monitoring_group_may_scrape_as_on_kube() {
    let server = ApiServer::new().unwrap();
    let (admin, _http) = common::http_client(&server).await;
    let as_user = |groups: &[&str]| {
        let mut request = http::Request::get("/metrics").header("Impersonate-User", "prometheus");
        for g in groups {
            request = request.header("Impersonate-Group", *g);
        }
        request.body(Vec::new()).unwrap()
    };
    let status = common::refusal(admin.request_text(as_user(&[])).await);
    assert_eq!(status.code, 403);
    let text = admin
        .request_text(as_user(&["system:monitoring"]))
        .await
        .unwrap();
    assert!(text.contains("apiserver_storage_objects{"), "{text}");
}
