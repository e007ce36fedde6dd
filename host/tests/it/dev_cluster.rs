//! `wasmctrl apiserver --pods=auto` behaving like a cluster (fake Nodes, a
//! scheduler, a kubelet stand-in and kube-controller-manager's workload controllers), driven by
//! kubectl as users drive a cluster: rollouts, Jobs, StatefulSets, Services.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::process::{Cluster, wait_for};
use serde_json::Value;

fn revision(rs: &Value) -> &str {
    rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        .as_str()
        .unwrap_or_default()
}

/// The Deployment's ReplicaSets by revision: (revision, name, replicas, image).
fn sets(cluster: &Cluster) -> Vec<(String, String, i64, String)> {
    let list = cluster.get_json(&["replicasets", "-l", "app=web"]).unwrap();
    let mut sets: Vec<_> = (list["items"].as_array().unwrap().iter())
        .map(|rs| {
            (
                revision(rs).to_string(),
                rs["metadata"]["name"].as_str().unwrap().to_string(),
                rs["spec"]["replicas"].as_i64().unwrap(),
                rs["spec"]["template"]["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    sets.sort();
    sets
}

/// `kubectl rollout status`, `history`, `undo` and `restart` on a Deployment whose Pods the
/// cluster runs by itself.
#[test]
fn kubectl_rolls_deployments_out_back_and_again() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start_with(dir.path(), &["--pods=auto"]);
    cluster.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.26",
        "--replicas=3",
    ]);
    let out = cluster.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(
        out.contains("deployment \"web\" successfully rolled out"),
        "{out}"
    );
    let pods = cluster.get_json(&["pods", "-l", "app=web"]).unwrap();
    let pods = pods["items"].as_array().unwrap();
    assert_eq!(pods.len(), 3);
    for pod in pods {
        assert_eq!(pod["status"]["phase"], "Running", "{pod}");
        assert!(
            pod["spec"]["nodeName"]
                .as_str()
                .unwrap()
                .starts_with("wasmctrl-node-")
        );
    }

    cluster.kubectl_ok(&["set", "image", "deployment/web", "nginx=nginx:1.27"]);
    cluster.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    let history = cluster.kubectl_ok(&["rollout", "history", "deployment/web"]);
    assert!(history.contains("REVISION"), "{history}");
    let revisions: Vec<&str> = (history
        .lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1))
    .filter_map(|l| l.split_whitespace().next())
    .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");
    let before = sets(&cluster);
    assert_eq!(before.len(), 2, "{before:?}");
    assert_eq!((before[0].2, before[0].3.as_str()), (0, "nginx:1.26"));
    assert_eq!((before[1].2, before[1].3.as_str()), (3, "nginx:1.27"));

    let out = cluster.kubectl_ok(&["rollout", "undo", "deployment/web"]);
    assert!(out.contains("rolled back"), "{out}");
    cluster.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    let after = sets(&cluster);
    // The first set is the new one again, as revision 3; no set was added.
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(after[1].0, "3");
    assert_eq!(
        after[1].1, before[0].1,
        "undo went back to the first ReplicaSet"
    );
    assert_eq!((after[1].2, after[1].3.as_str()), (3, "nginx:1.26"));
    assert_eq!(after[0].2, 0);

    cluster.kubectl_ok(&["rollout", "restart", "deployment/web"]);
    cluster.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    let restarted = sets(&cluster);
    assert_eq!(
        restarted.len(),
        3,
        "a restart makes a new ReplicaSet: {restarted:?}"
    );
    assert_eq!((restarted[2].0.as_str(), restarted[2].2), ("4", 3));
    let d = cluster.get_json(&["deployment", "web"]).unwrap();
    for (field, n) in [
        ("replicas", 3),
        ("updatedReplicas", 3),
        ("readyReplicas", 3),
        ("availableReplicas", 3),
    ] {
        assert_eq!(d["status"][field], n, "{field}: {d}");
    }
    wait_for(30, "the old Pods gone", || {
        cluster
            .get_json(&["pods", "-l", "app=web"])
            .is_some_and(|p| p["items"].as_array().unwrap().len() == 3)
    });
}
