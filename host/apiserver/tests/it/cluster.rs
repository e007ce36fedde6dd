//! The dev cluster as a whole, in process: fake Nodes, the scheduler and the kubelet stand-in
//! running the Pods of Deployments, Jobs, CronJobs and Services' endpoints, each checked against
//! what kube does (the controllers' finer points are in the other files, played by hand).

// Helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};
use wasmctrl_apiserver::{ApiServer, Kubelet};

use crate::common;
use common::{condition, until};

fn cluster() -> ApiServer {
    ApiServer::builder()
        .gc(true)
        .namespace_cleanup(true)
        .service_accounts(true)
        .workloads(true)
        .kubelet(Some(Kubelet {
            nodes: 3,
            start: Duration::from_millis(300),
            run: Duration::from_secs(1),
        }))
        .build()
        .unwrap()
}

fn pod(name: &str, annotations: Value, spec: Value) -> Pod {
    let mut spec = spec;
    if spec["containers"].is_null() {
        spec["containers"] = json!([{"name": "main", "image": "busybox:1.36"}]);
    }
    serde_json::from_value(
        json!({"metadata": {"name": name, "annotations": annotations}, "spec": spec}),
    )
    .unwrap()
}

/// `(reason, message)` of the Events about the object named `name`, oldest first.
async fn events_about(client: &kube::Client, name: &str) -> Vec<(String, String)> {
    use k8s_openapi::api::core::v1::Event;
    let events: Api<Event> = Api::default_namespaced(client.clone());
    let mut list = events.list(&ListParams::default()).await.unwrap().items;
    list.retain(|e| e.involved_object.name.as_deref() == Some(name));
    list.sort_by_key(|e| e.metadata.name.clone());
    (list.into_iter())
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

fn pairs<const N: usize>(expected: [(&str, &str); N]) -> Vec<(String, String)> {
    (expected.iter())
        .map(|(r, m)| (r.to_string(), m.to_string()))
        .collect()
}

async fn json_of(pods: &Api<Pod>, name: &str) -> Value {
    serde_json::to_value(pods.get(name).await.unwrap()).unwrap()
}

/// Three Ready Nodes with capacity, as a kubelet registers them.
#[tokio::test]
async fn fake_nodes_register_ready_with_capacity() {
    let server = cluster();
    let nodes: Api<Node> = Api::all(server.client());
    until("three Ready nodes", || async {
        let list = nodes.list(&ListParams::default()).await.unwrap().items;
        list.len() == 3
            && list.iter().all(|n| {
                condition(&serde_json::to_value(n).unwrap(), "Ready")
                    .is_some_and(|c| c["status"] == "True" && c["reason"] == "KubeletReady")
            })
    })
    .await;
    let node = serde_json::to_value(nodes.get("wasmctrl-node-1").await.unwrap()).unwrap();
    assert_eq!(node["status"]["allocatable"]["cpu"], "32");
    assert_eq!(node["status"]["allocatable"]["pods"], "110");
    assert_eq!(node["spec"]["podCIDR"], "10.244.1.0/24");
    assert_eq!(
        node["metadata"]["labels"]["kubernetes.io/hostname"],
        "wasmctrl-node-1"
    );
    assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "v1.32.0");
    // Deleted, it registers again, as a kubelet does.
    nodes
        .delete("wasmctrl-node-1", &DeleteParams::default())
        .await
        .unwrap();
    until("the node back", || async {
        nodes
            .get_opt("wasmctrl-node-1")
            .await
            .unwrap()
            .is_some_and(|n| condition(&serde_json::to_value(n).unwrap(), "Ready").is_some())
    })
    .await;
}

/// A Pod is scheduled, created, started and made Ready, with the status fields a kubelet
/// reports; a Pod that does not restart finishes; one annotated to fail fails; one whose
/// selector no Node matches is Unschedulable with kube's message; deletion is graceful.
#[tokio::test]
async fn pods_go_through_a_kubelets_stages() {
    let server = cluster();
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    until("the default ServiceAccount", || async {
        pods.create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &pod("probe", json!({}), json!({})),
        )
        .await
        .is_ok()
    })
    .await;
    let spec = json!({"containers": [{"name": "web", "image": "nginx:1.27",
        "readinessProbe": {"httpGet": {"port": 80}, "initialDelaySeconds": 1}}]});
    pods.create(&PostParams::default(), &pod("web", json!({}), spec))
        .await
        .unwrap();
    until("web Running", || async {
        json_of(&pods, "web").await["status"]["phase"] == "Running"
    })
    .await;
    let web = json_of(&pods, "web").await;
    assert!(
        web["spec"]["nodeName"]
            .as_str()
            .unwrap()
            .starts_with("wasmctrl-node-")
    );
    let ip = web["status"]["podIP"].as_str().unwrap();
    assert!(ip.starts_with("10.244."), "{ip}");
    assert_eq!(web["status"]["podIPs"], json!([{"ip": ip}]));
    assert!(
        web["status"]["hostIP"]
            .as_str()
            .unwrap()
            .starts_with("172.18.0.")
    );
    let container = &web["status"]["containerStatuses"][0];
    assert_eq!(container["image"], "docker.io/library/nginx:1.27");
    assert_eq!(container["started"], true);
    assert!(container["state"]["running"]["startedAt"].is_string());
    assert_eq!(condition(&web, "PodScheduled").unwrap()["status"], "True");
    until("web Ready after its probe's delay", || async {
        let web = json_of(&pods, "web").await;
        condition(&web, "Ready").is_some_and(|c| c["status"] == "True")
            && web["status"]["containerStatuses"][0]["ready"] == true
    })
    .await;
    let web = json_of(&pods, "web").await;
    let kinds: Vec<&str> = (web["status"]["conditions"].as_array().unwrap().iter())
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled"
        ]
    );
    // What `kubectl describe pod` shows, as the scheduler and a kubelet record it.
    let node = web["spec"]["nodeName"].as_str().unwrap();
    let assigned = format!("Successfully assigned default/web to {node}");
    assert_eq!(
        events_about(&server.client(), "web").await,
        pairs([
            ("Scheduled", assigned.as_str()),
            (
                "Pulled",
                "Container image \"nginx:1.27\" already present on machine"
            ),
            ("Created", "Created container: web"),
            ("Started", "Started container web"),
        ])
    );

    let never = json!({"restartPolicy": "Never"});
    pods.create(
        &PostParams::default(),
        &pod("done", json!({}), never.clone()),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &pod(
            "broken",
            json!({"kubelet.wasmctrl.dev/exit-code": "3"}),
            never,
        ),
    )
    .await
    .unwrap();
    until("done Succeeded and broken Failed", || async {
        json_of(&pods, "done").await["status"]["phase"] == "Succeeded"
            && json_of(&pods, "broken").await["status"]["phase"] == "Failed"
    })
    .await;
    let broken = json_of(&pods, "broken").await;
    let exit = &broken["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(
        (exit["exitCode"].as_i64(), exit["reason"].as_str()),
        (Some(3), Some("Error"))
    );
    let done = json_of(&pods, "done").await;
    assert_eq!(condition(&done, "Ready").unwrap()["reason"], "PodCompleted");

    pods.create(
        &PostParams::default(),
        &pod("lost", json!({}), json!({"nodeSelector": {"disk": "ssd"}})),
    )
    .await
    .unwrap();
    until("lost Unschedulable", || async {
        condition(&json_of(&pods, "lost").await, "PodScheduled").is_some_and(|c| {
            c["reason"] == "Unschedulable"
                && c["message"]
                    == "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        })
    })
    .await;

    // Deleting a running Pod: it stays, terminating, until the kubelet has stopped it.
    let slow = json!({"kubelet.wasmctrl.dev/stop-seconds": "1"});
    pods.create(&PostParams::default(), &pod("slow", slow, json!({})))
        .await
        .unwrap();
    until("slow Running", || async {
        json_of(&pods, "slow").await["status"]["phase"] == "Running"
    })
    .await;
    pods.delete("slow", &DeleteParams::default()).await.unwrap();
    let slow = json_of(&pods, "slow").await;
    assert_eq!(slow["metadata"]["deletionGracePeriodSeconds"], 30);
    until("slow gone", || async {
        pods.get_opt("slow").await.unwrap().is_none()
    })
    .await;
    // A Pod no node runs goes at once, as kube deletes it.
    pods.delete("lost", &DeleteParams::default()).await.unwrap();
    assert!(pods.get_opt("lost").await.unwrap().is_none());
}

/// A Pod whose containers keep exiting crash-loops with kube's back-off.
#[tokio::test]
async fn a_failing_container_crash_loops() {
    let server = cluster();
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    until("the default ServiceAccount", || async {
        let probe = pod(
            "crash",
            json!({"kubelet.wasmctrl.dev/exit-code": "1"}),
            json!({}),
        );
        pods.create(&PostParams::default(), &probe).await.is_ok()
    })
    .await;
    until("a restart waiting out its back-off", || async {
        let crash = json_of(&pods, "crash").await;
        let c = &crash["status"]["containerStatuses"][0];
        c["restartCount"] == 1
            && c["state"]["waiting"]["reason"] == "CrashLoopBackOff"
            && c["lastState"]["terminated"]["exitCode"] == 1
    })
    .await;
    let crash = json_of(&pods, "crash").await;
    assert_eq!(crash["status"]["phase"], "Running");
    assert_eq!(condition(&crash, "Ready").unwrap()["status"], "False");
}

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": image}]}}}}))
    .unwrap()
}

/// A Deployment of 3 becomes Available with 3 ready Pods spread over the fake Nodes; a new
/// template rolls over to a new ReplicaSet with never fewer than 2 ready Pods (maxUnavailable 1)
/// nor more than 4 (maxSurge 1), watched Pod by Pod; old sets beyond the history limit go.
#[tokio::test]
async fn deployments_roll_out_within_their_surge_and_unavailability() {
    let server = cluster();
    let client = server.client();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let sets: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    deployments
        .create(&PostParams::default(), &deployment("web", 3, "nginx:1.26"))
        .await
        .unwrap();
    let available = || async {
        let d = serde_json::to_value(deployments.get("web").await.unwrap()).unwrap();
        condition(&d, "Available").is_some_and(|c| c["status"] == "True")
            && condition(&d, "Progressing").is_some_and(|c| c["reason"] == "NewReplicaSetAvailable")
            && d["status"]["readyReplicas"] == 3
            && d["status"]["updatedReplicas"] == 3
            && d["status"]["replicas"] == 3
    };
    until("web Available with 3 ready Pods", available).await;
    let rs_name = sets.list(&ListParams::default()).await.unwrap().items[0].name_any();
    let scaled = format!("Scaled up replica set {rs_name} from 0 to 3");
    assert_eq!(
        events_about(&client, "web").await,
        pairs([("ScalingReplicaSet", scaled.as_str())])
    );
    let created = events_about(&client, &rs_name).await;
    assert_eq!(created.len(), 3, "{created:?}");
    let prefix = format!("Created pod: {rs_name}-");
    assert!(
        (created.iter()).all(|(r, m)| r == "SuccessfulCreate" && m.starts_with(&prefix)),
        "{created:?}"
    );
    let d = serde_json::to_value(deployments.get("web").await.unwrap()).unwrap();
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    let first = sets.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(first.len(), 1);
    let first = first[0].clone();
    let hash = first.labels()["pod-template-hash"].clone();
    assert_eq!(first.name_any(), format!("web-{hash}"));
    let nodes: std::collections::BTreeSet<String> = (pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter())
    .map(|p| p.spec.as_ref().unwrap().node_name.clone().unwrap())
    .collect();
    assert_eq!(nodes.len(), 3, "replicas spread over the nodes: {nodes:?}");

    // Watch every Pod change from here on.
    let version = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = pods
        .watch(&WatchParams::default(), &version)
        .await
        .unwrap()
        .boxed();
    let mut live: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        live.insert(p.name_any(), (true, false));
    }
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let mut fewest_ready = 3;
    let mut most = 3;
    let rolled = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = stream.try_next().await.unwrap() {
            let (p, gone) = match event {
                WatchEvent::Added(p) | WatchEvent::Modified(p) => (p, false),
                WatchEvent::Deleted(p) => (p, true),
                _ => continue,
            };
            let v = serde_json::to_value(&p).unwrap();
            if gone || v["metadata"]["deletionTimestamp"].is_string() {
                live.remove(&p.name_any());
            } else {
                let ready = condition(&v, "Ready").is_some_and(|c| c["status"] == "True");
                let new = v["spec"]["containers"][0]["image"] == "nginx:1.27";
                live.insert(p.name_any(), (ready, new));
            }
            let ready = live.values().filter(|(r, _)| *r).count();
            fewest_ready = fewest_ready.min(ready);
            most = most.max(live.len());
            if live.len() == 3 && live.values().all(|(r, new)| *r && *new) {
                return;
            }
        }
    })
    .await;
    assert!(rolled.is_ok(), "the rollout did not finish: {live:?}");
    assert!(
        fewest_ready >= 2,
        "fewer than 2 ready Pods during the rollout: {fewest_ready}"
    );
    assert!(most <= 4, "more than 4 Pods during the rollout: {most}");
    until("web Available on revision 2", available).await;
    let d = serde_json::to_value(deployments.get("web").await.unwrap()).unwrap();
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    let old = sets.get(&first.name_any()).await.unwrap();
    assert_eq!(old.spec.as_ref().unwrap().replicas, Some(0));
    assert_eq!(old.annotations()["deployment.kubernetes.io/revision"], "1");

    // Undo as kubectl does: the old set's template written back makes it the new set again,
    // with the next revision.
    let mut template = serde_json::to_value(&first.spec.as_ref().unwrap().template).unwrap();
    template["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("pod-template-hash");
    let undo = json!([{"op": "replace", "path": "/spec/template", "value": template}]);
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(undo).unwrap()),
        )
        .await
        .unwrap();
    until("web back on its first ReplicaSet", || async {
        let rs = sets.get(&first.name_any()).await.unwrap();
        rs.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str)
            == Some("3")
            && rs.status.is_some_and(|s| s.available_replicas == Some(3))
    })
    .await;
    let rs = sets.get(&first.name_any()).await.unwrap();
    assert_eq!(
        rs.annotations()["deployment.kubernetes.io/revision-history"],
        "1"
    );
    until("web Available on revision 3", available).await;

    // Scaled: the one active set follows.
    let scale = json!({"spec": {"replicas": 5}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    until("5 ready replicas", || async {
        let d = serde_json::to_value(deployments.get("web").await.unwrap()).unwrap();
        d["status"]["availableReplicas"] == 5 && d["status"]["replicas"] == 5
    })
    .await;
    let rs = sets.get(&first.name_any()).await.unwrap();
    assert_eq!(
        rs.annotations()["deployment.kubernetes.io/desired-replicas"],
        "5"
    );
    assert_eq!(
        rs.annotations()["deployment.kubernetes.io/max-replicas"],
        "6"
    );
}

/// `Recreate`: every old Pod is gone before a new one is created.
#[tokio::test]
async fn recreate_deployments_stop_old_pods_first() {
    let server = cluster();
    let client = server.client();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut d = serde_json::to_value(deployment("db", 2, "postgres:16")).unwrap();
    d["spec"]["strategy"] = json!({"type": "Recreate"});
    deployments
        .create(&PostParams::default(), &serde_json::from_value(d).unwrap())
        .await
        .unwrap();
    until("db Available", || async {
        let d = serde_json::to_value(deployments.get("db").await.unwrap()).unwrap();
        d["status"]["availableReplicas"] == 2
    })
    .await;
    let version = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = pods
        .watch(&WatchParams::default(), &version)
        .await
        .unwrap()
        .boxed();
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "postgres:17"}]}}}});
    deployments
        .patch("db", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let mut old_left: usize = 2;
    let done = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = stream.try_next().await.unwrap() {
            match event {
                WatchEvent::Deleted(p)
                    if p.spec.as_ref().unwrap().containers[0].image.as_deref()
                        == Some("postgres:16") =>
                {
                    old_left -= 1;
                }
                WatchEvent::Added(p) => {
                    assert_eq!(
                        old_left,
                        0,
                        "a new Pod {} before the old ones were gone",
                        p.name_any()
                    );
                    return;
                }
                _ => {}
            }
        }
    })
    .await;
    assert!(done.is_ok(), "no new Pod came");
}

fn job(name: &str, spec: Value, annotations: Value) -> Value {
    let mut spec = spec;
    spec["template"] = json!({"metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "work", "image": "busybox:1.36"}]}});
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec})
}

/// A Job of 3 completions, 2 at a time, completes on the fake Nodes, never running more than 2
/// Pods; one whose Pods fail is `Failed` once past its backoff limit (after kube's 10 s
/// back-off before the retry).
#[tokio::test]
async fn jobs_complete_and_fail_on_the_fake_nodes() {
    use k8s_openapi::api::batch::v1::Job;
    let server = cluster();
    let jobs: Api<Job> = Api::default_namespaced(server.client());
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let version = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = pods
        .watch(&WatchParams::default(), &version)
        .await
        .unwrap()
        .boxed();
    let work = job(
        "work",
        json!({"completions": 3, "parallelism": 2}),
        json!({}),
    );
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(work).unwrap(),
    )
    .await
    .unwrap();
    let exit = json!({"kubelet.wasmctrl.dev/exit-code": "2"});
    let doomed = job("doomed", json!({"backoffLimit": 1}), exit);
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(doomed).unwrap(),
    )
    .await
    .unwrap();

    let mut running: BTreeMap<String, bool> = BTreeMap::new();
    let mut most = 0;
    let complete = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let j = serde_json::to_value(jobs.get("work").await.unwrap()).unwrap();
            if condition(&j, "Complete").is_some_and(|c| c["status"] == "True") {
                return j;
            }
            while let Ok(event) =
                tokio::time::timeout(Duration::from_millis(100), stream.try_next()).await
            {
                let Some(event) = event.unwrap() else { break };
                let (p, gone) = match event {
                    WatchEvent::Added(p) | WatchEvent::Modified(p) => (p, false),
                    WatchEvent::Deleted(p) => (p, true),
                    _ => continue,
                };
                if p.labels().get("job-name").map(String::as_str) != Some("work") {
                    continue;
                }
                let phase = p
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default();
                running.insert(
                    p.name_any(),
                    !gone && !matches!(phase.as_str(), "Succeeded" | "Failed"),
                );
                most = most.max(running.values().filter(|r| **r).count());
            }
        }
    })
    .await
    .expect("work completes");
    assert_eq!(complete["status"]["succeeded"], 3, "{complete}");
    assert!(most <= 2, "more than 2 Pods ran at once: {most}");
    assert_eq!(running.len(), 3, "{running:?}");
    let kinds: Vec<&str> = (complete["status"]["conditions"].as_array().unwrap().iter())
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["SuccessCriteriaMet", "Complete"]);
    assert!(complete["status"]["completionTime"].is_string());

    until("doomed Failed", || async {
        let j = serde_json::to_value(jobs.get("doomed").await.unwrap()).unwrap();
        condition(&j, "Failed")
            .is_some_and(|c| c["status"] == "True" && c["reason"] == "BackoffLimitExceeded")
    })
    .await;
    let j = serde_json::to_value(jobs.get("doomed").await.unwrap()).unwrap();
    assert_eq!(j["status"]["failed"], 2, "{j}");
}

/// A CronJob every minute, its clock moved on a minute at a time: a Job per minute, named as
/// kube names it, run to completion, and only its last `successfulJobsHistoryLimit` kept.
#[tokio::test]
async fn cron_jobs_start_jobs_by_the_test_clock_and_keep_their_history() {
    use k8s_openapi::api::batch::v1::{CronJob, Job};
    let server = cluster();
    let crons: Api<CronJob> = Api::default_namespaced(server.client());
    let jobs: Api<Job> = Api::default_namespaced(server.client());
    let template = job(
        "",
        json!({}),
        json!({"kubelet.wasmctrl.dev/run-seconds": "0.2"}),
    );
    let cron = json!({"metadata": {"name": "tick"}, "spec": {"schedule": "*/1 * * * *",
        "successfulJobsHistoryLimit": 2, "jobTemplate": {"spec": template["spec"]}}});
    crons
        .create(
            &PostParams::default(),
            &serde_json::from_value(cron).unwrap(),
        )
        .await
        .unwrap();
    let completed = || async {
        let list = jobs.list(&ListParams::default()).await.unwrap().items;
        (list.iter())
            .filter(|j| {
                let v = serde_json::to_value(j).unwrap();
                condition(&v, "Complete").is_some_and(|c| c["status"] == "True")
            })
            .map(|j| j.name_any())
            .collect::<Vec<String>>()
    };
    let mut names: Vec<String> = Vec::new();
    for minute in 1..=4 {
        server.advance_cronjob_clock(Duration::from_secs(60));
        let known = names.clone();
        until(&format!("job {minute} complete"), || async {
            completed().await.iter().any(|n| !known.contains(n))
        })
        .await;
        let new: Vec<String> = completed()
            .await
            .into_iter()
            .filter(|n| !names.contains(n))
            .collect();
        assert_eq!(new.len(), 1, "one Job per minute: {new:?}");
        names.extend(new);
    }
    for name in &names {
        let minutes: i64 = name.strip_prefix("tick-").unwrap().parse().unwrap();
        assert!(minutes > 29_000_000, "{name}: minutes since the epoch");
    }
    until("only the last two Jobs kept", || async {
        let mut kept: Vec<String> = (jobs
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter())
        .map(|j| j.name_any())
        .collect();
        kept.sort();
        kept == names[2..]
    })
    .await;
    let c = serde_json::to_value(crons.get("tick").await.unwrap()).unwrap();
    assert!(c["status"]["lastScheduleTime"].is_string(), "{c}");
    assert!(c["status"]["lastSuccessfulTime"].is_string(), "{c}");
}

/// A Service's EndpointSlice lists its ready Pods' IPs and follows a Pod that stops being
/// Ready.
#[tokio::test]
async fn services_list_their_ready_pods_as_the_kubelet_runs_them() {
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    let server = cluster();
    let client = server.client();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let services: Api<Service> = Api::default_namespaced(client.clone());
    let slices: Api<EndpointSlice> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    deployments
        .create(&PostParams::default(), &deployment("api", 3, "nginx:1.27"))
        .await
        .unwrap();
    let svc = json!({"metadata": {"name": "api"}, "spec": {"selector": {"app": "api"},
        "ports": [{"port": 80, "targetPort": 8080}]}});
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(svc).unwrap(),
        )
        .await
        .unwrap();
    let endpoints = || async {
        let list = slices
            .list(&ListParams::default().labels("kubernetes.io/service-name=api"))
            .await
            .unwrap()
            .items;
        let mut seen: Vec<(String, bool)> = list
            .iter()
            .flat_map(|s| s.endpoints.iter())
            .map(|e| {
                (
                    e.addresses[0].clone(),
                    e.conditions.as_ref().and_then(|c| c.ready) == Some(true),
                )
            })
            .collect();
        seen.sort();
        seen
    };
    let ready_ips = || async {
        let mut ips: Vec<(String, bool)> = (pods
            .list(&ListParams::default().labels("app=api"))
            .await
            .unwrap()
            .items
            .iter())
        .filter_map(|p| {
            let v = serde_json::to_value(p).unwrap();
            let ready = condition(&v, "Ready").is_some_and(|c| c["status"] == "True");
            Some((v["status"]["podIP"].as_str()?.to_string(), ready))
        })
        .collect();
        ips.sort();
        ips
    };
    until("three ready endpoints", || async {
        let e = endpoints().await;
        e.len() == 3 && e.iter().all(|(_, r)| *r) && e == ready_ips().await
    })
    .await;
    let slice = &slices.list(&ListParams::default()).await.unwrap().items[0];
    assert_eq!(slice.ports.as_ref().unwrap()[0].port, Some(8080));
    let one = pods
        .list(&ListParams::default().labels("app=api"))
        .await
        .unwrap()
        .items[0]
        .name_any();
    let unready = json!({"metadata": {"annotations": {"kubelet.wasmctrl.dev/ready": "false"}}});
    pods.patch(&one, &PatchParams::default(), &Patch::Merge(&unready))
        .await
        .unwrap();
    until("the unready Pod's endpoint not ready", || async {
        let e = endpoints().await;
        e.len() == 3 && e.iter().filter(|(_, r)| !*r).count() == 1 && e == ready_ips().await
    })
    .await;
}
