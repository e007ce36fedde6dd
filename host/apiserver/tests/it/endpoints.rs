//! The EndpointSlice, Endpoints and DaemonSet controllers of the embedded server's dev
//! cluster, through a real client; the tests play the kubelet (Pod IPs, phase, readiness).

#![allow(clippy::unwrap_used)]

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use wasmctrl_apiserver::ApiServer;

use crate::common;
use common::until;

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

async fn node(client: &Client, name: &str, labels: Value, taints: Value) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(node).unwrap(),
        )
        .await
        .unwrap();
}

/// What a kubelet reports of a started Pod: its IP, Running, and whether it is Ready.
async fn report(pods: &Api<Pod>, name: &str, ip: &str, is_ready: bool) {
    let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": if is_ready { "True" } else { "False" },
            "lastTransitionTime": now()}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// Binds a Pod to a Node as the scheduler does, through the `binding` subresource.
async fn bind(pods: &Api<Pod>, name: &str, node: &str) {
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    pods.create_subresource::<Value, Value>("binding", name, &PostParams::default(), &binding)
        .await
        .unwrap();
}

fn web_pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "nginx",
            "ports": [{"name": "web", "containerPort": 8080}]}]}}))
    .unwrap()
}

async fn slices_of(slices: &Api<EndpointSlice>, service: &str) -> Vec<EndpointSlice> {
    let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={service}"));
    slices.list(&lp).await.unwrap().items
}

/// Each endpoint of the slice by its Pod's name: (address, ready, serving, terminating).
fn endpoints_of(slice: &EndpointSlice) -> Vec<(String, String, bool, bool, bool)> {
    let mut out: Vec<_> = slice
        .endpoints
        .iter()
        .map(|e| {
            let c = &e.conditions;
            (
                e.target_ref.as_ref().unwrap().name.clone().unwrap(),
                e.addresses.join(","),
                c.as_ref().unwrap().ready.unwrap(),
                c.as_ref().unwrap().serving.unwrap(),
                c.as_ref().unwrap().terminating.unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn services_get_slices_and_endpoints_of_their_pods() {
    let server = ApiServer::builder()
        .gc(true)
        .workloads(true)
        .build()
        .unwrap();
    let client = server.client();
    let services: Api<Service> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let slices: Api<EndpointSlice> = Api::default_namespaced(client.clone());
    let endpoints: Api<Endpoints> = Api::default_namespaced(client.clone());
    node(
        &client,
        "node-a",
        json!({"topology.kubernetes.io/zone": "zone-a"}),
        json!([]),
    )
    .await;
    let service = json!({"metadata": {"name": "web", "labels": {"tier": "front"}},
        "spec": {"selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": "web"}]}});
    let service = services
        .create(
            &PostParams::default(),
            &serde_json::from_value(service).unwrap(),
        )
        .await
        .unwrap();

    // Nothing selected yet: one placeholder slice, written as kube writes it.
    until("the placeholder slice", || async {
        slices_of(&slices, "web").await.len() == 1
    })
    .await;
    let placeholder = slices_of(&slices, "web").await.remove(0);
    // As the server sent it: the typed object would write its required `endpoints` as `[]`.
    let dynamic: Api<DynamicObject> =
        Api::default_namespaced_with(client.clone(), &ApiResource::erase::<EndpointSlice>(&()));
    let raw = dynamic.get(&placeholder.name_any()).await.unwrap().data;
    assert!(placeholder.endpoints.is_empty() && placeholder.ports.is_none());
    assert_eq!(placeholder.address_type, "IPv4");
    assert!(placeholder.name_any().starts_with("web-"));
    let labels = placeholder.labels();
    assert_eq!(
        labels
            .get("endpointslice.kubernetes.io/managed-by")
            .unwrap(),
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(labels.get("tier").unwrap(), "front");
    let owner = &placeholder.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Service", service.uid().unwrap().as_str(), Some(true))
    );
    assert_eq!(
        placeholder.annotations()["endpoints.kubernetes.io/last-change-trigger-time"],
        service
            .metadata
            .creation_timestamp
            .as_ref()
            .unwrap()
            .0
            .to_string()
    );
    assert!(raw.get("endpoints").is_none_or(Value::is_null), "{raw}");

    // Three Pods started, two of them ready.
    for (i, name) in ["web-0", "web-1", "web-2"].iter().enumerate() {
        pods.create(&PostParams::default(), &web_pod(name))
            .await
            .unwrap();
        report(&pods, name, &format!("10.1.0.{}", i + 1), true).await;
    }
    until("one slice of the three ready Pods", || async {
        let all = slices_of(&slices, "web").await;
        all.len() == 1 && endpoints_of(&all[0]).iter().filter(|e| e.2).count() == 3
    })
    .await;
    let slice = slices_of(&slices, "web").await.remove(0);
    // The placeholder is reused rather than replaced.
    assert_eq!(slice.name_any(), placeholder.name_any());
    let port = &slice.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port, port.protocol.as_deref()),
        (Some("http"), Some(8080), Some("TCP"))
    );
    let ep = &slice.endpoints[0];
    assert_eq!(ep.node_name.as_deref(), Some("node-a"));
    assert_eq!(ep.zone.as_deref(), Some("zone-a"));
    let target = ep.target_ref.as_ref().unwrap();
    assert_eq!(target.kind.as_deref(), Some("Pod"));
    let pod = pods.get(target.name.as_deref().unwrap()).await.unwrap();
    assert_eq!(target.uid, pod.uid());

    // One stops being ready; a new one comes.
    report(&pods, "web-1", "10.1.0.2", false).await;
    until("web-1 unready in the slice", || async {
        let all = slices_of(&slices, "web").await;
        endpoints_of(&all[0]).contains(&("web-1".into(), "10.1.0.2".into(), false, false, false))
    })
    .await;
    pods.create(&PostParams::default(), &web_pod("web-3"))
        .await
        .unwrap();
    report(&pods, "web-3", "10.1.0.4", true).await;
    until("web-3 in the slice", || async {
        let all = slices_of(&slices, "web").await;
        all.len() == 1 && endpoints_of(&all[0]).len() == 4
    })
    .await;
    let slice = slices_of(&slices, "web").await.remove(0);
    assert_eq!(
        endpoints_of(&slice),
        vec![
            ("web-0".into(), "10.1.0.1".into(), true, true, false),
            ("web-1".into(), "10.1.0.2".into(), false, false, false),
            ("web-2".into(), "10.1.0.3".into(), true, true, false),
            ("web-3".into(), "10.1.0.4".into(), true, true, false),
        ]
    );

    // The legacy Endpoints say the same.
    until("the Endpoints of four Pods", || async {
        let Ok(e) = endpoints.get("web").await else {
            return false;
        };
        let subsets = e.subsets.unwrap_or_default();
        subsets.len() == 1
            && subsets[0].addresses.as_ref().map_or(0, Vec::len) == 3
            && subsets[0].not_ready_addresses.as_ref().map_or(0, Vec::len) == 1
    })
    .await;
    let e = endpoints.get("web").await.unwrap();
    assert_eq!(e.labels().get("tier").unwrap(), "front");
    assert!(
        e.annotations()
            .contains_key("endpoints.kubernetes.io/last-change-trigger-time")
    );
    let subset = &e.subsets.unwrap()[0];
    let ips: Vec<&str> = (subset.addresses.iter().flatten())
        .map(|a| a.ip.as_str())
        .collect();
    assert_eq!(ips, ["10.1.0.1", "10.1.0.3", "10.1.0.4"]);
    let unready = &subset.not_ready_addresses.as_ref().unwrap()[0];
    assert_eq!(
        (
            unready.ip.as_str(),
            unready.node_name.as_deref(),
            unready.target_ref.as_ref().unwrap().name.as_deref()
        ),
        ("10.1.0.2", Some("node-a"), Some("web-1"))
    );
    let port = &subset.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port, port.protocol.as_deref()),
        (Some("http"), 8080, Some("TCP"))
    );

    // Writes that do not concern it leave the slice alone: once another Service's slice shows
    // a pass ran, the web slice is the same version.
    let version = slice.resource_version();
    let other = json!({"metadata": {"name": "other"}, "spec": {"selector": {"app": "none"},
        "ports": [{"port": 80}]}});
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(other).unwrap(),
        )
        .await
        .unwrap();
    until("the other Service's slice", || async {
        !slices_of(&slices, "other").await.is_empty()
    })
    .await;
    assert_eq!(
        slices_of(&slices, "web").await[0].resource_version(),
        version
    );

    // A Service without a selector has its Endpoints left to its clients.
    let manual = json!({"metadata": {"name": "manual"}, "spec": {"ports": [{"port": 80}]}});
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(manual).unwrap(),
        )
        .await
        .unwrap();
    let manual_ep = json!({"metadata": {"name": "manual"},
        "subsets": [{"addresses": [{"ip": "192.0.2.1"}], "ports": [{"port": 80}]}]});
    endpoints
        .create(
            &PostParams::default(),
            &serde_json::from_value(manual_ep).unwrap(),
        )
        .await
        .unwrap();

    // The Service gone, its Endpoints and slices go.
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    until("the Endpoints and slices of web gone", || async {
        endpoints.get_opt("web").await.unwrap().is_none()
            && slices_of(&slices, "web").await.is_empty()
    })
    .await;
    let kept = endpoints.get("manual").await.unwrap();
    assert_eq!(
        kept.subsets.unwrap()[0].addresses.as_ref().unwrap()[0].ip,
        "192.0.2.1"
    );
    assert!(slices_of(&slices, "manual").await.is_empty());
}

fn daemon_set() -> DaemonSet {
    serde_json::from_value(json!({"metadata": {"name": "agent"}, "spec": {
        "selector": {"matchLabels": {"app": "agent"}},
        "minReadySeconds": 3,
        "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
            "nodeSelector": {"role": "worker"},
            "containers": [{"name": "agent", "image": "busybox:1.36"}]}}}}))
    .unwrap()
}

/// The live Pods of the DaemonSet, by the Node their affinity pins them to.
async fn daemon_pods(pods: &Api<Pod>) -> Vec<(String, Pod)> {
    let lp = ListParams::default().labels("app=agent");
    let mut out: Vec<(String, Pod)> = (pods.list(&lp).await.unwrap().items.into_iter())
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let affinity = serde_json::to_value(&p.spec.as_ref().unwrap().affinity).unwrap();
            let term = &affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchFields"][0];
            assert_eq!(
                (&term["key"], &term["operator"]),
                (&json!("metadata.name"), &json!("In"))
            );
            (term["values"][0].as_str().unwrap().to_string(), p)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

async fn ds_status(sets: &Api<DaemonSet>) -> DaemonSetStatus {
    sets.get("agent").await.unwrap().status.unwrap_or_default()
}

/// Binds the DaemonSet's Pod on `node` there and reports it started and ready.
async fn start(pods: &Api<Pod>, node: &str, pod: &Pod, ip: &str) {
    if pod.spec.as_ref().unwrap().node_name.is_none() {
        bind(pods, &pod.name_any(), node).await;
    }
    report(pods, &pod.name_any(), ip, true).await;
}

#[tokio::test]
async fn daemon_sets_run_a_pod_on_each_eligible_node() {
    let server = ApiServer::builder()
        .gc(true)
        .workloads(true)
        .build()
        .unwrap();
    let client = server.client();
    let sets: Api<DaemonSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let revisions: Api<ControllerRevision> = Api::default_namespaced(client.clone());
    node(&client, "n-a", json!({"role": "worker"}), json!([])).await;
    node(
        &client,
        "n-b",
        json!({"role": "worker"}),
        json!([{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]),
    )
    .await;
    node(&client, "n-c", json!({"role": "db"}), json!([])).await;
    let ds = sets
        .create(&PostParams::default(), &daemon_set())
        .await
        .unwrap();

    // Only n-a qualifies: n-b's taint is not tolerated, n-c is not a worker.
    until("one Pod and its count", || async {
        daemon_pods(&pods).await.len() == 1 && ds_status(&sets).await.current_number_scheduled == 1
    })
    .await;
    let (on, pod) = daemon_pods(&pods).await.remove(0);
    assert_eq!(on, "n-a");
    assert!(pod.name_any().starts_with("agent-"));
    let owner = &pod.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("DaemonSet", ds.uid().unwrap().as_str())
    );
    let tolerations: Vec<(String, String)> = (pod.spec.as_ref().unwrap().tolerations.iter())
        .flatten()
        .map(|t| (t.key.clone().unwrap(), t.effect.clone().unwrap()))
        .collect();
    for (key, effect) in [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ] {
        assert!(tolerations.contains(&(key.into(), effect.into())), "{key}");
    }
    let hash = pod.labels()["controller-revision-hash"].clone();
    assert_eq!(pod.labels()["pod-template-generation"], "1");
    let revision = revisions.get(&format!("agent-{hash}")).await.unwrap();
    assert_eq!(revision.revision, 1);
    assert_eq!(revision.labels()["controller-revision-hash"], hash);
    assert_eq!(revision.owner_references()[0].uid, ds.uid().unwrap());
    let status = ds_status(&sets).await;
    assert_eq!(
        (
            status.desired_number_scheduled,
            status.current_number_scheduled,
            status.number_misscheduled,
            status.number_ready,
            status.updated_number_scheduled,
            status.number_available,
            status.number_unavailable,
            status.observed_generation,
        ),
        (1, 1, 0, 0, Some(1), None, Some(1), Some(1))
    );

    // Started and ready: available once ready for minReadySeconds.
    start(&pods, "n-a", &pod, "10.2.0.1").await;
    until("the Pod available", || async {
        let s = ds_status(&sets).await;
        s.number_ready == 1 && s.number_available == Some(1) && s.number_unavailable.is_none()
    })
    .await;

    // A new worker Node gets its Pod.
    node(&client, "n-d", json!({"role": "worker"}), json!([])).await;
    until("a Pod for n-d", || async {
        daemon_pods(&pods).await.iter().any(|(n, _)| n == "n-d")
    })
    .await;
    let (_, pod_d) = daemon_pods(&pods).await.remove(1);
    start(&pods, "n-d", &pod_d, "10.2.0.2").await;
    until("both available", || async {
        let s = ds_status(&sets).await;
        s.desired_number_scheduled == 2 && s.number_available == Some(2)
    })
    .await;

    // A template change rolls out one Node at a time (maxUnavailable 1).
    let change = json!({"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}});
    sets.patch("agent", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap();
    let is_new = |p: &Pod| p.labels()["controller-revision-hash"] != hash;
    until("one Node's Pod replaced", || async {
        daemon_pods(&pods).await.iter().any(|(_, p)| is_new(p))
    })
    .await;
    let now_pods = daemon_pods(&pods).await;
    assert_eq!(now_pods.len(), 2, "the other Node keeps its old Pod");
    let (first, new_pod) = now_pods.iter().find(|(_, p)| is_new(p)).unwrap().clone();
    let (second, old_pod) = now_pods.iter().find(|(_, p)| !is_new(p)).unwrap().clone();
    assert_eq!(new_pod.labels()["pod-template-generation"], "2");
    start(&pods, &first, &new_pod, "10.2.0.3").await;
    // Ready but not yet available: the status of that pass still counts the old Pod, which the
    // rollout left alone as the new one is not available yet.
    until("the new Pod ready", || async {
        let s = ds_status(&sets).await;
        s.number_ready == 2 && s.number_available == Some(1)
    })
    .await;
    let old_now = pods.get(&old_pod.name_any()).await.unwrap();
    assert!(old_now.metadata.deletion_timestamp.is_none());
    until("the second Node's Pod replaced", || async {
        daemon_pods(&pods)
            .await
            .iter()
            .any(|(n, p)| *n == second && is_new(p))
    })
    .await;
    let (_, second_pod) = daemon_pods(&pods)
        .await
        .into_iter()
        .find(|(n, _)| *n == second)
        .unwrap();
    start(&pods, &second, &second_pod, "10.2.0.4").await;
    until("the rollout done", || async {
        let s = ds_status(&sets).await;
        s.updated_number_scheduled == Some(2)
            && s.number_available == Some(2)
            && s.observed_generation == Some(2)
    })
    .await;
    let all = revisions.list(&ListParams::default()).await.unwrap().items;
    let mut numbers: Vec<i64> = all.iter().map(|r| r.revision).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [1, 2]);

    // A Node that stops qualifying loses its Pod.
    let relabel = json!({"metadata": {"labels": {"role": "db"}}});
    nodes
        .patch("n-d", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
    until("n-d's Pod gone", || async {
        let s = ds_status(&sets).await;
        daemon_pods(&pods).await.iter().all(|(n, _)| n != "n-d") && s.desired_number_scheduled == 1
    })
    .await;

    // A failed Pod is replaced.
    let (_, survivor) = daemon_pods(&pods).await.remove(0);
    let failed = json!({"status": {"phase": "Failed"}});
    pods.patch_status(
        &survivor.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&failed),
    )
    .await
    .unwrap();
    until("a replacement Pod", || async {
        let live = daemon_pods(&pods).await;
        live.len() == 1 && live[0].1.name_any() != survivor.name_any()
    })
    .await;

    // A NoSchedule taint keeps a running Pod (misscheduled); a NoExecute one drives it off.
    let (_, last) = daemon_pods(&pods).await.remove(0);
    let taint = |effect: &str| json!({"spec": {"taints": [{"key": "maintenance", "value": "true", "effect": effect}]}});
    nodes
        .patch(
            "n-a",
            &PatchParams::default(),
            &Patch::Merge(&taint("NoSchedule")),
        )
        .await
        .unwrap();
    until("the Pod counted misscheduled", || async {
        let s = ds_status(&sets).await;
        s.number_misscheduled == 1 && s.desired_number_scheduled == 0
    })
    .await;
    assert!(pods.get(&last.name_any()).await.is_ok());
    nodes
        .patch(
            "n-a",
            &PatchParams::default(),
            &Patch::Merge(&taint("NoExecute")),
        )
        .await
        .unwrap();
    until("the Pod evicted", || async {
        let s = ds_status(&sets).await;
        daemon_pods(&pods).await.is_empty() && s.number_misscheduled == 0
    })
    .await;
}

#[tokio::test]
async fn with_the_kubelet_daemon_pods_run_everywhere_and_serve() {
    let server = ApiServer::builder()
        .gc(true)
        .service_accounts(true)
        .workloads(true)
        .kubelet(Some(wasmctrl_apiserver::Kubelet::default()))
        .build()
        .unwrap();
    let client = server.client();
    let sets: Api<DaemonSet> = Api::default_namespaced(client.clone());
    let services: Api<Service> = Api::default_namespaced(client.clone());
    let slices: Api<EndpointSlice> = Api::default_namespaced(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    until("the fake Nodes", || async {
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            == 3
    })
    .await;
    let ds = json!({"metadata": {"name": "agent"}, "spec": {
        "selector": {"matchLabels": {"app": "agent"}},
        "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
            "containers": [{"name": "agent", "image": "busybox:1.36",
                "ports": [{"name": "metrics", "containerPort": 9100}]}]}}}});
    sets.create(&PostParams::default(), &serde_json::from_value(ds).unwrap())
        .await
        .unwrap();
    let service = json!({"metadata": {"name": "agent"}, "spec": {"selector": {"app": "agent"},
        "ports": [{"name": "metrics", "port": 9100, "targetPort": "metrics"}]}});
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(service).unwrap(),
        )
        .await
        .unwrap();
    until("a ready Pod on each Node", || async {
        ds_status(&sets).await.number_available == Some(3)
    })
    .await;
    until("the slice of the three", || async {
        let all = slices_of(&slices, "agent").await;
        all.len() == 1 && endpoints_of(&all[0]).iter().filter(|e| e.2).count() == 3
    })
    .await;
    let slice = slices_of(&slices, "agent").await.remove(0);
    let mut on: Vec<String> = slice
        .endpoints
        .iter()
        .map(|e| e.node_name.clone().unwrap())
        .collect();
    on.sort();
    assert_eq!(
        on,
        ["wasmctrl-node-0", "wasmctrl-node-1", "wasmctrl-node-2"]
    );
    assert_eq!(slice.ports.unwrap()[0].port, Some(9100));
}
