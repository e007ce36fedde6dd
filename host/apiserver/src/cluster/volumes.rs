//! kube-controller-manager's PersistentVolume controller, for dev mode, with a fake dynamic
//! provisioner standing in for a CSI driver's external provisioner.
//!
//! The cluster gets a default StorageClass `standard` (provisioner `wasmctrl.dev/fake`,
//! `reclaimPolicy: Delete`, `volumeBindingMode: Immediate`) while it has none at all, so a user
//! may replace it. As kube's controller does: a pending claim binds to the smallest Available
//! volume that fits it (class, access modes, volume mode, capacity, selector; a volume
//! pre-bound to it through `claimRef` first); a claim without a class is given the default one
//! (kube's retroactive default StorageClass); otherwise its class's provisioner is named on it
//! (`volume.kubernetes.io/storage-provisioner`) and, for `wasmctrl.dev/fake`, a volume
//! `pvc-<claim uid>` is provisioned (a `hostPath` under `/var/lib/wasmctrl/volumes`) and bound.
//! A `WaitForFirstConsumer` class waits for the scheduler to name a node on the claim
//! (`volume.kubernetes.io/selected-node`). Binding writes what kube writes: the volume's
//! `claimRef` and phase, the claim's `volumeName`, annotations, phase, capacity and access
//! modes. A volume whose claim is gone is `Released` and reclaimed: kept (`Retain`) or deleted
//! (`Delete`: by the fake provisioner for its volumes, by kube's `hostPath` deleter rules for
//! others, which fail as kube's do). `lastPhaseTransitionTime` follows each phase change.
//!
//! Left out: Events, `Recycle` (deprecated; such a volume stays `Released`), volume expansion,
//! `volumeAttributesClassName` (off in 1.32) and data sources.

use std::sync::Arc;

use serde_json::{Value, json};

use super::scheduler::selects_node;
use super::{create, deleting, objects, target, update, write_status};
use crate::admission::now;
use crate::catalog::ResKey;
use crate::defaults::{IS_DEFAULT, default_class};
use crate::delete;
use crate::json::str_at;
use crate::quantity::Quantity;
use crate::registry::core::{PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM};
use crate::store::State;
use crate::validate::selects;

/// The fake provisioner's name, on the default StorageClass and the volumes it provisions.
pub(crate) const PROVISIONER: &str = "wasmctrl.dev/fake";
/// The StorageClass kept while there is none.
const DEFAULT_CLASS: &str = "standard";
/// Where the fake provisioner's volumes would live on a node.
const VOLUME_DIR: &str = "/var/lib/wasmctrl/volumes";

const CLASS_BETA: &str = "volume.beta.kubernetes.io/storage-class";
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
const STORAGE_PROVISIONER_BETA: &str = "volume.beta.kubernetes.io/storage-provisioner";
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

fn claims_key() -> ResKey {
    (String::new(), "persistentvolumeclaims".into())
}

fn volumes_key() -> ResKey {
    (String::new(), "persistentvolumes".into())
}

fn classes_key() -> ResKey {
    ("storage.k8s.io".into(), "storageclasses".into())
}

/// Keeps the default StorageClass, binds claims and reclaims volumes; whether anything was
/// written.
pub(crate) fn sync(st: &mut State) -> bool {
    let mut changed = default_class_kept(st);
    for claim in objects(st, "", "persistentvolumeclaims", None) {
        // Each object read again: an earlier one's sync may have written it.
        let ns = str_at(&claim, "/metadata/namespace");
        if let Some(claim) = st.get(&claims_key(), ns, str_at(&claim, "/metadata/name")) {
            changed |= sync_claim(st, &claim);
        }
    }
    for volume in objects(st, "", "persistentvolumes", None) {
        if let Some(volume) = st.get(&volumes_key(), "", str_at(&volume, "/metadata/name")) {
            changed |= sync_volume(st, &volume);
        }
    }
    changed
}

/// Creates the `standard` StorageClass if there is no StorageClass at all.
fn default_class_kept(st: &mut State) -> bool {
    if !objects(st, "storage.k8s.io", "storageclasses", None).is_empty() {
        return false;
    }
    let Some(t) = target(st, "storage.k8s.io", "storageclasses", "", None) else {
        return false;
    };
    let class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": DEFAULT_CLASS, "annotations": {IS_DEFAULT: "true"}},
        "provisioner": PROVISIONER, "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate"});
    create(st, &t, class, "the default StorageClass").is_ok()
}

fn annotation<'a>(o: &'a Value, key: &str) -> Option<&'a str> {
    o["metadata"]["annotations"][key].as_str()
}

/// The class a claim asks for (`None`: it names none, not even `""`).
fn claim_class(claim: &Value) -> Option<&str> {
    annotation(claim, CLASS_BETA).or_else(|| claim["spec"]["storageClassName"].as_str())
}

fn volume_class(volume: &Value) -> &str {
    annotation(volume, CLASS_BETA).unwrap_or_else(|| str_at(volume, "/spec/storageClassName"))
}

fn volume_mode(o: &Value) -> &str {
    o["spec"]["volumeMode"].as_str().unwrap_or("Filesystem")
}

fn storage(resources: &Value) -> Quantity {
    resources["storage"]
        .as_str()
        .and_then(Quantity::parse)
        .unwrap_or(Quantity::ZERO)
}

/// Whether the volume's `claimRef` points at the claim (kube's `IsVolumeBoundToClaim`).
fn bound_to(volume: &Value, claim: &Value) -> bool {
    let r = &volume["spec"]["claimRef"];
    r.is_object()
        && r["name"] == claim["metadata"]["name"]
        && r["namespace"] == claim["metadata"]["namespace"]
        && (str_at(r, "/uid").is_empty() || r["uid"] == claim["metadata"]["uid"])
}

/// An object reference to the claim, as kube's `GetReference` makes it.
fn reference(claim: &Value) -> Value {
    json!({"kind": PERSISTENT_VOLUME_CLAIM.kind, "namespace": claim["metadata"]["namespace"],
        "name": claim["metadata"]["name"], "uid": claim["metadata"]["uid"], "apiVersion": "v1",
        "resourceVersion": claim["metadata"]["resourceVersion"]})
}

fn sync_claim(st: &mut State, claim: &Arc<Value>) -> bool {
    if annotation(claim, BIND_COMPLETED).is_some() {
        return sync_bound(st, claim);
    }
    if deleting(claim) {
        return false;
    }
    let wanted = str_at(claim, "/spec/volumeName");
    if wanted.is_empty() {
        return sync_unbound(st, claim);
    }
    // Pre-bound by the user to a volume.
    match st.get(&volumes_key(), "", wanted) {
        Some(v) if v["spec"]["claimRef"].is_null() || bound_to(&v, claim) => bind(st, &v, claim),
        // Missing, or bound to another claim: pending until that changes.
        _ => claim_phase(st, claim, "Pending", None),
    }
}

/// kube's `syncUnboundClaim` for a claim naming no volume.
fn sync_unbound(st: &mut State, claim: &Arc<Value>) -> bool {
    let class_name = claim_class(claim).unwrap_or("").to_string();
    let class = (!class_name.is_empty())
        .then(|| st.get(&classes_key(), "", &class_name))
        .flatten();
    let delayed = class
        .as_ref()
        .is_some_and(|c| c["volumeBindingMode"] == "WaitForFirstConsumer");
    let selected = annotation(claim, SELECTED_NODE).map(String::from);
    // kube's PV controller leaves a delayed claim to the scheduler, which picks its volume for
    // the node it chose; here that node is the one named on the claim.
    let node = (selected.as_deref().filter(|_| delayed)).map(|name| node_named(st, name));
    if let Some(volume) = best_match(st, claim, delayed, node.as_ref()) {
        return bind(st, &volume, claim);
    }
    if claim_class(claim).is_none() {
        // kube's retroactive default StorageClass: a claim without one gets the default.
        let Some(default) = default_class(st) else {
            return false;
        };
        let Some(t) = target(
            st,
            "",
            "persistentvolumeclaims",
            str_at(claim, "/metadata/namespace"),
            None,
        ) else {
            return false;
        };
        let mut classed = (**claim).clone();
        classed["spec"]["storageClassName"] = default["metadata"]["name"].clone();
        return update(st, &t, claim, classed, "a claim's default StorageClass");
    }
    if (delayed && selected.is_none()) || class_name.is_empty() {
        return false;
    }
    match class {
        Some(class) => provision(st, claim, &class, node.as_ref()),
        None => false,
    }
}

/// The Node `name`, or (none registered) what the scheduler knows of one: its hostname label.
fn node_named(st: &State, name: &str) -> Value {
    match st.get(&(String::new(), "nodes".into()), "", name) {
        Some(node) => (*node).clone(),
        None => json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}),
    }
}

/// kube's `syncBoundClaim`: a claim whose binding completed stays bound, or is `Lost`.
fn sync_bound(st: &mut State, claim: &Arc<Value>) -> bool {
    let name = str_at(claim, "/spec/volumeName");
    match (!name.is_empty())
        .then(|| st.get(&volumes_key(), "", name))
        .flatten()
    {
        Some(v) if v["spec"]["claimRef"].is_null() || bound_to(&v, claim) => bind(st, &v, claim),
        _ => claim_phase(st, claim, "Lost", None),
    }
}

/// The volume the claim binds to (kube's `findMatchingVolume`, in its index's order: fewest
/// access modes, then smallest); with `node`, as the scheduler's binder picks it for that node.
fn best_match(
    st: &State,
    claim: &Value,
    delayed: bool,
    node: Option<&Value>,
) -> Option<Arc<Value>> {
    let requested = storage(&claim["spec"]["resources"]["requests"]);
    let class = claim_class(claim).unwrap_or("");
    let selector = &claim["spec"]["selector"];
    let modes: Vec<&Value> = claim["spec"]["accessModes"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let mut best: Option<((usize, Quantity), Arc<Value>)> = None;
    for volume in objects(st, "", "persistentvolumes", None) {
        let bound = bound_to(&volume, claim);
        if volume["spec"]["claimRef"].is_object() && !bound {
            continue;
        }
        let size = storage(&volume["spec"]["capacity"]);
        if size < requested || volume_mode(&volume) != volume_mode(claim) || deleting(&volume) {
            continue;
        }
        let fits_node = node.is_none_or(|n| affinity_allows(&volume, n));
        if bound {
            return fits_node.then_some(volume);
        }
        if node.is_none() && delayed {
            continue;
        }
        let offered = volume["spec"]["accessModes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if str_at(&volume, "/status/phase") != "Available"
            || (selector.is_object()
                && selects(selector, &volume["metadata"]["labels"]) != Some(true))
            || volume_class(&volume) != class
            || !fits_node
            || !modes.iter().all(|m| offered.contains(m))
        {
            continue;
        }
        let rank = (offered.len(), size);
        if best.as_ref().is_none_or(|(r, _)| rank < *r) {
            best = Some((rank, volume));
        }
    }
    best.map(|(_, v)| v)
}

/// Whether the volume's required node affinity admits `node`.
fn affinity_allows(volume: &Value, node: &Value) -> bool {
    let required = &volume["spec"]["nodeAffinity"]["required"];
    if required.is_null() {
        return true;
    }
    let spec = json!({"affinity": {"nodeAffinity":
        {"requiredDuringSchedulingIgnoredDuringExecution": required}}});
    selects_node(&spec, node)
}

/// Names the class's provisioner on the claim (kube's `setClaimProvisioner`) and, when it is
/// the fake one, provisions the volume as an external provisioner does and binds it.
fn provision(st: &mut State, claim: &Arc<Value>, class: &Value, node: Option<&Value>) -> bool {
    let provisioner = str_at(class, "/provisioner").to_string();
    let ns = str_at(claim, "/metadata/namespace").to_string();
    if provisioner == "kubernetes.io/no-provisioner" {
        return false;
    }
    let (Some(claims_t), Some(volumes_t)) = (
        target(st, "", "persistentvolumeclaims", &ns, None),
        target(st, "", "persistentvolumes", "", None),
    ) else {
        return false;
    };
    let mut changed = false;
    let mut claim = claim.clone();
    if annotation(&claim, STORAGE_PROVISIONER) != Some(&provisioner)
        || annotation(&claim, STORAGE_PROVISIONER_BETA) != Some(&provisioner)
    {
        let mut named = (*claim).clone();
        let annotations = &mut named["metadata"]["annotations"];
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[STORAGE_PROVISIONER] = json!(provisioner);
        annotations[STORAGE_PROVISIONER_BETA] = json!(provisioner);
        if !update(st, &claims_t, &claim, named, "a claim's provisioner") {
            return false;
        }
        changed = true;
        let Some(fresh) = st.get(&claims_key(), &ns, str_at(&claim, "/metadata/name")) else {
            return changed;
        };
        claim = fresh;
    }
    // Another provisioner's claim; and, as sig-storage's provisioner library, none with a
    // selector.
    let request = claim["spec"]["resources"]["requests"]["storage"].clone();
    if provisioner != PROVISIONER || !claim["spec"]["selector"].is_null() || !request.is_string() {
        return changed;
    }
    let name = format!("pvc-{}", str_at(&claim, "/metadata/uid"));
    if st.get(&volumes_key(), "", &name).is_some() {
        return changed;
    }
    let mut spec = json!({
        "accessModes": claim["spec"]["accessModes"],
        "capacity": {"storage": request},
        "claimRef": reference(&claim),
        "persistentVolumeReclaimPolicy": class["reclaimPolicy"].as_str().unwrap_or("Delete"),
        "storageClassName": class["metadata"]["name"],
        "volumeMode": volume_mode(&claim),
        "hostPath": {"path": format!("{VOLUME_DIR}/{name}"), "type": "DirectoryOrCreate"},
    });
    if class["mountOptions"]
        .as_array()
        .is_some_and(|o| !o.is_empty())
    {
        spec["mountOptions"] = class["mountOptions"].clone();
    }
    // A node's local directory: only that node can mount it.
    if let Some(node) = node {
        spec["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In",
             "values": [node["metadata"]["labels"]["kubernetes.io/hostname"].as_str()
                .unwrap_or_else(|| str_at(node, "/metadata/name"))]}]}]}});
    }
    let volume = json!({"apiVersion": PERSISTENT_VOLUME.api_version, "kind": PERSISTENT_VOLUME.kind,
        "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER}}, "spec": spec});
    match create(st, &volumes_t, volume, "a provisioned PersistentVolume") {
        Ok(v) => {
            bind(st, &Arc::new(v), &claim);
            true
        }
        Err(_) => changed,
    }
}

/// Binds the volume and the claim to each other as kube's `bind` does: the volume's
/// `claimRef` and phase, then the claim's `volumeName`, annotations and status.
fn bind(st: &mut State, volume: &Arc<Value>, claim: &Arc<Value>) -> bool {
    let ns = str_at(claim, "/metadata/namespace").to_string();
    let claim_name = str_at(claim, "/metadata/name").to_string();
    let volume_name = str_at(volume, "/metadata/name").to_string();
    let (Some(claims_t), Some(volumes_t)) = (
        target(st, "", "persistentvolumeclaims", &ns, None),
        target(st, "", "persistentvolumes", "", None),
    ) else {
        return false;
    };
    let mut changed = false;

    let mut v = (**volume).clone();
    let r = &volume["spec"]["claimRef"];
    let mut dirty = false;
    if !r.is_object()
        || r["name"] != claim["metadata"]["name"]
        || r["namespace"] != claim["metadata"]["namespace"]
        || r["uid"] != claim["metadata"]["uid"]
    {
        v["spec"]["claimRef"] = reference(claim);
        dirty = true;
    }
    if !bound_to(volume, claim) && annotation(volume, BOUND_BY_CONTROLLER).is_none() {
        set_annotation(&mut v, BOUND_BY_CONTROLLER, "yes");
        dirty = true;
    }
    if dirty {
        if !update(st, &volumes_t, volume, v, "a volume's claim") {
            return changed;
        }
        changed = true;
    }
    let Some(volume) = st.get(&volumes_key(), "", &volume_name) else {
        return changed;
    };
    changed |= volume_phase(st, &volume, "Bound", None);

    let mut c = (**claim).clone();
    let mut dirty = false;
    if str_at(claim, "/spec/volumeName") != volume_name {
        c["spec"]["volumeName"] = json!(volume_name);
        if annotation(claim, BOUND_BY_CONTROLLER).is_none() {
            set_annotation(&mut c, BOUND_BY_CONTROLLER, "yes");
        }
        dirty = true;
    }
    if annotation(claim, BIND_COMPLETED).is_none() {
        set_annotation(&mut c, BIND_COMPLETED, "yes");
        dirty = true;
    }
    if dirty {
        if !update(st, &claims_t, claim, c, "a claim's volume") {
            return changed;
        }
        changed = true;
    }
    let Some(claim) = st.get(&claims_key(), &ns, &claim_name) else {
        return changed;
    };
    changed | claim_phase(st, &claim, "Bound", Some(&volume))
}

fn set_annotation(o: &mut Value, key: &str, value: &str) {
    let annotations = &mut o["metadata"]["annotations"];
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations[key] = json!(value);
}

/// kube's `updateClaimStatus`: the phase, with the volume's capacity and access modes (none
/// without a volume).
fn claim_phase(st: &mut State, claim: &Arc<Value>, phase: &str, volume: Option<&Value>) -> bool {
    let mut status = claim["status"].clone();
    if !status.is_object() {
        status = json!({});
    }
    status["phase"] = json!(phase);
    if let Some(fields) = status.as_object_mut() {
        for key in ["accessModes", "capacity"] {
            match volume.map(|v| &v["spec"][key]).filter(|v| !v.is_null()) {
                Some(value) => fields.insert(key.into(), value.clone()),
                None => fields.remove(key),
            };
        }
    }
    write_status(st, "", "persistentvolumeclaims", claim, status)
}

/// kube's `updateVolumePhase`, with the `lastPhaseTransitionTime` kube-apiserver sets when the
/// phase changes.
fn volume_phase(st: &mut State, volume: &Arc<Value>, phase: &str, message: Option<&str>) -> bool {
    if str_at(volume, "/status/phase") == phase {
        return false;
    }
    let mut status = volume["status"].clone();
    if !status.is_object() {
        status = json!({});
    }
    status["phase"] = json!(phase);
    status["lastPhaseTransitionTime"] = json!(now());
    match message {
        Some(m) => status["message"] = json!(m),
        None => {
            if let Some(m) = status.as_object_mut() {
                m.remove("message");
            }
        }
    }
    write_status(st, "", "persistentvolumes", volume, status)
}

/// kube's `syncVolume`: a volume is Available, Bound, or Released and reclaimed once its claim
/// is gone.
fn sync_volume(st: &mut State, volume: &Arc<Value>) -> bool {
    if deleting(volume) {
        return false;
    }
    let r = &volume["spec"]["claimRef"];
    if !r.is_object() || str_at(r, "/uid").is_empty() {
        return volume_phase(st, volume, "Available", None);
    }
    let claim = st
        .get(&claims_key(), str_at(r, "/namespace"), str_at(r, "/name"))
        .filter(|c| c["metadata"]["uid"] == r["uid"]);
    let name = str_at(volume, "/metadata/name");
    match claim {
        None => release(st, volume),
        // The claim's sync binds it.
        Some(c) if str_at(&c, "/spec/volumeName").is_empty() => false,
        Some(c) if str_at(&c, "/spec/volumeName") == name => {
            volume_phase(st, volume, "Bound", None)
        }
        // The claim is bound to another volume.
        Some(_) => {
            if annotation(volume, PROVISIONED_BY).is_some()
                && volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
            {
                release(st, volume)
            } else if annotation(volume, BOUND_BY_CONTROLLER).is_some() {
                unbind(st, volume)
            } else {
                false
            }
        }
    }
}

/// Marks the volume `Released` (unless it already `Failed`) and reclaims it.
fn release(st: &mut State, volume: &Arc<Value>) -> bool {
    let mut changed = false;
    let mut volume = volume.clone();
    if !matches!(str_at(&volume, "/status/phase"), "Released" | "Failed") {
        changed = volume_phase(st, &volume, "Released", None);
        match st.get(&volumes_key(), "", str_at(&volume, "/metadata/name")) {
            Some(v) => volume = v,
            None => return changed,
        }
    }
    changed | reclaim(st, &volume)
}

/// kube's `reclaimVolume`: `Retain` keeps the volume; `Delete` deletes it, as its provisioner
/// (the fake one here) or kube's in-tree deleter would, or fails as kube's does.
fn reclaim(st: &mut State, volume: &Arc<Value>) -> bool {
    if volume["spec"]["persistentVolumeReclaimPolicy"] != "Delete"
        || str_at(volume, "/status/phase") == "Failed"
    {
        return false;
    }
    let name = str_at(volume, "/metadata/name");
    let failure = match annotation(volume, PROVISIONED_BY) {
        Some(PROVISIONER) => None,
        // Another provisioner deletes its own volumes.
        Some(_) => return false,
        None => match volume["spec"]["hostPath"]["path"].as_str() {
            // kube's hostPath deleter removes only directories under /tmp.
            Some(path) if path.find("/tmp/").is_some_and(|i| path.len() > i + 5) => None,
            Some(path) => Some(format!(
                "host_path deleter only supports /tmp/.+ but received provided {path}"
            )),
            None => Some(format!(
                "error getting deleter volume plugin for volume \"{name}\": no deletable volume plugin matched"
            )),
        },
    };
    if let Some(message) = failure {
        return volume_phase(st, volume, "Failed", Some(&message));
    }
    let Some(t) = target(st, "", "persistentvolumes", "", None) else {
        return false;
    };
    match delete::delete_locked(st, &t, volume, false) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(volume = %name, error = %e.message, "deleting a released volume");
            false
        }
    }
}

/// kube's `unbindVolume` for a volume the controller bound to a claim that is bound elsewhere:
/// Available again, without `claimRef`.
fn unbind(st: &mut State, volume: &Arc<Value>) -> bool {
    let Some(t) = target(st, "", "persistentvolumes", "", None) else {
        return false;
    };
    let mut v = (**volume).clone();
    if let Some(spec) = v["spec"].as_object_mut() {
        spec.remove("claimRef");
    }
    if let Some(meta) = v["metadata"].as_object_mut() {
        let annotations = meta.get_mut("annotations").and_then(Value::as_object_mut);
        if annotations.is_some_and(|a| {
            a.remove(BOUND_BY_CONTROLLER);
            a.is_empty()
        }) {
            meta.remove("annotations");
        }
    }
    if !update(st, &t, volume, v, "a volume's claim") {
        return false;
    }
    if let Some(v) = st.get(&volumes_key(), "", str_at(volume, "/metadata/name")) {
        volume_phase(st, &v, "Available", None);
    }
    true
}
