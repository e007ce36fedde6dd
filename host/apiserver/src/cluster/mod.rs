//! What makes the embedded server behave like a cluster in dev mode: kube-controller-manager's
//! controllers (each namespace's ServiceAccount and root CA, ReplicaSets, Deployments,
//! StatefulSets, DaemonSets, Jobs, CronJobs, EndpointSlices, PersistentVolumeClaim binding) and,
//! in the manner of KWOK, a kubelet stand-in: fake Nodes, a scheduler binding Pods to them and
//! Pods going through their lifecycle without containers.
//!
//! Each controller is a pass over the store under its lock, run by the background loop
//! (`gc::run`) after every burst of writes and when a deadline a controller asked for comes.
//! They write through the same create, update and delete paths as clients (admission, defaults,
//! validation), as kube's controllers do through kube-apiserver, and compute what kube's do,
//! status fields and conditions included.

use std::sync::Arc;

use serde_json::{Value, json};

use super::admission::now;
use super::handlers::{Query, Target};
use super::json::str_at;
use super::status::ApiError;
use super::store::State;
use super::write;
use crate::registry::TypeMeta;
use crate::registry::core::EVENT;

pub(crate) mod accounts;
mod cronjobs;
mod daemonsets;
mod deployments;
mod endpoints;
mod jobs;
pub(crate) mod kubelet;
mod replicasets;
pub(crate) mod scheduler;
mod statefulsets;
mod volumes;

/// A workload controller's pass over the store: whether it wrote.
pub(crate) type Pass = fn(&mut State) -> bool;

/// The workload controllers by kube-controller-manager's names for them, in the order a pass
/// runs them: owners before what they own, so one pass carries a change down (a Deployment's
/// ReplicaSet gets its Pods in the same pass). The Job controller includes the
/// TTL-after-finished one; the EndpointSlice controller keeps the legacy Endpoints too.
pub const WORKLOAD_CONTROLLERS: [&str; 8] = [
    "persistentvolume-binder-controller",
    "cronjob-controller",
    "job-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "daemonset-controller",
    "endpointslice-controller",
];

/// The pass of workload controller `name` (one of [`WORKLOAD_CONTROLLERS`]).
pub(crate) fn pass_of(name: &str) -> Option<Pass> {
    Some(match name {
        "persistentvolume-binder-controller" => volumes::sync,
        "cronjob-controller" => cronjobs::sync,
        "job-controller" => jobs::sync,
        "deployment-controller" => deployments::sync,
        "replicaset-controller" => replicasets::sync,
        "statefulset-controller" => statefulsets::sync,
        "daemonset-controller" => daemonsets::sync,
        "endpointslice-controller" => endpoints::sync,
        _ => return None,
    })
}

/// The manager kube's controllers write as.
pub(crate) const MANAGER: &str = "kube-controller-manager";

/// A controller's target: resource `plural` of `group` (in its preferred version) in `ns`,
/// through subresource `sub`.
pub(crate) fn target(
    st: &State,
    group: &str,
    plural: &str,
    ns: &str,
    sub: Option<&str>,
) -> Option<Target> {
    let res = st
        .catalog()
        .by_key(&(group.to_string(), plural.to_string()))?;
    Some(Target {
        version: res.versions[0].clone(),
        res,
        namespace: (!ns.is_empty()).then(|| ns.to_string()),
        name: None,
        sub: sub.map(String::from),
    })
}

/// Every object of resource `plural` of `group` (in `ns`, or everywhere when `None`).
pub(crate) fn objects(st: &State, group: &str, plural: &str, ns: Option<&str>) -> Vec<Arc<Value>> {
    (st.table_of(&(group.to_string(), plural.to_string()))
        .into_iter())
    .flat_map(|t| t.objects.values())
    .filter(|o| ns.is_none_or(|ns| str_at(o, "/metadata/namespace") == ns))
    .cloned()
    .collect()
}

/// The uid of the object controlling `o`, if any.
pub(crate) fn controller_uid(o: &Value) -> Option<&str> {
    (o.pointer("/metadata/ownerReferences")?.as_array()?.iter())
        .find(|r| r["controller"] == true)
        .and_then(|r| r["uid"].as_str())
}

pub(crate) fn deleting(o: &Value) -> bool {
    o.pointer("/metadata/deletionTimestamp").is_some()
}

/// A Pod that counts towards replicas: neither finished nor being deleted.
pub(crate) fn active(pod: &Value) -> bool {
    let phase = str_at(pod, "/status/phase");
    !deleting(pod) && phase != "Succeeded" && phase != "Failed"
}

/// The condition of type `kind` in `o`'s status.
pub(crate) fn condition<'a>(o: &'a Value, kind: &str) -> Option<&'a Value> {
    (o.pointer("/status/conditions")?.as_array()?.iter()).find(|c| c["type"] == kind)
}

pub(crate) fn ready(pod: &Value) -> bool {
    condition(pod, "Ready").is_some_and(|c| c["status"] == "True")
}

/// Seconds since the RFC 3339 time `t` (negative in the future; `None` if unparsable).
pub(crate) fn seconds_since(t: &str) -> Option<f64> {
    let at = chrono::DateTime::parse_from_rfc3339(t).ok()?;
    Some((chrono::Utc::now() - at.to_utc()).num_milliseconds() as f64 / 1000.0)
}

/// Ready for at least `min_ready` seconds (kube's `IsPodAvailable`).
pub(crate) fn available(pod: &Value, min_ready: i64) -> bool {
    if min_ready <= 0 {
        return ready(pod);
    }
    (condition(pod, "Ready").filter(|c| c["status"] == "True"))
        .and_then(|c| c["lastTransitionTime"].as_str())
        .and_then(seconds_since)
        .is_some_and(|s| s >= min_ready as f64)
}

/// An owner reference making `kind` `name` the controller of an object.
pub(crate) fn controller_ref(owner: TypeMeta, name: &str, uid: &str) -> Value {
    json!({"apiVersion": owner.api_version, "kind": owner.kind, "name": name, "uid": uid,
        "controller": true, "blockOwnerDeletion": true})
}

/// Sets condition `new` (with `type`, `status`, `reason`, `message`) in `conditions` as kube's
/// controllers do: unchanged when status, reason and message are the same; otherwise the
/// transition time kept while the status is, and the condition moved to the end.
pub(crate) fn set_condition(conditions: &mut Vec<Value>, mut new: Value, update_time: bool) {
    let at = json!(now());
    let old = conditions.iter().position(|c| c["type"] == new["type"]);
    if let Some(i) = old {
        let c = &conditions[i];
        if c["status"] == new["status"]
            && c["reason"] == new["reason"]
            && c["message"] == new["message"]
        {
            return;
        }
        new["lastTransitionTime"] = if c["status"] == new["status"] {
            c["lastTransitionTime"].clone()
        } else {
            at.clone()
        };
        conditions.remove(i);
    } else {
        new["lastTransitionTime"] = at.clone();
    }
    if update_time {
        new["lastUpdateTime"] = at;
    }
    conditions.push(new);
}

/// Creates `obj` as a controller; logs a refusal naming `what`.
pub(crate) fn create(
    st: &mut State,
    t: &Target,
    obj: Value,
    what: &str,
) -> Result<Value, ApiError> {
    write::create_locked(st, t, &Query::new(), obj, Some(MANAGER)).inspect_err(|e| {
        tracing::warn!(namespace = t.ns(), error = %e.message, "creating {what}");
    })
}

/// Replaces `cur` with `new` as a controller (through `t`'s subresource, if any); logs a
/// refusal naming `what`. Whether it was written.
pub(crate) fn update(st: &mut State, t: &Target, cur: &Arc<Value>, new: Value, what: &str) -> bool {
    if **cur == new {
        return false;
    }
    match write::update_locked(st, t, &Query::new(), cur, new, write::Via::Put, MANAGER) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(namespace = t.ns(), name = %str_at(cur, "/metadata/name"),
                error = %e.message, "updating {what}");
            false
        }
    }
}

/// Writes `status` as `o`'s status through the status subresource of `group`/`plural`, if it
/// differs. Whether it was written.
pub(crate) fn write_status(
    st: &mut State,
    group: &str,
    plural: &str,
    o: &Arc<Value>,
    status: Value,
) -> bool {
    if o["status"] == status {
        return false;
    }
    let ns = str_at(o, "/metadata/namespace").to_string();
    let Some(t) = target(st, group, plural, &ns, Some("status")) else {
        return false;
    };
    let mut new = (**o).clone();
    new["status"] = status;
    update(st, &t, o, new, &format!("the status of {plural}"))
}

/// kube's `ComputeHash` (a Deployment's `pod-template-hash`, a DaemonSet's revision hash):
/// FNV-1a (32 bits) of the Pod template and, if any, the collision count (eight bytes, little
/// endian), its decimal digits spelt in kube's safe alphabet. kube hashes its Go value; this
/// hashes the template's JSON with sorted keys, so the hashes have kube's form, not its values.
pub(crate) fn template_hash(template: &Value, collisions: Option<i64>) -> String {
    fn feed(v: &Value, out: &mut Vec<u8>) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push(b'{');
                for k in keys {
                    out.extend(serde_json::to_string(k).unwrap_or_default().bytes());
                    out.push(b':');
                    feed(&m[k], out);
                    out.push(b',');
                }
                out.push(b'}');
            }
            Value::Array(a) => {
                out.push(b'[');
                for x in a {
                    feed(x, out);
                    out.push(b',');
                }
                out.push(b']');
            }
            other => out.extend(other.to_string().bytes()),
        }
    }
    let mut bytes = Vec::new();
    feed(template, &mut bytes);
    if let Some(c) = collisions {
        bytes.extend((c as u32).to_le_bytes());
        bytes.extend([0u8; 4]);
    }
    let mut hash: u32 = 0x811c_9dc5;
    for b in bytes {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    crate::names::safe_encode(hash)
}

/// What kube stores in a ControllerRevision of a StatefulSet's or DaemonSet's template
/// (`getPatch`): a strategic merge patch replacing the template, the template as Go marshals
/// it (`creationTimestamp: null`).
pub(crate) fn revision_patch(owner: &Value, kind: TypeMeta) -> Value {
    let mut full = owner.clone();
    full["apiVersion"] = json!(kind.api_version);
    full["kind"] = json!(kind.kind);
    crate::protobuf::complete(&mut full);
    let mut template = full["spec"]["template"].take();
    if !template.is_object() {
        template = json!({});
    }
    template["$patch"] = json!("replace");
    json!({"spec": {"template": template}})
}

/// Who records an Event: kube's component name and, for a kubelet, its Node.
pub(crate) struct Source<'a> {
    pub component: &'a str,
    pub host: Option<&'a str>,
}

/// Records an Event about `regarding` as client-go's recorder does for kube's controllers
/// (core/v1, named `<object>.<hex nanoseconds>`): a repeat of the same Event (same object,
/// type, reason, message and source) counts up the one already recorded instead. Callers record
/// on a change of state only, as kube's controllers do, so that a pass that writes nothing
/// records nothing.
pub(crate) fn record(
    st: &mut State,
    regarding: &Value,
    kind: &str,
    reason: &str,
    message: &str,
    source: &Source<'_>,
) {
    let ns = match str_at(regarding, "/metadata/namespace") {
        "" => "default",
        ns => ns,
    }
    .to_string();
    let Some(t) = target(st, "", "events", &ns, None) else {
        return;
    };
    let involved = json!({"apiVersion": regarding["apiVersion"], "kind": regarding["kind"],
        "namespace": regarding["metadata"]["namespace"], "name": regarding["metadata"]["name"],
        "uid": regarding["metadata"]["uid"],
        "resourceVersion": regarding["metadata"]["resourceVersion"]});
    let mut from = json!({"component": source.component});
    if let Some(host) = source.host {
        from["host"] = json!(host);
    }
    let at = now();
    let same = objects(st, "", "events", Some(&ns)).into_iter().find(|e| {
        e["involvedObject"]["uid"] == involved["uid"]
            && e["type"] == kind
            && e["reason"] == reason
            && e["message"] == message
            && e["source"] == from
    });
    if let Some(e) = same {
        let mut again = (*e).clone();
        again["count"] = json!(e["count"].as_i64().unwrap_or(1) + 1);
        again["lastTimestamp"] = json!(at);
        update(st, &t, &e, again, "an Event");
        return;
    }
    let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
    let name = format!("{}.{nanos:x}", str_at(regarding, "/metadata/name"));
    let event = json!({"apiVersion": EVENT.api_version, "kind": EVENT.kind,
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": involved, "type": kind, "reason": reason, "message": message,
        "source": from, "firstTimestamp": at, "lastTimestamp": at, "count": 1,
        "eventTime": null, "reportingComponent": source.component,
        "reportingInstance": source.host.unwrap_or("")});
    let _ = create(st, &t, event, "an Event");
}
