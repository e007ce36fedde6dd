//! A scheduler for the dev cluster, deciding as kube-scheduler's default plugins do for what dev
//! mode has: a Pod without a node is bound (through the `binding` path, as kube-scheduler binds)
//! to a Ready Node it fits: its `nodeSelector` and required node affinity, the Node's taints it
//! tolerates, its resource requests within what the Node has left, its claims bound. Among those
//! it prefers the Node with fewest Pods of the same owner (kube's default topology spreading),
//! then the least requested one. A Pod no Node fits gets kube's `PodScheduled` condition with
//! reason `Unschedulable` and a message in kube's form.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{Source, active, condition, controller_uid, deleting, objects, record, set_condition};
use crate::json::str_at;
use crate::quantity::Quantity;
use crate::store::State;
use crate::write;

/// The scheduler this one stands in for; Pods naming another are left to it.
const SCHEDULER: &str = "default-scheduler";

/// Who records the scheduler's Events.
const SOURCE: Source<'static> = Source {
    component: SCHEDULER,
    host: None,
};

/// Binds every Pod waiting for a node that one fits; whether anything was written.
pub(crate) fn schedule(st: &mut State) -> bool {
    let waiting: Vec<Arc<Value>> = objects(st, "", "pods", None)
        .into_iter()
        .filter(|p| str_at(p, "/spec/nodeName").is_empty() && active(p))
        .filter(|p| matches!(str_at(p, "/spec/schedulerName"), "" | SCHEDULER))
        .collect();
    if waiting.is_empty() {
        return false;
    }
    let nodes = objects(st, "", "nodes", None);
    let mut changed = false;
    for pod in waiting {
        let pods = objects(st, "", "pods", None);
        match place(st, &pod, &nodes, &pods) {
            Ok(node) => {
                if let Some(wrote) = claims_waiting(st, &pod, &node) {
                    changed |= wrote;
                    continue;
                }
                let ns = str_at(&pod, "/metadata/namespace");
                let name = str_at(&pod, "/metadata/name");
                match write::bind_locked(st, ns, name, &node) {
                    Ok(_) => {
                        changed = true;
                        let message = format!("Successfully assigned {ns}/{name} to {node}");
                        record(st, &pod, "Normal", "Scheduled", &message, &SOURCE);
                    }
                    Err(e) => tracing::warn!(pod = %name, namespace = %ns, node = %node,
                        error = %e.message, "binding a Pod"),
                }
            }
            Err(why) => changed |= unschedulable(st, &pod, why),
        }
    }
    changed
}

/// The Node `pod` goes to, or why none fits (kube's message).
fn place(
    st: &State,
    pod: &Value,
    nodes: &[Arc<Value>],
    pods: &[Arc<Value>],
) -> Result<String, String> {
    let n = nodes.len();
    match unbound_claim(st, pod) {
        Some(Claim::Missing(why)) => return Err(why),
        Some(Claim::Unbound) => {
            return Err(format!(
                "0/{n} nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
            ));
        }
        None => {}
    }
    let spec = &pod["spec"];
    let wanted = requests(spec);
    let owner = controller_uid(pod);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut fits = Vec::new();
    for node in nodes.iter().filter(|n| !deleting(n)) {
        let name = str_at(node, "/metadata/name");
        let here: Vec<&Arc<Value>> = pods
            .iter()
            .filter(|p| str_at(p, "/spec/nodeName") == name && active(p))
            .collect();
        match fit(spec, node, &wanted, &here) {
            Ok(load) => {
                let siblings = here
                    .iter()
                    .filter(|p| owner.is_some() && controller_uid(p) == owner)
                    .count();
                fits.push(((siblings, load, here.len()), name.to_string()));
            }
            Err(why) => {
                for reason in why {
                    *reasons.entry(reason).or_default() += 1;
                }
            }
        }
    }
    if let Some((_, node)) = fits
        .into_iter()
        .min_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal))
    {
        return Ok(node);
    }
    let mut listed: Vec<String> = reasons
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    listed.sort();
    let detail = if listed.is_empty() {
        String::new()
    } else {
        format!(" {}.", listed.join(", "))
    };
    Err(format!(
        "0/{n} nodes are available:{detail} preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
    ))
}

/// A claim keeping a Pod from being scheduled.
enum Claim {
    /// Missing or being deleted: kube's message.
    Missing(String),
    /// Not bound yet.
    Unbound,
}

/// Why a claim of `pod` keeps it from being scheduled: missing, or not yet bound (kube's
/// volume binding waits for an immediately bound claim; a `WaitForFirstConsumer` one is
/// provisioned once a node is chosen, which the volume controller does from the claim's
/// `volume.kubernetes.io/selected-node`).
fn unbound_claim(st: &State, pod: &Value) -> Option<Claim> {
    let ns = str_at(pod, "/metadata/namespace");
    let claims = claim_names(pod);
    let key = (String::new(), "persistentvolumeclaims".to_string());
    for claim in claims {
        let Some(pvc) = st.get(&key, ns, claim) else {
            return Some(Claim::Missing(format!(
                "persistentvolumeclaim \"{claim}\" not found"
            )));
        };
        if deleting(&pvc) {
            return Some(Claim::Missing(format!(
                "persistentvolumeclaim \"{claim}\" is being deleted"
            )));
        }
        if str_at(&pvc, "/status/phase") != "Bound" && !waits_for_consumer(st, &pvc) {
            return Some(Claim::Unbound);
        }
    }
    None
}

/// The claims a Pod's volumes name.
fn claim_names(pod: &Value) -> impl Iterator<Item = &str> {
    (pod.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter())
    .flatten()
    .filter_map(|v| {
        v.pointer("/persistentVolumeClaim/claimName")
            .and_then(Value::as_str)
    })
}

/// Whether claim `pvc` is bound only once a Pod using it has a node (its class's
/// `volumeBindingMode: WaitForFirstConsumer`).
fn waits_for_consumer(st: &State, pvc: &Value) -> bool {
    let class = str_at(pvc, "/spec/storageClassName");
    let key = ("storage.k8s.io".to_string(), "storageclasses".to_string());
    (!class.is_empty())
        && st
            .get(&key, "", class)
            .is_some_and(|c| str_at(&c, "/volumeBindingMode") == "WaitForFirstConsumer")
}

/// The claims of `pod` waiting for it to have a node: kube's scheduler names the node it chose
/// on them (`volume.kubernetes.io/selected-node`) and binds the Pod once they are bound.
/// `None` when the Pod has none left waiting, else whether it wrote.
fn claims_waiting(st: &mut State, pod: &Value, node: &str) -> Option<bool> {
    let ns = str_at(pod, "/metadata/namespace").to_string();
    let claims: Vec<String> = claim_names(pod).map(String::from).collect();
    let key = (String::new(), "persistentvolumeclaims".to_string());
    let mut waiting = None;
    for claim in claims {
        let Some(pvc) = st.get(&key, &ns, &claim) else {
            continue;
        };
        if str_at(&pvc, "/status/phase") == "Bound" {
            continue;
        }
        let wrote = waiting.get_or_insert(false);
        let selected = "/metadata/annotations/volume.kubernetes.io~1selected-node";
        if pvc.pointer(selected).and_then(Value::as_str) == Some(node) {
            continue;
        }
        let Some(t) = super::target(st, "", "persistentvolumeclaims", &ns, None) else {
            continue;
        };
        let mut annotated = (*pvc).clone();
        annotated["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] = json!(node);
        *wrote |= super::update(st, &t, &pvc, annotated, "a claim's selected node");
    }
    waiting
}

/// The Pod's resource requests as kube's scheduler adds them up: the containers' sum or the
/// largest init container's, whichever is larger, per resource, plus the Pod's overhead.
fn requests(spec: &Value) -> BTreeMap<String, Quantity> {
    let of = |c: &Value| -> BTreeMap<String, Quantity> {
        (c.pointer("/resources/requests")
            .and_then(Value::as_object)
            .into_iter())
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), Quantity::parse(v.as_str()?)?)))
        .collect()
    };
    let mut sum: BTreeMap<String, Quantity> = BTreeMap::new();
    for c in spec["containers"].as_array().into_iter().flatten() {
        for (k, q) in of(c) {
            let e = sum.entry(k).or_insert(Quantity::ZERO);
            *e = *e + q;
        }
    }
    for c in spec["initContainers"].as_array().into_iter().flatten() {
        for (k, q) in of(c) {
            let e = sum.entry(k).or_insert(Quantity::ZERO);
            *e = (*e).max(q);
        }
    }
    for (k, v) in spec["overhead"].as_object().into_iter().flatten() {
        if let Some(q) = v.as_str().and_then(Quantity::parse) {
            let e = sum.entry(k.clone()).or_insert(Quantity::ZERO);
            *e = *e + q;
        }
    }
    sum
}

/// Whether a Pod with `spec` fits `node`, which already runs `here`: the share of its CPU and
/// memory then requested, or every reason it does not fit.
fn fit(
    spec: &Value,
    node: &Value,
    wanted: &BTreeMap<String, Quantity>,
    here: &[&Arc<Value>],
) -> Result<f64, Vec<String>> {
    let mut why = Vec::new();
    if node["spec"]["unschedulable"] == true
        && !tolerates(
            spec,
            &json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}),
        )
    {
        why.push("node(s) were unschedulable".to_string());
    }
    if !condition(node, "Ready").is_some_and(|c| c["status"] == "True") {
        why.push("node(s) had untolerated taint {node.kubernetes.io/not-ready: }".to_string());
    }
    if !selects_node(spec, node) {
        why.push("node(s) didn't match Pod's node affinity/selector".to_string());
    }
    if let Some(taint) = untolerated_taint(spec, node) {
        why.push(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            str_at(taint, "/key"),
            str_at(taint, "/value")
        ));
    }
    let allocatable = &node["status"]["allocatable"];
    let mut load = 0.0;
    for (resource, asked) in wanted {
        let Some(has) = allocatable[resource].as_str().and_then(Quantity::parse) else {
            if !asked.is_zero() {
                why.push(format!("Insufficient {resource}"));
            }
            continue;
        };
        let used = here
            .iter()
            .filter_map(|p| requests(&p["spec"]).get(resource).copied())
            .fold(Quantity::ZERO, |a, b| a + b);
        if used + *asked > has {
            why.push(format!("Insufficient {resource}"));
        } else if matches!(resource.as_str(), "cpu" | "memory") && !has.is_zero() {
            load += (used + *asked).as_f64() / has.as_f64();
        }
    }
    let max_pods = allocatable["pods"]
        .as_str()
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(110);
    if here.len() >= max_pods {
        why.push("Too many pods".to_string());
    }
    if why.is_empty() { Ok(load) } else { Err(why) }
}

/// Whether `node` satisfies the Pod's `nodeSelector` and required node affinity.
pub(crate) fn selects_node(spec: &Value, node: &Value) -> bool {
    let labels = &node["metadata"]["labels"];
    let by_selector = (spec["nodeSelector"].as_object().into_iter().flatten())
        .all(|(k, v)| labels.get(k) == Some(v));
    let terms = spec.pointer(
        "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    );
    let by_affinity = match terms.and_then(Value::as_array) {
        None => true,
        // Terms are ORed; a term's requirements ANDed; an empty term matches nothing.
        Some(terms) => terms.iter().any(|term| node_term(term, node)),
    };
    by_selector && by_affinity
}

fn node_term(term: &Value, node: &Value) -> bool {
    let expressions = term["matchExpressions"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let fields = term["matchFields"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = &node["metadata"]["labels"];
    expressions
        .iter()
        .all(|r| requirement(r, labels.get(str_at(r, "/key")).and_then(Value::as_str)))
        && fields.iter().all(|r| {
            // kube supports one field: the Node's name.
            str_at(r, "/key") == "metadata.name"
                && requirement(r, Some(str_at(node, "/metadata/name")))
        })
}

/// A `NodeSelectorRequirement` against the value (or absence) of its key.
fn requirement(r: &Value, value: Option<&str>) -> bool {
    let values: Vec<&str> = (r["values"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    let number = |v: &str| v.parse::<i64>().ok();
    match str_at(r, "/operator") {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => {
            matches!((value.and_then(number), values.first().and_then(|v| number(v))), (Some(a), Some(b)) if a > b)
        }
        "Lt" => {
            matches!((value.and_then(number), values.first().and_then(|v| number(v))), (Some(a), Some(b)) if a < b)
        }
        _ => false,
    }
}

/// The first of `node`'s `NoSchedule`/`NoExecute` taints the Pod does not tolerate.
pub(crate) fn untolerated_taint<'a>(spec: &Value, node: &'a Value) -> Option<&'a Value> {
    (node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .into_iter())
    .flatten()
    .filter(|t| matches!(str_at(t, "/effect"), "NoSchedule" | "NoExecute"))
    .find(|t| !tolerates(spec, t))
}

/// Whether one of the Pod's tolerations tolerates `taint` (kube's `ToleratesTaint`).
pub(crate) fn tolerates(spec: &Value, taint: &Value) -> bool {
    (spec["tolerations"].as_array().into_iter().flatten()).any(|t| {
        let effect = str_at(t, "/effect");
        if !effect.is_empty() && effect != str_at(taint, "/effect") {
            return false;
        }
        let key = str_at(t, "/key");
        if !key.is_empty() && key != str_at(taint, "/key") {
            return false;
        }
        match str_at(t, "/operator") {
            // An empty key with Exists tolerates everything.
            "Exists" => true,
            "" | "Equal" => str_at(t, "/value") == str_at(taint, "/value"),
            _ => false,
        }
    })
}

/// Records on `pod` why it cannot be scheduled, as kube-scheduler does; whether it wrote.
fn unschedulable(st: &mut State, pod: &Arc<Value>, why: String) -> bool {
    let mut status = pod["status"].clone();
    let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    set_condition(
        &mut conditions,
        json!({"type": "PodScheduled", "status": "False", "lastProbeTime": null,
            "reason": "Unschedulable", "message": &why}),
        false,
    );
    status["conditions"] = json!(conditions);
    if status == pod["status"] {
        return false;
    }
    let wrote = super::kubelet::write_pod_status(st, pod, status, SCHEDULER);
    if wrote {
        record(st, pod, "Warning", "FailedScheduling", &why, &SOURCE);
    }
    wrote
}
