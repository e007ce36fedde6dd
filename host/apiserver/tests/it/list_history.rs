//! Lists at earlier revisions (`resourceVersionMatch=Exact`, and `resourceVersion` with
//! `limit`), rebuilt from the event history until etcd's compaction (as kube-apiserver drives
//! it) or the history cap has dropped what they need: then 410 `Expired`.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, ObjectList, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmctrl_apiserver::ApiServer;

use crate::common;

const INTERVAL: Duration = Duration::from_secs(5 * 60);

async fn create(api: &Api<ConfigMap>, name: &str, app: &str) -> String {
    let cm = serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": app}}}))
        .unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    created.resource_version().unwrap()
}

async fn modify(api: &Api<ConfigMap>, name: &str) -> String {
    let patch = Patch::Merge(json!({"data": {"changed": "yes"}}));
    let modified = api
        .patch(name, &PatchParams::default(), &patch)
        .await
        .unwrap();
    modified.resource_version().unwrap()
}

fn exact(rv: &str) -> ListParams {
    ListParams::default()
        .at(rv)
        .matching(kube::api::VersionMatch::Exact)
}

/// The items' names and resourceVersions.
fn seen(list: &ObjectList<ConfigMap>) -> Vec<(String, String)> {
    (list.items.iter())
        .map(|c| (c.name_any(), c.resource_version().unwrap()))
        .collect()
}

fn pair(name: &str, rv: &str) -> (String, String) {
    (name.to_string(), rv.to_string())
}

#[tokio::test]
async fn exact_lists_return_the_objects_as_they_were_at_each_earlier_revision() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let a1 = create(&api, "a", "x").await;
    let b = create(&api, "b", "y").await;
    let a2 = modify(&api, "a").await;
    let b_gone = api
        .delete("b", &DeleteParams::default())
        .await
        .unwrap()
        .map_left(|cm| cm.resource_version().unwrap());
    assert!(b_gone.is_left(), "deleted at once");

    let expected = [
        (&a1, vec![pair("a", &a1)]),
        (&b, vec![pair("a", &a1), pair("b", &b)]),
        (&a2, vec![pair("a", &a2), pair("b", &b)]),
    ];
    for (rv, items) in expected {
        let list = api.list(&exact(rv)).await.unwrap();
        assert_eq!(seen(&list), items, "at {rv}");
        assert_eq!(list.metadata.resource_version.as_deref(), Some(rv.as_str()));
    }
    let now = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(seen(&now), [pair("a", &a2)]);

    // Selectors apply to the earlier state.
    let ys = api.list(&exact(&a2).labels("app=y")).await.unwrap();
    assert_eq!(seen(&ys), [pair("b", &b)]);

    // So do limit and continue, all pages at the asked revision.
    let first = api.list(&exact(&a2).limit(1)).await.unwrap();
    assert_eq!(seen(&first), [pair("a", &a2)]);
    assert_eq!(
        first.metadata.resource_version.as_deref(),
        Some(a2.as_str())
    );
    let token = first.metadata.continue_.clone().unwrap();
    let rest = ListParams::default().limit(1).continue_token(&token);
    let second = api.list(&rest).await.unwrap();
    assert_eq!(seen(&second), [pair("b", &b)]);
    assert_eq!(
        second.metadata.resource_version.as_deref(),
        Some(a2.as_str())
    );
    assert!(second.metadata.continue_.is_none_or(|c| c.is_empty()));

    // A resourceVersion with a limit is an exact read too (kube reads it from etcd).
    let legacy = api
        .list(&ListParams::default().at(&b).limit(10))
        .await
        .unwrap();
    assert_eq!(seen(&legacy), [pair("a", &a1), pair("b", &b)]);

    // NotOlderThan an old revision is the current state.
    let not_older = ListParams::default()
        .at(&a1)
        .matching(kube::api::VersionMatch::NotOlderThan);
    let current = api.list(&not_older).await.unwrap();
    assert_eq!(seen(&current), [pair("a", &a2)]);
    assert_eq!(
        current.metadata.resource_version,
        now.metadata.resource_version
    );
}

#[tokio::test]
async fn a_revision_compacted_as_etcd_compacts_it_is_expired() {
    let server = ApiServer::builder()
        .compaction_interval(INTERVAL)
        .build()
        .unwrap();
    let (client, _http) = common::http_client(&server).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let a1 = create(&api, "a", "x").await;
    let a2 = modify(&api, "a").await;

    // The first tick only notes the revision it will compact to at the next.
    server.advance_compaction_clock(INTERVAL);
    let then = api.list(&exact(&a1)).await.unwrap();
    assert_eq!(seen(&then), [pair("a", &a1)]);

    server.advance_compaction_clock(INTERVAL);
    let status = common::refusal(api.list(&exact(&a1)).await);
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert_eq!(
        status.message,
        "The resourceVersion for the provided list is too old."
    );
    let kept = api.list(&exact(&a2)).await.unwrap();
    assert_eq!(seen(&kept), [pair("a", &a2)]);
}

#[tokio::test]
async fn a_revision_older_than_the_history_cap_reaches_is_expired() {
    let server = ApiServer::builder().history(2).build().unwrap();
    let (client, _http) = common::http_client(&server).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let c1 = create(&api, "c1", "x").await;
    let c2 = create(&api, "c2", "x").await;
    create(&api, "c3", "x").await;
    modify(&api, "c3").await;

    // The two events kept (c3's creation and change) undo back to c2's revision, no further.
    let at_c2 = api.list(&exact(&c2)).await.unwrap();
    assert_eq!(seen(&at_c2), [pair("c1", &c1), pair("c2", &c2)]);
    let status = common::refusal(api.list(&exact(&c1)).await);
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn an_exact_list_at_revision_zero_is_refused_as_kube_refuses_it() {
    let server = ApiServer::new().unwrap();
    let (client, _http) = common::http_client(&server).await;
    // kube-rs refuses to send this one; kube-apiserver refuses it too.
    let url = "/api/v1/namespaces/default/configmaps?resourceVersion=0&resourceVersionMatch=Exact";
    let request = http::Request::get(url).body(Vec::new()).unwrap();
    let status = common::refusal(client.request_text(request).await);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let causes = status.details.unwrap().causes;
    assert_eq!(
        causes[0].message,
        "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
    );
}
