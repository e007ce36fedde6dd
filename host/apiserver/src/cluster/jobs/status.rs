//! A Job's status as kube's controller writes it (`trackJobStatusAndRemoveFinalizers` and its
//! helpers): finished Pods recorded in `uncountedTerminatedPods`, their tracking finalizers
//! removed, then counted; the interim and final conditions; Go's `omitempty` for counts.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::indexes;
use super::pods::remove_finalizer;
use super::{Ctx, has_finalizer, phase, pod_failed, uid};
use crate::admission::now;
use crate::cluster::{deleting, write_status};
use crate::json::str_at;
use crate::store::State;

/// Most Pods recorded as uncounted at once (`MaxUncountedPods`).
const MAX_UNCOUNTED: usize = 500;

/// A condition as kube's Job controller writes one (`newCondition`).
pub(super) fn new_condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    let at = now();
    let mut c = json!({"type": kind, "status": status, "lastProbeTime": at,
        "lastTransitionTime": at});
    for (key, text) in [("reason", reason), ("message", message)] {
        if !text.is_empty() {
            c[key] = json!(text);
        }
    }
    c
}

/// Sets the condition of type `kind` (`ensureJobConditionStatus`): replaced in place, times
/// and all, when its status, reason or message differ; added only if not false. Whether the
/// list changed.
pub(super) fn ensure_condition(
    conditions: &mut Vec<Value>,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> bool {
    if let Some(c) = conditions.iter_mut().find(|c| c["type"] == kind) {
        if c["status"] == status && c["reason"] == reason && c["message"] == message {
            return false;
        }
        *c = new_condition(kind, status, reason, message);
        return true;
    }
    if status == "False" {
        return false;
    }
    conditions.push(new_condition(kind, status, reason, message));
    true
}

/// Counts finished Pods and writes the status (`trackJobStatusAndRemoveFinalizers`): records
/// the Pods that finished as uncounted (with the interim `FailureTarget` or
/// `SuccessCriteriaMet` condition), removes their finalizers, moves them to the counts, and
/// marks the Job `Complete` or `Failed` once nothing is uncounted or terminating.
pub(super) fn track(st: &mut State, ctx: &mut Ctx) {
    let job = ctx.job.clone();
    let mut with_finalizer: HashSet<String> = (ctx.pods.iter())
        .filter(|p| has_finalizer(p))
        .map(|p| uid(p).to_string())
        .collect();
    count_uncounted(&mut ctx.status, &with_finalizer);
    let (to_free, new_indexes, full) = finished_pods(ctx, &job);
    if ctx.indexed {
        ctx.indexes = ctx.indexes.with(&new_indexes);
        set_count(&mut ctx.status, "succeeded", ctx.indexes.total());
        let completed = ctx.indexes.to_string();
        if completed.is_empty() {
            remove(&mut ctx.status, "completedIndexes");
        } else {
            ctx.status["completedIndexes"] = json!(completed);
        }
    }
    let mut conditions = conditions_of(&ctx.status);
    let finished = interim_condition(ctx.finished.take(), &mut conditions);
    set_conditions(&mut ctx.status, conditions.clone());
    flush(st, ctx);
    for pod in &to_free {
        if remove_finalizer(st, ctx, pod) {
            with_finalizer.remove(uid(pod));
        }
    }
    count_uncounted(&mut ctx.status, &with_finalizer);
    if let Some(c) =
        finished.filter(|_| !full && uncounted_len(&ctx.status) == 0 && ctx.terminating == 0)
    {
        let kind = str_at(&c, "/type").to_string();
        ensure_condition(
            &mut conditions,
            &kind,
            "True",
            str_at(&c, "/reason"),
            str_at(&c, "/message"),
        );
        if kind == "Complete"
            && let Some(done) = conditions.iter().find(|x| x["type"] == "Complete")
        {
            ctx.status["completionTime"] = done["lastTransitionTime"].clone();
        }
        set_conditions(&mut ctx.status, conditions);
    }
    flush(st, ctx);
}

/// The Pods whose end is to be recorded (finished, or all of a finished or deleted Job's),
/// each counted as succeeded (its index, for an Indexed Job) or failed among the uncounted;
/// the new indexes; whether the uncounted lists filled up (the rest waits for the next pass).
fn finished_pods(ctx: &mut Ctx, job: &Value) -> (Vec<Arc<Value>>, Vec<usize>, bool) {
    let completions = ctx.completions.unwrap_or(0);
    let mut pods = ctx.pods.clone();
    if ctx.indexed {
        indexes::sort(&mut pods);
    }
    let failing = (ctx.finished.as_ref()).is_some_and(|c| c["type"] != "SuccessCriteriaMet");
    let mut to_free = Vec::new();
    let mut new_indexes = Vec::new();
    for pod in &pods {
        if !has_finalizer(pod) {
            continue;
        }
        let failed = pod_failed(pod, job);
        let succeeded = phase(pod) == "Succeeded";
        if !(deleting(job) || ctx.finished.is_some() || succeeded || failed) {
            continue;
        }
        to_free.push(pod.clone());
        let pod_uid = uid(pod).to_string();
        let index = indexes::of(pod).filter(|i| *i < completions);
        if succeeded && !ctx.uncounted_failed.contains(&pod_uid) {
            if ctx.indexed {
                if let Some(i) = index.filter(|i| !ctx.prev_indexes.has(*i)) {
                    new_indexes.push(i);
                }
            } else if !ctx.uncounted_succeeded.contains(&pod_uid) {
                record_uncounted(&mut ctx.status, "succeeded", pod_uid);
            }
        } else if (failed || failing)
            && !ctx.uncounted_failed.contains(&pod_uid)
            && (!ctx.indexed || index.is_some())
        {
            record_uncounted(&mut ctx.status, "failed", pod_uid);
        }
        if new_indexes.len() + uncounted_len(&ctx.status) >= MAX_UNCOUNTED {
            return (to_free, new_indexes, true);
        }
    }
    (to_free, new_indexes, false)
}

/// How a finishing Job says so before its Pods are all recorded: a `FailureTarget` or
/// `SuccessCriteriaMet` condition now (kept in `conditions`), the final `Failed` or
/// `Complete` condition once every Pod is (returned).
fn interim_condition(finished: Option<Value>, conditions: &mut Vec<Value>) -> Option<Value> {
    let c = finished?;
    let (reason, message) = (str_at(&c, "/reason"), str_at(&c, "/message"));
    if c["type"] == "FailureTarget" {
        conditions.push(c.clone());
        return Some(new_condition("Failed", "True", reason, message));
    }
    if c["type"] == "SuccessCriteriaMet" {
        let met = |x: &Value| x["type"] == "SuccessCriteriaMet" && x["status"] == "True";
        if !conditions.iter().any(met) {
            conditions.push(c.clone());
        }
        return Some(new_condition("Complete", "True", reason, message));
    }
    Some(c)
}

/// Writes the status computed so far, if it differs from the stored one.
fn flush(st: &mut State, ctx: &mut Ctx) {
    let key = ("batch".to_string(), "jobs".to_string());
    let Some(cur) = st
        .get(&key, &ctx.ns, &ctx.name)
        .filter(|j| uid(j) == uid(&ctx.job))
    else {
        return;
    };
    ctx.changed |= write_status(st, "batch", "jobs", &cur, ctx.status.clone());
}

/// Moves the uncounted Pods that no longer have the finalizer (or are gone) to the counts
/// (`cleanUncountedPodsWithoutFinalizers`).
fn count_uncounted(status: &mut Value, with_finalizer: &HashSet<String>) {
    for key in ["succeeded", "failed"] {
        let list = (status["uncountedTerminatedPods"][key].as_array())
            .cloned()
            .unwrap_or_default();
        let (kept, counted): (Vec<Value>, Vec<Value>) = list
            .into_iter()
            .partition(|u| u.as_str().is_some_and(|u| with_finalizer.contains(u)));
        if !counted.is_empty() {
            let total = count(status, key) + counted.len();
            set_count(status, key, total);
        }
        set_uncounted(status, key, kept);
    }
}

fn record_uncounted(status: &mut Value, key: &str, pod_uid: String) {
    let mut list = (status["uncountedTerminatedPods"][key].as_array())
        .cloned()
        .unwrap_or_default();
    list.push(json!(pod_uid));
    set_uncounted(status, key, list);
}

fn set_uncounted(status: &mut Value, key: &str, list: Vec<Value>) {
    let uncounted = &mut status["uncountedTerminatedPods"];
    if list.is_empty() {
        remove(uncounted, key);
    } else {
        uncounted[key] = json!(list);
    }
}

fn uncounted_len(status: &Value) -> usize {
    ["succeeded", "failed"]
        .iter()
        .map(|k| {
            status["uncountedTerminatedPods"][k]
                .as_array()
                .map_or(0, Vec::len)
        })
        .sum()
}

pub(super) fn count(status: &Value, key: &str) -> usize {
    status[key].as_i64().unwrap_or(0).max(0) as usize
}

/// Sets a count as Go writes an `omitempty` one: absent when zero.
pub(super) fn set_count(status: &mut Value, key: &str, n: usize) {
    if n == 0 {
        remove(status, key);
    } else {
        status[key] = json!(n);
    }
}

fn remove(o: &mut Value, key: &str) {
    if let Some(m) = o.as_object_mut() {
        m.remove(key);
    }
}

pub(super) fn conditions_of(status: &Value) -> Vec<Value> {
    status["conditions"].as_array().cloned().unwrap_or_default()
}

pub(super) fn set_conditions(status: &mut Value, conditions: Vec<Value>) {
    if conditions.is_empty() {
        remove(status, "conditions");
    } else {
        status["conditions"] = json!(conditions);
    }
}
