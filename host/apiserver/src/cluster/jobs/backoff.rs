//! The delay before a Job replaces a failed Pod (kube's `backoff_utils.go`): 10 s after one
//! failure since the last success, doubling with each further one up to 10 min, counted from
//! when the last failed Pod finished; and the restarts that exhaust the backoff limit of Pods
//! restarted in place.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::phase;
use crate::cluster::condition;
use crate::json::str_at;
use wasmctrl_core::sync::lock;

/// The first delay before a failed Pod is replaced (`DefaultJobPodFailureBackOff`).
const BACKOFF: Duration = Duration::from_secs(10);

/// The longest (`MaxJobPodFailureBackOff`).
const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// A Job's failures since its last success and when the last was (kube's `backoffRecord`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Backoff {
    failures: u32,
    last_failure: Option<DateTime<Utc>>,
}

/// The backoff records of running Jobs by uid, in memory as kube keeps them (a record goes when
/// its Job finishes or is being deleted; uids make the servers of one process share it safely).
static BACKOFFS: Mutex<BTreeMap<String, Backoff>> = Mutex::new(BTreeMap::new());

/// The backoff records, locked.
pub(super) fn records() -> std::sync::MutexGuard<'static, BTreeMap<String, Backoff>> {
    lock(&BACKOFFS)
}

/// The Job's backoff record with the Pods that finished since the last sync
/// (`newBackoffRecord`): a success clears it, except for failures after it; each failure
/// counts, the last one's time kept.
pub(super) fn record(job_uid: &str, succeeded: &[&Arc<Value>], failed: &[&Arc<Value>]) -> Backoff {
    let mut records = records();
    let mut record = records.get(job_uid).copied().unwrap_or_default();
    let last_failure = failed.iter().map(|p| finished_time(p)).max();
    match succeeded.iter().map(|p| finished_time(p)).max() {
        _ if failed.is_empty() && succeeded.is_empty() => return record,
        None => {
            record.failures += failed.len() as u32;
            record.last_failure = last_failure;
        }
        Some(success) => {
            let after: Vec<DateTime<Utc>> = (failed.iter())
                .map(|p| finished_time(p))
                .filter(|t| *t > success)
                .collect();
            record = Backoff {
                failures: after.len() as u32,
                last_failure: after.into_iter().max(),
            };
        }
    }
    records.insert(job_uid.to_string(), record);
    record
}

/// How long a replacement for a failed Pod still waits (`getRemainingTime`): 10 s after one
/// failure, doubling with each further one up to 10 min, counted from the last.
pub(super) fn left(backoff: Backoff) -> Option<Duration> {
    let last = backoff.last_failure.filter(|_| backoff.failures > 0)?;
    let mut delay = BACKOFF;
    for _ in 1..backoff.failures {
        delay = (delay * 2).min(MAX_BACKOFF);
        if delay == MAX_BACKOFF {
            break;
        }
    }
    let elapsed = (Utc::now() - last).to_std().unwrap_or_default();
    delay.checked_sub(elapsed).filter(|left| !left.is_zero())
}

/// When a Pod finished (kube's `getFinishedTime`): its containers' last exit, else when it
/// stopped being ready, else when it was deleted, else when it was created.
fn finished_time(pod: &Value) -> DateTime<Utc> {
    let parse = |t: &str| DateTime::parse_from_rfc3339(t).ok().map(|t| t.to_utc());
    let statuses = (pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array))
    .cloned()
    .unwrap_or_default();
    let exits: Option<Vec<DateTime<Utc>>> = (statuses.iter())
        .map(|c| {
            c.pointer("/state/terminated/finishedAt")?
                .as_str()
                .and_then(parse)
        })
        .collect();
    if let Some(last) = exits.and_then(|e| e.into_iter().max()) {
        return last;
    }
    let unready = condition(pod, "Ready")
        .filter(|c| c["status"] == "False")
        .and_then(|c| c["lastTransitionTime"].as_str())
        .and_then(parse);
    if let Some(t) = unready {
        return t;
    }
    if let Some(t) = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(parse)
    {
        let grace = pod
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64);
        return t - chrono::TimeDelta::seconds(grace.unwrap_or(0));
    }
    parse(str_at(pod, "/metadata/creationTimestamp")).unwrap_or_else(Utc::now)
}

/// Whether the restarts of a Job's running Pods reach its backoff limit, for Pods restarted
/// in place (`restartPolicy: OnFailure`, `pastBackoffLimitOnFailure`).
pub(super) fn past_limit_on_failure(job: &Value, pods: &[Arc<Value>]) -> bool {
    if str_at(job, "/spec/template/spec/restartPolicy") != "OnFailure" {
        return false;
    }
    let restarts: i64 = (pods.iter())
        .filter(|p| matches!(phase(p), "Running" | "Pending"))
        .flat_map(|p| {
            ["initContainerStatuses", "containerStatuses"]
                .into_iter()
                .flat_map(|k| p["status"][k].as_array().cloned().unwrap_or_default())
        })
        .filter_map(|c| c["restartCount"].as_i64())
        .sum();
    match job
        .pointer("/spec/backoffLimit")
        .and_then(Value::as_i64)
        .unwrap_or(6)
    {
        0 => restarts > 0,
        limit => restarts >= limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_per_failure_up_to_ten_minutes() {
        let at = |failures, ago: i64| Backoff {
            failures,
            last_failure: Some(Utc::now() - chrono::TimeDelta::seconds(ago)),
        };
        let secs = |b| left(b).map_or(0, |d: Duration| d.as_secs_f64().round() as u64);
        assert_eq!(secs(at(1, 0)), 10);
        assert_eq!(secs(at(3, 5)), 35);
        assert_eq!(secs(at(12, 0)), 600);
        assert_eq!(left(at(1, 11)), None);
        assert_eq!(left(Backoff::default()), None);
    }
}
