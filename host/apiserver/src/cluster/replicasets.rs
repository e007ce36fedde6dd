//! kube-controller-manager's ReplicaSet controller, for dev mode: each ReplicaSet keeps
//! `spec.replicas` active Pods of its template (named `<name>-<suffix>`, controlled by it),
//! adopting orphans its selector matches and deleting the surplus (unscheduled, pending and
//! unready ones first, as kube ranks them), and reports them in its status as kube's does
//! (`replicas`, `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas`,
//! `observedGeneration`, a `ReplicaFailure` condition while Pods cannot be created). Its writes
//! go through the same paths as clients' (admission, defaults, the ServiceAccount plugin).

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    MANAGER, Source, active, available, controller_ref, controller_uid, deleting, ready, record,
    target,
};
use crate::admission::now;
use crate::handlers::{Query, Target};
use crate::json::str_at;
use crate::registry::{apps::REPLICA_SET, core::POD};
use crate::status::ApiError;
use crate::store::State;
use crate::validate::selects;
use crate::{delete, write};

/// Who records the ReplicaSet controller's Events.
const SOURCE: Source<'static> = Source {
    component: "replicaset-controller",
    host: None,
};

/// Most Pods one pass creates for one ReplicaSet (kube's `burstReplicas`).
const BURST: usize = 500;

/// Brings every ReplicaSet to its replicas; whether anything was written.
pub(crate) fn sync(st: &mut State) -> bool {
    let sets: Vec<Arc<Value>> = (st.table_of(&("apps".into(), "replicasets".into())))
        .map(|t| t.objects.values().cloned().collect())
        .unwrap_or_default();
    let mut changed = false;
    for rs in sets.iter().filter(|rs| !deleting(rs)) {
        changed |= sync_one(st, rs);
    }
    changed
}

fn sync_one(st: &mut State, rs: &Arc<Value>) -> bool {
    let ns = str_at(rs, "/metadata/namespace").to_string();
    let wanted = rs["spec"]["replicas"].as_i64().unwrap_or(1).max(0) as usize;
    let (Some(pods_t), Some(status_t)) = (
        target(st, "", "pods", &ns, None),
        target(st, "apps", "replicasets", &ns, Some("status")),
    ) else {
        return false;
    };
    let (owned, mut changed) = claim_pods(st, rs, &pods_t);
    let mut live: Vec<Arc<Value>> = owned.iter().filter(|p| active(p)).cloned().collect();
    let mut new_status = status_of(rs, &live);
    if live.len() < wanted {
        let (created, failure) = create_pods(st, rs, &pods_t, wanted - live.len());
        changed |= created;
        if let Some(e) = &failure {
            tracing::warn!(replicaset = %str_at(rs, "/metadata/name"), namespace = %ns, error = %e.message, "creating a Pod");
            new_status["conditions"] = json!([failed_condition(rs, e)]);
        }
    } else if live.len() > wanted {
        changed |= delete_surplus(st, rs, &pods_t, &mut live, wanted);
    }
    if rs["status"] != new_status {
        let mut updated = (**rs).clone();
        updated["status"] = new_status;
        let query = Query::new();
        match write::update_locked(st, &status_t, &query, rs, updated, write::Via::Put, MANAGER) {
            Ok(_) => changed = true,
            Err(e) => {
                tracing::warn!(replicaset = %str_at(rs, "/metadata/name"), error = %e.message, "writing a ReplicaSet's status")
            }
        }
    }
    changed
}

/// The Pods `rs` controls in its namespace, orphans its selector matches adopted first, as
/// kube's controller adopts them; whether an adoption was written.
fn claim_pods(st: &mut State, rs: &Value, pods_t: &Target) -> (Vec<Arc<Value>>, bool) {
    let ns = str_at(rs, "/metadata/namespace");
    let (name, uid) = (str_at(rs, "/metadata/name"), str_at(rs, "/metadata/uid"));
    let selector = &rs["spec"]["selector"];
    let in_namespace: Vec<Arc<Value>> = (st.table_of(&(String::new(), "pods".into())))
        .into_iter()
        .flat_map(|t| t.objects.values())
        .filter(|p| str_at(p, "/metadata/namespace") == ns)
        .cloned()
        .collect();
    let mut changed = false;
    let mut owned = Vec::new();
    for pod in in_namespace {
        match controller_uid(&pod) {
            Some(u) if u == uid => owned.push(pod),
            Some(_) => {}
            None if !deleting(&pod)
                && selects(selector, &pod["metadata"]["labels"]) == Some(true) =>
            {
                let mut adopted = (*pod).clone();
                let mut refs = adopted["metadata"]["ownerReferences"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                refs.push(owner_ref(name, uid));
                adopted["metadata"]["ownerReferences"] = json!(refs);
                let query = Query::new();
                match write::update_locked(
                    st,
                    pods_t,
                    &query,
                    &pod,
                    adopted,
                    write::Via::Put,
                    MANAGER,
                ) {
                    Ok(v) => {
                        changed = true;
                        owned.push(Arc::new(v));
                    }
                    Err(e) => {
                        tracing::warn!(pod = %str_at(&pod, "/metadata/name"), error = %e.message, "adopting a Pod")
                    }
                }
            }
            None => {}
        }
    }
    (owned, changed)
}

/// Creates up to `missing` Pods for `rs` (at most a burst), recording each; stops at the first
/// refusal, recorded once per failure (not per retry). Whether one was created, and the refusal.
fn create_pods(
    st: &mut State,
    rs: &Value,
    pods_t: &Target,
    missing: usize,
) -> (bool, Option<ApiError>) {
    let ns = str_at(rs, "/metadata/namespace");
    let (name, uid) = (str_at(rs, "/metadata/name"), str_at(rs, "/metadata/uid"));
    let mut created = false;
    for _ in 0..missing.min(BURST) {
        let pod = new_pod(rs, ns, name, uid);
        match write::create_locked(st, pods_t, &Query::new(), pod, Some(MANAGER)) {
            Ok(pod) => {
                created = true;
                let message = format!("Created pod: {}", str_at(&pod, "/metadata/name"));
                record(st, rs, "Normal", "SuccessfulCreate", &message, &SOURCE);
            }
            Err(e) => {
                let known = super::condition(rs, "ReplicaFailure")
                    .is_some_and(|c| c["message"] == e.message.as_str());
                if !known {
                    let message = format!("Error creating: {}", e.message);
                    record(st, rs, "Warning", "FailedCreate", &message, &SOURCE);
                }
                return (created, Some(e));
            }
        }
    }
    (created, None)
}

/// Deletes `rs`'s Pods beyond `wanted`, those least along first as kube picks them
/// (unscheduled, pending, unready, newest); whether one was deleted.
fn delete_surplus(
    st: &mut State,
    rs: &Value,
    pods_t: &Target,
    live: &mut [Arc<Value>],
    wanted: usize,
) -> bool {
    live.sort_by_key(|p| {
        (
            !str_at(p, "/spec/nodeName").is_empty(),
            str_at(p, "/status/phase") != "Pending",
            ready(p),
            std::cmp::Reverse(str_at(p, "/metadata/creationTimestamp").to_string()),
        )
    });
    let mut changed = false;
    for pod in &live[..live.len() - wanted] {
        match delete::delete_locked(st, pods_t, pod, false) {
            Ok(_) => {
                changed = true;
                let message = format!("Deleted pod: {}", str_at(pod, "/metadata/name"));
                record(st, rs, "Normal", "SuccessfulDelete", &message, &SOURCE);
            }
            Err(e) => {
                tracing::warn!(pod = %str_at(pod, "/metadata/name"), error = %e.message, "deleting a surplus Pod")
            }
        }
    }
    changed
}

fn owner_ref(name: &str, uid: &str) -> Value {
    controller_ref(REPLICA_SET, name, uid)
}

/// A Pod of the ReplicaSet's template, controlled by it.
fn new_pod(rs: &Value, ns: &str, name: &str, uid: &str) -> Value {
    let template = &rs["spec"]["template"];
    let mut meta = json!({"generateName": format!("{name}-"), "namespace": ns,
        "ownerReferences": [owner_ref(name, uid)]});
    for key in ["labels", "annotations"] {
        if let Some(m) = template["metadata"][key]
            .as_object()
            .filter(|m| !m.is_empty())
        {
            meta[key] = json!(m);
        }
    }
    json!({"apiVersion": POD.api_version, "kind": POD.kind, "metadata": meta, "spec": template["spec"]})
}

/// The status kube's controller computes from the ReplicaSet's active Pods.
fn status_of(rs: &Value, live: &[Arc<Value>]) -> Value {
    let template_labels = &rs["spec"]["template"]["metadata"]["labels"];
    let fully = live
        .iter()
        .filter(|p| {
            (template_labels.as_object().into_iter().flatten())
                .all(|(k, v)| p["metadata"]["labels"][k] == *v)
        })
        .count();
    let ready_count = live.iter().filter(|p| ready(p)).count();
    let min_ready = rs["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
    let available = live.iter().filter(|p| available(p, min_ready)).count();
    let mut status = json!({"replicas": live.len()});
    for (key, n) in [
        ("fullyLabeledReplicas", fully),
        ("readyReplicas", ready_count),
        ("availableReplicas", available),
    ] {
        if n > 0 {
            status[key] = json!(n);
        }
    }
    if let Some(g) = rs.pointer("/metadata/generation") {
        status["observedGeneration"] = g.clone();
    }
    status
}

/// kube's `ReplicaFailure` condition for Pods it could not create.
fn failed_condition(rs: &Value, e: &ApiError) -> Value {
    let since = (rs
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten())
    .find(|c| c["type"] == "ReplicaFailure")
    .map_or_else(|| json!(now()), |c| c["lastTransitionTime"].clone());
    json!({"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
        "message": e.message, "lastTransitionTime": since})
}
