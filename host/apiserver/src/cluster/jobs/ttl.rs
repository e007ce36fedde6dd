//! kube-controller-manager's TTL-after-finished controller (`pkg/controller/ttlafterfinished`):
//! a finished Job with `spec.ttlSecondsAfterFinished` is deleted that many seconds after it
//! finished (the `lastTransitionTime` of its `Complete` or `Failed` condition), with
//! foreground propagation as kube deletes it, so its Pods go first.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::finished_at;
use crate::cluster::{deleting, objects, seconds_since, target};
use crate::delete;
use crate::json::str_at;
use crate::store::State;

/// Deletes the Jobs whose time is up; asks to run again when the next one's is.
pub(super) fn sync(st: &mut State) -> bool {
    let mut changed = false;
    for job in objects(st, "batch", "jobs", None) {
        let Some(ttl) = job
            .pointer("/spec/ttlSecondsAfterFinished")
            .and_then(Value::as_i64)
        else {
            continue;
        };
        if deleting(&job) {
            continue;
        }
        let Some(since) = finished_at(&job).and_then(seconds_since) else {
            continue;
        };
        let left = ttl as f64 - since;
        if left > 0.0 {
            st.wake_within(Duration::from_secs_f64(left));
            continue;
        }
        changed |= delete_foreground(st, &job);
    }
    changed
}

fn delete_foreground(st: &mut State, job: &Arc<Value>) -> bool {
    let ns = str_at(job, "/metadata/namespace").to_string();
    let Some(t) = target(st, "batch", "jobs", &ns, None) else {
        return false;
    };
    let mut marked = (**job).clone();
    let mut finalizers = (marked.pointer("/metadata/finalizers"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == delete::FOREGROUND) {
        finalizers.push(json!(delete::FOREGROUND));
    }
    marked["metadata"]["finalizers"] = json!(finalizers);
    match delete::delete_locked(st, &t, &Arc::new(marked), false) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(namespace = %ns, job = %str_at(job, "/metadata/name"),
                error = %e.message, "deleting a finished Job after its TTL");
            false
        }
    }
}
