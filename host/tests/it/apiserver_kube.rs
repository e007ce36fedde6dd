//! The embedded API server through a real `kube::Client` (in-process, no sockets): CRUD,
//! CRDs, patches, server-side apply, status, finalizers.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinEvent, finalizer};
use kube::{Client, ResourceExt};
use serde_json::json;
use wasmctrl::apiserver::ApiServer;

fn status_code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("not an API error: {other:?}"),
    }
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"a": "1"}})).unwrap()
}

fn crd_json() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

async fn setup() -> (ApiServer, Client) {
    let server = ApiServer::new().unwrap();
    let client = server.client();
    (server, client)
}

async fn create_crd(client: &Client) -> Api<DynamicObject> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(crd_json()).unwrap();
    let created = crds.create(&PostParams::default(), &crd).await.unwrap();
    let conds = created.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "NamesAccepted" && c.status == "True")
    );
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    Api::namespaced_with(client.clone(), "default", &ar)
}

#[tokio::test]
async fn typed_configmap_crud() {
    let (_s, client) = setup().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let created = api
        .create(&PostParams::default(), &cm("one"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    // As in kube, a ConfigMap has no generation (a `generation-changed` predicate passes all
    // its changes); custom resources and Deployments have one (below).
    assert_eq!(created.metadata.generation, None);
    let rv = created.resource_version().unwrap();
    // Name taken.
    let e = api
        .create(&PostParams::default(), &cm("one"))
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 409);
    // generateName.
    let mut g = cm("");
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let gen_obj = api.create(&PostParams::default(), &g).await.unwrap();
    assert!(gen_obj.name_any().starts_with("gen-") && gen_obj.name_any().len() == 9);
    // Replace with the right RV, then with the stale one.
    let mut upd = created.clone();
    upd.data = Some([("a".to_string(), "2".to_string())].into());
    let replaced = api
        .replace("one", &PostParams::default(), &upd)
        .await
        .unwrap();
    assert_ne!(replaced.resource_version().unwrap(), rv);
    let e = api
        .replace("one", &PostParams::default(), &upd)
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 409);
    // dryRun persists nothing.
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    api.create(&dry, &cm("dry")).await.unwrap();
    assert_eq!(status_code(&api.get("dry").await.unwrap_err()), 404);
    // Missing namespace.
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    assert_eq!(
        status_code(
            &other
                .create(&PostParams::default(), &cm("x"))
                .await
                .unwrap_err()
        ),
        404
    );
    // List with selectors and paging.
    for i in 0..7 {
        let mut c = cm(&format!("l{i}"));
        c.metadata.labels = Some([("idx".to_string(), (i % 2).to_string())].into());
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    let odd = api
        .list(&ListParams::default().labels("idx=1"))
        .await
        .unwrap();
    assert_eq!(odd.items.len(), 3);
    let notin = api
        .list(&ListParams::default().labels("idx notin (1),idx"))
        .await
        .unwrap();
    assert_eq!(notin.items.len(), 4);
    let page = api.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(page.items.len(), 3);
    let token = page.metadata.continue_.clone().unwrap();
    api.create(&PostParams::default(), &cm("late"))
        .await
        .unwrap();
    let mut all = page.items.len();
    let mut token = Some(token);
    while let Some(t) = token {
        let p = api
            .list(&ListParams::default().limit(3).continue_token(&t))
            .await
            .unwrap();
        all += p.items.len();
        token = p.metadata.continue_.filter(|c| !c.is_empty());
    }
    assert_eq!(
        all, 9,
        "the snapshot excludes objects created after the first page"
    );
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=one"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
    assert_eq!(
        status_code(
            &api.list(&ListParams::default().fields("spec.x=1"))
                .await
                .unwrap_err()
        ),
        400
    );
    // resourceVersionMatch: Exact at the current RV works, an older one gives the list as it
    // was then (until compacted: 410), a future one 504; NotOlderThan an older RV gives the
    // current state.
    let cur = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let exact = ListParams::default()
        .at(&cur)
        .matching(kube::api::VersionMatch::Exact);
    assert_eq!(api.list(&exact).await.unwrap().items.len(), 10);
    let old = ListParams::default()
        .at(&rv)
        .matching(kube::api::VersionMatch::Exact);
    let then = api.list(&old).await.unwrap();
    assert_eq!(then.metadata.resource_version.as_deref(), Some(rv.as_str()));
    let rv_of = |c: &ConfigMap| c.resource_version().unwrap().parse::<u64>().unwrap();
    assert!(then.items.iter().any(|c| c.name_any() == "one"));
    assert!(
        then.items
            .iter()
            .all(|c| rv_of(c) <= rv.parse::<u64>().unwrap())
    );
    let future = ListParams::default()
        .at("999999")
        .matching(kube::api::VersionMatch::NotOlderThan);
    assert_eq!(status_code(&api.list(&future).await.unwrap_err()), 504);
    let not_older = ListParams::default()
        .at(&rv)
        .matching(kube::api::VersionMatch::NotOlderThan);
    assert_eq!(api.list(&not_older).await.unwrap().items.len(), 10);
    // Delete.
    api.delete("one", &DeleteParams::default()).await.unwrap();
    assert_eq!(status_code(&api.get("one").await.unwrap_err()), 404);
    // Built-in namespaces exist.
    let ns: Api<Namespace> = Api::all(client);
    for n in ["default", "kube-system", "kube-public"] {
        ns.get(n).await.unwrap();
    }
}

#[tokio::test]
async fn dynamic_crd_and_discovery() {
    let (_s, client) = setup().await;
    let widgets = create_crd(&client).await;
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .unwrap();
    let (ar, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("Widget discovered");
    assert_eq!(ar.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "status"));
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"size": 1}, "status": {"ignored": true}
    }))
    .unwrap();
    let created = widgets.create(&PostParams::default(), &obj).await.unwrap();
    assert!(
        created.data.get("status").is_none(),
        "create ignores status"
    );
    assert_eq!(created.metadata.generation, Some(1));
    // Status subresource writes only status, generation unchanged.
    let st = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}, "spec": {"size": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["ready"], true);
    assert_eq!(st.data["spec"]["size"], 1);
    assert_eq!(st.metadata.generation, Some(1));
    // Main resource ignores status, bumps generation on spec change.
    let m = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": false}, "spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(m.data["status"]["ready"], true);
    assert_eq!(m.metadata.generation, Some(2));
    // Metadata-only change: no generation bump.
    let m = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(m.metadata.generation, Some(2));
    // Server-side apply to the status subresource.
    let applied = widgets
        .patch_status(
            "w1",
            &PatchParams::apply("status-writer"),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "status": {"phase": "Up"}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.data["status"]["phase"], "Up");
    assert_eq!(applied.data["spec"]["size"], 2);
    let mf = applied.metadata.managed_fields.unwrap();
    assert!(
        mf.iter()
            .any(|e| e.manager.as_deref() == Some("status-writer")
                && e.subresource.as_deref() == Some("status"))
    );
    // Strategic merge on a CRD: 415.
    let e = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 3}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 415);
    // JSON patch, including a failing test op (422) and a malformed patch (400).
    let jp: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/size", "value": 2},
        {"op": "replace", "path": "/spec/size", "value": 5}
    ]))
    .unwrap();
    let j = widgets
        .patch("w1", &PatchParams::default(), &Patch::Json::<()>(jp))
        .await
        .unwrap();
    assert_eq!(j.data["spec"]["size"], 5);
    let bad: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/spec/size", "value": 99}])).unwrap();
    let e = widgets
        .patch("w1", &PatchParams::default(), &Patch::Json::<()>(bad))
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 422);
    // The resource disappears with its CRD.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(status_code(&widgets.get("w1").await.unwrap_err()), 404);
}

#[tokio::test]
async fn strategic_merge_on_deployment() {
    let (_s, client) = setup().await;
    let api: Api<Deployment> = Api::default_namespaced(client);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &d).await.unwrap();
    let p =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}});
    let out = api
        .patch("web", &PatchParams::default(), &Patch::Strategic(p))
        .await
        .unwrap();
    let cs = out.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[1].image.as_deref(), Some("b:2"));
    assert_eq!(out.metadata.generation, Some(2));
    // As kube's Deployment strategy: annotations bump the generation, labels do not.
    let meta = |m: serde_json::Value| Patch::Merge(json!({"metadata": m}));
    let labelled = api
        .patch(
            "web",
            &PatchParams::default(),
            &meta(json!({"labels": {"tier": "web"}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(2));
    let annotated = api
        .patch(
            "web",
            &PatchParams::default(),
            &meta(json!({"annotations": {"a": "b"}})),
        )
        .await
        .unwrap();
    assert_eq!(annotated.metadata.generation, Some(3));
}

#[tokio::test]
async fn server_side_apply_conflicts_and_force() {
    let (_s, client) = setup().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"x": "1", "y": "2"}});
    let created = api
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&a))
        .await
        .unwrap();
    let mf = created.metadata.managed_fields.clone().unwrap();
    assert_eq!(mf[0].manager.as_deref(), Some("alice"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    let b = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"x": "9"}});
    let e = api
        .patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(&b))
        .await
        .unwrap_err();
    let kube::Error::Api(s) = &e else { panic!() };
    assert_eq!(s.code, 409);
    assert_eq!(s.reason, "Conflict");
    assert!(s.message.contains("alice"), "{}", s.message);
    let forced = api
        .patch("ssa", &PatchParams::apply("bob").force(), &Patch::Apply(&b))
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["x"], "9");
    // alice drops y, which she owned alone: removed. x is bob's now: kept.
    let a2 =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {}});
    let out = api
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&a2))
        .await
        .unwrap();
    let data = out.data.unwrap();
    assert!(!data.contains_key("y"));
    assert_eq!(data["x"], "9");
    // fieldManager is required.
    let e = api
        .patch("ssa", &PatchParams::default(), &Patch::Apply(&a2))
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 400);
    // Merge patch.
    let m = api
        .patch(
            "ssa",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"z": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(m.data.unwrap()["z"], "3");
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

#[tokio::test]
async fn finalizer_helper_and_deletion() {
    let (_s, client) = setup().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &cm("fin"))
        .await
        .unwrap();
    // First reconcile adds the finalizer.
    let obj = Arc::new(api.get("fin").await.unwrap());
    finalizer(&api, "example.com/cleanup", obj, |_ev| async {
        Ok::<_, Never>(Action::await_change())
    })
    .await
    .unwrap();
    let obj = api.get("fin").await.unwrap();
    assert_eq!(obj.finalizers(), ["example.com/cleanup"]);
    // Delete: object stays with a deletionTimestamp; kube bumps only a generation the object
    // has, and a ConfigMap has none.
    api.delete("fin", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("fin").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(
        (obj.metadata.generation, deleting.metadata.generation),
        (None, None)
    );
    // No new finalizers once deleting.
    let e = api
        .patch(
            "fin",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/cleanup", "x/y"]}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 422);
    // Cleanup event removes the finalizer: object gone.
    let mut saw_cleanup = false;
    finalizer(&api, "example.com/cleanup", Arc::new(deleting), |ev| {
        saw_cleanup = matches!(ev, FinEvent::Cleanup(_));
        async { Ok::<_, Never>(Action::await_change()) }
    })
    .await
    .unwrap();
    assert!(saw_cleanup);
    assert_eq!(status_code(&api.get("fin").await.unwrap_err()), 404);
    // Delete preconditions.
    let c = api
        .create(&PostParams::default(), &cm("pre"))
        .await
        .unwrap();
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("wrong".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_eq!(status_code(&api.delete("pre", &dp).await.unwrap_err()), 409);
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: c.metadata.uid.clone(),
            resource_version: c.metadata.resource_version.clone(),
        }),
        ..Default::default()
    };
    api.delete("pre", &dp).await.unwrap();
}

/// The PostgresWriter CRD exactly as the example ships it.
fn postgres_writer_crd() -> CustomResourceDefinition {
    let text = include_str!("../../../examples/postgres-writer/crd.yaml");
    serde_yaml::from_str(text).unwrap()
}

fn writer(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "demo.yash.com/v1", "kind": "PostgresWriter",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

/// `(reason, field, message)` of each cause of a 422 Invalid for PostgresWriter `name`.
fn invalid_causes(e: &kube::Error, name: &str) -> Vec<(String, String, String)> {
    let kube::Error::Api(s) = e else {
        panic!("not an API error: {e:?}")
    };
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
    let d = s.details.as_ref().expect("details");
    assert_eq!(
        (d.name.as_str(), d.group.as_str(), d.kind.as_str()),
        (name, "demo.yash.com", "PostgresWriter")
    );
    d.causes
        .iter()
        .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
        .collect()
}

#[tokio::test]
async fn custom_resources_are_pruned_and_validated_against_their_schema() {
    let (_s, client) = setup().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &postgres_writer_crd())
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk("demo.yash.com", "v1", "PostgresWriter");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "postgreswriters");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let pp = PostParams::default();
    let good = json!({"table": "students", "name": "Alice", "age": 23, "country": "Norway"});

    // A valid object is created; an unknown field is pruned, not stored.
    let mut spec = good.clone();
    spec["extra"] = json!("dropped");
    let created = api.create(&pp, &writer("alice", spec)).await.unwrap();
    assert_eq!(created.data["spec"], good);
    assert_eq!(api.get("alice").await.unwrap().data["spec"], good);

    // A negative age: 422 Invalid naming spec.age, in kube-apiserver's words; nothing stored.
    let mut spec = good.clone();
    spec["age"] = json!(-1);
    let e = api.create(&pp, &writer("bad", spec)).await.unwrap_err();
    let kube::Error::Api(s) = &e else { panic!() };
    assert_eq!(
        s.message,
        "PostgresWriter.demo.yash.com \"bad\" is invalid: spec.age: Invalid value: -1: \
         spec.age in body should be greater than or equal to 0"
    );
    assert_eq!(
        invalid_causes(&e, "bad"),
        [(
            "FieldValueInvalid".to_string(),
            "spec.age".to_string(),
            "Invalid value: -1: spec.age in body should be greater than or equal to 0".to_string()
        )]
    );
    assert_eq!(status_code(&api.get("bad").await.unwrap_err()), 404);

    // Every violation is reported: a wrong type and a missing required field together.
    let e = api
        .create(
            &pp,
            &writer("bad", json!({"table": "t", "name": "n", "age": "old"})),
        )
        .await
        .unwrap_err();
    let causes = invalid_causes(&e, "bad");
    let summary: Vec<(&str, &str)> = causes
        .iter()
        .map(|(r, f, _)| (r.as_str(), f.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("FieldValueTypeInvalid", "spec.age"),
            ("FieldValueRequired", "spec.country")
        ]
    );
    assert_eq!(causes[1].2, "Required value");
    let kube::Error::Api(s) = &e else { panic!() };
    assert!(
        s.message.ends_with(
            "is invalid: [spec.age: Invalid value: \"string\": spec.age in body must be of type \
             integer: \"string\", spec.country: Required value]"
        ),
        "{}",
        s.message
    );

    // A merge patch making age negative is refused and changes nothing.
    let before = api.get("alice").await.unwrap();
    let e = api
        .patch(
            "alice",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"age": -5}})),
        )
        .await
        .unwrap_err();
    assert_eq!(invalid_causes(&e, "alice")[0].1, "spec.age");
    let after = api.get("alice").await.unwrap();
    assert_eq!(after.data["spec"], good);
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );

    // So is a JSON patch removing a required field, and a PUT with a too-long table name.
    let jp: json_patch::Patch =
        serde_json::from_value(json!([{"op": "remove", "path": "/spec/country"}])).unwrap();
    let e = api
        .patch("alice", &PatchParams::default(), &Patch::Json::<()>(jp))
        .await
        .unwrap_err();
    assert_eq!(
        invalid_causes(&e, "alice")[0],
        (
            "FieldValueRequired".to_string(),
            "spec.country".to_string(),
            "Required value".to_string()
        )
    );
    let mut put = after.clone();
    put.data["spec"]["table"] = json!("t".repeat(64));
    let e = api.replace("alice", &pp, &put).await.unwrap_err();
    assert_eq!(
        invalid_causes(&e, "alice")[0],
        (
            "FieldValueTooLong".to_string(),
            "spec.table".to_string(),
            "Too long: may not be more than 63 bytes".to_string()
        )
    );

    // A patch that only adds unknown fields is a no-op.
    let same = api
        .patch(
            "alice",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nickname": "Al"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        before.metadata.resource_version
    );

    // Server-side apply: an invalid object is refused, whether new or existing; a valid one
    // has its unknown fields pruned before they could be owned.
    let ssa = PatchParams::apply("tester");
    let mut config = json!({"apiVersion": "demo.yash.com/v1", "kind": "PostgresWriter",
        "metadata": {"name": "carol"},
        "spec": {"table": "students", "name": "Carol", "age": -3, "country": "Chile"}});
    let e = api
        .patch("carol", &ssa, &Patch::Apply(&config))
        .await
        .unwrap_err();
    assert_eq!(invalid_causes(&e, "carol")[0].1, "spec.age");
    assert_eq!(status_code(&api.get("carol").await.unwrap_err()), 404);
    config["spec"]["age"] = json!(41);
    config["spec"]["shoeSize"] = json!(38);
    let applied = api
        .patch("carol", &ssa, &Patch::Apply(&config))
        .await
        .unwrap();
    assert!(applied.data["spec"].get("shoeSize").is_none());
    let owned = serde_json::to_string(&applied.metadata.managed_fields).unwrap();
    assert!(
        owned.contains("f:age") && !owned.contains("shoeSize"),
        "{owned}"
    );
    config["spec"]["country"] = json!("");
    let e = api
        .patch("carol", &ssa, &Patch::Apply(&config))
        .await
        .unwrap_err();
    assert_eq!(
        invalid_causes(&e, "carol")[0].2,
        "Invalid value: \"\": spec.country in body should be at least 1 chars long"
    );

    // Status writes are validated as part of the whole object, and pruned too.
    let e = api
        .patch_status(
            "alice",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observedGeneration": "one"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        invalid_causes(&e, "alice")[0],
        (
            "FieldValueTypeInvalid".to_string(),
            "status.observedGeneration".to_string(),
            "Invalid value: \"string\": status.observedGeneration in body must be of type \
             integer: \"string\""
                .to_string()
        )
    );
    let st = api
        .patch_status(
            "alice",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Synced", "observedGeneration": 1, "mood": "ok"}}),
            ),
        )
        .await
        .unwrap();
    // Pruned (`mood`), and defaulted as kube defaults (the schema's `default: ''`s).
    assert_eq!(
        st.data["status"],
        json!({"phase": "Synced", "observedGeneration": 1, "id": "", "table": ""})
    );

    // A dry run is judged like the real thing.
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let mut spec = good.clone();
    spec["name"] = json!("");
    let e = api.create(&dry, &writer("dry", spec)).await.unwrap_err();
    assert_eq!(invalid_causes(&e, "dry")[0].1, "spec.name");
}

#[tokio::test]
async fn crd_with_an_unusable_schema_is_refused() {
    let (_s, client) = setup().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = crd_json();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "string", "pattern": "(["}}}}
    });
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    let e = crds.create(&PostParams::default(), &crd).await.unwrap_err();
    let kube::Error::Api(s) = &e else { panic!() };
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    let cause = &s.details.as_ref().unwrap().causes[0];
    assert_eq!(
        cause.field,
        // One version: kube holds its schema once, as `spec.validation`.
        "spec.validation.openAPIV3Schema.properties[spec].properties[size].pattern"
    );
    assert!(
        cause.message.contains("must be a valid regular expression"),
        "{}",
        cause.message
    );
    assert_eq!(
        status_code(&crds.get("widgets.example.com").await.unwrap_err()),
        404
    );
}

/// kube-runtime's `Recorder` writes through `events.k8s.io/v1` (a create, then a merge patch
/// of the series for a repeat); a core/v1 watch selected by the object it is about, as
/// `kubectl get events -w --field-selector involvedObject.name=...` runs, sees both writes in
/// the core form: the two groups serve one resource.
#[tokio::test]
async fn recorder_events_show_through_a_core_v1_watch() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event as EventsV1;
    use kube::Resource;
    use kube::api::{WatchEvent, WatchParams};
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};

    let (_server, client) = setup().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let about = cms
        .create(&PostParams::default(), &cm("recorded"))
        .await
        .unwrap();
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let rv = core
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let selector = WatchParams::default().fields("involvedObject.name=recorded");
    let mut watch = core.watch(&selector, &rv).await.unwrap().boxed();

    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "example.com/recorder".into(),
            instance: Some("recorder-0".into()),
        },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("the ConfigMap is in sync".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    let reference = about.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();

    let mut seen = Vec::new();
    while seen.len() < 2 {
        match watch.next().await.unwrap().unwrap() {
            WatchEvent::Added(e) => seen.push(("ADDED", e)),
            WatchEvent::Modified(e) => seen.push(("MODIFIED", e)),
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected watch event {other:?}"),
        }
    }
    let (added, repeated) = (&seen[0], &seen[1]);
    assert_eq!((added.0, repeated.0), ("ADDED", "MODIFIED"));
    for (_, e) in &seen {
        assert_eq!(e.involved_object.name.as_deref(), Some("recorded"));
        assert_eq!(e.involved_object.uid, about.metadata.uid);
        assert_eq!(e.message.as_deref(), Some("the ConfigMap is in sync"));
        assert_eq!(e.reason.as_deref(), Some("Synced"));
        assert_eq!(
            e.reporting_component.as_deref(),
            Some("example.com/recorder")
        );
    }
    assert_eq!(repeated.1.series.as_ref().and_then(|s| s.count), Some(2));

    // The same object through events.k8s.io/v1, in that group's field names.
    let name = repeated.1.metadata.name.clone().unwrap();
    let v1: Api<EventsV1> = Api::namespaced(client.clone(), "default");
    let read = v1.get(&name).await.unwrap();
    assert_eq!(read.note.as_deref(), Some("the ConfigMap is in sync"));
    assert_eq!(
        read.regarding.and_then(|r| r.name).as_deref(),
        Some("recorded")
    );
    assert_eq!(read.series.map(|s| s.count), Some(2));
}

#[tokio::test]
async fn field_selectors_on_pods_and_a_crd_s_selectable_fields_filter_lists_and_watches() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{WatchEvent, WatchParams};

    let (_server, client) = setup().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, node) in [("a", "node1"), ("b", "node2")] {
        let pod = json!({"metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]}});
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await
        .unwrap();
    }
    let on_node1 = ListParams::default().fields("spec.nodeName=node1,status.phase!=Failed");
    let names: Vec<String> = pods
        .list(&on_node1)
        .await
        .unwrap()
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(names, ["a"]);

    let mut crd = crd_json();
    crd["spec"]["versions"][0]["selectableFields"] = json!([{"jsonPath": ".spec.color"}]);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).unwrap(),
    )
    .await
    .unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    );
    let widget = |name: &str, color: &str| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name}, "spec": {"color": color}}))
        .unwrap()
    };
    for (name, color) in [("w1", "red"), ("w2", "blue")] {
        widgets
            .create(&PostParams::default(), &widget(name, color))
            .await
            .unwrap();
    }
    let red = widgets
        .list(&ListParams::default().fields("spec.color=red"))
        .await
        .unwrap();
    assert_eq!(red.items.len(), 1);
    assert_eq!(red.items[0].name_any(), "w1");
    let unknown = widgets
        .list(&ListParams::default().fields("spec.shape=round"))
        .await
        .unwrap_err();
    assert_eq!(status_code(&unknown), 400);

    // A watch sees an object leave the selection as DELETED and enter it as ADDED.
    let rv = red.metadata.resource_version.unwrap();
    let params = WatchParams::default().fields("spec.color=red");
    let mut watch = widgets.watch(&params, &rv).await.unwrap().boxed();
    let paint = |color: &str| Patch::Merge(json!({"spec": {"color": color}}));
    widgets
        .patch("w1", &PatchParams::default(), &paint("blue"))
        .await
        .unwrap();
    widgets
        .patch("w2", &PatchParams::default(), &paint("red"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match watch.next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => seen.push(("ADDED", o.name_any())),
            WatchEvent::Modified(o) => seen.push(("MODIFIED", o.name_any())),
            WatchEvent::Deleted(o) => seen.push(("DELETED", o.name_any())),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        }
    }
    assert_eq!(
        seen,
        [("DELETED", "w1".to_string()), ("ADDED", "w2".to_string())]
    );
}

#[tokio::test]
async fn a_secret_s_string_data_is_stored_as_data() {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;

    let (_server, client) = setup().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = json!({"metadata": {"name": "s"}, "data": {"kept": "a2VwdA==", "both": "b2xk"},
        "stringData": {"password": "hunter2", "both": "new"}});
    let created = secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(secret).unwrap(),
        )
        .await
        .unwrap();
    let data = |s: &Secret, k: &str| s.data.as_ref().and_then(|d| d.get(k)).cloned();
    for s in [created, secrets.get("s").await.unwrap()] {
        assert_eq!(s.string_data, None, "stringData is write-only");
        assert_eq!(data(&s, "password"), Some(ByteString(b"hunter2".to_vec())));
        assert_eq!(data(&s, "both"), Some(ByteString(b"new".to_vec())));
        assert_eq!(data(&s, "kept"), Some(ByteString(b"kept".to_vec())));
    }
    // A patch's stringData is merged the same way.
    let patch = Patch::Merge(json!({"stringData": {"token": "abc"}}));
    let patched = secrets
        .patch("s", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(patched.string_data, None);
    assert_eq!(data(&patched, "token"), Some(ByteString(b"abc".to_vec())));
    assert_eq!(
        data(&patched, "password"),
        Some(ByteString(b"hunter2".to_vec()))
    );
}
