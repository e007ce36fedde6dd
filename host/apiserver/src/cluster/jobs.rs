//! kube-controller-manager's Job controller (`pkg/controller/job`, 1.32 with its default
//! feature gates), for dev mode, and the TTL-after-finished controller ([`ttl`]).
//!
//! A Job runs Pods of its template (`<job>-<suffix>`; for an Indexed Job `<job>-<i>-<suffix>`
//! with hostname `<job>-<i>` and its completion index as annotation, label and
//! `JOB_COMPLETION_INDEX`), `parallelism` at a time, until `completions` have succeeded (without
//! completions: until one has and none runs). A failed Pod is replaced after kube's backoff
//! (10 s doubling per failure since the last success, at most 10 min, from the last failure)
//! until more than `backoffLimit` have failed; past that, or past `activeDeadlineSeconds`, the
//! Job fails and its running Pods are deleted. A suspended Job runs none.
//!
//! Pods are counted as kube counts them, through the `batch.kubernetes.io/job-tracking`
//! finalizer each is created with: a finished Pod is recorded in
//! `status.uncountedTerminatedPods`, its finalizer removed, then it moves to `succeeded` or
//! `failed`, so each counts once whatever happens to it next; a Pod whose Job is gone or
//! finished loses the finalizer. The status is written as kube writes it (zero counts omitted,
//! `ready` and `terminating` always, `uncountedTerminatedPods: {}`), with kube's conditions in
//! its order: `SuccessCriteriaMet` then `Complete` (`CompletionsReached`), `FailureTarget` then
//! `Failed` once no Pod is terminating, `Suspended` (`JobSuspended`, `JobResumed`).
//!
//! Not done: `podFailurePolicy`, `successPolicy` and `backoffLimitPerIndex` (a Job runs as if
//! they were unset), Events.

mod backoff;
mod indexes;
mod pods;
mod status;
mod ttl;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use self::backoff::Backoff;
use self::indexes::Intervals;
use self::status::{
    conditions_of, count, ensure_condition, new_condition, set_conditions, set_count,
};
use super::{active, condition, create, deleting, objects, ready, seconds_since, target};
use crate::admission::now;
use crate::handlers::Target;
use crate::json::str_at;
use crate::store::State;

/// The finalizer a Job's Pods carry until they are counted.
const FINALIZER: &str = "batch.kubernetes.io/job-tracking";

/// The `spec.managedBy` of Jobs this controller runs (an unset one too).
const MANAGED_BY: &str = "kubernetes.io/job-controller";

/// Most Pods one sync creates or deletes (`MaxPodCreateDeletePerSync`).
const MAX_PER_SYNC: usize = 500;

/// Syncs every Job, frees the Pods of finished and deleted Jobs, and deletes the Jobs whose
/// time to live is over; whether anything was written.
pub(crate) fn sync(st: &mut State) -> bool {
    let mut changed = false;
    for job in objects(st, "batch", "jobs", None) {
        changed |= sync_job(st, &job);
    }
    changed |= pods::free_orphans(st);
    changed | ttl::sync(st)
}

/// The true `Complete` or `Failed` condition of a finished Job.
fn finished_condition(job: &Value) -> Option<&Value> {
    (job.pointer("/status/conditions")?.as_array()?.iter())
        .find(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
}

/// When a finished Job finished.
fn finished_at(job: &Value) -> Option<&str> {
    finished_condition(job)?["lastTransitionTime"].as_str()
}

/// Run by another controller (`spec.managedBy`), which kube's leaves alone.
fn managed_elsewhere(job: &Value) -> bool {
    job.pointer("/spec/managedBy")
        .and_then(Value::as_str)
        .is_some_and(|m| m != MANAGED_BY)
}

fn has_finalizer(pod: &Value) -> bool {
    (pod.pointer("/metadata/finalizers")
        .and_then(Value::as_array))
    .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

fn uid(o: &Value) -> &str {
    str_at(o, "/metadata/uid")
}

fn phase(pod: &Value) -> &str {
    str_at(pod, "/status/phase")
}

/// Replacements wait for Pods to fail, not merely to be terminating (`onlyReplaceFailedPods`).
fn only_replace_failed(job: &Value) -> bool {
    job.pointer("/spec/podReplacementPolicy") == Some(&json!("Failed"))
        || job
            .pointer("/spec/podFailurePolicy")
            .is_some_and(|p| !p.is_null())
}

/// A Pod that counts as failed (`isPodFailed`): failed, or deleted before succeeding, which
/// is how an orphaned Pod that never reaches `Failed` is counted.
fn pod_failed(pod: &Value, job: &Value) -> bool {
    if phase(pod) == "Failed" {
        return true;
    }
    !only_replace_failed(job) && deleting(pod) && phase(pod) != "Succeeded"
}

/// What one sync of a Job works with (kube's `syncJobCtx`).
struct Ctx {
    job: Arc<Value>,
    ns: String,
    name: String,
    pods_t: Target,
    indexed: bool,
    /// `spec.completions` (none: a work queue).
    completions: Option<usize>,
    /// The Job's Pods.
    pods: Vec<Arc<Value>>,
    /// The status being computed.
    status: Value,
    /// `status.uncountedTerminatedPods` as the sync found it.
    uncounted_succeeded: HashSet<String>,
    uncounted_failed: HashSet<String>,
    /// The condition the Job is finishing with.
    finished: Option<Value>,
    ready: usize,
    terminating: usize,
    succeeded: usize,
    /// For an Indexed Job: the succeeded indexes in the status, and with the new ones.
    prev_indexes: Intervals,
    indexes: Intervals,
    changed: bool,
}

impl Ctx {
    /// A sync's start for `job`, if it is one kube's controller would sync.
    fn new(st: &State, job: &Arc<Value>) -> Option<Self> {
        let mode = str_at(job, "/spec/completionMode");
        if !matches!(mode, "" | "NonIndexed" | "Indexed") {
            return None;
        }
        let ns = str_at(job, "/metadata/namespace").to_string();
        let pods_t = target(st, "", "pods", &ns, None)?;
        let mut status = match job.get("status") {
            Some(Value::Object(s)) => Value::Object(s.clone()),
            _ => json!({}),
        };
        if !status["uncountedTerminatedPods"].is_object() {
            status["uncountedTerminatedPods"] = json!({});
        }
        let uncounted = |key: &str| -> HashSet<String> {
            (status["uncountedTerminatedPods"][key]
                .as_array()
                .into_iter()
                .flatten())
            .filter_map(|u| u.as_str().map(String::from))
            .collect()
        };
        Some(Self {
            job: job.clone(),
            name: str_at(job, "/metadata/name").to_string(),
            ns,
            pods_t,
            indexed: mode == "Indexed",
            completions: (job.pointer("/spec/completions").and_then(Value::as_i64))
                .map(|c| c.max(0) as usize),
            pods: Vec::new(),
            uncounted_succeeded: uncounted("succeeded"),
            uncounted_failed: uncounted("failed"),
            status,
            finished: None,
            ready: 0,
            terminating: 0,
            succeeded: 0,
            prev_indexes: Intervals::default(),
            indexes: Intervals::default(),
            changed: false,
        })
    }
}

/// A Pod being deleted that has not finished (`IsPodTerminating`).
fn terminating(pod: &Value) -> bool {
    deleting(pod) && !matches!(phase(pod), "Succeeded" | "Failed")
}

/// One Job's sync (kube's `syncJob`).
fn sync_job(st: &mut State, job: &Arc<Value>) -> bool {
    if finished_condition(job).is_some() || deleting(job) {
        backoff::records().remove(uid(job));
    }
    if finished_condition(job).is_some() || managed_elsewhere(job) {
        return false;
    }
    let Some(mut ctx) = Ctx::new(st, job) else {
        return false;
    };
    let spec = &job["spec"];
    if !pods::claim(st, &mut ctx) {
        return ctx.changed;
    }
    let suspended = spec["suspend"] == true;
    let active_pods: Vec<Arc<Value>> = ctx.pods.iter().filter(|p| active(p)).cloned().collect();
    ctx.ready = active_pods.iter().filter(|p| ready(p)).count();
    ctx.terminating = ctx.pods.iter().filter(|p| terminating(p)).count();
    let mut active_count = active_pods.len();

    // Pods finished since the last sync: they still have the finalizer and are not recorded.
    let countable = |p: &Value, recorded: &HashSet<String>| {
        has_finalizer(p)
            && !recorded.contains(uid(p))
            && (!ctx.indexed || indexes::of(p).is_some_and(|i| i < ctx.completions.unwrap_or(0)))
    };
    let new_succeeded: Vec<&Arc<Value>> = (ctx.pods.iter())
        .filter(|p| countable(p, &ctx.uncounted_succeeded) && phase(p) == "Succeeded")
        .collect();
    let new_failed: Vec<&Arc<Value>> = (ctx.pods.iter())
        .filter(|p| countable(p, &ctx.uncounted_failed) && pod_failed(p, job))
        .collect();
    let backoff = if deleting(job) {
        Backoff::default()
    } else {
        backoff::record(uid(job), &new_succeeded, &new_failed)
    };
    let (new_succeeded, new_failed) = (new_succeeded.len(), new_failed.len());
    ctx.succeeded = count(&ctx.status, "succeeded") + new_succeeded + ctx.uncounted_succeeded.len();
    let failed = count(&ctx.status, "failed") + new_failed + ctx.uncounted_failed.len();
    if ctx.status["startTime"].is_null() && !suspended {
        ctx.status["startTime"] = json!(now());
    }

    ctx.finished = finished(st, &ctx, job, failed);
    if ctx.indexed {
        count_indexes(&mut ctx, job);
    }
    let mut conditions = conditions_of(&ctx.status);
    if ctx.finished.is_some() {
        // The Job is done: its running Pods go, keeping their finalizers so they are counted.
        let (deleted, deleted_ready) = pods::delete(st, &mut ctx, &active_pods, false);
        if deleted != active_pods.len() {
            ctx.finished = None;
        }
        active_count -= deleted;
        ctx.terminating += deleted;
        ctx.ready -= deleted_ready;
    } else {
        let managed = !deleting(job);
        if managed {
            active_count = manage(st, &mut ctx, &active_pods, backoff);
        }
        carry_on(&mut ctx, &mut conditions, active_count, managed, suspended);
    }
    set_count(&mut ctx.status, "active", active_count);
    ctx.status["ready"] = json!(ctx.ready);
    ctx.status["terminating"] = json!(ctx.terminating);
    set_conditions(&mut ctx.status, conditions);
    status::track(st, &mut ctx);
    ctx.changed
}

/// How the Job has finished, if it has: its criteria met, a failure target set, or (with
/// `failed` Pods) a failure now.
fn finished(st: &mut State, ctx: &Ctx, job: &Value, failed: usize) -> Option<Value> {
    if let Some(met) = condition(job, "SuccessCriteriaMet").filter(|c| c["status"] == "True") {
        return Some(met.clone());
    }
    if let Some(target) = condition(job, "FailureTarget").filter(|c| c["status"] == "True") {
        let (reason, message) = (str_at(target, "/reason"), str_at(target, "/message"));
        return Some(new_condition("Failed", "True", reason, message));
    }
    failure(st, ctx, failed)
}

/// An Indexed Job's completed indexes (those recorded, and those of Pods succeeded since),
/// which are its successes.
fn count_indexes(ctx: &mut Ctx, job: &Value) {
    let completions = ctx.completions.unwrap_or(0);
    ctx.prev_indexes = Intervals::parse(str_at(job, "/status/completedIndexes"), completions);
    let done = (ctx.pods.iter()).filter(|p| {
        phase(p) == "Succeeded"
            && has_finalizer(p)
            && indexes::of(p).is_some_and(|i| i < completions)
    });
    ctx.indexes = ctx.prev_indexes.with(&indexes::indexes(done));
    ctx.succeeded = ctx.indexes.total();
}

/// A Job not finished: complete once no Pod is active and enough have succeeded; otherwise
/// (when this controller manages it) its `Suspended` condition follows `spec.suspend`, a
/// resumed Job's deadline counting from its resumption.
fn carry_on(
    ctx: &mut Ctx,
    conditions: &mut Vec<Value>,
    active_count: usize,
    managed: bool,
    suspended: bool,
) {
    let complete = active_count == 0
        && match ctx.completions {
            None => ctx.succeeded > 0,
            Some(c) => ctx.succeeded >= c,
        };
    if complete {
        ctx.finished = Some(new_condition(
            "SuccessCriteriaMet",
            "True",
            "CompletionsReached",
            "Reached expected number of succeeded pods",
        ));
    } else if managed && suspended {
        ensure_condition(
            conditions,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
        );
    } else if managed
        && ensure_condition(
            conditions,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
        )
    {
        ctx.status["startTime"] = json!(now());
    }
}

/// The `FailureTarget` condition of a Job that has just failed: more failed Pods than its
/// `backoffLimit` (or, restarted in place, as many restarts), or past its
/// `activeDeadlineSeconds`, whose end it otherwise asks to be woken at.
fn failure(st: &mut State, ctx: &Ctx, failed: usize) -> Option<Value> {
    let spec = &ctx.job["spec"];
    let limit = spec["backoffLimit"].as_i64().unwrap_or(6).max(0) as usize;
    if failed > limit || backoff::past_limit_on_failure(&ctx.job, &ctx.pods) {
        return Some(new_condition(
            "FailureTarget",
            "True",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        ));
    }
    let deadline = spec["activeDeadlineSeconds"]
        .as_i64()
        .filter(|_| spec["suspend"] != true)?;
    let since = ctx.status["startTime"].as_str().and_then(seconds_since)?;
    let left = deadline as f64 - since;
    if left <= 0.0 {
        return Some(new_condition(
            "FailureTarget",
            "True",
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
        ));
    }
    st.wake_within(Duration::from_secs_f64(left));
    None
}

/// Creates or deletes Pods to run what the Job wants now (`manageJob`); the number active.
fn manage(st: &mut State, ctx: &mut Ctx, active_pods: &[Arc<Value>], backoff: Backoff) -> usize {
    let job = ctx.job.clone();
    let spec = &job["spec"];
    let mut active_count = active_pods.len();
    if spec["suspend"] == true {
        let doomed = pods::for_removal(ctx, active_pods, active_count);
        let (removed, removed_ready) = pods::delete(st, ctx, &doomed, true);
        ctx.terminating += removed;
        ctx.ready -= removed_ready;
        return active_count - removed;
    }
    let parallelism = spec["parallelism"].as_i64().unwrap_or(1).max(0) as usize;
    let wanted = match ctx.completions {
        None if ctx.succeeded > 0 => active_count,
        None => parallelism,
        Some(c) => c.saturating_sub(ctx.succeeded).min(parallelism),
    };
    let mut doomed = pods::for_removal(ctx, active_pods, active_count.saturating_sub(wanted));
    doomed.truncate(MAX_PER_SYNC);
    if !doomed.is_empty() {
        let (removed, removed_ready) = pods::delete(st, ctx, &doomed, true);
        ctx.terminating += removed;
        ctx.ready -= removed_ready;
        return active_count - removed;
    }
    // Pods still terminating take their replacements' places under the `Failed` policy.
    let stopping = if only_replace_failed(&job) {
        ctx.terminating
    } else {
        0
    };
    let missing = wanted.saturating_sub(stopping + active_count);
    if missing == 0 {
        return active_count;
    }
    if let Some(left) = backoff::left(backoff) {
        st.wake_within(left.max(Duration::from_secs(1)));
        return active_count;
    }
    let missing = missing.min(MAX_PER_SYNC);
    let new_indexes: Vec<Option<usize>> = if ctx.indexed {
        let mut taken = ctx.indexes.with(&indexes::indexes(active_pods));
        if only_replace_failed(&job) {
            let stopping = ctx.pods.iter().filter(|p| terminating(p));
            taken = taken.with(&indexes::indexes(stopping));
        }
        let pending = taken.first_missing(missing, ctx.completions.unwrap_or(0));
        pending.into_iter().map(Some).collect()
    } else {
        vec![None; missing]
    };
    for index in new_indexes {
        // As kube's slow start: after a refusal, the rest would be refused too.
        if create(st, &ctx.pods_t, pods::new_pod(ctx, index), "a Job's Pod").is_err() {
            break;
        }
        ctx.changed = true;
        active_count += 1;
    }
    active_count
}
