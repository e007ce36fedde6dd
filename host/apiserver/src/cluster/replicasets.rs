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
use crate::handlers::Query;
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
    let name = str_at(rs, "/metadata/name").to_string();
    let uid = str_at(rs, "/metadata/uid").to_string();
    let selector = &rs["spec"]["selector"];
    let wanted = rs["spec"]["replicas"].as_i64().unwrap_or(1).max(0) as usize;
    let (Some(pods_t), Some(status_t)) = (
        target(st, "", "pods", &ns, None),
        target(st, "apps", "replicasets", &ns, Some("status")),
    ) else {
        return false;
    };
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
            // An orphan the selector matches is adopted, as kube's controller adopts it.
            None if !deleting(&pod)
                && selects(selector, &pod["metadata"]["labels"]) == Some(true) =>
            {
                let mut adopted = (*pod).clone();
                let mut refs = adopted["metadata"]["ownerReferences"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                refs.push(owner_ref(&name, &uid));
                adopted["metadata"]["ownerReferences"] = json!(refs);
                match write::update_locked(
                    st,
                    &pods_t,
                    &Query::new(),
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
    let mut live: Vec<Arc<Value>> = owned.iter().filter(|p| active(p)).cloned().collect();
    let status = status_of(rs, &live);
    let mut failure = None;
    if live.len() < wanted {
        for _ in 0..(wanted - live.len()).min(BURST) {
            let pod = new_pod(rs, &ns, &name, &uid);
            match write::create_locked(st, &pods_t, &Query::new(), pod, Some(MANAGER)) {
                Ok(pod) => {
                    changed = true;
                    let message = format!("Created pod: {}", str_at(&pod, "/metadata/name"));
                    record(st, rs, "Normal", "SuccessfulCreate", &message, &SOURCE);
                }
                Err(e) => {
                    // Once per failure, not per retry: a retry writes nothing else.
                    let known = super::condition(rs, "ReplicaFailure")
                        .is_some_and(|c| c["message"] == e.message.as_str());
                    if !known {
                        let message = format!("Error creating: {}", e.message);
                        record(st, rs, "Warning", "FailedCreate", &message, &SOURCE);
                    }
                    failure = Some(e);
                    break;
                }
            }
        }
    } else if live.len() > wanted {
        // kube deletes the Pods least along first: unscheduled, pending, unready, newest.
        live.sort_by_key(|p| {
            (
                !str_at(p, "/spec/nodeName").is_empty(),
                str_at(p, "/status/phase") != "Pending",
                ready(p),
                std::cmp::Reverse(str_at(p, "/metadata/creationTimestamp").to_string()),
            )
        });
        for pod in &live[..live.len() - wanted] {
            match delete::delete_locked(st, &pods_t, pod, false) {
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
    }
    let mut new_status = status;
    if let Some(e) = &failure {
        tracing::warn!(replicaset = %name, namespace = %ns, error = %e.message, "creating a Pod");
        new_status["conditions"] = json!([failed_condition(rs, e)]);
    }
    if rs["status"] != new_status {
        let mut updated = (**rs).clone();
        updated["status"] = new_status;
        match write::update_locked(
            st,
            &status_t,
            &Query::new(),
            rs,
            updated,
            write::Via::Put,
            MANAGER,
        ) {
            Ok(_) => changed = true,
            Err(e) => {
                tracing::warn!(replicaset = %name, error = %e.message, "writing a ReplicaSet's status")
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
