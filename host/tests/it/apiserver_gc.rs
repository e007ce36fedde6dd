//! The optional background controllers: owner-reference garbage collection and namespace
//! deletion.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use wasmctrl::apiserver::ApiServer;

async fn gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for _ in 0..100 {
        if matches!(api.get(name).await, Err(kube::Error::Api(s)) if s.code == 404) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

#[tokio::test]
async fn owner_gone_dependents_deleted() {
    let server = ApiServer::builder().gc(true).build().unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let owner = api
        .create(&PostParams::default(), &cm("owner"))
        .await
        .unwrap();
    let mut dep = cm("dep");
    dep.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner.uid().unwrap(),
            ..Default::default()
        },
    ]);
    api.create(&PostParams::default(), &dep).await.unwrap();
    api.create(&PostParams::default(), &cm("bystander"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    api.get("dep").await.unwrap();
    api.delete("owner", &DeleteParams::default()).await.unwrap();
    assert!(gone(&api, "dep").await);
    api.get("bystander").await.unwrap();
}

fn owned(name: &str, owner: &ConfigMap) -> ConfigMap {
    let mut c = cm(name);
    c.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: owner.name_any(),
            uid: owner.uid().unwrap(),
            ..Default::default()
        },
    ]);
    c
}

#[tokio::test]
async fn foreground_and_orphan_propagation() {
    let server = ApiServer::builder().gc(true).build().unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let fg = api.create(&PostParams::default(), &cm("fg")).await.unwrap();
    let mut held = owned("fg-child", &fg);
    held.metadata.finalizers = Some(vec!["x/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    api.delete("fg", &DeleteParams::foreground()).await.unwrap();
    // The owner waits (foregroundDeletion) while its dependent is held by a finalizer.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let owner = api.get("fg").await.unwrap();
    assert!(
        owner
            .finalizers()
            .contains(&"foregroundDeletion".to_string())
    );
    assert!(
        api.get("fg-child")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    api.patch(
        "fg-child",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(gone(&api, "fg").await);

    let or = api.create(&PostParams::default(), &cm("or")).await.unwrap();
    api.create(&PostParams::default(), &owned("or-child", &or))
        .await
        .unwrap();
    api.delete("or", &DeleteParams::orphan()).await.unwrap();
    assert!(gone(&api, "or").await);
    let child = api.get("or-child").await.unwrap();
    assert!(
        child
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
}

#[tokio::test]
async fn namespace_deletion_cleans_up() {
    let server = ApiServer::builder()
        .namespace_cleanup(true)
        .build()
        .unwrap();
    let client: Client = server.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "tmp"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "tmp");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let mut held = cm("held");
    held.metadata.finalizers = Some(vec!["x/y".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    nss.delete("tmp", &DeleteParams::default()).await.unwrap();
    assert!(gone(&api, "a").await);
    // The namespace waits for the finalizer of its last object.
    let ns = nss.get("tmp").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(gone(&nss, "tmp").await);
}

/// Polls until `api` has `name`, for up to five seconds.
async fn appears<K>(api: &Api<K>, name: &str) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for _ in 0..100 {
        if let Ok(Some(o)) = api.get_opt(name).await {
            return o;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} did not appear");
}

/// As kube-controller-manager's ServiceAccounts controller and root CA publisher: every
/// namespace, present or new, has a `default` ServiceAccount (made again when deleted) and
/// `kube-root-ca.crt`; and Pods are admitted as kube's ServiceAccount plugin admits them (read
/// off kube 1.32): run by `default` unless they name an account, which must exist, with the
/// projected `kube-api-access-*` volume mounted in each container unless automounting is off.
#[tokio::test]
async fn namespaces_get_their_service_account_and_pods_run_as_it() {
    use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
    let server = ApiServer::builder().service_accounts(true).build().unwrap();
    let client = server.client();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "kube-system");
    appears(&accounts, "default").await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let team: Namespace = serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &team)
        .await
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "team");
    let first = appears(&accounts, "default").await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let root = appears(&maps, "kube-root-ca.crt").await;
    let ca = &root.data.unwrap()["ca.crt"];
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    accounts
        .delete("default", &DeleteParams::default())
        .await
        .unwrap();
    let mut again = appears(&accounts, "default").await;
    for _ in 0..100 {
        if again.uid() != first.uid() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        again = appears(&accounts, "default").await;
    }
    assert_ne!(
        again.uid(),
        first.uid(),
        "the deleted account is made again"
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), "team");
    let pod = |name: &str, extra: serde_json::Value| -> Pod {
        let mut p = json!({"metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "busybox"}],
                "initContainers": [{"name": "init", "image": "busybox"}]}});
        json_patch::merge(&mut p["spec"], &extra);
        serde_json::from_value(p).unwrap()
    };
    let made = pods
        .create(&PostParams::default(), &pod("p1", json!({})))
        .await
        .unwrap();
    let spec = made.spec.unwrap();
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    assert_eq!(spec.service_account.as_deref(), Some("default"));
    let volume = &spec.volumes.unwrap()[0];
    assert!(
        volume.name.starts_with("kube-api-access-"),
        "{}",
        volume.name
    );
    let sources = volume.projected.as_ref().unwrap().sources.as_ref().unwrap();
    assert_eq!(
        sources[0]
            .service_account_token
            .as_ref()
            .unwrap()
            .expiration_seconds,
        Some(3607)
    );
    assert_eq!(
        sources[1].config_map.as_ref().unwrap().name,
        "kube-root-ca.crt"
    );
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let mount = &c.volume_mounts.as_ref().unwrap()[0];
        assert_eq!(mount.name, volume.name);
        assert_eq!(
            mount.mount_path,
            "/var/run/secrets/kubernetes.io/serviceaccount"
        );
        assert_eq!(mount.read_only, Some(true));
    }
    let quiet = pods
        .create(
            &PostParams::default(),
            &pod("p2", json!({"automountServiceAccountToken": false})),
        )
        .await
        .unwrap();
    assert!(quiet.spec.unwrap().volumes.is_none());
    let e = pods
        .create(
            &PostParams::default(),
            &pod("p3", json!({"serviceAccountName": "bot"})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(s) = e else {
        panic!("{e}")
    };
    assert_eq!(
        (s.code, s.message.as_str()),
        (
            403,
            "pods \"p3\" is forbidden: error looking up service account team/bot: serviceaccount \"bot\" not found"
        )
    );
}

/// Polls `check` every 50 ms until it holds, for up to ten seconds.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// As kube-controller-manager's ReplicaSet controller: a ReplicaSet keeps its replicas of
/// Pods it controls (`<name>-<suffix>`), scales down deleting the surplus, adopts a matching
/// orphan, counts ready Pods, says why it cannot create Pods (`ReplicaFailure`), and its Pods
/// go with it.
#[tokio::test]
async fn replica_sets_keep_their_replicas_of_pods() {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    let server = ApiServer::builder()
        .gc(true)
        .service_accounts(true)
        .workloads(true)
        .build()
        .unwrap();
    let client = server.client();
    let sets: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    appears(
        &Api::<k8s_openapi::api::core::v1::ServiceAccount>::default_namespaced(client.clone()),
        "default",
    )
    .await;
    let set = |name: &str, replicas: i32, account: &str| -> ReplicaSet {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"serviceAccountName": account, "containers": [{"name": "c", "image": "busybox"}]}}}}))
        .unwrap()
    };
    let web = sets
        .create(&PostParams::default(), &set("web", 3, "default"))
        .await
        .unwrap();
    let owned = |uid: String| {
        let pods = pods.clone();
        async move {
            let list = pods.list(&Default::default()).await.unwrap();
            (list.items.into_iter())
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| {
                    (p.owner_references().iter())
                        .any(|r| r.uid == uid && r.controller == Some(true))
                })
                .collect::<Vec<Pod>>()
        }
    };
    let uid = web.uid().unwrap();
    until("three Pods and their count", || async {
        let status = sets.get("web").await.unwrap().status;
        owned(uid.clone()).await.len() == 3 && status.is_some_and(|s| s.replicas == 3)
    })
    .await;
    let status = sets.get("web").await.unwrap().status.unwrap();
    assert_eq!(
        (
            status.fully_labeled_replicas,
            status.ready_replicas,
            status.observed_generation
        ),
        (Some(3), None, Some(1))
    );
    assert!(
        owned(uid.clone())
            .await
            .iter()
            .all(|p| p.name_any().starts_with("web-"))
    );

    let scale = json!({"spec": {"replicas": 1}});
    sets.patch("web", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    until("one Pod", || async { owned(uid.clone()).await.len() == 1 }).await;
    let orphan: Pod = serde_json::from_value(
        json!({"metadata": {"name": "stray", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .unwrap();
    pods.create(&PostParams::default(), &orphan).await.unwrap();
    until("the orphan adopted and the surplus gone", || async {
        let list = pods.list(&Default::default()).await.unwrap().items;
        let live: Vec<&Pod> = list
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        live.len() == 1 && owned(uid.clone()).await.len() == 1
    })
    .await;

    let survivor = owned(uid.clone()).await.remove(0).name_any();
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(&survivor, &PatchParams::default(), &Patch::Merge(&ready))
        .await
        .unwrap();
    until("a ready, available replica", || async {
        let s = sets.get("web").await.unwrap().status.unwrap();
        s.ready_replicas == Some(1) && s.available_replicas == Some(1)
    })
    .await;

    sets.create(&PostParams::default(), &set("lost", 1, "missing"))
        .await
        .unwrap();
    until("a ReplicaFailure", || async {
        let s = sets.get("lost").await.unwrap().status;
        let conditions = s.and_then(|s| s.conditions).unwrap_or_default();
        conditions.iter().any(|c| {
            c.type_ == "ReplicaFailure"
                && c.reason.as_deref() == Some("FailedCreate")
                && c.message
                    .as_deref()
                    .is_some_and(|m| m.contains("serviceaccount \"missing\" not found"))
        })
    })
    .await;

    sets.delete("web", &DeleteParams::default()).await.unwrap();
    until("its Pods collected", || async {
        owned(uid.clone()).await.is_empty()
    })
    .await;
}
