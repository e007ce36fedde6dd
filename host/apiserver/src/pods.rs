//! The Pod subresources clients create: `binding` (a scheduler's assignment, as the `bindings`
//! resource) and `eviction` (`kubectl drain`): a Pod is deleted unless the one
//! PodDisruptionBudget selecting it allows no disruption, as kube's `EvictionREST` decides.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Inner;
use super::handlers::{Query, Target};
use super::json::str_at;
use super::status::{ApiError, ApiResult};
use super::validate::selects;
use super::{delete, write};

/// `POST pods/{name}/binding`: the Binding names the Pod of the URL (or nothing).
pub fn bind(inner: &Inner, t: &Target, name: &str, mut binding: Value) -> ApiResult<Value> {
    let named = str_at(&binding, "/metadata/name").to_string();
    if named.is_empty() {
        binding["metadata"]["name"] = json!(name);
    } else if named != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    write::bind(inner, t.ns(), binding)
}

/// 429 TooManyRequests naming the budget, as kube refuses an eviction.
fn refused(why: String) -> ApiError {
    let mut e = ApiError::new(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
    )
    .with_causes(vec![json!({"reason": "DisruptionBudget", "message": why})]);
    e.retry_after = Some(10);
    e
}

/// `POST pods/{name}/eviction`: the Pod's PodDisruptionBudget (at most one) must allow a
/// disruption; it is then counted down and the Pod deleted with the Eviction's
/// `deleteOptions`. A Pod not running (pending or finished) is deleted whatever its budget.
pub fn evict(inner: &Inner, t: &Target, name: &str, eviction: &Value) -> ApiResult<Value> {
    let named = str_at(eviction, "/metadata/name");
    if !named.is_empty() && named != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let mut st = inner.store.lock();
    let pod = st
        .get(&t.key(), t.ns(), name)
        .ok_or_else(|| t.not_found(name))?;
    let running = !matches!(
        str_at(&pod, "/status/phase"),
        "Pending" | "Succeeded" | "Failed"
    );
    let budgets_key = ("policy".to_string(), "poddisruptionbudgets".to_string());
    let budgets: Vec<&Arc<Value>> = (st.table_of(&budgets_key).into_iter())
        .flat_map(|table| table.objects.values())
        .filter(|b| str_at(b, "/metadata/namespace") == t.ns())
        .filter(|b| selects(&b["spec"]["selector"], &pod["metadata"]["labels"]) == Some(true))
        .collect();
    let counted = match budgets.as_slice() {
        _ if !running => None,
        [] => None,
        [budget] => count_down(budget, &pod)?,
        _ => {
            return Err(ApiError::new(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    if let Some(counted) = counted {
        st.put(&budgets_key, counted)?;
        let rv = st.rv();
        drop(st);
        inner.store.notify(rv);
    } else {
        drop(st);
    }
    finish(inner, t, name, eviction)
}

/// Whether `budget` lets a running `pod` go: the budget with one disruption fewer to write
/// (as kube's eviction writes the budget's status), none when the Pod goes without counting,
/// or the 429 (or the budget's pending status) that refuses it.
fn count_down(budget: &Value, pod: &Value) -> ApiResult<Option<Value>> {
    let budget_name = str_at(budget, "/metadata/name");
    let generation = budget
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let observed = budget
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    if observed < generation {
        return Err(refused(format!(
            "The disruption budget {budget_name} is still being processed by the server."
        )));
    }
    let count = |field: &str| budget.pointer(field).and_then(Value::as_i64).unwrap_or(0);
    let healthy = count("/status/currentHealthy");
    let desired = count("/status/desiredHealthy");
    // An unready Pod counts for nothing healthy: evicted while the budget holds without it
    // (`unhealthyPodEvictionPolicy`, `IfHealthyBudget` by default).
    let conditions = pod.pointer("/status/conditions").and_then(Value::as_array);
    let ready =
        (conditions.into_iter().flatten()).any(|c| c["type"] == "Ready" && c["status"] == "True");
    let policy = budget
        .pointer("/spec/unhealthyPodEvictionPolicy")
        .and_then(Value::as_str);
    if !ready && (policy == Some("AlwaysAllow") || healthy >= desired) {
        return Ok(None);
    }
    let allowed = count("/status/disruptionsAllowed");
    if allowed <= 0 {
        return Err(refused(format!(
            "The disruption budget {budget_name} needs {desired} healthy pods and has {healthy} currently"
        )));
    }
    let mut counted = budget.clone();
    counted["status"]["disruptionsAllowed"] = json!(allowed - 1);
    Ok(Some(counted))
}

/// Deletes the evicted Pod with the Eviction's `deleteOptions`: kube's success Status.
fn finish(inner: &Inner, t: &Target, name: &str, eviction: &Value) -> ApiResult<Value> {
    let options = eviction.get("deleteOptions").cloned().unwrap_or(json!({}));
    let body = serde_json::to_vec(&options).unwrap_or_default();
    let pod_target = Target {
        sub: None,
        ..t.clone()
    };
    delete::delete_unadmitted(inner, &pod_target, &Query::default(), name, &body)?;
    Ok(
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}
