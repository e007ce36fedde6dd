//! kube-controller-manager's Deployment controller, for dev mode: each Deployment owns one
//! ReplicaSet per version of its Pod template (named `<deployment>-<pod-template-hash>`, the hash
//! also a label of the set, its selector and its Pods), numbered by the
//! `deployment.kubernetes.io/revision` annotation, and moves replicas from the old sets to the
//! new one as its strategy says: `RollingUpdate` within `maxSurge` and `maxUnavailable`,
//! `Recreate` all old Pods gone first. Scaling a Deployment mid-rollout scales its sets in
//! proportion, as kube's does. Its status (`replicas`, `updatedReplicas`, `readyReplicas`,
//! `availableReplicas`, `unavailableReplicas`, the `Available`, `Progressing` and
//! `ReplicaFailure` conditions, `progressDeadlineSeconds`) is kube's, so `kubectl rollout
//! status`, `history`, `undo`, `restart`, `pause` and `resume` work as on a cluster: kubectl
//! undoes a rollout by writing an old set's template back, which makes that set the new one
//! again, with the next revision number.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{
    Source, condition, controller_ref, controller_uid, create, deleting, objects, record,
    seconds_since, set_condition, target, template_hash, update,
};
use crate::admission::now;
use crate::handlers::Target;
use crate::json::str_at;
use crate::registry::apps::{DEPLOYMENT, REPLICA_SET};
use crate::store::State;
use crate::validate::selects;

const HASH_LABEL: &str = "pod-template-hash";
const REVISION: &str = "deployment.kubernetes.io/revision";
const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
const DESIRED: &str = "deployment.kubernetes.io/desired-replicas";
const MAX: &str = "deployment.kubernetes.io/max-replicas";
/// Longest `revision-history` annotation kube keeps, in characters.
const HISTORY_CHARS: usize = 2000;
/// The Deployment annotations a ReplicaSet does not copy.
const NOT_COPIED: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED,
    MAX,
    "deprecated.deployment.rollback.to",
];

/// Rolls out every Deployment; whether anything was written.
pub(crate) fn sync(st: &mut State) -> bool {
    let mut changed = false;
    for d in objects(st, "apps", "deployments", None) {
        changed |= sync_one(st, &d);
    }
    changed
}

/// A Deployment's view of its sets, refreshed after each write.
struct Sets {
    new: Option<Arc<Value>>,
    /// The others, oldest first.
    old: Vec<Arc<Value>>,
}

impl Sets {
    fn all(&self) -> Vec<Arc<Value>> {
        self.old.iter().chain(&self.new).cloned().collect()
    }
}

fn replicas_of(o: &Value) -> i64 {
    o["spec"]["replicas"].as_i64().unwrap_or(1)
}

fn status_count(o: &Value, field: &str) -> i64 {
    o["status"][field].as_i64().unwrap_or(0)
}

fn annotation<'a>(o: &'a Value, key: &str) -> Option<&'a str> {
    o["metadata"]["annotations"][key].as_str()
}

fn revision(rs: &Value) -> i64 {
    annotation(rs, REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn sync_one(st: &mut State, d: &Arc<Value>) -> bool {
    let mut changed = false;
    let sets = claim(st, d, &mut changed);
    let d = current(st, d);
    if deleting(&d) {
        return changed | write_status(st, &d, &sets, false);
    }
    changed |= paused_condition(st, &d);
    let d = current(st, &d);
    if d["spec"]["paused"] == true || scaling_event(&d, &sets) {
        let sets = sync_new_set(st, &d, sets, false, &mut changed);
        changed |= scale(st, &d, &sets);
        let sets = refresh(st, &sets);
        if d["spec"]["paused"] == true {
            changed |= clean_up(st, &d, &sets);
        }
        return changed | write_status(st, &current(st, &d), &sets, false);
    }
    if str_at(&d, "/spec/strategy/type") == "Recreate" {
        changed | recreate(st, &d, sets)
    } else {
        changed | rolling(st, &d, sets)
    }
}

/// The Deployment as stored now (after this pass's writes).
fn current(st: &State, d: &Arc<Value>) -> Arc<Value> {
    let key = ("apps".to_string(), "deployments".to_string());
    st.get(
        &key,
        str_at(d, "/metadata/namespace"),
        str_at(d, "/metadata/name"),
    )
    .unwrap_or_else(|| d.clone())
}

fn refresh(st: &State, sets: &Sets) -> Sets {
    let key = ("apps".to_string(), "replicasets".to_string());
    let again = |rs: &Arc<Value>| {
        st.get(
            &key,
            str_at(rs, "/metadata/namespace"),
            str_at(rs, "/metadata/name"),
        )
    };
    Sets {
        new: sets.new.as_ref().and_then(again),
        old: sets.old.iter().filter_map(again).collect(),
    }
}

/// The Deployment's ReplicaSets, adopting orphans its selector matches (as kube's controller
/// does); the new one is the oldest whose template is the Deployment's.
fn claim(st: &mut State, d: &Value, changed: &mut bool) -> Sets {
    let ns = str_at(d, "/metadata/namespace");
    let uid = str_at(d, "/metadata/uid");
    let name = str_at(d, "/metadata/name");
    let mut owned = Vec::new();
    for rs in objects(st, "apps", "replicasets", Some(ns)) {
        match controller_uid(&rs) {
            Some(u) if u == uid => owned.push(rs),
            None if !deleting(&rs)
                && !deleting(d)
                && selects(&d["spec"]["selector"], &rs["metadata"]["labels"]) == Some(true) =>
            {
                let mut adopted = (*rs).clone();
                let mut refs = adopted["metadata"]["ownerReferences"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                refs.push(controller_ref(DEPLOYMENT, name, uid));
                adopted["metadata"]["ownerReferences"] = json!(refs);
                let Some(t) = target(st, "apps", "replicasets", ns, None) else {
                    continue;
                };
                if update(st, &t, &rs, adopted, "an adopted ReplicaSet") {
                    *changed = true;
                    let key = ("apps".to_string(), "replicasets".to_string());
                    owned.extend(st.get(&key, ns, str_at(&rs, "/metadata/name")));
                }
            }
            _ => {}
        }
    }
    owned.sort_by(|a, b| {
        (
            str_at(a, "/metadata/creationTimestamp"),
            str_at(a, "/metadata/name"),
        )
            .cmp(&(
                str_at(b, "/metadata/creationTimestamp"),
                str_at(b, "/metadata/name"),
            ))
    });
    let new = owned
        .iter()
        .find(|rs| same_template(&d["spec"]["template"], &rs["spec"]["template"]))
        .cloned();
    let old = owned
        .into_iter()
        .filter(|rs| new.as_ref().is_none_or(|n| !Arc::ptr_eq(n, rs)))
        .collect();
    Sets { new, old }
}

/// Whether two Pod templates are the same but for the `pod-template-hash` label (kube's
/// `EqualIgnoreHash`).
fn same_template(a: &Value, b: &Value) -> bool {
    let strip = |t: &Value| {
        let mut t = t.clone();
        if let Some(labels) = t["metadata"]["labels"].as_object_mut() {
            labels.remove(HASH_LABEL);
            if labels.is_empty() {
                t["metadata"].as_object_mut().map(|m| m.remove("labels"));
            }
        }
        t
    };
    strip(a) == strip(b)
}

/// `maxSurge` and `maxUnavailable` resolved against the replicas (kube's `ResolveFenceposts`):
/// surge rounds up, unavailability down, and both zero becomes one unavailable.
fn fenceposts(d: &Value) -> (i64, i64) {
    if str_at(d, "/spec/strategy/type") == "Recreate" {
        return (0, 0);
    }
    let replicas = replicas_of(d);
    let resolve = |v: &Value, default: &str, up: bool| -> i64 {
        let v = if v.is_null() {
            json!(default)
        } else {
            v.clone()
        };
        match (v.as_i64(), v.as_str().and_then(|s| s.strip_suffix('%'))) {
            (Some(n), _) => n,
            (None, Some(p)) => {
                let p: i64 = p.parse().unwrap_or(0);
                if up {
                    (p * replicas + 99) / 100
                } else {
                    p * replicas / 100
                }
            }
            _ => 0,
        }
    };
    let rolling = &d["spec"]["strategy"]["rollingUpdate"];
    let surge = resolve(&rolling["maxSurge"], "25%", true);
    let mut unavailable = resolve(&rolling["maxUnavailable"], "25%", false);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    (surge, unavailable.min(replicas))
}

fn max_unavailable(d: &Value) -> i64 {
    if replicas_of(d) == 0 {
        0
    } else {
        fenceposts(d).1
    }
}

/// A replica change not yet passed on to the sets: an active set's `desired-replicas` is not
/// the Deployment's replicas.
fn scaling_event(d: &Value, sets: &Sets) -> bool {
    sets.all()
        .iter()
        .filter(|rs| replicas_of(rs) > 0)
        .any(|rs| {
            annotation(rs, DESIRED)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|desired| desired != replicas_of(d))
        })
}

/// Keeps the new set's annotations (those copied from the Deployment, revision, replicas) and
/// the Deployment's revision; creates the new set when `create` and there is none.
fn sync_new_set(
    st: &mut State,
    d: &Arc<Value>,
    mut sets: Sets,
    create_new: bool,
    changed: &mut bool,
) -> Sets {
    let ns = str_at(d, "/metadata/namespace").to_string();
    let max_old = sets.old.iter().map(|rs| revision(rs)).max().unwrap_or(0);
    let next = max_old + 1;
    let Some(rs_t) = target(st, "apps", "replicasets", &ns, None) else {
        return sets;
    };
    if let Some(rs) = sets.new.clone() {
        return keep_new_set(st, d, &rs_t, rs, sets, next, changed);
    }
    if !create_new {
        return sets;
    }
    let collisions = d["status"]["collisionCount"].as_i64();
    let hash = template_hash(&d["spec"]["template"], collisions);
    let name = format!("{}-{hash}", str_at(d, "/metadata/name"));
    let key = ("apps".to_string(), "replicasets".to_string());
    if let Some(existing) = st.get(&key, &ns, &name) {
        // A set of that name with another template: a hash collision; the next attempt hashes
        // with a higher count.
        if controller_uid(&existing) != Some(str_at(d, "/metadata/uid"))
            || !same_template(&d["spec"]["template"], &existing["spec"]["template"])
        {
            let mut status = d["status"].clone();
            status["collisionCount"] = json!(collisions.unwrap_or(0) + 1);
            *changed |= put_status(st, d, status);
        }
        return sets;
    }
    let rs = new_set(d, &sets, &hash, next);
    let replicas = rs["spec"]["replicas"].as_i64().unwrap_or(0);
    match create(st, &rs_t, rs, "a Deployment's ReplicaSet") {
        Ok(_) => {
            *changed = true;
            if replicas > 0 {
                let message = format!("Scaled up replica set {name} from 0 to {replicas}");
                record(st, d, "Normal", "ScalingReplicaSet", &message, &SOURCE);
            }
            sets.new = st.get(&key, &ns, &name);
            set_revision(st, d, &next.to_string());
            let d = current(st, d);
            if progress_deadline(&d).is_some() {
                let message = format!("Created new replica set \"{name}\"");
                let condition = progressing("True", "NewReplicaSetCreated", message);
                with_condition(st, &d, condition);
            }
        }
        Err(e) => {
            if progress_deadline(d).is_some() {
                let message = format!("Failed to create new replica set \"{name}\": {}", e.message);
                let condition = progressing("False", "ReplicaSetCreateError", message);
                *changed |= with_condition(st, d, condition);
            }
        }
    }
    sets
}

/// The Deployment's new ReplicaSet as it should be: its annotations (revision `next`) and
/// `minReadySeconds` the Deployment's, the Deployment's revision its, and `Progressing` found.
fn keep_new_set(
    st: &mut State,
    d: &Arc<Value>,
    rs_t: &Target,
    rs: Arc<Value>,
    mut sets: Sets,
    next: i64,
    changed: &mut bool,
) -> Sets {
    let mut fixed = (*rs).clone();
    set_annotations(d, &mut fixed, next, true);
    fixed["spec"]["minReadySeconds"] = d["spec"]["minReadySeconds"].clone();
    if fixed["spec"]["minReadySeconds"].is_null() {
        fixed["spec"]
            .as_object_mut()
            .map(|s| s.remove("minReadySeconds"));
    }
    if update(st, rs_t, &rs, fixed, "a Deployment's new ReplicaSet") {
        *changed = true;
        sets = refresh(st, &sets);
    }
    let rs = sets.new.clone().unwrap_or(rs);
    *changed |= set_revision(st, d, annotation(&rs, REVISION).unwrap_or_default());
    let d = current(st, d);
    if progress_deadline(&d).is_some() && condition(&d, "Progressing").is_none() {
        let name = str_at(&rs, "/metadata/name");
        let message = format!("Found new replica set \"{name}\"");
        *changed |= with_condition(st, &d, progressing("True", "FoundNewReplicaSet", message));
    }
    sets
}

/// A new ReplicaSet for the Deployment's template, named and labelled by its `hash`, scaled as
/// the rollout allows, with revision `next`.
fn new_set(d: &Value, sets: &Sets, hash: &str, next: i64) -> Value {
    let name = format!("{}-{hash}", str_at(d, "/metadata/name"));
    let ns = str_at(d, "/metadata/namespace");
    let mut template = d["spec"]["template"].clone();
    template["metadata"]["labels"][HASH_LABEL] = json!(hash);
    let mut selector = d["spec"]["selector"].clone();
    selector["matchLabels"][HASH_LABEL] = json!(hash);
    let mut rs = json!({"apiVersion": REPLICA_SET.api_version, "kind": REPLICA_SET.kind,
        "metadata": {"name": name, "namespace": ns, "labels": template["metadata"]["labels"],
            "ownerReferences": [controller_ref(DEPLOYMENT, str_at(d, "/metadata/name"), str_at(d, "/metadata/uid"))]},
        "spec": {"replicas": 0, "selector": selector, "template": template}});
    if let Some(m) = d["spec"]["minReadySeconds"].as_i64() {
        rs["spec"]["minReadySeconds"] = json!(m);
    }
    let replicas = new_set_replicas(d, &sets.all(), &rs);
    rs["spec"]["replicas"] = json!(replicas);
    set_annotations(d, &mut rs, next, false);
    rs
}

/// Copies the Deployment's annotations to set `rs` and sets its revision (raised to `next` when
/// below it, the old one then kept in its `revision-history`) and replica annotations.
fn set_annotations(d: &Value, rs: &mut Value, next: i64, exists: bool) {
    let mut notes: Map<String, Value> = rs["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (k, v) in d["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if !NOT_COPIED.contains(&k.as_str()) {
            notes.insert(k.clone(), v.clone());
        }
    }
    let old = notes
        .get(REVISION)
        .and_then(Value::as_str)
        .map(String::from);
    let old_number = old.as_deref().map_or(Some(0), |o| o.parse::<i64>().ok());
    if let Some(old_number) = old_number
        && old_number < next
    {
        notes.insert(REVISION.into(), json!(next.to_string()));
        if let (true, Some(old)) = (exists, old) {
            let history = notes
                .get(REVISION_HISTORY)
                .and_then(Value::as_str)
                .unwrap_or("");
            let mut revisions: Vec<&str> = history.split(',').filter(|r| !r.is_empty()).collect();
            revisions.push(&old);
            while revisions.join(",").len() > HISTORY_CHARS && revisions.len() > 1 {
                revisions.remove(0);
            }
            notes.insert(REVISION_HISTORY.into(), json!(revisions.join(",")));
        }
    }
    // A set about to be created gets the replica annotations; an existing one keeps its own
    // until it is scaled.
    if !exists {
        let (surge, _) = fenceposts(d);
        notes.insert(DESIRED.into(), json!(replicas_of(d).to_string()));
        notes.insert(MAX.into(), json!((replicas_of(d) + surge).to_string()));
    }
    rs["metadata"]["annotations"] = Value::Object(notes);
}

/// Sets the Deployment's revision annotation; whether it wrote.
fn set_revision(st: &mut State, d: &Arc<Value>, revision: &str) -> bool {
    let d = current(st, d);
    if annotation(&d, REVISION) == Some(revision) || revision.is_empty() {
        return false;
    }
    let Some(t) = target(
        st,
        "apps",
        "deployments",
        str_at(&d, "/metadata/namespace"),
        None,
    ) else {
        return false;
    };
    let mut new = (*d).clone();
    new["metadata"]["annotations"][REVISION] = json!(revision);
    update(st, &t, &d, new, "a Deployment's revision")
}

/// Replicas of the new set (kube's `NewRSNewReplicas`).
fn new_set_replicas(d: &Value, all: &[Arc<Value>], new: &Value) -> i64 {
    let replicas = replicas_of(d);
    let current = replicas_of(new);
    if str_at(d, "/spec/strategy/type") == "Recreate" {
        return replicas;
    }
    let (surge, _) = fenceposts(d);
    let total: i64 = all.iter().map(|rs| replicas_of(rs)).sum::<i64>()
        + if all
            .iter()
            .any(|rs| rs["metadata"]["name"] == new["metadata"]["name"])
        {
            0
        } else {
            current
        };
    let max_total = replicas + surge;
    if total >= max_total {
        return current;
    }
    current + (max_total - total).min(replicas - current).max(0)
}

/// Who records the Deployment controller's Events.
const SOURCE: Source<'static> = Source {
    component: "deployment-controller",
    host: None,
};

/// Scales `rs` to `to`, with the Deployment's replica annotations; whether it wrote.
fn scale_set(st: &mut State, d: &Value, rs: &Arc<Value>, to: i64) -> bool {
    let to = to.max(0);
    let from = replicas_of(rs);
    let mut new = (**rs).clone();
    new["spec"]["replicas"] = json!(to);
    let (surge, _) = fenceposts(d);
    new["metadata"]["annotations"][DESIRED] = json!(replicas_of(d).to_string());
    new["metadata"]["annotations"][MAX] = json!((replicas_of(d) + surge).to_string());
    let Some(t) = target(
        st,
        "apps",
        "replicasets",
        str_at(rs, "/metadata/namespace"),
        None,
    ) else {
        return false;
    };
    let wrote = update(st, &t, rs, new, "scaling a ReplicaSet");
    if wrote && from != to {
        let way = if to > from { "up" } else { "down" };
        let name = str_at(rs, "/metadata/name");
        let message = format!("Scaled {way} replica set {name} from {from} to {to}");
        record(st, d, "Normal", "ScalingReplicaSet", &message, &SOURCE);
    }
    wrote
}

/// Passes a replica change on to the sets (kube's `scale`): all of it to the one active set,
/// else in proportion to their sizes when rolling.
fn scale(st: &mut State, d: &Value, sets: &Sets) -> bool {
    let replicas = replicas_of(d);
    let active: Vec<Arc<Value>> = sets
        .all()
        .into_iter()
        .filter(|rs| replicas_of(rs) > 0)
        .collect();
    let only = match active.as_slice() {
        [] => sets.new.clone().or_else(|| sets.old.last().cloned()),
        [one] => Some(one.clone()),
        _ => None,
    };
    if let Some(rs) = only {
        return replicas_of(&rs) != replicas && scale_set(st, d, &rs, replicas);
    }
    if let Some(new) = &sets.new
        && annotation(new, DESIRED) == Some(&replicas.to_string())
        && replicas_of(new) == replicas
        && status_count(new, "availableReplicas") == replicas
    {
        let mut changed = false;
        for rs in active.iter().filter(|rs| !Arc::ptr_eq(rs, new)) {
            changed |= scale_set(st, d, rs, 0);
        }
        return changed;
    }
    if str_at(d, "/spec/strategy/type") == "Recreate" {
        return false;
    }
    let (surge, _) = fenceposts(d);
    let allowed = if replicas > 0 { replicas + surge } else { 0 };
    let to_add = allowed - active.iter().map(|rs| replicas_of(rs)).sum::<i64>();
    let mut ordered = active.clone();
    // Larger sets first; among equals, newer first when growing, older first when shrinking.
    ordered.sort_by(|a, b| {
        let (a_made, b_made) = (
            str_at(a, "/metadata/creationTimestamp"),
            str_at(b, "/metadata/creationTimestamp"),
        );
        let by_age = if to_add > 0 {
            b_made.cmp(a_made)
        } else {
            a_made.cmp(b_made)
        };
        replicas_of(b).cmp(&replicas_of(a)).then(by_age)
    });
    let mut added = 0;
    let mut sizes: Vec<i64> = Vec::new();
    for rs in &ordered {
        let mut size = replicas_of(rs);
        if to_add != 0 {
            let proportion = proportion(rs, d, to_add, added);
            size += proportion;
            added += proportion;
        }
        sizes.push(size);
    }
    let mut changed = false;
    for (i, rs) in ordered.iter().enumerate() {
        let mut size = sizes[i];
        if i == 0 && to_add != 0 {
            size = (size + to_add - added).max(0);
        }
        changed |= scale_set(st, d, rs, size);
    }
    changed
}

/// A set's share of `to_add` replicas (kube's `GetReplicaSetProportion`).
fn proportion(rs: &Value, d: &Value, to_add: i64, added: i64) -> i64 {
    if replicas_of(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = if replicas_of(d) == 0 {
        -replicas_of(rs)
    } else {
        let (surge, _) = fenceposts(d);
        let max_now = replicas_of(d) + surge;
        let before = annotation(rs, MAX)
            .and_then(|m| m.parse::<i64>().ok())
            .filter(|m| *m > 0)
            .unwrap_or_else(|| status_count(d, "replicas"));
        if before == 0 {
            0
        } else {
            ((replicas_of(rs) * max_now) as f64 / before as f64).round() as i64 - replicas_of(rs)
        }
    };
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// One step of a rolling update (kube's `rolloutRolling`).
fn rolling(st: &mut State, d: &Arc<Value>, sets: Sets) -> bool {
    let mut changed = false;
    let sets = sync_new_set(st, d, sets, true, &mut changed);
    let d = current(st, d);
    let replicas = replicas_of(&d);
    // Scale the new set up within the surge.
    if let Some(new) = &sets.new {
        let wanted = match replicas_of(new) {
            n if n == replicas => n,
            n if n > replicas => replicas,
            _ => new_set_replicas(&d, &sets.all(), new),
        };
        if wanted != replicas_of(new) && scale_set(st, &d, new, wanted) {
            let sets = refresh(st, &sets);
            write_status(st, &current(st, &d), &sets, true);
            return true;
        }
    }
    // Scale old sets down within the unavailability.
    let scaled_down = scale_down_old(st, &d, &sets);
    let sets = refresh(st, &sets);
    if scaled_down {
        write_status(st, &current(st, &d), &sets, true);
        return true;
    }
    if complete(&d, &status_of(&d, &sets)) {
        changed |= clean_up(st, &d, &sets);
    }
    let sets = refresh(st, &sets);
    changed | write_status(st, &current(st, &d), &sets, true)
}

/// kube's `reconcileOldReplicaSets`: first the old sets' unavailable replicas, then available
/// ones down to the minimum available.
fn scale_down_old(st: &mut State, d: &Value, sets: &Sets) -> bool {
    let old_count: i64 = sets.old.iter().map(|rs| replicas_of(rs)).sum();
    if old_count == 0 {
        return false;
    }
    let all_count: i64 = sets.all().iter().map(|rs| replicas_of(rs)).sum();
    let min_available = replicas_of(d) - max_unavailable(d);
    let new_unavailable = sets
        .new
        .as_ref()
        .map_or(0, |n| replicas_of(n) - status_count(n, "availableReplicas"));
    let room = all_count - min_available - new_unavailable;
    if room <= 0 {
        return false;
    }
    let mut changed = false;
    // Unhealthy replicas of the old sets go first, oldest set first.
    let mut cleaned = 0;
    for rs in &sets.old {
        if cleaned >= room {
            break;
        }
        let unhealthy = replicas_of(rs) - status_count(rs, "availableReplicas");
        if replicas_of(rs) == 0 || unhealthy <= 0 {
            continue;
        }
        let down = (room - cleaned).min(unhealthy);
        changed |= scale_set(st, d, rs, replicas_of(rs) - down);
        cleaned += down;
    }
    let sets = refresh(st, sets);
    let available: i64 = sets
        .all()
        .iter()
        .map(|rs| status_count(rs, "availableReplicas"))
        .sum();
    if available <= min_available {
        return changed;
    }
    let mut left = available - min_available;
    for rs in &sets.old {
        if left <= 0 {
            break;
        }
        if replicas_of(rs) == 0 {
            continue;
        }
        let down = replicas_of(rs).min(left);
        changed |= scale_set(st, d, rs, replicas_of(rs) - down);
        left -= down;
    }
    changed
}

/// One step of a `Recreate` rollout: old sets to zero, then, once their Pods are gone, the new
/// set to the replicas.
fn recreate(st: &mut State, d: &Arc<Value>, sets: Sets) -> bool {
    let mut changed = false;
    let sets = sync_new_set(st, d, sets, false, &mut changed);
    let d = current(st, d);
    let mut scaled = false;
    for rs in sets.old.iter().filter(|rs| replicas_of(rs) > 0) {
        scaled |= scale_set(st, &d, rs, 0);
    }
    if scaled {
        let sets = refresh(st, &sets);
        write_status(st, &current(st, &d), &sets, true);
        return true;
    }
    // Any Pod of an old set not finished keeps the new one waiting.
    let old_uids: Vec<&str> = sets
        .old
        .iter()
        .map(|rs| str_at(rs, "/metadata/uid"))
        .collect();
    let running = objects(st, "", "pods", Some(str_at(&d, "/metadata/namespace")))
        .iter()
        .any(|p| {
            controller_uid(p).is_some_and(|u| old_uids.contains(&u))
                && !matches!(str_at(p, "/status/phase"), "Succeeded" | "Failed")
        });
    if running {
        return changed | write_status(st, &d, &sets, true);
    }
    let sets = if sets.new.is_none() {
        sync_new_set(st, &d, sets, true, &mut changed)
    } else {
        sets
    };
    let d = current(st, &d);
    if let Some(new) = &sets.new
        && replicas_of(new) != replicas_of(&d)
    {
        changed |= scale_set(st, &d, new, replicas_of(&d));
    }
    let sets = refresh(st, &sets);
    if complete(&d, &status_of(&d, &sets)) {
        changed |= clean_up(st, &d, &sets);
    }
    let sets = refresh(st, &sets);
    changed | write_status(st, &current(st, &d), &sets, true)
}

/// Deletes the oldest fully scaled-down sets beyond `revisionHistoryLimit`.
fn clean_up(st: &mut State, d: &Value, sets: &Sets) -> bool {
    let limit = d["spec"]["revisionHistoryLimit"]
        .as_i64()
        .unwrap_or(10)
        .max(0) as usize;
    let mut idle: Vec<&Arc<Value>> = sets
        .old
        .iter()
        .filter(|rs| {
            replicas_of(rs) == 0
                && status_count(rs, "replicas") == 0
                && !deleting(rs)
                && rs["status"]["observedGeneration"].as_i64()
                    >= rs["metadata"]["generation"].as_i64()
        })
        .collect();
    if idle.len() <= limit {
        return false;
    }
    idle.sort_by_key(|rs| revision(rs));
    let mut changed = false;
    for rs in &idle[..idle.len() - limit] {
        let Some(t) = target(
            st,
            "apps",
            "replicasets",
            str_at(rs, "/metadata/namespace"),
            None,
        ) else {
            continue;
        };
        match crate::delete::delete_locked(st, &t, rs, false) {
            Ok(_) => changed = true,
            Err(e) => {
                tracing::warn!(replicaset = %str_at(rs, "/metadata/name"), error = %e.message,
                "deleting an old ReplicaSet")
            }
        }
    }
    changed
}

fn progress_deadline(d: &Value) -> Option<i64> {
    // kube's "no deadline" is the largest int32.
    d["spec"]["progressDeadlineSeconds"]
        .as_i64()
        .or(Some(600))
        .filter(|s| *s != i64::from(i32::MAX))
}

fn progressing(status: &str, reason: &str, message: String) -> Value {
    json!({"type": "Progressing", "status": status, "reason": reason, "message": message})
}

/// Sets condition `c` as kube's `SetDeploymentCondition` does (nothing when the status and
/// reason are the same).
fn set_deployment_condition(conditions: &mut Vec<Value>, c: Value) {
    let same = conditions.iter().any(|old| {
        old["type"] == c["type"] && old["status"] == c["status"] && old["reason"] == c["reason"]
    });
    if !same {
        set_condition(conditions, c, true);
    }
}

/// Writes condition `c` into the Deployment's status at once; whether it wrote.
fn with_condition(st: &mut State, d: &Arc<Value>, c: Value) -> bool {
    let d = current(st, d);
    let mut status = d["status"].clone();
    let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    set_deployment_condition(&mut conditions, c);
    status["conditions"] = json!(conditions);
    put_status(st, &d, status)
}

/// A paused Deployment's `Progressing` condition (`DeploymentPaused`, `DeploymentResumed`).
fn paused_condition(st: &mut State, d: &Arc<Value>) -> bool {
    if progress_deadline(d).is_none() {
        return false;
    }
    let reason = condition(d, "Progressing").map(|c| str_at(c, "/reason"));
    if reason == Some("ProgressDeadlineExceeded") {
        return false;
    }
    let paused = d["spec"]["paused"] == true;
    let was = reason == Some("DeploymentPaused");
    match (paused, was) {
        (true, false) => with_condition(
            st,
            d,
            progressing("Unknown", "DeploymentPaused", "Deployment is paused".into()),
        ),
        (false, true) => with_condition(
            st,
            d,
            progressing(
                "Unknown",
                "DeploymentResumed",
                "Deployment is resumed".into(),
            ),
        ),
        _ => false,
    }
}

/// The counts of kube's `calculateStatus`, with the `Available` condition.
fn status_of(d: &Value, sets: &Sets) -> Value {
    let all = sets.all();
    let sum = |field: &str| all.iter().map(|rs| status_count(rs, field)).sum::<i64>();
    let available = sum("availableReplicas");
    let total: i64 = all.iter().map(|rs| replicas_of(rs)).sum();
    let mut status = json!({});
    if let Some(g) = d.pointer("/metadata/generation") {
        status["observedGeneration"] = g.clone();
    }
    for (field, n) in [
        ("replicas", sum("replicas")),
        (
            "updatedReplicas",
            sets.new.as_ref().map_or(0, |n| status_count(n, "replicas")),
        ),
        ("readyReplicas", sum("readyReplicas")),
        ("availableReplicas", available),
        ("unavailableReplicas", (total - available).max(0)),
    ] {
        if n != 0 {
            status[field] = json!(n);
        }
    }
    if let Some(c) = d["status"].get("collisionCount") {
        status["collisionCount"] = c.clone();
    }
    let mut conditions = d["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let c = if available >= replicas_of(d) - max_unavailable(d) {
        json!({"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability."})
    } else {
        json!({"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
            "message": "Deployment does not have minimum availability."})
    };
    set_deployment_condition(&mut conditions, c);
    status["conditions"] = json!(conditions);
    status
}

/// kube's `DeploymentComplete`.
fn complete(d: &Value, status: &Value) -> bool {
    let replicas = replicas_of(d);
    let n = |f: &str| status[f].as_i64().unwrap_or(0);
    n("updatedReplicas") == replicas
        && n("replicas") == replicas
        && n("availableReplicas") == replicas
        && status["observedGeneration"].as_i64() >= d["metadata"]["generation"].as_i64()
}

/// Computes and writes the Deployment's status; with `rollout`, the `Progressing` condition as
/// kube's `syncRolloutStatus` estimates it, and the sets' `ReplicaFailure`.
fn write_status(st: &mut State, d: &Arc<Value>, sets: &Sets, rollout: bool) -> bool {
    let mut status = status_of(d, sets);
    if rollout {
        let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        sync_progressing(st, d, sets, &status, &mut conditions);
        let failure = sets
            .all()
            .iter()
            .find_map(|rs| condition(rs, "ReplicaFailure").cloned());
        match failure {
            Some(f) => set_deployment_condition(
                &mut conditions,
                json!({"type": "ReplicaFailure",
                "status": f["status"], "reason": f["reason"], "message": f["message"]}),
            ),
            None => conditions.retain(|c| c["type"] != "ReplicaFailure"),
        }
        status["conditions"] = json!(conditions);
    }
    put_status(st, d, status)
}

/// The `Progressing` condition of kube's `syncRolloutStatus`: none without a progress deadline;
/// `NewReplicaSetAvailable` once complete; `ReplicaSetUpdated` (its update time now) while the
/// new `status` shows progress over the stored one; `ProgressDeadlineExceeded` once the last
/// progress is older than the deadline, and until then a wake-up at the deadline.
fn sync_progressing(
    st: &mut State,
    d: &Value,
    sets: &Sets,
    status: &Value,
    conditions: &mut Vec<Value>,
) {
    let deadline = progress_deadline(d);
    if deadline.is_none() {
        conditions.retain(|c| c["type"] != "Progressing");
    }
    let current = condition(d, "Progressing");
    let done = status["replicas"] == status["updatedReplicas"]
        && current.is_some_and(|c| c["reason"] == "NewReplicaSetAvailable");
    let Some(deadline) = deadline.filter(|_| !done) else {
        return;
    };
    let set_name = sets
        .new
        .as_ref()
        .map(|n| str_at(n, "/metadata/name").to_string());
    let named = |what: &str| match &set_name {
        Some(n) => format!("ReplicaSet \"{n}\" {what}"),
        None => format!("Deployment \"{}\" {what}", str_at(d, "/metadata/name")),
    };
    if complete(d, status) {
        let c = progressing(
            "True",
            "NewReplicaSetAvailable",
            named("has successfully progressed."),
        );
        set_deployment_condition(conditions, c);
    } else if progressed(&d["status"], status) {
        // Progress: the condition is written again, its update time now.
        let mut c = progressing("True", "ReplicaSetUpdated", named("is progressing."));
        let since = current
            .filter(|c| c["status"] == "True")
            .map(|c| c["lastTransitionTime"].clone());
        conditions.retain(|c| c["type"] != "Progressing");
        c["lastUpdateTime"] = json!(now());
        c["lastTransitionTime"] = since.unwrap_or_else(|| json!(now()));
        conditions.push(c);
    } else if let Some(c) = conditions.iter().find(|c| c["type"] == "Progressing") {
        let reason = str_at(c, "/reason");
        let since = c["lastUpdateTime"]
            .as_str()
            .and_then(seconds_since)
            .unwrap_or(0.0);
        if reason == "ProgressDeadlineExceeded"
            || (reason != "NewReplicaSetAvailable" && since > deadline as f64)
        {
            let c = progressing(
                "False",
                "ProgressDeadlineExceeded",
                named("has timed out progressing."),
            );
            set_deployment_condition(conditions, c);
        } else if reason != "NewReplicaSetAvailable" {
            st.wake_within(Duration::from_secs_f64(
                (deadline as f64 - since).max(0.0) + 1.0,
            ));
        }
    }
}

/// Whether the `new` status shows progress over the `old` one, as kube's `DeploymentProgressing`
/// judges it: more updated, ready or available replicas, or fewer old ones.
fn progressed(old: &Value, new: &Value) -> bool {
    let old_replicas = |s: &Value| {
        s["replicas"].as_i64().unwrap_or(0) - s["updatedReplicas"].as_i64().unwrap_or(0)
    };
    let more = |f: &str| new[f].as_i64().unwrap_or(0) > old[f].as_i64().unwrap_or(0);
    more("updatedReplicas")
        || old_replicas(new) < old_replicas(old)
        || more("readyReplicas")
        || more("availableReplicas")
}

/// Writes the Deployment's status (to the Deployment as stored now) if it changed; whether
/// it wrote.
fn put_status(st: &mut State, d: &Arc<Value>, status: Value) -> bool {
    let d = current(st, d);
    super::write_status(st, "apps", "deployments", &d, status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_kubes_alphabet_and_change_with_the_template_and_collisions() {
        let t = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        let h = template_hash(&t, None);
        assert!(!h.is_empty() && h.len() <= 10, "{h}");
        assert!(
            h.bytes().all(|b| crate::names::SAFE_ALPHABET.contains(&b)),
            "{h}"
        );
        assert_eq!(h, template_hash(&t, None));
        assert_ne!(h, template_hash(&t, Some(1)));
        let mut other = t.clone();
        other["spec"]["containers"][0]["image"] = json!("nginx:2");
        assert_ne!(h, template_hash(&other, None));
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailability_down() {
        let d = |replicas: i64, surge: Value, unavailable: Value| {
            json!({"spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}}})
        };
        assert_eq!(fenceposts(&d(3, Value::Null, Value::Null)), (1, 0));
        assert_eq!(fenceposts(&d(10, json!("25%"), json!("25%"))), (3, 2));
        assert_eq!(fenceposts(&d(3, json!(0), json!(0))), (0, 1));
        assert_eq!(fenceposts(&d(3, json!(1), json!(5))), (1, 3));
    }

    #[test]
    fn templates_compare_without_their_hash_label() {
        let a = json!({"metadata": {"labels": {"app": "web"}}, "spec": {}});
        let mut b = a.clone();
        b["metadata"]["labels"][HASH_LABEL] = json!("abc");
        assert!(same_template(&a, &b));
        b["metadata"]["labels"]["app"] = json!("db");
        assert!(!same_template(&a, &b));
    }
}
