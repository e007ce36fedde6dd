//! A StatefulSet's claims: one per `volumeClaimTemplates` entry and Pod, created before the
//! Pod, and the owner references kube's `persistentVolumeClaimRetentionPolicy` rules give
//! them (`isClaimOwnerUpToDate`, `updateClaimOwnerRefForSetAndPod`), so the garbage collector
//! deletes them with the StatefulSet or with a scaled-down Pod.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{Pass, Set, ordinal, refs_of};
use crate::cluster::{controller_ref, create, deleting};
use crate::json::str_at;
use crate::registry::TypeMeta;
use crate::registry::apps::STATEFUL_SET;
use crate::registry::core::{PERSISTENT_VOLUME_CLAIM, POD};

impl Pass<'_> {
    fn claim(&self, name: &str) -> Option<Arc<Value>> {
        let key = (String::new(), "persistentvolumeclaims".to_string());
        self.st.get(&key, &self.set.ns, name)
    }

    /// kube's `createPersistentVolumeClaims`: each missing claim of the Pod at `ordinal`
    /// created; a claim being deleted holds the Pod back.
    pub(super) fn create_claims(&mut self, ordinal: i64) -> Result<(), ()> {
        let set = self.set;
        let mut result = Ok(());
        for template in set.claim_templates() {
            let name = claim_name(set, template, ordinal);
            match self.claim(&name) {
                None => {
                    let t = self.claims.clone();
                    let claim = new_claim(set, template, &name);
                    match create(self.st, &t, claim, "a StatefulSet's PersistentVolumeClaim") {
                        Ok(_) => self.changed = true,
                        Err(_) => result = Err(()),
                    }
                }
                Some(c) if deleting(&c) => {
                    tracing::debug!(claim = %name, namespace = %set.ns, "a claim being deleted");
                    result = Err(());
                }
                Some(_) => {}
            }
        }
        result
    }

    /// kube's `PodClaimIsStale`: with `whenScaled: Delete`, a claim still owned by an earlier
    /// Pod of the same name is left for the garbage collector before the Pod is created again.
    pub(super) fn claims_stale(&self, ordinal: i64) -> bool {
        let set = self.set;
        if !set.delete_when_scaled {
            return false;
        }
        let pod_name = set.pod_name(ordinal);
        let pod = Owner::pod(&pod_name, "");
        (set.claim_templates().iter())
            .filter_map(|t| self.claim(&claim_name(set, t, ordinal)))
            .any(|c| has_stale_ref(&c, &pod))
    }

    /// kube's `UpdatePodClaimForRetentionPolicy`: the owner references of `pod`'s claims set
    /// as the retention policy wants them.
    pub(super) fn keep_claims(&mut self, pod: &Value) -> Result<(), ()> {
        let set = self.set;
        let Some(ordinal) = ordinal(pod) else {
            return Ok(());
        };
        let owners = Owners {
            set: Owner::set(set),
            pod: Owner::pod(str_at(pod, "/metadata/name"), str_at(pod, "/metadata/uid")),
            scaled_down: !set.in_range(ordinal),
            delete_with_set: set.delete_with_set,
            delete_when_scaled: set.delete_when_scaled,
        };
        for template in set.claim_templates() {
            let Some(claim) = self.claim(&claim_name(set, template, ordinal)) else {
                continue;
            };
            if owners.up_to_date(&claim) {
                continue;
            }
            let t = self.claims.clone();
            if self.set_refs(&t, &claim, owners.refs(&claim)).is_none() {
                return Err(());
            }
        }
        Ok(())
    }
}

pub(super) fn claim_name(set: &Set, template: &Value, ordinal: i64) -> String {
    format!(
        "{}-{}-{ordinal}",
        str_at(template, "/metadata/name"),
        set.name
    )
}

/// The claim of `template` named `name`, labelled with the template's labels and the
/// selector's (kube's `getPersistentVolumeClaims`).
fn new_claim(set: &Set, template: &Value, name: &str) -> Value {
    let mut meta: Map<String, Value> = (template["metadata"].as_object().into_iter().flatten())
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(set.ns));
    let mut labels = meta
        .get("labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let selected = set.obj.pointer("/spec/selector/matchLabels");
    for (k, v) in selected.and_then(Value::as_object).into_iter().flatten() {
        labels.insert(k.clone(), v.clone());
    }
    if !labels.is_empty() {
        meta.insert("labels".into(), json!(labels));
    }
    json!({"apiVersion": PERSISTENT_VOLUME_CLAIM.api_version, "kind": PERSISTENT_VOLUME_CLAIM.kind, "metadata": meta,
        "spec": template["spec"]})
}

/// An object a claim's owner reference may point at.
struct Owner<'a> {
    kind: TypeMeta,
    name: &'a str,
    /// Empty for a Pod not created yet.
    uid: &'a str,
}

impl<'a> Owner<'a> {
    fn set(set: &'a Set) -> Self {
        let (name, uid) = (&set.name, &set.uid);
        Self {
            kind: STATEFUL_SET,
            name,
            uid,
        }
    }

    fn pod(name: &'a str, uid: &'a str) -> Self {
        Self {
            kind: POD,
            name,
            uid,
        }
    }

    /// Whether `r` names this object (by kind and name, whatever its uid).
    fn named_by(&self, r: &Value) -> bool {
        self.kind.named_by(r) && r["name"] == self.name
    }

    fn owns(&self, claim: &Value) -> bool {
        !self.uid.is_empty() && refs_of(claim).iter().any(|r| r["uid"] == self.uid)
    }

    fn controller_ref(&self) -> Value {
        controller_ref(self.kind, self.name, self.uid)
    }
}

/// A reference naming `owner` with another uid: an earlier object of that name.
fn has_stale_ref(claim: &Value, owner: &Owner<'_>) -> bool {
    (refs_of(claim).iter())
        .find(|r| owner.named_by(r))
        .is_some_and(|r| r["uid"] != owner.uid)
}

/// The owners a claim of one Pod should have, by kube's retention policy rules
/// (`isClaimOwnerUpToDate`, `updateClaimOwnerRefForSetAndPod`).
struct Owners<'a> {
    set: Owner<'a>,
    pod: Owner<'a>,
    /// The Pod's ordinal is past the replicas.
    scaled_down: bool,
    delete_with_set: bool,
    delete_when_scaled: bool,
}

impl Owners<'_> {
    fn retain_all(&self) -> bool {
        !self.delete_with_set && !self.delete_when_scaled
    }

    /// A controller reference other than the StatefulSet's and the Pod's (or one of theirs
    /// with another uid): the claim is someone else's to manage.
    fn unexpected_controller(&self, claim: &Value) -> bool {
        if self.retain_all() {
            return false;
        }
        refs_of(claim).iter().any(|r| {
            if self.set.named_by(r) {
                r["uid"] != self.set.uid
            } else if self.pod.named_by(r) {
                r["uid"] != self.pod.uid
            } else {
                r["controller"] == true
            }
        })
    }

    /// The owners wanted: the StatefulSet's, the Pod's.
    fn wanted(&self) -> (bool, bool) {
        let by_set = self.delete_with_set && !(self.delete_when_scaled && self.scaled_down);
        let by_pod = self.delete_when_scaled && self.scaled_down;
        (by_set, by_pod)
    }

    fn up_to_date(&self, claim: &Value) -> bool {
        if has_stale_ref(claim, &self.set) || has_stale_ref(claim, &self.pod) {
            // Left to the garbage collector.
            return true;
        }
        let (has_set, has_pod) = (self.set.owns(claim), self.pod.owns(claim));
        if self.unexpected_controller(claim) {
            return !has_set && !has_pod;
        }
        let uncontrolled = refs_of(claim).iter().any(|r| {
            let ours = (!self.set.uid.is_empty() && r["uid"] == self.set.uid)
                || (!self.pod.uid.is_empty() && r["uid"] == self.pod.uid);
            ours && r["controller"] != true
        });
        if uncontrolled {
            return false;
        }
        if self.retain_all() {
            return !has_set && !has_pod;
        }
        (has_set, has_pod) == self.wanted()
    }

    /// The claim's owner references as the policy wants them.
    fn refs(&self, claim: &Value) -> Vec<Value> {
        let unexpected = self.unexpected_controller(claim);
        let mut refs = refs_of(claim);
        refs.retain(|r| !self.set.named_by(r) && !self.pod.named_by(r));
        if unexpected {
            return refs;
        }
        let (by_set, by_pod) = self.wanted();
        for (wanted, owner) in [(by_pod, &self.pod), (by_set, &self.set)] {
            if wanted && !owner.uid.is_empty() {
                refs.push(owner.controller_ref());
            }
        }
        refs
    }
}
