//! Error bodies are `Status` objects with kube-apiserver's reason and code; bad input never
//! panics (a bounded, seeded fuzz over bodies and paths); discovery and health endpoints.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used)]

use axum::body::Body;
use http::{Method, Request};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tower::ServiceExt;
use wasmctrl::apiserver::ApiServer;

async fn call(
    server: &ApiServer,
    method: Method,
    uri: &str,
    ct: Option<&str>,
    body: Vec<u8>,
) -> (u16, Value, http::HeaderMap) {
    let mut b = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {}", server.admin_token()));
    if let Some(ct) = ct {
        b = b.header("content-type", ct);
    }
    let resp = server
        .service()
        .oneshot(b.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()));
    (code, v, headers)
}

fn assert_status(v: &Value, code: u16, reason: &str) {
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["status"], "Failure", "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert_eq!(v["reason"], reason, "{v}");
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
    )
    .unwrap()
}

#[tokio::test]
async fn status_bodies_for_each_error() {
    let s = ApiServer::new().unwrap();
    let json_ct = Some("application/json");
    let (c, v, _) = call(&s, Method::GET, &format!("{CMS}/nope"), None, vec![]).await;
    assert_eq!(c, 404);
    assert_status(&v, 404, "NotFound");
    assert_eq!(v["details"]["name"], "nope");
    assert_eq!(call(&s, Method::POST, CMS, json_ct, cm("a")).await.0, 201);
    let (_, v, _) = call(&s, Method::POST, CMS, json_ct, cm("a")).await;
    assert_status(&v, 409, "AlreadyExists");
    // Stale resourceVersion on replace.
    let stale = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "1"}})).unwrap();
    let (_, v, _) = call(&s, Method::PUT, &format!("{CMS}/a"), json_ct, stale).await;
    assert_status(&v, 409, "Conflict");
    // resourceVersion on create.
    let (_, v, _) = call(
        &s,
        Method::POST,
        CMS,
        json_ct,
        serde_json::to_vec(&json!({"metadata": {"name": "rv", "resourceVersion": "3"}})).unwrap(),
    )
    .await;
    assert_status(&v, 400, "BadRequest");
    // Patches that would break the object's shape: 422, not a panic.
    for (ct, body) in [
        ("application/merge-patch+json", r#"{"metadata":"x"}"#),
        (
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"a":1}}}"#,
        ),
        (
            "application/merge-patch+json",
            r#"{"metadata":{"finalizers":"x"}}"#,
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"/metadata","value":[]}]"#,
        ),
    ] {
        let (_, v, _) = call(
            &s,
            Method::PATCH,
            &format!("{CMS}/a"),
            Some(ct),
            body.as_bytes().to_vec(),
        )
        .await;
        assert_status(&v, 422, "Invalid");
    }
    let ns_bad =
        br#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"odd"},"spec":"x"}"#.to_vec();
    let (_, v, _) = call(&s, Method::POST, "/api/v1/namespaces", json_ct, ns_bad).await;
    assert_status(&v, 422, "Invalid");
    // Invalid names.
    for bad in ["UPPER", "-x", "a_b", &"x".repeat(254)] {
        let (_, v, _) = call(&s, Method::POST, CMS, json_ct, cm(bad)).await;
        assert_status(&v, 422, "Invalid");
        assert_eq!(v["details"]["causes"][0]["field"], "metadata.name");
    }
    // Malformed JSON and YAML.
    let (_, v, _) = call(&s, Method::POST, CMS, json_ct, b"{not json".to_vec()).await;
    assert_status(&v, 400, "BadRequest");
    let (_, v, _) = call(
        &s,
        Method::POST,
        CMS,
        Some("application/yaml"),
        b"a: [b".to_vec(),
    )
    .await;
    assert_status(&v, 400, "BadRequest");
    // Wrong kind in the body.
    let secret = serde_json::to_vec(
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
    )
    .unwrap();
    let (_, v, _) = call(&s, Method::POST, CMS, json_ct, secret).await;
    assert_status(&v, 400, "BadRequest");
    // Unknown kind / resource path.
    let (_, v, _) = call(
        &s,
        Method::GET,
        "/apis/nope.example.com/v1/things",
        None,
        vec![],
    )
    .await;
    assert_status(&v, 404, "NotFound");
    // Unsupported media types.
    let (_, v, _) = call(&s, Method::POST, CMS, Some("application/cbor"), vec![1, 2]).await;
    assert_status(&v, 415, "UnsupportedMediaType");
    let (_, v, _) = call(
        &s,
        Method::PATCH,
        &format!("{CMS}/a"),
        Some("text/plain"),
        b"{}".to_vec(),
    )
    .await;
    assert_status(&v, 415, "UnsupportedMediaType");
    // Malformed JSON patch: 400.
    let (_, v, _) = call(
        &s,
        Method::PATCH,
        &format!("{CMS}/a"),
        Some("application/json-patch+json"),
        b"{\"op\":1}".to_vec(),
    )
    .await;
    assert_status(&v, 400, "BadRequest");
    // Huge body: 413.
    let big = vec![b' '; 4 * 1024 * 1024];
    let (c, v, _) = call(&s, Method::POST, CMS, json_ct, big).await;
    assert_eq!(c, 413);
    assert_status(&v, 413, "RequestEntityTooLarge");
    // Method not allowed.
    let (_, v, _) = call(&s, Method::PUT, CMS, json_ct, cm("x")).await;
    assert_status(&v, 405, "MethodNotAllowed");
    // Terminating namespace: 403 Forbidden.
    let ns = serde_json::to_vec(
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone"}}),
    )
    .unwrap();
    assert_eq!(
        call(&s, Method::POST, "/api/v1/namespaces", json_ct, ns)
            .await
            .0,
        201
    );
    assert_eq!(
        call(&s, Method::DELETE, "/api/v1/namespaces/gone", None, vec![])
            .await
            .0,
        200
    );
    let (_, v, _) = call(
        &s,
        Method::POST,
        "/api/v1/namespaces/gone/configmaps",
        json_ct,
        cm("x"),
    )
    .await;
    assert_status(&v, 403, "Forbidden");
    // Expired continue token: 410.
    let (_, v, _) = call(
        &s,
        Method::GET,
        &format!("{CMS}?limit=1&continue=999:1"),
        None,
        vec![],
    )
    .await;
    assert_status(&v, 410, "Expired");
    // Injected faults: 429 with Retry-After, 500, 409.
    s.faults().fail(Some("get"), Some("configmaps"), 429, 1);
    let (c, v, h) = call(&s, Method::GET, &format!("{CMS}/a"), None, vec![]).await;
    assert_eq!(c, 429);
    assert_status(&v, 429, "TooManyRequests");
    assert_eq!(h.get("retry-after").unwrap(), "1");
    s.faults().fail(Some("create"), None, 500, 1);
    let (_, v, _) = call(&s, Method::POST, CMS, json_ct, cm("z")).await;
    assert_status(&v, 500, "InternalError");
    s.faults().fail(Some("update"), None, 409, 1);
    let (_, v, _) = call(&s, Method::PUT, &format!("{CMS}/a"), json_ct, cm("a")).await;
    assert_status(&v, 409, "Conflict");
    // Unsupported field selector.
    let (_, v, _) = call(
        &s,
        Method::GET,
        &format!("{CMS}?fieldSelector=spec.nodeName%3Dx"),
        None,
        vec![],
    )
    .await;
    assert_status(&v, 400, "BadRequest");
}

#[tokio::test]
async fn discovery_and_health() {
    let s = ApiServer::new().unwrap();
    for p in ["/healthz", "/livez", "/readyz"] {
        let (c, v, _) = call(&s, Method::GET, p, None, vec![]).await;
        assert_eq!((c, v), (200, Value::String("ok".into())));
    }
    let (_, v, _) = call(&s, Method::GET, "/version", None, vec![]).await;
    assert_eq!(v["major"], "1");
    let (_, v, _) = call(&s, Method::GET, "/api/v1", None, vec![]).await;
    let pods = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods")
        .unwrap();
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert!(
        v["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "pods/status")
    );
    let (_, v, _) = call(&s, Method::GET, "/apis", None, vec![]).await;
    let groups: Vec<&str> = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for g in [
        "apps",
        "coordination.k8s.io",
        "events.k8s.io",
        "apiextensions.k8s.io",
    ] {
        assert!(groups.contains(&g), "{groups:?}");
    }
    // Aggregated discovery.
    let req = Request::get("/apis")
        .header("authorization", format!("Bearer {}", s.admin_token()))
        .header(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )
        .body(Body::empty())
        .unwrap();
    let resp = s.service().oneshot(req).await.unwrap();
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .contains("as=APIGroupDiscoveryList")
    );
    let v: Value = serde_json::from_slice(
        &axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(v["kind"], "APIGroupDiscoveryList");
    let (_, v, _) = call(&s, Method::GET, "/openapi/v3", None, vec![]).await;
    assert!(v["paths"]["apis/apps/v1"]["serverRelativeURL"].is_string());
}

#[tokio::test]
async fn fuzz_never_panics() {
    let s = ApiServer::new().unwrap();
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let paths = [
        CMS,
        "/api/v1/namespaces/default/configmaps/a",
        "/api/v1/namespaces",
        "/api/v1/namespaces/default",
        "/apis/apps/v1/namespaces/default/deployments",
        "/apis/apps/v1/namespaces/default/deployments/d/status",
        "/api/v1/namespaces/f1",
        "/api/v1/namespaces/f2/status",
        "/api/v1/namespaces/default/pods/f3/status",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "/api/v1/pods",
        "/apis/x/y/z/w/v/u",
        "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=0",
        "/api/v1/namespaces/default/configmaps?limit=-1",
        "/api/v1/namespaces/default/configmaps?labelSelector=a%20in%20(",
        "/api/v1/namespaces/default/configmaps?resourceVersion=x&resourceVersionMatch=Exact",
    ];
    let methods = [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
    ];
    let cts = [
        None,
        Some("application/json"),
        Some("application/yaml"),
        Some("application/merge-patch+json"),
        Some("application/json-patch+json"),
        Some("application/strategic-merge-patch+json"),
        Some("application/apply-patch+yaml"),
    ];
    let fragments: [&[u8]; 10] = [
        b"{",
        b"}",
        b"[",
        b"]",
        b"\"metadata\":",
        b"{\"name\":\"a\"}",
        b"null",
        b"\"kind\":\"ConfigMap\"",
        b",",
        b"\xff",
    ];
    for i in 0..3000 {
        let mut body = Vec::new();
        if rng.random_bool(0.5) {
            let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("f{}", i % 7)}});
            if rng.random_bool(0.5) {
                obj["data"] = json!({"k": rng.random::<u32>().to_string()});
            }
            if rng.random_bool(0.2) {
                obj["metadata"]["finalizers"] = json!(["a/b"]);
            }
            if rng.random_bool(0.1) {
                obj["metadata"]["labels"] = json!(rng.random::<u8>());
            }
            if rng.random_bool(0.1) {
                obj["spec"] = json!("x");
                obj["status"] = json!([1]);
            }
            if rng.random_bool(0.05) {
                obj["metadata"] = json!("m");
            }
            if rng.random_bool(0.2) {
                obj = json!([{"op": "add", "path": "/data", "value": {}}]);
            }
            body = serde_json::to_vec(&obj).unwrap();
        } else {
            for _ in 0..rng.random_range(0..12) {
                body.extend_from_slice(fragments[rng.random_range(0..fragments.len())]);
            }
        }
        let m = methods[rng.random_range(0..methods.len())].clone();
        let p = paths[rng.random_range(0..paths.len())];
        let ct = cts[rng.random_range(0..cts.len())];
        let (c, v, _) =
            tokio::time::timeout(std::time::Duration::from_secs(5), call(&s, m, p, ct, body))
                .await
                .expect("answers");
        if c >= 400 {
            assert_eq!(v["kind"], "Status", "{c} {v}");
            assert_eq!(v["code"], c);
            let msg = v["message"].as_str().unwrap_or("");
            assert!(!msg.contains("panicked"), "handler panicked: {msg}");
        }
    }
}
