//! Object metadata and Events are validated as kube-apiserver validates them, through a real
//! client (kube-rs): each rule family refuses what kube refuses with a 422 `Invalid` whose
//! cause names kube's field and reason, and accepts a valid value. The rules themselves are
//! unit-tested in `wasmctrl_core::validation`; this proves the server applies them on every
//! write path (create, update, patch, server-side apply).

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use wasmctrl::apiserver::ApiServer;

fn api(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let namespaced = !matches!(kind, "Namespace" | "ClusterRole");
    if namespaced {
        Api::namespaced_with(client.clone(), "default", &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    }
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

/// The `(field, reason)` of each cause of a 422 Invalid; panics on any other outcome.
fn causes<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Vec<(String, String)> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 422 => {
            assert_eq!(status.reason, "Invalid", "{status:?}");
            status
                .details
                .unwrap()
                .causes
                .into_iter()
                .map(|c| (c.field, c.reason))
                .collect()
        }
        other => panic!("expected 422 Invalid, got {other:?}"),
    }
}

/// A create to try: where, the body, and kube's cause `(field, reason)` or, for `None`, success.
type Case<'a> = (Api<DynamicObject>, Value, Option<(&'a str, &'a str)>);

/// Creates each case's body, expecting its outcome.
async fn creates(cases: Vec<Case<'_>>) {
    for (api, body, want) in cases {
        let result = api
            .create(&PostParams::default(), &object(body.clone()))
            .await;
        match want {
            None => {
                result.unwrap_or_else(|e| panic!("kube accepts {body}, we refused: {e}"));
            }
            Some((field, reason)) => {
                let got = causes(result);
                assert!(
                    got.iter().any(|(f, r)| f == field && r == reason),
                    "{body}: want cause {field} {reason}, got {got:?}"
                );
            }
        }
    }
}

async fn server() -> (ApiServer, kube::Client) {
    let server = ApiServer::new().unwrap();
    let client = server.client();
    common::things::install(&client).await;
    (server, client)
}

const INVALID: &str = "FieldValueInvalid";

#[tokio::test]
async fn names_and_generate_names_follow_each_kind_s_rule() {
    let (_server, client) = server().await;
    let cm = api(&client, "", "v1", "ConfigMap", "configmaps");
    let ns = api(&client, "", "v1", "Namespace", "namespaces");
    let svc = api(&client, "", "v1", "Service", "services");
    let role = api(
        &client,
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
    );
    let thing = common::things::api(&client);
    let events = common::events(&client, "default");
    let cm_named = |meta: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta});
    let svc_named = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"ports": [{"port": 80}]}})
    };
    let event = |generate: &str| {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"generateName": generate, "namespace": "default"},
            "eventTime": "2026-11-26T05:00:00.000000Z", "type": "Normal", "reason": "Active",
            "action": "Reconcile", "reportingController": "wasmctrl/vm", "reportingInstance": "h",
            "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "x"}})
    };
    creates(vec![
        (cm.clone(), cm_named(json!({"name": "Bad_Name"})), Some(("metadata.name", INVALID))),
        (cm.clone(), cm_named(json!({"name": "ok.name"})), None),
        (cm.clone(), cm_named(json!({"generateName": "cm."})), Some(("metadata.generateName", INVALID))),
        (cm.clone(), cm_named(json!({"generateName": "cm-"})), None),
        (cm.clone(), cm_named(json!({})), Some(("metadata.name", "FieldValueRequired"))),
        (ns.clone(), json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team.a"}}), Some(("metadata.name", INVALID))),
        (ns.clone(), json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}), None),
        (svc.clone(), svc_named("1web"), Some(("metadata.name", INVALID))),
        (svc.clone(), svc_named("web"), None),
        (role.clone(), json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "a%b"}}), Some(("metadata.name", INVALID))),
        (role.clone(), json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:thing-reader"}}), None),
        (thing.clone(), json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "Upper"}}), Some(("metadata.name", INVALID))),
        (thing.clone(), json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "lower"}}), None),
        // The host's old Event names: refused by kube-apiserver, and now here.
        (events.clone(), event("test-vm."), Some(("metadata.generateName", INVALID))),
        (events.clone(), event("test-vm-"), None),
    ])
    .await;
}

#[tokio::test]
async fn labels_annotations_finalizers_and_owner_references() {
    let (_server, client) = server().await;
    let cm = api(&client, "", "v1", "ConfigMap", "configmaps");
    let n = std::sync::atomic::AtomicUsize::new(0);
    let with = |meta: Value| {
        let mut meta = meta;
        meta["name"] = json!(format!(
            "cm{}",
            n.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    };
    let owner = |kind: &str, controller: bool| json!({"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": "u-1", "controller": controller});
    let big = "x".repeat(300 * 1024);
    let case = |meta: Value, want| (cm.clone(), with(meta), want);
    creates(vec![
        case(json!({"labels": {"bad key": "v"}}), Some(("metadata.labels", INVALID))),
        case(json!({"labels": {"k": "-x"}}), Some(("metadata.labels", INVALID))),
        case(json!({"labels": {"k": "v".repeat(64)}}), Some(("metadata.labels", INVALID))),
        case(json!({"labels": {"app.kubernetes.io/name": "web", "empty": ""}}), None),
        case(json!({"annotations": {"bad key!": ""}}), Some(("metadata.annotations", INVALID))),
        case(json!({"annotations": {"big": big}}), Some(("metadata.annotations", "FieldValueTooLong"))),
        case(json!({"annotations": {"Example.com/Mixed-Case": "x".repeat(200 * 1024)}}), None),
        case(json!({"finalizers": ["a/b/c"]}), Some(("metadata.finalizers", INVALID))),
        case(json!({"finalizers": ["orphan", "foregroundDeletion"]}), Some(("metadata.finalizers", INVALID))),
        case(json!({"finalizers": ["example.com/cleanup"]}), None),
        case(json!({"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p"}]}), Some(("metadata.ownerReferences.uid", INVALID))),
        case(json!({"ownerReferences": [{"apiVersion": "", "kind": "Pod", "name": "p", "uid": "u"}]}), Some(("metadata.ownerReferences.apiVersion", INVALID))),
        case(json!({"ownerReferences": [owner("Deployment", true), owner("StatefulSet", true)]}), Some(("metadata.ownerReferences", INVALID))),
        case(json!({"ownerReferences": [owner("Deployment", true), owner("StatefulSet", false)]}), None),
    ])
    .await;

    // The same rules hold on every update path.
    let stored = cm
        .create(&PostParams::default(), &object(with(json!({}))))
        .await
        .unwrap();
    let name = stored.metadata.name.unwrap();
    let merge = json!({"metadata": {"labels": {"bad key": "v"}}});
    let got = causes(
        cm.patch(&name, &PatchParams::default(), &Patch::Merge(&merge))
            .await,
    );
    assert_eq!(got, [("metadata.labels".into(), INVALID.into())]);
    let apply = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "finalizers": ["a/b/c"]}});
    let got = causes(
        cm.patch(&name, &PatchParams::apply("test"), &Patch::Apply(&apply))
            .await,
    );
    assert_eq!(got, [("metadata.finalizers".into(), INVALID.into())]);
    let mut put = cm.get(&name).await.unwrap();
    put.metadata.annotations = Some([("no spaces here".to_string(), String::new())].into());
    let got = causes(cm.replace(&name, &PostParams::default(), &put).await);
    assert_eq!(got, [("metadata.annotations".into(), INVALID.into())]);
}

#[tokio::test]
async fn what_only_the_server_sets_on_create_and_update() {
    let (_server, client) = server().await;
    let cm = api(&client, "", "v1", "ConfigMap", "configmaps");
    // Create: uid and creationTimestamp are the server's, whatever the body says.
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c",
        "uid": "mine", "creationTimestamp": "2000-01-01T00:00:00Z"}});
    let created = cm
        .create(&PostParams::default(), &object(body))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    assert_ne!(uid, "mine");
    let created_at = created.metadata.creation_timestamp.clone().unwrap();
    assert_ne!(created_at.0.to_string(), "2000-01-01T00:00:00Z");
    // ... and a resourceVersion on create is a bad request.
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d", "resourceVersion": "1"}});
    match cm.create(&PostParams::default(), &object(body)).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest")),
        other => panic!("{other:?}"),
    }

    // Update: a new creationTimestamp is ignored, a different uid fails the PUT's precondition
    // (409) and a patch's validation (422), a deletionTimestamp cannot be set by hand.
    let patch =
        json!({"metadata": {"creationTimestamp": "2001-01-01T00:00:00Z", "labels": {"a": "b"}}});
    let patched = cm
        .patch("c", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(patched.metadata.creation_timestamp, Some(created_at));
    let mut put = patched.clone();
    put.metadata.uid = Some("another".into());
    match cm.replace("c", &PostParams::default(), &put).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"), "{s:?}");
            assert!(
                s.message
                    .contains("Precondition failed: UID in precondition: another"),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
    let patch = json!({"metadata": {"uid": "another"}});
    let got = causes(
        cm.patch("c", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!(got, [("metadata.uid".into(), INVALID.into())]);
    let patch = json!({"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}});
    let got = causes(
        cm.patch("c", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!(got, [("metadata.deletionTimestamp".into(), INVALID.into())]);
    // A PUT without a resourceVersion overwrites a ConfigMap, as kube allows ...
    let mut put = cm.get("c").await.unwrap();
    put.metadata.resource_version = None;
    cm.replace("c", &PostParams::default(), &put).await.unwrap();
    // ... but not a Lease or a custom resource, whose strategies insist on one.
    let leases = api(&client, "coordination.k8s.io", "v1", "Lease", "leases");
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {}});
    let mut lease = leases
        .create(&PostParams::default(), &object(lease))
        .await
        .unwrap();
    lease.metadata.resource_version = None;
    let got = causes(leases.replace("l", &PostParams::default(), &lease).await);
    assert_eq!(got, [("metadata.resourceVersion".into(), INVALID.into())]);
    common::things::create(&common::things::api(&client), "t", json!({})).await;
    let things = common::things::api(&client);
    let mut thing = things.get("t").await.unwrap();
    thing.metadata.resource_version = None;
    let got = causes(things.replace("t", &PostParams::default(), &thing).await);
    assert_eq!(got, [("metadata.resourceVersion".into(), INVALID.into())]);
}

#[tokio::test]
async fn events_follow_the_event_rules_of_the_group_they_are_written_through() {
    let (_server, client) = server().await;
    let events = common::events(&client, "default");
    let n = std::sync::atomic::AtomicUsize::new(0);
    let event = |change: &dyn Fn(&mut Value)| {
        let mut e = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": format!("e{}", n.fetch_add(1, std::sync::atomic::Ordering::Relaxed)), "namespace": "default"},
            "eventTime": "2026-11-26T05:00:00.000000Z", "type": "Warning", "reason": "Failed",
            "note": "it failed", "action": "Reconcile", "reportingController": "wasmctrl/vm",
            "reportingInstance": "host-0",
            "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "x"}});
        change(&mut e);
        e
    };
    let case = |change: &dyn Fn(&mut Value), want| (events.clone(), event(change), want);
    creates(vec![
        case(&|_| {}, None),
        case(
            &|e| e["eventTime"] = Value::Null,
            Some(("eventTime", "FieldValueRequired")),
        ),
        case(
            &|e| e["reportingController"] = json!("not a name!"),
            Some(("reportingController", INVALID)),
        ),
        case(
            &|e| e["note"] = json!("n".repeat(1025)),
            Some(("message", INVALID)),
        ),
        case(&|e| e["note"] = json!("n".repeat(1024)), None),
        case(
            &|e| e["reason"] = json!("r".repeat(129)),
            Some(("reason", INVALID)),
        ),
        case(
            &|e| e["action"] = json!(""),
            Some(("action", "FieldValueRequired")),
        ),
        case(&|e| e["type"] = json!("Info"), Some(("type", INVALID))),
        case(
            &|e| {
                e["series"] = json!({"count": 1, "lastObservedTime": "2026-11-26T05:00:01.000000Z"})
            },
            Some(("series.count", INVALID)),
        ),
    ])
    .await;

    // A recorder may move a series on; what happened may not change.
    let first = events
        .create(&PostParams::default(), &object(event(&|_| {})))
        .await
        .unwrap();
    let name = first.metadata.name.unwrap();
    let series = json!({"series": {"count": 2, "lastObservedTime": "2026-11-26T05:01:00.000000Z"}});
    events
        .patch(&name, &PatchParams::default(), &Patch::Merge(&series))
        .await
        .unwrap();
    let rewrite = json!({"note": "something else"});
    let got = causes(
        events
            .patch(&name, &PatchParams::default(), &Patch::Merge(&rewrite))
            .await,
    );
    assert_eq!(got, [("message".into(), INVALID.into())]);
}
