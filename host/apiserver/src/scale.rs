//! The `scale` subresource of the scalable kinds (Deployments, ReplicaSets, StatefulSets,
//! ReplicationControllers: `kubectl scale`): an `autoscaling/v1` Scale view of `spec.replicas`,
//! readable and writable with PUT or any non-apply patch.

use http::Method;
use serde_json::{Value, json};

use super::Inner;
use super::handlers::{Query, Target};
use super::patch::{self, PATCH_TYPES, PatchType};
use super::status::{ApiError, ApiResult};
use super::write::{Via, update_locked};

/// The label selector of a scalable object as a string: a `LabelSelector`'s `matchLabels`, or
/// a ReplicationController's plain map.
fn selector(obj: &Value) -> String {
    let selector = obj.pointer("/spec/selector");
    let labels = selector
        .and_then(|s| s.get("matchLabels"))
        .or_else(|| selector.filter(|s| s.get("matchExpressions").is_none()));
    let mut parts: Vec<String> = labels
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    parts.sort();
    parts.join(",")
}

/// The Scale view of a Deployment.
pub fn to_scale(obj: &Value) -> Value {
    let m = &obj["metadata"];
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
                     "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"]},
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {"replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
                   "selector": selector(obj)},
    })
}

/// GET, PUT or PATCH on `.../deployments/{name}/scale`.
#[allow(clippy::too_many_arguments)]
pub fn handle(
    inner: &Inner,
    t: &Target,
    q: &Query,
    name: &str,
    method: &Method,
    ct: &str,
    body: &[u8],
    ua: &str,
) -> ApiResult<Value> {
    let mut st = inner.store.lock();
    let cur = st
        .get(&t.key(), t.ns(), name)
        .ok_or_else(|| t.not_found(name))?;
    let scale = to_scale(&cur);
    let wanted = match *method {
        Method::GET => return Ok(scale),
        Method::PUT => serde_json::from_slice::<Value>(body)
            .map_err(|e| ApiError::bad_request(format!("couldn't decode Scale: {e}")))?,
        Method::PATCH => match PatchType::from_content_type(ct) {
            Some(PatchType::Json) => patch::json_patch(&scale, body)?,
            Some(PatchType::Merge) => patch::merge_patch(&scale, body)?,
            Some(PatchType::Strategic) => patch::strategic_patch(&scale, body)?,
            _ => return Err(ApiError::unsupported_media_type(ct, &PATCH_TYPES[..3])),
        },
        ref m => return Err(ApiError::method_not_allowed(m.as_str())),
    };
    let Some(replicas) = wanted
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .filter(|r| *r >= 0)
    else {
        return Err(ApiError::invalid(
            "Scale",
            "autoscaling",
            name,
            &[(
                "spec.replicas".into(),
                "Invalid value: must be a non-negative integer".into(),
            )],
        ));
    };
    let mut new = (*cur).clone();
    new["spec"]["replicas"] = json!(replicas);
    new["metadata"]["resourceVersion"] = match wanted.pointer("/metadata/resourceVersion") {
        Some(Value::String(rv)) if !rv.is_empty() => json!(rv),
        _ => cur["metadata"]["resourceVersion"].clone(),
    };
    let main = Target {
        sub: None,
        ..t.clone()
    };
    let out = update_locked(&mut st, &main, q, &cur, new, Via::Patch, ua)?;
    let rv = st.rv();
    drop(st);
    inner.store.notify(rv);
    Ok(to_scale(&out))
}
