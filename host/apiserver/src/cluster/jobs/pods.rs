//! A Job's Pods (kube's `getPodsForJob`, `manageJob` helpers, `syncOrphanPod`): claimed,
//! adopted and released; created from its template; ranked and deleted; freed of the
//! tracking finalizer.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    Ctx, FINALIZER, finished_condition, has_finalizer, indexes, managed_elsewhere, phase, uid,
};
use crate::cluster::{
    condition, controller_ref, controller_uid, deleting, objects, ready, target, update,
};
use crate::json::str_at;
use crate::registry::{batch::JOB, core::POD};
use crate::store::State;
use crate::validate::selects;

/// The Job's Pods: those it controls whose labels its selector matches, orphans it matches
/// adopted (with the tracking finalizer), and those it controls but no longer matches
/// released (`getPodsForJob`). False when the selector is not one kube could use.
pub(super) fn claim(st: &mut State, ctx: &mut Ctx) -> bool {
    let job = ctx.job.clone();
    let selector = &job["spec"]["selector"];
    if selects(selector, &json!({})).is_none() {
        return false;
    }
    let job_uid = uid(&job).to_string();
    for pod in objects(st, "", "pods", Some(&ctx.ns)) {
        let matches = selects(selector, &pod["metadata"]["labels"]) == Some(true);
        match controller_uid(&pod) {
            Some(u) if u == job_uid && matches => ctx.pods.push(pod),
            Some(u) if u == job_uid && !deleting(&job) => {
                let mut released = (*pod).clone();
                if let Some(refs) = released["metadata"]["ownerReferences"].as_array_mut() {
                    refs.retain(|r| r["uid"] != job_uid.as_str());
                }
                if let Some(f) = released["metadata"]["finalizers"].as_array_mut() {
                    f.retain(|f| f != FINALIZER);
                }
                ctx.changed |= update(st, &ctx.pods_t, &pod, released, "releasing a Pod");
            }
            None if matches && !deleting(&job) && !deleting(&pod) => {
                let mut adopted = (*pod).clone();
                let meta = &mut adopted["metadata"];
                let mut refs = meta["ownerReferences"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                refs.push(controller_ref(JOB, &ctx.name, &job_uid));
                meta["ownerReferences"] = json!(refs);
                let mut finalizers = meta["finalizers"].as_array().cloned().unwrap_or_default();
                finalizers.push(json!(FINALIZER));
                meta["finalizers"] = json!(finalizers);
                if update(st, &ctx.pods_t, &pod, adopted, "adopting a Pod") {
                    ctx.changed = true;
                    if let Some(now) = current(st, &pod) {
                        ctx.pods.push(now);
                    }
                }
            }
            _ => {}
        }
    }
    true
}

/// A Pod of the Job's template (`index` for an Indexed Job), controlled by it, with the
/// tracking finalizer.
pub(super) fn new_pod(ctx: &Ctx, index: Option<usize>) -> Value {
    let template = &ctx.job["spec"]["template"];
    let map = |key: &str| {
        template["metadata"][key]
            .as_object()
            .cloned()
            .unwrap_or_default()
    };
    let (mut labels, mut annotations) = (map("labels"), map("annotations"));
    let mut finalizers = (template["metadata"]["finalizers"].as_array())
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(json!(FINALIZER));
    }
    let mut spec = template["spec"].clone();
    let generate_name = match index {
        Some(i) => {
            annotations.insert(indexes::KEY.into(), json!(i.to_string()));
            labels.insert(indexes::KEY.into(), json!(i.to_string()));
            spec["hostname"] = json!(format!("{}-{i}", ctx.name));
            indexes::generate_name(&ctx.name, i)
        }
        None => format!("{}-", ctx.name),
    };
    if ctx.indexed {
        let from_label = json!({"name": indexes::ENV, "valueFrom": {"fieldRef":
            {"fieldPath": format!("metadata.labels['{}']", indexes::KEY)}}});
        for kind in ["initContainers", "containers"] {
            for c in spec[kind].as_array_mut().into_iter().flatten() {
                let env = c["env"].as_array().cloned().unwrap_or_default();
                if !env.iter().any(|e| e["name"] == indexes::ENV) {
                    let mut env = env;
                    env.push(from_label.clone());
                    c["env"] = json!(env);
                }
            }
        }
    }
    let owner = controller_ref(JOB, &ctx.name, uid(&ctx.job));
    let mut meta = json!({"generateName": generate_name, "namespace": ctx.ns,
        "ownerReferences": [owner], "finalizers": finalizers});
    if !labels.is_empty() {
        meta["labels"] = json!(labels);
    }
    if !annotations.is_empty() {
        meta["annotations"] = json!(annotations);
    }
    json!({"apiVersion": POD.api_version, "kind": POD.kind, "metadata": meta, "spec": spec})
}

/// Which active Pods to delete, at least `at_least` of them (`activePodsForRemoval`): for an
/// Indexed Job first those with a duplicate or invalid index; then the least along.
pub(super) fn for_removal(ctx: &Ctx, pods: &[Arc<Value>], at_least: usize) -> Vec<Arc<Value>> {
    let (mut doomed, mut left) = if ctx.indexed {
        indexes::duplicates(pods, ctx.completions.unwrap_or(0), deletion_order)
    } else {
        (Vec::new(), pods.to_vec())
    };
    if doomed.len() < at_least {
        deletion_order(&mut left);
        doomed.extend(left.into_iter().take(at_least - doomed.len()));
    }
    doomed
}

/// Sorts Pods the least along first, as kube's `controller.ActivePods` ranks them:
/// unscheduled, pending before running, unready, ready for less time, more restarts, newer.
fn deletion_order(pods: &mut [Arc<Value>]) {
    use std::cmp::Reverse;
    pods.sort_by_cached_key(|p| {
        let phase = match phase(p) {
            "Unknown" => 1,
            "Running" => 2,
            _ => 0,
        };
        let is_ready = ready(p);
        let ready_since = if is_ready {
            (condition(p, "Ready").and_then(|c| c["lastTransitionTime"].as_str()))
                .unwrap_or_default()
                .to_string()
        } else {
            String::new()
        };
        let restarts = (p
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(|c| c["restartCount"].as_i64())
        .max()
        .unwrap_or(0);
        (
            !str_at(p, "/spec/nodeName").is_empty(),
            phase,
            is_ready,
            Reverse(ready_since),
            Reverse(restarts),
            Reverse(str_at(p, "/metadata/creationTimestamp").to_string()),
        )
    })
}

/// Deletes `pods`, first removing their tracking finalizer when `uncounted` (a suspended or
/// scaled-down Job's Pods are not counted as failures, `deleteJobPods`) and keeping it
/// otherwise (`deleteActivePods`); how many were deleted, and how many of those were ready.
pub(super) fn delete(
    st: &mut State,
    ctx: &mut Ctx,
    pods: &[Arc<Value>],
    uncounted: bool,
) -> (usize, usize) {
    let (mut deleted, mut deleted_ready) = (0, 0);
    for pod in pods {
        if uncounted && !remove_finalizer(st, ctx, pod) {
            continue;
        }
        let Some(cur) = current(st, pod) else {
            deleted += 1;
            continue;
        };
        match crate::delete::delete_locked(st, &ctx.pods_t, &cur, false) {
            Ok(_) => {
                ctx.changed = true;
                deleted += 1;
                deleted_ready += usize::from(ready(pod));
            }
            Err(e) => tracing::warn!(pod = %str_at(pod, "/metadata/name"),
                error = %e.message, "deleting a Job's Pod"),
        }
    }
    (deleted, deleted_ready)
}

/// The stored version of `pod`, if it is still there.
fn current(st: &State, pod: &Value) -> Option<Arc<Value>> {
    let key = (String::new(), "pods".to_string());
    let (ns, name) = (
        str_at(pod, "/metadata/namespace"),
        str_at(pod, "/metadata/name"),
    );
    st.get(&key, ns, name).filter(|p| uid(p) == uid(pod))
}

/// Removes the tracking finalizer from `pod`; whether it no longer has it (gone counts).
pub(super) fn remove_finalizer(st: &mut State, ctx: &mut Ctx, pod: &Value) -> bool {
    let Some(cur) = current(st, pod) else {
        return true;
    };
    if !has_finalizer(&cur) {
        return true;
    }
    let mut freed = (*cur).clone();
    if let Some(f) = freed["metadata"]["finalizers"].as_array_mut() {
        f.retain(|f| f != FINALIZER);
    }
    let done = update(
        st,
        &ctx.pods_t,
        &cur,
        freed,
        "removing a Job's Pod finalizer",
    );
    ctx.changed |= done;
    done
}

/// Removes the tracking finalizer from Pods no running Job counts any more: orphans, and Pods
/// of Jobs that are gone or finished (kube's `syncOrphanPod`). Pods controlled by something
/// other than a Job, or by a Job another controller runs, keep it.
pub(super) fn free_orphans(st: &mut State) -> bool {
    let jobs_key = ("batch".to_string(), "jobs".to_string());
    let mut changed = false;
    for pod in objects(st, "", "pods", None) {
        if !has_finalizer(&pod) {
            continue;
        }
        let owner = (pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array))
        .and_then(|refs| refs.iter().find(|r| r["controller"] == true));
        let keep = owner.is_some_and(|r| {
            if !JOB.named_by(r) {
                return true;
            }
            let ns = str_at(&pod, "/metadata/namespace");
            (st.get(&jobs_key, ns, r["name"].as_str().unwrap_or_default()))
                .filter(|j| r["uid"] == uid(j))
                .is_some_and(|j| managed_elsewhere(&j) || finished_condition(&j).is_none())
        });
        if keep {
            continue;
        }
        let ns = str_at(&pod, "/metadata/namespace").to_string();
        let Some(t) = target(st, "", "pods", &ns, None) else {
            continue;
        };
        let mut freed = (*pod).clone();
        if let Some(f) = freed["metadata"]["finalizers"].as_array_mut() {
            f.retain(|f| f != FINALIZER);
        }
        changed |= update(
            st,
            &t,
            &pod,
            freed,
            "removing an orphan Pod's Job finalizer",
        );
    }
    changed
}
