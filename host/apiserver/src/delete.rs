//! DELETE and the end of an object's life: immediate removal without finalizers, otherwise
//! `deletionTimestamp` (+ generation bump) and removal once the last finalizer is gone; CRD
//! removal cascades to its custom resources; the namespace controller's final step.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Inner;
use super::admission::dry_run;
use super::auth::User;
use super::handlers::{Query, Target};
use super::json::str_at;
use super::registry;
use super::status::{ApiError, ApiResult};
use super::store::State;
use super::webhooks::{Attributes, Operation};

/// Namespaces also wait for `spec.finalizers`.
pub(crate) fn has_spec_finalizers(o: &Value) -> bool {
    o.get("kind").and_then(Value::as_str) == Some("Namespace")
        && o.pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
}

/// Removes an object for good (after its last finalizer), with what its strategy removes with
/// it (a CRD its objects).
pub(crate) fn finalize_delete(st: &mut State, t: &Target, obj: &Value) -> ApiResult<Value> {
    let ns = str_at(obj, "/metadata/namespace").to_string();
    let name = str_at(obj, "/metadata/name").to_string();
    registry::of(&t.res).removing(st, obj)?;
    let last = st
        .remove(&t.key(), &ns, &name)?
        .map(|a| (*a).clone())
        .unwrap_or_else(|| obj.clone());
    Ok(last)
}

/// Finalizer of a deletion with `propagationPolicy: Foreground`.
pub const FOREGROUND: &str = "foregroundDeletion";
/// Finalizer of a deletion with `propagationPolicy: Orphan`.
pub const ORPHAN: &str = "orphan";

/// Removes one finalizer; the object goes away if it was the last one.
pub(crate) fn drop_finalizer(st: &mut State, t: &Target, obj: &Value, fin: &str) -> ApiResult<()> {
    let mut out = obj.clone();
    if let Some(a) = out["metadata"]["finalizers"].as_array_mut() {
        a.retain(|x| x != fin);
    }
    let empty = out["metadata"]["finalizers"]
        .as_array()
        .is_none_or(Vec::is_empty);
    let graceful = (out.pointer("/metadata/deletionGracePeriodSeconds"))
        .and_then(Value::as_i64)
        .is_some_and(|g| g > 0);
    if empty && !graceful && !has_spec_finalizers(&out) {
        finalize_delete(st, t, &out)?;
    } else {
        st.put(&t.key(), out)?;
    }
    Ok(())
}

/// DELETE by a client: immediate without finalizers, else marks the object as deleting;
/// the admission webhooks that apply see it first (with the stored object as `oldObject`).
pub async fn delete(
    inner: &Inner,
    t: &Target,
    q: &Query,
    name: &str,
    body: &[u8],
    user: &User,
) -> ApiResult<Value> {
    let opts = options(body)?;
    let dry = is_dry_run(q, &opts);
    let namespace = t.namespace.as_deref().filter(|_| t.res.namespaced);
    let attrs = Attributes::new(
        Operation::Delete,
        &t.res,
        &t.version,
        None,
        namespace.unwrap_or_default(),
        name,
        user,
        dry,
        "DeleteOptions",
        opts.clone(),
    );
    for _ in 0..ATTEMPTS {
        let (cur, matched) = {
            let mut st = inner.store.lock();
            let cur = st
                .get(&t.key(), t.ns(), name)
                .ok_or_else(|| t.not_found(name))?;
            inner.policies.admit(&st, &attrs, None, Some(&cur))?;
            let matched = inner.webhooks.matching(&st, &attrs, None)?;
            if matched.is_empty() {
                let out = delete_stored(&mut st, t, q, name, &opts, dry, cur)?;
                let rv = st.rv();
                drop(st);
                inner.store.notify(rv);
                return Ok(out);
            }
            (cur, matched)
        };
        let mut none = Value::Null;
        let old = Some(&*cur);
        inner
            .webhooks
            .mutate(&matched, &attrs, &mut none, old)
            .await?;
        inner.webhooks.validate(&matched, &attrs, None, old).await?;
        let mut st = inner.store.lock();
        let now = st.get(&t.key(), t.ns(), name);
        let rv = |o: &Value| str_at(o, "/metadata/resourceVersion").to_string();
        if now.is_none_or(|n| rv(&n) != rv(&cur)) {
            continue;
        }
        let out = delete_stored(&mut st, t, q, name, &opts, dry, cur)?;
        let rv = st.rv();
        drop(st);
        inner.store.notify(rv);
        return Ok(out);
    }
    Err(ApiError::conflict(
        &t.res.group,
        &t.res.plural,
        name,
        "the object has been modified; please apply your changes to the latest version and try again",
    ))
}

/// DELETE without admission (what an eviction does to the Pod it evicts, as kube's
/// `EvictionREST` deletes through the store).
pub fn delete_unadmitted(
    inner: &Inner,
    t: &Target,
    q: &Query,
    name: &str,
    body: &[u8],
) -> ApiResult<Value> {
    let opts = options(body)?;
    let dry = is_dry_run(q, &opts);
    let mut st = inner.store.lock();
    let cur = st
        .get(&t.key(), t.ns(), name)
        .ok_or_else(|| t.not_found(name))?;
    let out = delete_stored(&mut st, t, q, name, &opts, dry, cur)?;
    let rv = st.rv();
    drop(st);
    inner.store.notify(rv);
    Ok(out)
}

/// Deletes the stored `cur` as `opts` ask: preconditions, propagation, grace period.
fn delete_stored(
    st: &mut State,
    t: &Target,
    q: &Query,
    name: &str,
    opts: &Value,
    dry: bool,
    cur: Arc<Value>,
) -> ApiResult<Value> {
    check_preconditions(t, name, opts, &cur)?;
    let cur = match propagation_finalizer(opts, q)? {
        Some(f) if cur.pointer("/metadata/deletionTimestamp").is_none() => {
            Arc::new(with_finalizer(&cur, f))
        }
        _ => cur,
    };
    let grace = match opts.get("gracePeriodSeconds") {
        Some(g) => g.as_i64(),
        None => q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()),
    };
    delete_within(st, t, &cur, dry, grace)
}

/// How often a delete whose object changed while webhooks looked at it is tried again.
const ATTEMPTS: usize = 5;

/// Whether a DELETE is a dry run, by its query or its options.
fn is_dry_run(q: &Query, opts: &Value) -> bool {
    dry_run(q)
        || opts
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"))
}

/// A DELETE's body: `DeleteOptions`, or none.
fn options(body: &[u8]) -> ApiResult<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))
}

/// `preconditions.uid` and `preconditions.resourceVersion`: a 409 naming both values when the
/// object is not the one the client meant.
fn check_preconditions(t: &Target, name: &str, opts: &Value, cur: &Value) -> ApiResult<()> {
    for (field, path, label) in [
        ("uid", "/metadata/uid", "UID"),
        (
            "resourceVersion",
            "/metadata/resourceVersion",
            "ResourceVersion",
        ),
    ] {
        let Some(want) = opts["preconditions"][field].as_str() else {
            continue;
        };
        let have = str_at(cur, path);
        if want != have {
            return Err(ApiError::conflict(
                &t.res.group,
                &t.res.plural,
                name,
                &format!(
                    "Precondition failed: {label} in precondition: {want}, {label} in object meta: {have}"
                ),
            ));
        }
    }
    Ok(())
}

/// The finalizer a `propagationPolicy` asks for: Foreground and Orphan propagation are
/// finalizers the garbage collector acts on; Background (the default) is none.
fn propagation_finalizer(opts: &Value, q: &Query) -> ApiResult<Option<&'static str>> {
    let policy = opts
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .or(q.get("propagationPolicy").map(String::as_str));
    match policy {
        Some("Foreground") => Ok(Some(FOREGROUND)),
        Some("Orphan") => Ok(Some(ORPHAN)),
        None | Some("Background") => Ok(None),
        Some(other) => Err(ApiError::invalid(
            "DeleteOptions",
            "meta.k8s.io",
            "",
            &[(
                "propagationPolicy".into(),
                format!("Unsupported value: \"{other}\""),
            )],
        )),
    }
}

/// `obj` with `fin` among its finalizers (added last, once).
fn with_finalizer(obj: &Value, fin: &str) -> Value {
    let mut out = obj.clone();
    let mut fins = out["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !fins.iter().any(|x| x == fin) {
        fins.push(json!(fin));
    }
    out["metadata"]["finalizers"] = Value::Array(fins);
    out
}

/// Deletes (or starts deleting) `cur` under the lock; shared with the background controllers.
pub fn delete_locked(st: &mut State, t: &Target, cur: &Arc<Value>, dry: bool) -> ApiResult<Value> {
    delete_within(st, t, cur, dry, None)
}

/// The grace period a Pod's deletion gets, as kube's Pod strategy decides it
/// (`CheckGracefulDelete`): the request's, else the Pod's `terminationGracePeriodSeconds`;
/// none for a Pod no node runs or one that has finished. Only where a kubelet finishes
/// deletions (`State::kubelet`); other objects have none.
fn grace_period(st: &State, t: &Target, cur: &Value, asked: Option<i64>) -> i64 {
    if !st.cluster.kubelet || !t.res.group.is_empty() || t.res.plural != "pods" {
        return 0;
    }
    let finished = matches!(str_at(cur, "/status/phase"), "Succeeded" | "Failed");
    if str_at(cur, "/spec/nodeName").is_empty() || finished {
        return 0;
    }
    let period = asked.unwrap_or_else(|| {
        (cur.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64))
        .unwrap_or(30)
    });
    // kube turns a negative period into the shortest graceful one.
    if period < 0 { 1 } else { period }
}

/// Deletes (or starts deleting) `cur` under the lock with grace period `grace` (the request's
/// `gracePeriodSeconds`). A Pod deleted gracefully stays, its `deletionTimestamp` the end of
/// its grace period, until the kubelet deletes it again with none; a second deletion may only
/// shorten the period.
pub fn delete_within(
    st: &mut State,
    t: &Target,
    cur: &Arc<Value>,
    dry: bool,
    grace: Option<i64>,
) -> ApiResult<Value> {
    let has_fins = cur
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
        || has_spec_finalizers(cur);
    let period = grace_period(st, t, cur, grace);
    if cur.pointer("/metadata/deletionTimestamp").is_some() {
        let current = (cur.pointer("/metadata/deletionGracePeriodSeconds"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if grace.is_none() || period >= current {
            return Ok((**cur).clone());
        }
        if period == 0 && !has_fins {
            return if dry {
                Ok((**cur).clone())
            } else {
                finalize_delete(st, t, cur)
            };
        }
        let mut out = (**cur).clone();
        out["metadata"]["deletionTimestamp"] = json!(after_seconds(period));
        out["metadata"]["deletionGracePeriodSeconds"] = json!(period);
        return if dry {
            Ok(out)
        } else {
            Ok((*st.put(&t.key(), out)?).clone())
        };
    }
    if !has_fins && period == 0 {
        if dry {
            return Ok((**cur).clone());
        }
        return finalize_delete(st, t, cur);
    }
    let mut out = (**cur).clone();
    out["metadata"]["deletionTimestamp"] = json!(after_seconds(period));
    out["metadata"]["deletionGracePeriodSeconds"] = json!(period);
    // kube bumps a generation the object has; it gives none to kinds without one.
    if let Some(g) = cur.pointer("/metadata/generation").and_then(Value::as_i64) {
        out["metadata"]["generation"] = json!(g + 1);
    }
    if t.res.plural == "namespaces" {
        out["status"]["phase"] = json!("Terminating");
    }
    if dry {
        return Ok(out);
    }
    Ok((*st.put(&t.key(), out)?).clone())
}

/// The time `seconds` from now, as metadata times are written.
fn after_seconds(seconds: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(seconds))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Finishes deleting a namespace once it is empty (the namespace controller's last step).
pub fn finish_namespace(st: &mut State, ns_target: &Target, ns: &Arc<Value>) -> ApiResult<()> {
    let mut out = (**ns).clone();
    out["spec"]["finalizers"] = json!([]);
    let fins_left = out
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if fins_left {
        st.put(&ns_target.key(), out)?;
    } else {
        finalize_delete(st, ns_target, &out)?;
    }
    Ok(())
}
