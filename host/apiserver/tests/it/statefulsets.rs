//! kube-controller-manager's StatefulSet controller and PersistentVolume controller (with the
//! fake provisioner) in the embedded server, checked against what kube does. The tests play
//! the kubelet: they make Pods Running and Ready by writing their status.

// Helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use wasmctrl_apiserver::ApiServer;

use crate::common;
use common::until;

fn server() -> ApiServer {
    ApiServer::builder()
        .gc(true)
        .workloads(true)
        .build()
        .unwrap()
}

/// The object `name` as JSON, if it exists.
async fn get<K>(api: &Api<K>, name: &str) -> Option<Value>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    (api.get_opt(name).await.unwrap()).map(|o| serde_json::to_value(o).unwrap())
}

/// Waits for `name` to exist and `check` to hold of it; returns it.
async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    for _ in 0..600 {
        if let Some(o) = get(api, name).await.filter(|o| check(o)) {
            return o;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {name}: {what}");
}

/// A StatefulSet `name` of `replicas` with a claim template `data`; `extra` merged into its spec.
fn stateful_set(name: &str, replicas: i32, extra: Value) -> StatefulSet {
    let mut set = json!({"metadata": {"name": name}, "spec": {
        "replicas": replicas, "serviceName": name,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {"tier": "db"}},
            "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}]}});
    for (k, v) in extra.as_object().unwrap() {
        set["spec"][k] = v.clone();
    }
    serde_json::from_value(set).unwrap()
}

/// Plays the kubelet: the Pod is Running and Ready.
async fn make_ready(pods: &Api<Pod>, name: &str) {
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

fn label<'a>(o: &'a Value, key: &str) -> &'a str {
    o["metadata"]["labels"][key].as_str().unwrap_or("")
}

fn annotation<'a>(o: &'a Value, key: &str) -> &'a str {
    o["metadata"]["annotations"][key].as_str().unwrap_or("")
}

/// Creates the StatefulSet and brings its Pods up one by one, as `OrderedReady` wants, checking
/// that each next Pod waits for the one before to be Ready.
async fn ready_set(client: &Client, name: &str, replicas: i32) -> Value {
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    sets.create(
        &PostParams::default(),
        &stateful_set(name, replicas, json!({})),
    )
    .await
    .unwrap();
    for i in 0..replicas {
        let pod = format!("{name}-{i}");
        wait_for(&pods, &pod, "created", |_| true).await;
        // The controller has seen this Pod not Ready (it counts it) and made no next one.
        wait_for(&sets, name, "counting the Pod", |s| {
            s["status"]["replicas"] == i + 1
                && s["status"]["readyReplicas"].as_i64().unwrap_or(0) == i64::from(i)
        })
        .await;
        assert!(
            get(&pods, &format!("{name}-{}", i + 1)).await.is_none(),
            "{pod} is not Ready yet"
        );
        make_ready(&pods, &pod).await;
    }
    wait_for(&sets, name, "all Ready", |s| {
        s["status"]["readyReplicas"] == replicas
    })
    .await
}

/// `OrderedReady`: Pods `<set>-<ordinal>` one at a time, each with its identity, its claim made
/// first and bound to a volume the fake provisioner made, the template's ControllerRevision,
/// and kube's status.
#[tokio::test]
async fn ordered_pods_come_up_one_by_one_with_bound_claims() {
    let server = server();
    let client = server.client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let revisions: Api<ControllerRevision> = Api::default_namespaced(client.clone());
    let set = ready_set(&client, "web", 3).await;
    let uid = set["metadata"]["uid"].as_str().unwrap();

    let status = &set["status"];
    let revision = status["updateRevision"].as_str().unwrap();
    assert_eq!(status["currentRevision"], revision);
    assert_eq!(
        (
            &status["replicas"],
            &status["currentReplicas"],
            &status["updatedReplicas"],
            &status["availableReplicas"],
            &status["collisionCount"],
            &status["observedGeneration"],
        ),
        (
            &json!(3),
            &json!(3),
            &json!(3),
            &json!(3),
            &json!(0),
            &json!(1)
        )
    );

    let rev = get(&revisions, revision).await.unwrap();
    let hash = label(&rev, "controller-revision-hash");
    assert_eq!(format!("web-{hash}"), revision);
    assert_eq!(label(&rev, "app"), "web");
    assert_eq!(rev["revision"], 1);
    assert_eq!(rev["data"]["spec"]["template"]["$patch"], "replace");
    assert_eq!(
        rev["data"]["spec"]["template"]["metadata"]["labels"]["app"],
        "web"
    );
    assert_eq!(rev["metadata"]["ownerReferences"][0]["uid"], uid);

    for i in 0..3 {
        let name = format!("web-{i}");
        let pod = get(&pods, &name).await.unwrap();
        assert_eq!(label(&pod, "statefulset.kubernetes.io/pod-name"), name);
        assert_eq!(label(&pod, "apps.kubernetes.io/pod-index"), i.to_string());
        assert_eq!(label(&pod, "controller-revision-hash"), revision);
        assert_eq!(label(&pod, "app"), "web");
        assert_eq!(pod["metadata"]["generateName"], "web-");
        assert_eq!(
            (&pod["spec"]["hostname"], &pod["spec"]["subdomain"]),
            (&json!(name), &json!("web"))
        );
        let owner = &pod["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&owner["kind"], &owner["uid"], &owner["controller"]),
            (&json!("StatefulSet"), &json!(uid), &json!(true))
        );
        let claim_name = format!("data-web-{i}");
        let volume = (pod["spec"]["volumes"].as_array().unwrap().iter())
            .find(|v| v["name"] == "data")
            .unwrap();
        assert_eq!(volume["persistentVolumeClaim"]["claimName"], claim_name);

        let claim = wait_for(&claims, &claim_name, "Bound", |c| {
            c["status"]["phase"] == "Bound"
        })
        .await;
        assert_eq!((label(&claim, "app"), label(&claim, "tier")), ("web", "db"));
        // Retain, Retain: no owners.
        assert!(claim["metadata"]["ownerReferences"].is_null());
        let claim_uid = claim["metadata"]["uid"].as_str().unwrap();
        let pv_name = format!("pvc-{claim_uid}");
        assert_eq!(claim["spec"]["volumeName"], pv_name);
        assert_eq!(claim["spec"]["storageClassName"], "standard");
        for (key, value) in [
            ("pv.kubernetes.io/bind-completed", "yes"),
            ("pv.kubernetes.io/bound-by-controller", "yes"),
            (
                "volume.kubernetes.io/storage-provisioner",
                "wasmctrl.dev/fake",
            ),
            (
                "volume.beta.kubernetes.io/storage-provisioner",
                "wasmctrl.dev/fake",
            ),
        ] {
            assert_eq!(annotation(&claim, key), value, "{key}");
        }
        assert_eq!(claim["status"]["capacity"]["storage"], "1Gi");
        assert_eq!(claim["status"]["accessModes"], json!(["ReadWriteOnce"]));

        let pv = wait_for(&volumes, &pv_name, "Bound", |v| {
            v["status"]["phase"] == "Bound"
        })
        .await;
        assert_eq!(
            annotation(&pv, "pv.kubernetes.io/provisioned-by"),
            "wasmctrl.dev/fake"
        );
        assert_eq!(annotation(&pv, "pv.kubernetes.io/bound-by-controller"), "");
        let spec = &pv["spec"];
        assert_eq!(
            (&spec["claimRef"]["name"], &spec["claimRef"]["uid"]),
            (&json!(claim_name), &json!(claim_uid))
        );
        assert_eq!(
            (
                &spec["capacity"]["storage"],
                &spec["storageClassName"],
                &spec["persistentVolumeReclaimPolicy"]
            ),
            (&json!("1Gi"), &json!("standard"), &json!("Delete"))
        );
        assert_eq!(
            spec["hostPath"]["path"],
            format!("/var/lib/wasmctrl/volumes/{pv_name}")
        );
        assert!(pv["status"]["lastPhaseTransitionTime"].is_string());
    }

    let classes: Api<StorageClass> = Api::all(client.clone());
    let standard = get(&classes, "standard").await.unwrap();
    assert_eq!(
        annotation(&standard, "storageclass.kubernetes.io/is-default-class"),
        "true"
    );
    assert_eq!(
        (&standard["provisioner"], &standard["volumeBindingMode"]),
        (&json!("wasmctrl.dev/fake"), &json!("Immediate"))
    );
}

/// Scaling down deletes from the highest ordinal, one Pod at a time; the claims stay
/// (`whenScaled: Retain`).
#[tokio::test]
async fn scaling_down_removes_the_highest_ordinal_first() {
    let server = server();
    let client = server.client();
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    let set = ready_set(&client, "db", 3).await;
    let rv = set["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut events = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    sets.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    let mut deleted = Vec::new();
    let watched = tokio::time::timeout(Duration::from_secs(20), async {
        while deleted.len() < 2 {
            if let Some(WatchEvent::Deleted(p)) = events.try_next().await.unwrap() {
                deleted.push(p.name_any());
            }
        }
    })
    .await;
    assert!(watched.is_ok(), "deleted only {deleted:?}");
    assert_eq!(deleted, ["db-2", "db-1"]);
    let s = wait_for(&sets, "db", "one replica", |s| s["status"]["replicas"] == 1).await;
    assert_eq!(s["status"]["readyReplicas"], 1);
    for i in 0..3 {
        assert!(get(&claims, &format!("data-db-{i}")).await.is_some());
    }
}

/// A template change is a new revision; `RollingUpdate` replaces Pods from the highest
/// ordinal, each once the one before is Ready again, and the update completes.
#[tokio::test]
async fn a_template_change_rolls_pods_from_the_highest_ordinal() {
    let server = server();
    let client = server.client();
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let revisions: Api<ControllerRevision> = Api::default_namespaced(client.clone());
    let set = ready_set(&client, "app", 3).await;
    let old = set["status"]["currentRevision"]
        .as_str()
        .unwrap()
        .to_string();
    let change = json!({"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}});
    sets.patch("app", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap();
    let set = wait_for(&sets, "app", "a new update revision", |s| {
        s["status"]["updateRevision"]
            .as_str()
            .is_some_and(|r| r != old)
    })
    .await;
    let new = set["status"]["updateRevision"]
        .as_str()
        .unwrap()
        .to_string();
    for i in (0..3).rev() {
        let name = format!("app-{i}");
        let pod = wait_for(&pods, &name, "at the new revision", |p| {
            label(p, "controller-revision-hash") == new
        })
        .await;
        assert_eq!(annotation(&pod, "rollout"), "2");
        // The controller counts it, not Ready, and replaces no lower Pod meanwhile.
        wait_for(&sets, "app", "the updated Pod counted", |s| {
            s["status"]["updatedReplicas"] == 3 - i && s["status"]["readyReplicas"] == 2
        })
        .await;
        for lower in 0..i {
            let p = get(&pods, &format!("app-{lower}")).await.unwrap();
            assert_eq!(
                label(&p, "controller-revision-hash"),
                old,
                "app-{lower} waits"
            );
        }
        make_ready(&pods, &name).await;
    }
    let set = wait_for(&sets, "app", "the update complete", |s| {
        s["status"]["currentRevision"] == new.as_str() && s["status"]["currentReplicas"] == 3
    })
    .await;
    assert_eq!(set["status"]["updatedReplicas"], 3);
    let list = revisions.list(&ListParams::default()).await.unwrap().items;
    let mut numbered: Vec<(String, i64)> =
        list.iter().map(|r| (r.name_any(), r.revision)).collect();
    numbered.sort_by_key(|(_, n)| *n);
    assert_eq!(numbered, [(old.clone(), 1), (new.clone(), 2)]);

    // Back to the first template: its revision becomes the newest again, as kube rolls back.
    let back = json!({"spec": {"template": {"metadata": {"annotations": null}}}});
    sets.patch("app", &PatchParams::default(), &Patch::Merge(&back))
        .await
        .unwrap();
    wait_for(&sets, "app", "rolling back", |s| {
        s["status"]["updateRevision"] == old.as_str()
    })
    .await;
    let first = wait_for(&revisions, &old, "renumbered", |r| r["revision"] == 3).await;
    assert_eq!(label(&first, "app"), "app");
    wait_for(&pods, "app-2", "rolled back", |p| {
        label(p, "controller-revision-hash") == old
    })
    .await;
}

/// `OnDelete` leaves Pods at their revision until they are deleted; revisions no Pod and no
/// status names are pruned to `revisionHistoryLimit`.
#[tokio::test]
async fn on_delete_waits_for_the_user_and_history_is_pruned() {
    let server = server();
    let client = server.client();
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let revisions: Api<ControllerRevision> = Api::default_namespaced(client.clone());
    let extra = json!({"updateStrategy": {"type": "OnDelete"}, "revisionHistoryLimit": 0});
    sets.create(&PostParams::default(), &stateful_set("q", 1, extra))
        .await
        .unwrap();
    let set = wait_for(&sets, "q", "one replica", |s| s["status"]["replicas"] == 1).await;
    let first = set["status"]["updateRevision"]
        .as_str()
        .unwrap()
        .to_string();
    let mut names = vec![first.clone()];
    for n in 2..=3 {
        let change =
            json!({"spec": {"template": {"metadata": {"annotations": {"n": n.to_string()}}}}});
        sets.patch("q", &PatchParams::default(), &Patch::Merge(&change))
            .await
            .unwrap();
        let set = wait_for(&sets, "q", "a new revision counted", |s| {
            s["status"]["updateRevision"] != names.last().unwrap().as_str()
                && s["status"]["observedGeneration"] == n
        })
        .await;
        names.push(
            set["status"]["updateRevision"]
                .as_str()
                .unwrap()
                .to_string(),
        );
        assert_eq!(set["status"]["currentRevision"], first.as_str());
        assert!(set["status"]["updatedReplicas"].is_null());
        let pod = get(&pods, "q-0").await.unwrap();
        assert_eq!(
            label(&pod, "controller-revision-hash"),
            first,
            "not replaced"
        );
    }
    // The middle revision is neither the Pod's nor the status's.
    until("the unused revision pruned", || async {
        let list = revisions.list(&ListParams::default()).await.unwrap().items;
        let mut left: Vec<String> = list.iter().map(|r| r.name_any()).collect();
        left.sort();
        let mut kept = vec![names[0].clone(), names[2].clone()];
        kept.sort();
        left == kept
    })
    .await;
    pods.delete("q-0", &DeleteParams::default()).await.unwrap();
    wait_for(&pods, "q-0", "made again at the update revision", |p| {
        label(p, "controller-revision-hash") == names[2]
    })
    .await;
}

/// `Parallel` creates every Pod at once; a failed Pod is deleted and made again; the claims
/// carry the owners `persistentVolumeClaimRetentionPolicy` asks for, so they go with a
/// scaled-down Pod and with the StatefulSet.
#[tokio::test]
async fn parallel_pods_failed_pods_and_claim_retention() {
    let server = server();
    let client = server.client();
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    let extra = json!({"podManagementPolicy": "Parallel",
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Delete"}});
    let set = sets
        .create(&PostParams::default(), &stateful_set("cache", 3, extra))
        .await
        .unwrap();
    let uid = set.uid().unwrap();
    for i in 0..3 {
        wait_for(&pods, &format!("cache-{i}"), "created at once", |_| true).await;
        wait_for(
            &claims,
            &format!("data-cache-{i}"),
            "owned by the StatefulSet",
            |c| {
                let refs = c["metadata"]["ownerReferences"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                refs.len() == 1 && refs[0]["uid"] == uid.as_str() && refs[0]["controller"] == true
            },
        )
        .await;
    }

    let first = get(&pods, "cache-0").await.unwrap();
    let failed = json!({"status": {"phase": "Failed"}});
    pods.patch_status("cache-0", &PatchParams::default(), &Patch::Merge(&failed))
        .await
        .unwrap();
    wait_for(&pods, "cache-0", "made again", |p| {
        p["metadata"]["uid"] != first["metadata"]["uid"] && p["status"]["phase"] == "Pending"
    })
    .await;

    sets.patch(
        "cache",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    until("the scaled-down Pods and their claims gone", || async {
        get(&pods, "cache-1").await.is_none()
            && get(&pods, "cache-2").await.is_none()
            && get(&claims, "data-cache-1").await.is_none()
            && get(&claims, "data-cache-2").await.is_none()
    })
    .await;
    assert!(get(&claims, "data-cache-0").await.is_some());
    sets.delete("cache", &DeleteParams::default())
        .await
        .unwrap();
    until("the last claim collected with its StatefulSet", || async {
        get(&claims, "data-cache-0").await.is_none()
    })
    .await;
}

fn volume(name: &str, size: &str, class: &str, extra: Value) -> PersistentVolume {
    let mut pv = json!({"metadata": {"name": name, "labels": {"size": size}}, "spec": {
        "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
        "storageClassName": class, "hostPath": {"path": format!("/data/{name}")}}});
    for (k, v) in extra.as_object().unwrap() {
        pv["spec"][k] = v.clone();
    }
    serde_json::from_value(pv).unwrap()
}

fn claim(name: &str, size: &str, spec: Value) -> PersistentVolumeClaim {
    let mut pvc = json!({"metadata": {"name": name}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}});
    for (k, v) in spec.as_object().unwrap() {
        pvc["spec"][k] = v.clone();
    }
    serde_json::from_value(pvc).unwrap()
}

/// Static binding: a claim binds to the smallest Available volume that fits it, a volume
/// pre-bound to a claim goes to that claim, and a deleted claim's `Retain` volume is Released
/// (a `Delete` one outside `/tmp` fails, as kube's hostPath deleter does).
#[tokio::test]
async fn claims_bind_to_the_smallest_fitting_volume() {
    let server = server();
    let client = server.client();
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let pp = PostParams::default();
    for (name, size, class) in [
        ("big", "10Gi", "manual"),
        ("small", "2Gi", "manual"),
        ("tiny", "500Mi", "manual"),
        ("other", "2Gi", "fast"),
    ] {
        volumes
            .create(&pp, &volume(name, size, class, json!({})))
            .await
            .unwrap();
    }
    let reserved = json!({"claimRef": {"namespace": "default", "name": "special"}});
    volumes
        .create(&pp, &volume("reserved", "20Gi", "manual", reserved))
        .await
        .unwrap();
    let doomed = json!({"persistentVolumeReclaimPolicy": "Delete"});
    volumes
        .create(&pp, &volume("doomed", "3Gi", "slow", doomed))
        .await
        .unwrap();
    for name in ["big", "small", "tiny", "other", "reserved", "doomed"] {
        let pv = wait_for(&volumes, name, "Available", |v| {
            v["status"]["phase"] == "Available"
        })
        .await;
        assert!(pv["status"]["lastPhaseTransitionTime"].is_string());
    }

    let manual = json!({"storageClassName": "manual"});
    claims
        .create(&pp, &claim("logs", "1Gi", manual.clone()))
        .await
        .unwrap();
    let logs = wait_for(&claims, "logs", "Bound", |c| {
        c["status"]["phase"] == "Bound"
    })
    .await;
    assert_eq!(logs["spec"]["volumeName"], "small");
    assert_eq!(annotation(&logs, "pv.kubernetes.io/bind-completed"), "yes");
    assert_eq!(
        annotation(&logs, "pv.kubernetes.io/bound-by-controller"),
        "yes"
    );
    assert_eq!(
        annotation(&logs, "volume.kubernetes.io/storage-provisioner"),
        ""
    );
    assert_eq!(logs["status"]["capacity"]["storage"], "2Gi");
    let small = wait_for(&volumes, "small", "Bound", |v| {
        v["status"]["phase"] == "Bound"
    })
    .await;
    assert_eq!(small["spec"]["claimRef"]["uid"], logs["metadata"]["uid"]);
    assert_eq!(small["spec"]["claimRef"]["kind"], "PersistentVolumeClaim");
    assert_eq!(
        annotation(&small, "pv.kubernetes.io/bound-by-controller"),
        "yes"
    );

    // Pre-bound: the big volume fits better, but this one was reserved for the claim.
    claims
        .create(&pp, &claim("special", "1Gi", manual.clone()))
        .await
        .unwrap();
    let special = wait_for(&claims, "special", "Bound", |c| {
        c["status"]["phase"] == "Bound"
    })
    .await;
    assert_eq!(special["spec"]["volumeName"], "reserved");
    let reserved = wait_for(&volumes, "reserved", "Bound", |v| {
        v["status"]["phase"] == "Bound"
    })
    .await;
    assert_eq!(
        reserved["spec"]["claimRef"]["uid"],
        special["metadata"]["uid"]
    );
    assert_eq!(
        annotation(&reserved, "pv.kubernetes.io/bound-by-controller"),
        ""
    );

    // Selected by label, from volumes of another class.
    let picky = json!({"storageClassName": "fast", "selector": {"matchLabels": {"size": "2Gi"}}});
    claims
        .create(&pp, &claim("picky", "1Gi", picky))
        .await
        .unwrap();
    let picky = wait_for(&claims, "picky", "Bound", |c| {
        c["status"]["phase"] == "Bound"
    })
    .await;
    assert_eq!(picky["spec"]["volumeName"], "other");

    claims
        .create(
            &pp,
            &claim("scratch", "1Gi", json!({"storageClassName": "slow"})),
        )
        .await
        .unwrap();
    wait_for(&claims, "scratch", "Bound", |c| {
        c["spec"]["volumeName"] == "doomed"
    })
    .await;

    claims
        .delete("logs", &DeleteParams::default())
        .await
        .unwrap();
    claims
        .delete("scratch", &DeleteParams::default())
        .await
        .unwrap();
    let small = wait_for(&volumes, "small", "Released", |v| {
        v["status"]["phase"] == "Released"
    })
    .await;
    assert_eq!(small["spec"]["claimRef"]["name"], "logs");
    let doomed = wait_for(&volumes, "doomed", "Failed", |v| {
        v["status"]["phase"] == "Failed"
    })
    .await;
    assert_eq!(
        doomed["status"]["message"],
        "host_path deleter only supports /tmp/.+ but received provided /data/doomed"
    );
    // The big volume was never taken.
    assert_eq!(
        get(&volumes, "big").await.unwrap()["status"]["phase"],
        "Available"
    );
}

/// A claim without a class gets the default one and a provisioned volume; deleting the claim
/// deletes the volume (`reclaimPolicy: Delete`). A `WaitForFirstConsumer` class provisions only
/// once a node is selected for the claim, for that node.
#[tokio::test]
async fn provisioned_volumes_follow_their_claims() {
    let server = server();
    let client = server.client();
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let classes: Api<StorageClass> = Api::all(client.clone());
    let pp = PostParams::default();
    wait_for(&classes, "standard", "the default class", |_| true).await;
    let local: StorageClass = serde_json::from_value(json!({"metadata": {"name": "local"},
        "provisioner": "wasmctrl.dev/fake", "reclaimPolicy": "Retain",
        "volumeBindingMode": "WaitForFirstConsumer"}))
    .unwrap();
    classes.create(&pp, &local).await.unwrap();

    claims
        .create(
            &pp,
            &claim("later", "1Gi", json!({"storageClassName": "local"})),
        )
        .await
        .unwrap();
    claims
        .create(&pp, &claim("now", "2Gi", json!({})))
        .await
        .unwrap();
    let now = wait_for(&claims, "now", "Bound", |c| c["status"]["phase"] == "Bound").await;
    assert_eq!(now["spec"]["storageClassName"], "standard");
    let pv_name = format!("pvc-{}", now["metadata"]["uid"].as_str().unwrap());
    assert_eq!(now["spec"]["volumeName"], pv_name);
    let pv = wait_for(&volumes, &pv_name, "Bound", |v| {
        v["status"]["phase"] == "Bound"
    })
    .await;
    assert_eq!(pv["spec"]["capacity"]["storage"], "2Gi");

    // Passes that bound "now" went by "later", waiting for its consumer.
    let later = get(&claims, "later").await.unwrap();
    assert_eq!(later["status"]["phase"], "Pending");
    assert!(later["spec"]["volumeName"].is_null());
    assert_eq!(
        volumes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let selected =
        json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "node-a"}}});
    claims
        .patch("later", &PatchParams::default(), &Patch::Merge(&selected))
        .await
        .unwrap();
    let later = wait_for(&claims, "later", "Bound", |c| {
        c["status"]["phase"] == "Bound"
    })
    .await;
    let local_pv = get(&volumes, later["spec"]["volumeName"].as_str().unwrap())
        .await
        .unwrap();
    let term = &local_pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0];
    assert_eq!(term["matchExpressions"][0]["values"], json!(["node-a"]));
    assert_eq!(local_pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");

    claims
        .delete("now", &DeleteParams::default())
        .await
        .unwrap();
    until("the provisioned volume deleted", || async {
        get(&volumes, &pv_name).await.is_none()
    })
    .await;
    claims
        .delete("later", &DeleteParams::default())
        .await
        .unwrap();
    let kept = wait_for(
        &volumes,
        local_pv["metadata"]["name"].as_str().unwrap(),
        "Released",
        |v| v["status"]["phase"] == "Released",
    )
    .await;
    assert_eq!(kept["spec"]["claimRef"]["name"], "later");
}

/// With the kubelet stand-in and the scheduler: the claims are bound before the Pods are
/// scheduled, the Pods come up in order, and scaling down waits for each graceful deletion.
#[tokio::test]
async fn with_the_kubelet_pods_come_up_and_go_in_order() {
    let server = ApiServer::builder()
        .gc(true)
        .service_accounts(true)
        .workloads(true)
        .kubelet(Some(wasmctrl_apiserver::Kubelet {
            nodes: 2,
            start: Duration::from_millis(200),
            run: Duration::from_secs(1),
        }))
        .build()
        .unwrap();
    let client = server.client();
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    let fast = json!({"template": {"metadata": {"labels": {"app": "kv"}}, "spec": {
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": "busybox:1.36"}]}}});
    let created = sets
        .create(&PostParams::default(), &stateful_set("kv", 3, fast))
        .await
        .unwrap();
    let rv = created.resource_version().unwrap();
    let mut events = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    // Each Pod is added only once the one before was seen Running and Ready.
    let mut ready: Vec<String> = Vec::new();
    let mut added: Vec<String> = Vec::new();
    let watched = tokio::time::timeout(Duration::from_secs(20), async {
        while ready.len() < 3 {
            let pod = match events.try_next().await.unwrap() {
                Some(WatchEvent::Added(p)) => {
                    let i: usize = p.name_any().trim_start_matches("kv-").parse().unwrap();
                    assert_eq!(
                        ready.len(),
                        i,
                        "{} added with {ready:?} ready",
                        p.name_any()
                    );
                    added.push(p.name_any());
                    p
                }
                Some(WatchEvent::Modified(p)) => p,
                _ => continue,
            };
            let status = serde_json::to_value(&pod.status).unwrap();
            let is_ready = (status["conditions"].as_array().into_iter().flatten())
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            if status["phase"] == "Running" && is_ready && !ready.contains(&pod.name_any()) {
                ready.push(pod.name_any());
            }
        }
    })
    .await;
    assert!(watched.is_ok(), "added {added:?}, ready {ready:?}");
    assert_eq!(added, ["kv-0", "kv-1", "kv-2"]);
    let set = wait_for(&sets, "kv", "three Ready replicas", |s| {
        s["status"]["readyReplicas"] == 3 && s["status"]["availableReplicas"] == 3
    })
    .await;
    for i in 0..3 {
        let pod = get(&pods, &format!("kv-{i}")).await.unwrap();
        assert!(pod["spec"]["nodeName"].is_string());
        let claim = get(&claims, &format!("data-kv-{i}")).await.unwrap();
        assert_eq!(claim["status"]["phase"], "Bound");
    }

    let rv = set["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut events = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    sets.patch(
        "kv",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    // Each Pod is first terminating (a deletionTimestamp), then gone, before the next starts.
    let mut seen = Vec::new();
    let watched = tokio::time::timeout(Duration::from_secs(20), async {
        while seen.iter().filter(|(_, gone)| *gone).count() < 2 {
            match events.try_next().await.unwrap() {
                Some(WatchEvent::Modified(p)) if p.metadata.deletion_timestamp.is_some() => {
                    let name = p.name_any();
                    if !seen.contains(&(name.clone(), false)) {
                        seen.push((name, false));
                    }
                }
                Some(WatchEvent::Deleted(p)) => seen.push((p.name_any(), true)),
                _ => {}
            }
        }
    })
    .await;
    assert!(watched.is_ok(), "saw only {seen:?}");
    let order: Vec<(&str, bool)> = seen.iter().map(|(n, g)| (n.as_str(), *g)).collect();
    assert_eq!(
        order,
        [
            ("kv-2", false),
            ("kv-2", true),
            ("kv-1", false),
            ("kv-1", true)
        ]
    );
}
