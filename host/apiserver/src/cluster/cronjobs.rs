//! kube-controller-manager's CronJob controller (`cronjob_controllerv2.go`, 1.32), for dev
//! mode. At each time its schedule gives (read in its `timeZone`, UTC without one), a CronJob
//! creates a Job of its `jobTemplate` named `<cronjob>-<scheduled time in minutes since the
//! epoch>`, controlled by it and annotated `batch.kubernetes.io/cronjob-scheduled-timestamp`.
//! As kube's, it counts from `status.lastScheduleTime` (else its creation): of several missed
//! times only the most recent starts, none older than `startingDeadlineSeconds`; `suspend`
//! stops it; `concurrencyPolicy` `Forbid` skips a time while a Job runs, `Replace` deletes the
//! running ones first. Its status lists its running Jobs (`active`, object references),
//! `lastScheduleTime` and `lastSuccessfulTime`; the oldest finished Jobs past
//! `successfulJobsHistoryLimit` and `failedJobsHistoryLimit` are deleted (background
//! propagation, as kube deletes them). Events are not written.
//!
//! Its clock is the system's plus the server's offset (`State::cronjob_clock`, moved by
//! `ApiServer::advance_cronjob_clock` and `POST /_admin/advance-cronjob-clock`), so that a test
//! or a developer can bring the next schedule forward without waiting for it: the next pass
//! sees the times up to the new "now" as passed and starts what they missed as kube would (the
//! most recent one). Job and Pod timestamps keep the system's clock.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde_json::{Value, json};

use super::{controller_ref, create, deleting, objects, target, write_status};
use crate::cron::{self, Schedule};
use crate::delete;
use crate::handlers::Target;
use crate::json::str_at;
use crate::registry::batch::{CRON_JOB, JOB};
use crate::store::State;

/// The annotation giving the time a CronJob's Job was scheduled for.
const SCHEDULED_AT: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// What kube adds to the wait for the next time, against clock skew (`nextScheduleDelta`).
const NEXT_DELTA: TimeDelta = TimeDelta::milliseconds(100);

/// Syncs every CronJob; whether anything was written.
pub(crate) fn sync(st: &mut State) -> bool {
    let now = Utc::now() + st.cluster.cronjob_clock;
    let mut changed = false;
    for cj in objects(st, "batch", "cronjobs", None) {
        changed |= sync_one(st, &cj, now);
    }
    changed
}

fn time(o: &Value, ptr: &str) -> Option<DateTime<Utc>> {
    let t = o.pointer(ptr)?.as_str()?;
    DateTime::parse_from_rfc3339(t).ok().map(|t| t.to_utc())
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The type of a finished Job's true `Complete` or `Failed` condition (`getFinishedStatus`).
fn finished(job: &Value) -> Option<&str> {
    (job.pointer("/status/conditions")?.as_array()?.iter())
        .find(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
        .and_then(|c| c["type"].as_str())
}

fn succeeded(job: &Value) -> bool {
    (job.pointer("/status/conditions").and_then(Value::as_array)).is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Complete" && c["status"] == "True")
    })
}

/// One CronJob's sync (kube's `sync`: `cleanupFinishedJobs`, then `syncCronJob`, then one
/// status update).
fn sync_one(st: &mut State, cj: &Arc<Value>, now: DateTime<Utc>) -> bool {
    let ns = str_at(cj, "/metadata/namespace").to_string();
    let name = str_at(cj, "/metadata/name");
    let Some(jobs_t) = target(st, "batch", "jobs", &ns, None) else {
        return false;
    };
    // Its Jobs are those whose controller reference names it, as kube finds them.
    let jobs: Vec<Arc<Value>> = objects(st, "batch", "jobs", Some(&ns))
        .into_iter()
        .filter(|j| {
            (j.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array))
            .and_then(|refs| refs.iter().find(|r| r["controller"] == true))
            .is_some_and(|r| r["kind"] == CRON_JOB.kind && r["name"] == name)
        })
        .collect();
    let mut status = match cj.get("status") {
        Some(Value::Object(s)) => Value::Object(s.clone()),
        _ => json!({}),
    };
    let mut changed = clean_up(st, &jobs_t, cj, &jobs, &mut status);
    if let Some(wait) = schedule(st, &jobs_t, cj, &jobs, &mut status, now, &mut changed) {
        st.wake_within(wait);
    }
    if status["active"].as_array().is_some_and(Vec::is_empty)
        && let Some(s) = status.as_object_mut()
    {
        s.remove("active");
    }
    // A CronJob never synced reads back with an empty status: nothing to write.
    if cj.get("status").is_none_or(Value::is_null) && status == json!({}) {
        return changed;
    }
    changed | write_status(st, "batch", "cronjobs", cj, status)
}

/// Deletes the oldest finished Jobs past the history limits (`cleanupFinishedJobs`).
fn clean_up(
    st: &mut State,
    jobs_t: &Target,
    cj: &Value,
    jobs: &[Arc<Value>],
    status: &mut Value,
) -> bool {
    let mut changed = false;
    for (kind, limit) in [
        ("Complete", "successfulJobsHistoryLimit"),
        ("Failed", "failedJobsHistoryLimit"),
    ] {
        let Some(limit) = cj["spec"][limit].as_i64() else {
            continue;
        };
        let mut done: Vec<&Arc<Value>> =
            jobs.iter().filter(|j| finished(j) == Some(kind)).collect();
        let excess = done.len().saturating_sub(limit.max(0) as usize);
        // Oldest first by start time, those never started last, then by name (`byJobStartTime`).
        done.sort_by_key(|j| {
            let start = time(j, "/status/startTime");
            (
                start.is_none(),
                start,
                str_at(j, "/metadata/name").to_string(),
            )
        });
        for job in &done[..excess] {
            changed |= delete_job(st, jobs_t, job, status);
        }
    }
    changed
}

/// Deletes a Job (background propagation) and drops it from `status.active` (`deleteJob`).
fn delete_job(st: &mut State, jobs_t: &Target, job: &Arc<Value>, status: &mut Value) -> bool {
    if let Err(e) = delete::delete_locked(st, jobs_t, job, false) {
        tracing::warn!(job = %str_at(job, "/metadata/name"), error = %e.message,
            "deleting a CronJob's Job");
        return false;
    }
    drop_active(status, str_at(job, "/metadata/uid"));
    true
}

fn drop_active(status: &mut Value, uid: &str) {
    if let Some(active) = status["active"].as_array_mut() {
        active.retain(|r| r["uid"] != uid);
    }
}

fn in_active(status: &Value, uid: &str) -> bool {
    (status["active"].as_array()).is_some_and(|a| a.iter().any(|r| r["uid"] == uid))
}

/// The object reference to a Job that `status.active` lists (`getRef`).
fn reference(job: &Value) -> Value {
    let meta = &job["metadata"];
    json!({"apiVersion": JOB.api_version, "kind": JOB.kind, "name": meta["name"],
        "namespace": meta["namespace"], "resourceVersion": meta["resourceVersion"],
        "uid": meta["uid"]})
}

/// Reconciles `status` with the CronJob's Jobs and starts the Job of a time that has come
/// (`syncCronJob`); how long until it should run again, if it should.
fn schedule(
    st: &mut State,
    jobs_t: &Target,
    cj: &Value,
    jobs: &[Arc<Value>],
    status: &mut Value,
    now: DateTime<Utc>,
    changed: &mut bool,
) -> Option<Duration> {
    track_jobs(st, jobs, status);
    let spec = &cj["spec"];
    if deleting(cj) {
        return None;
    }
    let zone = match spec["timeZone"].as_str() {
        Some(z) => cron::location(z)?,
        None => chrono_tz::Tz::UTC,
    };
    if spec["suspend"] == true {
        return None;
    }
    let sched = cron::parse(&schedule_spec(spec)).ok()?;
    let scheduled = next_schedule_time(cj, status, now, &sched).ok()?;
    let Some(scheduled) = scheduled else {
        return next_wait(cj, status, now, &sched);
    };
    let deadline = spec["startingDeadlineSeconds"].as_i64();
    if deadline.is_some_and(|d| scheduled + TimeDelta::seconds(d) < now) {
        return next_wait(cj, status, now, &sched);
    }
    let ns = str_at(cj, "/metadata/namespace");
    let cj_name = str_at(cj, "/metadata/name");
    let job_name = format!("{cj_name}-{}", scheduled.timestamp() / 60);
    let started = (status["active"].as_array().into_iter().flatten())
        .any(|r| r["name"] == job_name.as_str() && r["namespace"] == ns);
    if started || time(status, "/lastScheduleTime") == Some(scheduled) {
        return next_wait(cj, status, now, &sched);
    }
    let running = status["active"].as_array().is_some_and(|a| !a.is_empty());
    let jobs_key = ("batch".to_string(), "jobs".to_string());
    match spec["concurrencyPolicy"].as_str() {
        Some("Forbid") if running => return next_wait(cj, status, now, &sched),
        Some("Replace") => {
            let refs = status["active"].as_array().cloned().unwrap_or_default();
            for r in refs {
                let Some(job) = st.get(&jobs_key, str_at(&r, "/namespace"), str_at(&r, "/name"))
                else {
                    continue;
                };
                if !delete_job(st, jobs_t, &job, status) {
                    return None;
                }
                *changed = true;
            }
        }
        _ => {}
    }
    let job = run_job(
        st,
        jobs_t,
        cj,
        status,
        &job_name,
        (scheduled, zone),
        changed,
    )?;
    let mut active = status["active"].as_array().cloned().unwrap_or_default();
    active.push(reference(&job));
    status["active"] = json!(active);
    status["lastScheduleTime"] = json!(rfc3339(scheduled));
    next_wait(cj, status, now, &sched)
}

/// The status as the CronJob's Jobs say it: finished Jobs leave `active` (and a successful one
/// moves `lastSuccessfulTime` on), as do listed Jobs that are gone.
fn track_jobs(st: &State, jobs: &[Arc<Value>], status: &mut Value) {
    for job in jobs {
        let uid = str_at(job, "/metadata/uid");
        let listed = in_active(status, uid);
        if listed && finished(job).is_some() {
            drop_active(status, uid);
        } else if !listed && finished(job).is_none() {
            // A Job it did not start (kube only warns about it).
        } else if succeeded(job) {
            let last = time(status, "/lastSuccessfulTime");
            if let Some(completed) = time(job, "/status/completionTime")
                && last.is_none_or(|l| completed > l)
            {
                status["lastSuccessfulTime"] = job["status"]["completionTime"].clone();
            }
        }
    }
    let children: HashSet<&str> = jobs.iter().map(|j| str_at(j, "/metadata/uid")).collect();
    let jobs_key = ("batch".to_string(), "jobs".to_string());
    if let Some(active) = status["active"].as_array_mut() {
        active.retain(|r| {
            children.contains(r["uid"].as_str().unwrap_or_default())
                || st
                    .get(&jobs_key, str_at(r, "/namespace"), str_at(r, "/name"))
                    .is_some()
        });
    }
}

/// The Job of the run scheduled at `scheduled` (in `zone`): created now, or one created before whose
/// start was not recorded (if it is this CronJob's and not listed already).
fn run_job(
    st: &mut State,
    jobs_t: &Target,
    cj: &Value,
    status: &Value,
    job_name: &str,
    (scheduled, zone): (DateTime<Utc>, chrono_tz::Tz),
    changed: &mut bool,
) -> Option<Value> {
    let jobs_key = ("batch".to_string(), "jobs".to_string());
    let ns = str_at(cj, "/metadata/namespace");
    if let Some(existing) = st.get(&jobs_key, ns, job_name) {
        if super::controller_uid(&existing) != Some(str_at(cj, "/metadata/uid"))
            || in_active(status, str_at(&existing, "/metadata/uid"))
        {
            return None;
        }
        return Some((*existing).clone());
    }
    let job = new_job(cj, job_name, scheduled, zone);
    let created = create(st, jobs_t, job, "a CronJob's Job").ok()?;
    *changed = true;
    Some(created)
}

/// The schedule as kube parses it (`formatSchedule`): in the `timeZone`, unless the schedule
/// names its own zone.
fn schedule_spec(spec: &Value) -> String {
    let schedule = str_at(spec, "/schedule");
    match spec["timeZone"].as_str() {
        Some(zone) if !schedule.contains("TZ") && cron::location(zone).is_some() => {
            format!("TZ={zone} {schedule}")
        }
        _ => schedule.to_string(),
    }
}

/// A Job of the CronJob's template for the time `scheduled` (`getJobFromTemplate2`).
fn new_job(cj: &Value, name: &str, scheduled: DateTime<Utc>, zone: chrono_tz::Tz) -> Value {
    let template = &cj["spec"]["jobTemplate"];
    let map = |key: &str| {
        template["metadata"][key]
            .as_object()
            .cloned()
            .unwrap_or_default()
    };
    let (labels, mut annotations) = (map("labels"), map("annotations"));
    let at = scheduled
        .with_timezone(&zone)
        .to_rfc3339_opts(SecondsFormat::Secs, true);
    annotations.insert(SCHEDULED_AT.into(), json!(at));
    let owner = controller_ref(
        CRON_JOB,
        str_at(cj, "/metadata/name"),
        str_at(cj, "/metadata/uid"),
    );
    let mut meta = json!({"name": name, "namespace": cj["metadata"]["namespace"],
        "annotations": annotations, "ownerReferences": [owner]});
    if !labels.is_empty() {
        meta["labels"] = json!(labels);
    }
    json!({"apiVersion": JOB.api_version, "kind": JOB.kind, "metadata": meta,
        "spec": template["spec"]})
}

/// How many scheduled times were missed (`missedSchedulesType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missed {
    None,
    Few,
    Many,
}

/// Where a CronJob stands against its schedule (`mostRecentScheduleTime`'s results).
struct Recent {
    /// The time counted from: the last scheduled time, else the creation (not before
    /// `startingDeadlineSeconds` ago when that counts).
    earliest: DateTime<Utc>,
    /// The most recent scheduled time since then, up to now.
    latest: Option<DateTime<Utc>>,
    missed: Missed,
}

/// Where the CronJob stands at `now` (`mostRecentScheduleTime`), the starting deadline taken
/// into account when `with_deadline`. As kube's, it estimates the number of missed times from
/// the interval between two of them rather than listing them all.
fn most_recent(
    cj: &Value,
    status: &Value,
    now: DateTime<Utc>,
    sched: &Schedule,
    with_deadline: bool,
) -> Result<Recent, String> {
    let mut earliest = time(status, "/lastScheduleTime")
        .or_else(|| time(cj, "/metadata/creationTimestamp"))
        .unwrap_or(now);
    if with_deadline && let Some(d) = cj["spec"]["startingDeadlineSeconds"].as_i64() {
        earliest = earliest.max(now - TimeDelta::seconds(d));
    }
    let invalid = || "invalid schedule: no time in the next five years".to_string();
    let t1 = sched.next(earliest).ok_or_else(invalid)?;
    let t2 = sched.next(t1).ok_or_else(invalid)?;
    let recent = |latest, missed| Recent {
        earliest,
        latest,
        missed,
    };
    if now < t1 {
        return Ok(recent(None, Missed::None));
    }
    if now < t2 {
        return Ok(recent(Some(t1), Missed::None));
    }
    let between = ((t2 - t1).num_milliseconds() as f64 / 1000.0).round() as i64;
    if between < 1 {
        return Err("time difference between two schedules is less than 1 second".into());
    }
    let missed = (now - t1).num_seconds() / between + 1;
    let mut most_recent = None;
    let mut t = sched.next(t1 + TimeDelta::seconds((missed - 2) * between));
    while let Some(at) = t.filter(|at| *at <= now) {
        most_recent = Some(at);
        t = sched.next(at);
    }
    let kind = match missed {
        m if m > 100 => Missed::Many,
        m if m > 0 => Missed::Few,
        _ => Missed::None,
    };
    Ok(recent(most_recent, kind))
}

/// The time to start a Job for now, if one has come (`nextScheduleTime`). Past 100 missed
/// times kube warns (an Event) and still starts only the most recent.
fn next_schedule_time(
    cj: &Value,
    status: &Value,
    now: DateTime<Utc>,
    sched: &Schedule,
) -> Result<Option<DateTime<Utc>>, String> {
    let recent = most_recent(cj, status, now, sched, true)?;
    if recent.missed == Missed::Many {
        tracing::debug!(cronjob = %str_at(cj, "/metadata/name"),
            "too many missed start times; set or decrease .spec.startingDeadlineSeconds or check clock skew");
    }
    Ok(recent.latest.filter(|t| *t <= now))
}

/// How long until the next scheduled time, plus kube's margin (`nextScheduleTimeDuration`).
fn next_wait(cj: &Value, status: &Value, now: DateTime<Utc>, sched: &Schedule) -> Option<Duration> {
    let from = match most_recent(cj, status, now, sched, false) {
        Ok(Recent {
            latest: Some(t), ..
        }) => t,
        Ok(Recent {
            earliest,
            missed: Missed::None,
            ..
        }) => earliest,
        Ok(_) | Err(_) => now,
    };
    let wait = sched.next(from)? + NEXT_DELTA - now;
    Some(wait.to_std().unwrap_or_default())
}
