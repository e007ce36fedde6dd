//! kube-controller-manager's StatefulSet controller, for dev mode. Each StatefulSet keeps Pods
//! `<name>-<ordinal>` (from `spec.ordinals.start`) with a stable identity (`hostname`,
//! `subdomain`, the `statefulset.kubernetes.io/pod-name` and `apps.kubernetes.io/pod-index`
//! labels) and stable storage (a claim `<template>-<name>-<ordinal>` per
//! `volumeClaimTemplates` entry, created before its Pod).
//!
//! As kube's controller does it: `OrderedReady` creates ordinal i only once every lower one is
//! Running and Ready (and available, with `minReadySeconds`) and scales down from the highest
//! ordinal, one Pod at a time; `Parallel` does both at once. The template's history is kept in
//! ControllerRevisions (`<name>-<hash>`, the hash kube computes over the patch it stores;
//! `revisionHistoryLimit` prunes old ones); `RollingUpdate` replaces the Pods not at the update
//! revision from the highest ordinal down to `partition`, one at a time, waiting for each to be
//! ready again; `OnDelete` leaves that to the user. Pods that failed or finished are deleted
//! and created again. The claims carry the owner references
//! `persistentVolumeClaimRetentionPolicy` asks for, so the garbage collector deletes them with
//! the StatefulSet (`whenDeleted: Delete`) or with a scaled-down Pod (`whenScaled: Delete`).
//!
//! Left out: Events, `maxUnavailable` (alpha in 1.32), and replacing the volumes of a Pod whose
//! claims do not match the templates (kube's update of such a Pod is refused by validation).

mod claims;
mod history;

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{
    available, controller_ref, controller_uid, create, deleting, objects, ready, target, update,
    write_status,
};
use crate::delete;
use crate::handlers::Target;
use crate::json::str_at;
use crate::store::State;
use crate::validate::selects;

use self::claims::claim_name;
use crate::registry::{apps::STATEFUL_SET, core::POD};

const POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
const POD_INDEX: &str = "apps.kubernetes.io/pod-index";
/// On a Pod: the name of its ControllerRevision; on a ControllerRevision: its hash.
const REVISION: &str = "controller-revision-hash";

/// Brings every StatefulSet to its spec; whether anything was written.
pub(crate) fn sync(st: &mut State) -> bool {
    let mut changed = false;
    for obj in objects(st, "apps", "statefulsets", None) {
        // A StatefulSet being deleted is left to the garbage collector, with its Pods.
        if !deleting(&obj) {
            changed |= sync_one(st, obj);
        }
    }
    changed
}

/// What the controller reads of a StatefulSet.
struct Set {
    obj: Arc<Value>,
    ns: String,
    name: String,
    uid: String,
    start: i64,
    replicas: i64,
    min_ready: i64,
    /// `OrderedReady`: one Pod at a time, in ordinal order.
    monotonic: bool,
    /// The `RollingUpdate` strategy (else `OnDelete`).
    rolling: bool,
    /// `updateStrategy.rollingUpdate.partition`, if `rollingUpdate` is given.
    partition: Option<i64>,
    /// `persistentVolumeClaimRetentionPolicy.whenDeleted: Delete`.
    delete_with_set: bool,
    /// `persistentVolumeClaimRetentionPolicy.whenScaled: Delete`.
    delete_when_scaled: bool,
}

impl Set {
    fn read(obj: Arc<Value>) -> Self {
        let spec = &obj["spec"];
        let int = |p: &str| spec.pointer(p).and_then(Value::as_i64);
        let policy = |k: &str| spec["persistentVolumeClaimRetentionPolicy"][k] == "Delete";
        Self {
            ns: str_at(&obj, "/metadata/namespace").to_string(),
            name: str_at(&obj, "/metadata/name").to_string(),
            uid: str_at(&obj, "/metadata/uid").to_string(),
            start: int("/ordinals/start").unwrap_or(0),
            replicas: int("/replicas").unwrap_or(1).max(0),
            min_ready: int("/minReadySeconds").unwrap_or(0),
            monotonic: spec["podManagementPolicy"] != "Parallel",
            rolling: spec["updateStrategy"]["type"] != "OnDelete",
            partition: (spec["updateStrategy"]["rollingUpdate"].is_object())
                .then(|| int("/updateStrategy/rollingUpdate/partition").unwrap_or(0)),
            delete_with_set: policy("whenDeleted"),
            delete_when_scaled: policy("whenScaled"),
            obj,
        }
    }

    fn pod_name(&self, ordinal: i64) -> String {
        format!("{}-{ordinal}", self.name)
    }

    fn in_range(&self, ordinal: i64) -> bool {
        ordinal >= self.start && ordinal < self.start + self.replicas
    }

    fn claim_templates(&self) -> &[Value] {
        self.obj["spec"]["volumeClaimTemplates"]
            .as_array()
            .map_or(&[], Vec::as_slice)
    }

    /// Whether its selector matches `o`'s labels.
    fn selects(&self, o: &Value) -> bool {
        selects(&self.obj["spec"]["selector"], &o["metadata"]["labels"]) == Some(true)
    }

    fn owner_ref(&self) -> Value {
        controller_ref(STATEFUL_SET, &self.name, &self.uid)
    }
}

/// The parent name and ordinal in a StatefulSet Pod's name (`<parent>-<ordinal>`).
fn parent_and_ordinal(name: &str) -> Option<(&str, Option<i64>)> {
    let (parent, digits) = name.rsplit_once('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // kube parses the ordinal as a 32-bit number; a longer one is no ordinal.
    Some((parent, digits.parse::<i32>().ok().map(i64::from)))
}

fn ordinal(pod: &Value) -> Option<i64> {
    parent_and_ordinal(str_at(pod, "/metadata/name")).and_then(|(_, o)| o)
}

fn revision_of(pod: &Value) -> &str {
    pod["metadata"]["labels"][REVISION].as_str().unwrap_or("")
}

fn running_and_ready(pod: &Value) -> bool {
    str_at(pod, "/status/phase") == "Running" && ready(pod)
}

/// A replica's place: a Pod, or one to create at a revision.
enum Slot {
    Live(Arc<Value>),
    New { revision: String },
}

impl Slot {
    fn unavailable(&self, min_ready: i64) -> bool {
        match self {
            Slot::Live(p) => !available(p, min_ready) || deleting(p),
            Slot::New { .. } => true,
        }
    }
}

/// The current and update revisions: their names and templates.
struct Revisions {
    current: String,
    current_template: Value,
    update: String,
    update_template: Value,
    collisions: i64,
}

impl Revisions {
    fn template(&self, name: &str) -> &Value {
        if name == self.current {
            &self.current_template
        } else {
            &self.update_template
        }
    }
}

fn sync_one(st: &mut State, obj: Arc<Value>) -> bool {
    let set = Set::read(obj);
    let Some(mut pass) = Pass::new(st, &set) else {
        return false;
    };
    let pods = pass.claim_pods();
    let history = pass.claim_revisions();
    let Some(revs) = pass.revisions(&history) else {
        return pass.changed;
    };

    let mut slots: Vec<Option<Arc<Value>>> = vec![None; set.replicas as usize];
    let mut condemned = Vec::new();
    for pod in &pods {
        match ordinal(pod) {
            Some(o) if set.in_range(o) => slots[(o - set.start) as usize] = Some(pod.clone()),
            Some(_) => condemned.push(pod.clone()),
            None => {}
        }
    }
    condemned.sort_by_key(|p| Reverse(ordinal(p)));
    // Where a Pod is missing, one at the revision kube's `newVersionedStatefulSetPod` picks.
    let current_replicas = (set.obj.pointer("/status/currentReplicas"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let mut slots: Vec<Slot> = (slots.into_iter().enumerate())
        .map(|(i, pod)| match pod {
            Some(p) => Slot::Live(p),
            None => {
                let ordinal = set.start + i as i64;
                let at_current = match set.partition {
                    None => set.rolling && ordinal < set.start + current_replicas,
                    Some(partition) => ordinal < set.start + partition,
                };
                let revision = if at_current {
                    &revs.current
                } else {
                    &revs.update
                };
                Slot::New {
                    revision: revision.clone(),
                }
            }
        })
        .collect();

    let deleted_for_update = pass.control(&mut slots, &condemned, &revs);

    let live = (slots.iter())
        .filter_map(|s| match s {
            Slot::Live(p) => Some(&**p),
            Slot::New { .. } => None,
        })
        .chain(condemned.iter().map(|p| &**p));
    let mut status = Status::count(live, &set, &revs);
    status.current -= deleted_for_update;
    pass.record_status(status);
    pass.truncate_history(&pods, &history, &revs);
    pass.changed
}

/// One StatefulSet's sync: the store, the targets it writes through, whether it wrote.
struct Pass<'a> {
    st: &'a mut State,
    set: &'a Set,
    pods: Target,
    claims: Target,
    revisions: Target,
    changed: bool,
}

impl<'a> Pass<'a> {
    fn new(st: &'a mut State, set: &'a Set) -> Option<Self> {
        Some(Self {
            pods: target(st, "", "pods", &set.ns, None)?,
            claims: target(st, "", "persistentvolumeclaims", &set.ns, None)?,
            revisions: target(st, "apps", "controllerrevisions", &set.ns, None)?,
            st,
            set,
            changed: false,
        })
    }

    /// `t`'s object `obj` with `refs` as its owner references, written; the stored result.
    fn set_refs(&mut self, t: &Target, obj: &Arc<Value>, refs: Vec<Value>) -> Option<Arc<Value>> {
        let mut new = (**obj).clone();
        new["metadata"]["ownerReferences"] = json!(refs);
        let what = format!("the owner references of a {}", t.res.kind);
        if !update(self.st, t, obj, new, &what) {
            return None;
        }
        self.changed = true;
        let key = (t.res.group.clone(), t.res.plural.clone());
        self.st
            .get(&key, &self.set.ns, str_at(obj, "/metadata/name"))
    }

    /// Adds the StatefulSet as the controller of orphan `obj`; the adopted object.
    fn adopt(&mut self, t: &Target, obj: &Arc<Value>) -> Option<Arc<Value>> {
        let mut refs = refs_of(obj);
        refs.push(self.set.owner_ref());
        self.set_refs(t, obj, refs)
    }

    /// The Pods the StatefulSet owns (kube's `ClaimPods` with `isMemberOf`): its selector
    /// matching and named after it; orphans adopted, Pods no longer matching released.
    fn claim_pods(&mut self) -> Vec<Arc<Value>> {
        let t = self.pods.clone();
        let mut owned = Vec::new();
        for pod in objects(self.st, "", "pods", Some(&self.set.ns)) {
            let member = parent_and_ordinal(str_at(&pod, "/metadata/name"))
                .is_some_and(|(parent, _)| parent == self.set.name);
            let matches = member && self.set.selects(&pod);
            match controller_uid(&pod) {
                Some(u) if u == self.set.uid && matches => owned.push(pod),
                Some(u) if u == self.set.uid => {
                    let mut refs = refs_of(&pod);
                    refs.retain(|r| r["uid"] != self.set.uid.as_str());
                    self.set_refs(&t, &pod, refs);
                }
                None if matches && !deleting(&pod) => owned.extend(self.adopt(&t, &pod)),
                _ => {}
            }
        }
        owned
    }

    /// kube's `updateStatefulSet` after the revisions: replicas created and kept, the
    /// condemned deleted, then the rolling update. How many Pods it deleted for the update.
    fn control(&mut self, slots: &mut [Slot], condemned: &[Arc<Value>], revs: &Revisions) -> i64 {
        let set = self.set;
        let monotonic = set.monotonic;
        let first_unhealthy: Option<String> = (slots.iter().enumerate())
            .find(|(_, s)| s.unavailable(set.min_ready))
            .map(|(i, _)| set.pod_name(set.start + i as i64))
            .or_else(|| {
                (condemned.iter().rev())
                    .find(|p| !available(p, set.min_ready) || deleting(p))
                    .map(|p| str_at(p, "/metadata/name").to_string())
            });

        for (i, slot) in slots.iter_mut().enumerate() {
            match self.replica(slot, set.start + i as i64, revs) {
                Err(()) => return 0,
                Ok(true) if monotonic => return 0,
                Ok(_) => {}
            }
        }
        for pod in condemned {
            if self.keep_claims(pod).is_err() {
                return 0;
            }
        }
        for pod in condemned {
            let name = str_at(pod, "/metadata/name");
            if deleting(pod) {
                if monotonic {
                    return 0;
                }
                continue;
            }
            let first = first_unhealthy.as_deref() == Some(name);
            if monotonic && !first && (!running_and_ready(pod) || !available(pod, set.min_ready)) {
                return 0;
            }
            let deleted = self.delete_pod(pod, "for scale down");
            if monotonic || !deleted {
                return 0;
            }
        }

        if !set.rolling {
            return 0;
        }
        let lowest = set.partition.unwrap_or(0).max(0) as usize;
        for slot in slots.iter().skip(lowest).rev() {
            match slot {
                Slot::Live(pod) if revision_of(pod) != revs.update && !deleting(pod) => {
                    self.delete_pod(pod, "for update");
                    return 1;
                }
                Slot::New { revision } if *revision != revs.update => return 0,
                _ if slot.unavailable(set.min_ready) => return 0,
                _ => {}
            }
        }
        0
    }

    /// kube's `processReplica`: whether a monotonic sync must stop here (`Err` when a write
    /// failed, which stops any sync).
    fn replica(&mut self, slot: &mut Slot, ordinal: i64, revs: &Revisions) -> Result<bool, ()> {
        let set = self.set;
        let pod = match slot {
            Slot::Live(pod) => pod.clone(),
            Slot::New { revision } => {
                if self.claims_stale(ordinal) {
                    return Ok(true);
                }
                self.create_claims(ordinal)?;
                let pod = new_pod(set, revs.template(revision), ordinal, revision);
                let t = self.pods.clone();
                let created = create(self.st, &t, pod, "a StatefulSet's Pod").map_err(|_| ())?;
                self.changed = true;
                // The claims as the retention policy wants them, as far as they can be yet.
                self.keep_claims(&created)?;
                return Ok(true);
            }
        };
        let phase = str_at(&pod, "/status/phase");
        if phase == "Failed" || phase == "Succeeded" {
            // Deleted; created again once it is gone.
            if !deleting(&pod) && !self.delete_pod(&pod, "that has stopped") {
                return Err(());
            }
            return Ok(true);
        }
        if phase == "Pending" {
            self.create_claims(ordinal)?;
            self.keep_claims(&pod)?;
        }
        if set.monotonic
            && (deleting(&pod) || !running_and_ready(&pod) || !available(&pod, set.min_ready))
        {
            return Ok(true);
        }
        if !identity_matches(set, &pod) {
            let mut new = (*pod).clone();
            let labels = &mut new["metadata"]["labels"];
            if !labels.is_object() {
                *labels = json!({});
            }
            labels[POD_NAME] = json!(str_at(&pod, "/metadata/name"));
            labels[POD_INDEX] = json!(ordinal.to_string());
            let t = self.pods.clone();
            if !update(self.st, &t, &pod, new, "a StatefulSet Pod's identity") {
                return Err(());
            }
            self.changed = true;
        }
        self.keep_claims(&pod)?;
        Ok(false)
    }

    fn delete_pod(&mut self, pod: &Arc<Value>, why: &str) -> bool {
        let t = self.pods.clone();
        match delete::delete_locked(self.st, &t, pod, false) {
            Ok(_) => {
                self.changed = true;
                true
            }
            Err(e) => {
                tracing::warn!(pod = %str_at(pod, "/metadata/name"), namespace = %self.set.ns,
                    error = %e.message, "deleting a StatefulSet's Pod {why}");
                false
            }
        }
    }

    /// Writes the status if kube's `inconsistentStatus` finds it changed (completing a
    /// rolling update first), and asks to run again when a Pod comes to be available.
    fn record_status(&mut self, mut status: Status) {
        let set = self.set;
        if set.rolling
            && status.updated == set.replicas
            && status.ready == set.replicas
            && status.replicas == set.replicas
        {
            status.current = status.updated;
            status.current_revision = status.update_revision.clone();
        }
        if set.min_ready > 0 && status.ready != status.available {
            self.st
                .wake_within(Duration::from_secs(set.min_ready as u64));
        }
        let old = &set.obj["status"];
        let int = |k: &str| old[k].as_i64().unwrap_or(0);
        let text = |k: &str| old[k].as_str().unwrap_or("");
        let inconsistent = status.generation > int("observedGeneration")
            || status.replicas != int("replicas")
            || status.current != int("currentReplicas")
            || status.ready != int("readyReplicas")
            || status.updated != int("updatedReplicas")
            || status.current_revision != text("currentRevision")
            || status.available != int("availableReplicas")
            || status.update_revision != text("updateRevision");
        if inconsistent {
            let obj = set.obj.clone();
            self.changed |= write_status(self.st, "apps", "statefulsets", &obj, status.json());
        }
    }
}

fn refs_of(obj: &Value) -> Vec<Value> {
    (obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array))
    .cloned()
    .unwrap_or_default()
}

/// Whether the Pod has the name and labels of its ordinal (kube's `identityMatches`).
fn identity_matches(set: &Set, pod: &Value) -> bool {
    let name = str_at(pod, "/metadata/name");
    matches!(parent_and_ordinal(name), Some((parent, Some(o))) if parent == set.name && name == set.pod_name(o))
        && str_at(pod, "/metadata/namespace") == set.ns
        && pod["metadata"]["labels"][POD_NAME] == name
}

/// A Pod of the template `template` (at revision `revision`) for `ordinal`, as kube's
/// `newVersionedStatefulSetPod` makes it.
fn new_pod(set: &Set, template: &Value, ordinal: i64, revision: &str) -> Value {
    let name = set.pod_name(ordinal);
    let meta_of = &template["metadata"];
    let mut labels = meta_of["labels"].as_object().cloned().unwrap_or_default();
    labels.insert(POD_NAME.into(), json!(name));
    labels.insert(POD_INDEX.into(), json!(ordinal.to_string()));
    labels.insert(REVISION.into(), json!(revision));
    let mut meta = json!({"name": name, "generateName": format!("{}-", set.name),
        "namespace": set.ns, "labels": labels, "ownerReferences": [set.owner_ref()]});
    for key in ["annotations", "finalizers"] {
        let value = &meta_of[key];
        if value.as_object().is_some_and(|m| !m.is_empty())
            || value.as_array().is_some_and(|a| !a.is_empty())
        {
            meta[key] = value.clone();
        }
    }
    let mut spec = template["spec"].clone();
    if !spec.is_object() {
        spec = json!({});
    }
    spec["hostname"] = json!(name);
    let service = str_at(&set.obj, "/spec/serviceName");
    if !service.is_empty() {
        spec["subdomain"] = json!(service);
    }
    // A volume per claim template, replacing the template's volume of the same name.
    let templates = set.claim_templates();
    let mut volumes: Vec<Value> = (templates.iter())
        .map(|t| {
            json!({"name": str_at(t, "/metadata/name"),
                "persistentVolumeClaim": {"claimName": claim_name(set, t, ordinal)}})
        })
        .collect();
    let claimed =
        |v: &Value| (templates.iter()).any(|t| str_at(t, "/metadata/name") == str_at(v, "/name"));
    volumes.extend(
        (spec["volumes"].as_array().into_iter().flatten())
            .filter(|v| !claimed(v))
            .cloned(),
    );
    if volumes.is_empty() {
        if let Some(m) = spec.as_object_mut() {
            m.remove("volumes");
        }
    } else {
        spec["volumes"] = json!(volumes);
    }
    json!({"apiVersion": POD.api_version, "kind": POD.kind, "metadata": meta, "spec": spec})
}

/// A StatefulSet's status, as kube counts it.
struct Status {
    generation: i64,
    replicas: i64,
    ready: i64,
    available: i64,
    current: i64,
    updated: i64,
    current_revision: String,
    update_revision: String,
    collisions: i64,
}

impl Status {
    /// kube's `computeReplicaStatus` over the Pods.
    fn count<'p>(pods: impl Iterator<Item = &'p Value>, set: &Set, revs: &Revisions) -> Self {
        let mut s = Status {
            generation: (set.obj.pointer("/metadata/generation"))
                .and_then(Value::as_i64)
                .unwrap_or(0),
            replicas: 0,
            ready: 0,
            available: 0,
            current: 0,
            updated: 0,
            current_revision: revs.current.clone(),
            update_revision: revs.update.clone(),
            collisions: revs.collisions,
        };
        for pod in pods {
            let created = !str_at(pod, "/status/phase").is_empty();
            s.replicas += i64::from(created);
            if running_and_ready(pod) {
                s.ready += 1;
                s.available += i64::from(available(pod, set.min_ready));
            }
            if created && !deleting(pod) {
                s.current += i64::from(revision_of(pod) == revs.current);
                s.updated += i64::from(revision_of(pod) == revs.update);
            }
        }
        s
    }

    /// As Go writes `StatefulSetStatus` (`omitempty` but on `replicas`, `availableReplicas`,
    /// and the `collisionCount` pointer).
    fn json(&self) -> Value {
        let mut s = json!({"replicas": self.replicas, "availableReplicas": self.available,
            "collisionCount": self.collisions});
        for (key, n) in [
            ("observedGeneration", self.generation),
            ("readyReplicas", self.ready),
            ("currentReplicas", self.current),
            ("updatedReplicas", self.updated),
        ] {
            if n != 0 {
                s[key] = json!(n);
            }
        }
        for (key, text) in [
            ("currentRevision", &self.current_revision),
            ("updateRevision", &self.update_revision),
        ] {
            if !text.is_empty() {
                s[key] = json!(text);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_names_give_parent_and_ordinal() {
        assert_eq!(parent_and_ordinal("web-0"), Some(("web", Some(0))));
        assert_eq!(parent_and_ordinal("my-db-12"), Some(("my-db", Some(12))));
        assert_eq!(parent_and_ordinal("web-99999999999"), Some(("web", None)));
        assert_eq!(parent_and_ordinal("web"), None);
        assert_eq!(parent_and_ordinal("web-a1"), None);
    }
}
