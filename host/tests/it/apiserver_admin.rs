//! The fault-injection admin endpoints on the HTTP listener (`--admin`), off by default.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::{Client, Config};
use serde_json::json;
use wasmctrl::apiserver::ApiServer;

async fn http_client(server: &ApiServer) -> (Client, wasmctrl::apiserver::HttpServer) {
    let http = server.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&http.kubeconfig()).unwrap();
    let cfg = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    (Client::try_from(cfg).unwrap(), http)
}

async fn admin(
    client: &Client,
    action: &str,
    body: serde_json::Value,
) -> Result<String, kube::Error> {
    let req = http::Request::post(format!("/_admin/{action}"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    client.request_text(req).await
}

#[tokio::test]
async fn admin_endpoints_inject_faults() {
    let server = ApiServer::builder().admin(true).build().unwrap();
    let (client, _http) = http_client(&server).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();

    admin(
        &client,
        "fail",
        json!({"verb": "get", "resource": "configmaps", "code": 500, "times": 1}),
    )
    .await
    .unwrap();
    match api.get("a").await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (500, "InternalError")),
        other => panic!("{other:?}"),
    }
    api.get("a").await.unwrap();

    admin(&client, "expire-next-watch", json!({}))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let mut s = Box::pin(api.watch(&WatchParams::default(), &rv).await.unwrap());
    match s.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("{other:?}"),
    }

    let mut w = Box::pin(api.watch(&WatchParams::default(), &rv).await.unwrap());
    admin(&client, "drop-watches", json!({})).await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(5), w.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none(), "the dropped stream ends");

    admin(&client, "latency", json!({"ms": 300})).await.unwrap();
    let start = Instant::now();
    api.get("a").await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(300));
    admin(&client, "reset", json!({})).await.unwrap();
    let start = Instant::now();
    api.get("a").await.unwrap();
    assert!(start.elapsed() < Duration::from_millis(300));
}

#[tokio::test]
async fn admin_endpoints_off_by_default() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = http_client(&server).await;
    match admin(&client, "drop-watches", json!({})).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_test_clock_moves_forward_and_refuses_a_jump_past_its_range() {
    let server = ApiServer::builder().admin(true).build().unwrap();
    let (client, _http) = http_client(&server).await;
    admin(&client, "advance-cronjob-clock", json!({"seconds": 3600}))
        .await
        .unwrap();
    assert_eq!(server.cronjob_clock(), std::time::Duration::from_secs(3600));
    // u64::MAX seconds is past chrono's range: a 400 naming it, not a panic, and the clock
    // stays where it was.
    let err = admin(
        &client,
        "advance-cronjob-clock",
        json!({"seconds": u64::MAX}),
    )
    .await
    .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("not an API error: {err}");
    };
    assert_eq!(status.code, 400);
    assert!(
        status.message.contains("cannot advance by"),
        "{}",
        status.message
    );
    assert_eq!(server.cronjob_clock(), std::time::Duration::from_secs(3600));
    // The server still answers.
    admin(&client, "advance-cronjob-clock", json!({"seconds": 60}))
        .await
        .unwrap();
    assert_eq!(server.cronjob_clock(), std::time::Duration::from_secs(3660));
}
