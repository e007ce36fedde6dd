//! kube-controller-manager's DaemonSet controller, for dev mode: each DaemonSet keeps one Pod
//! of its template on every Node that should run it (its `nodeSelector`, required node
//! affinity and the Node's taints against its tolerations, as kube's
//! `NodeShouldRunDaemonPod` decides), each Pod pinned to its Node by node affinity for the
//! scheduler to bind, with the tolerations kube gives daemon Pods. Pods on Nodes that no
//! longer qualify go, failed ones are replaced (with kube's backoff), orphans the selector
//! matches are adopted. Templates are recorded as ControllerRevisions (`<name>-<hash>`),
//! old ones pruned to `revisionHistoryLimit`; a template change rolls out under
//! `RollingUpdate` (`maxUnavailable`, or `maxSurge` new Pods beside the old) or waits for
//! deletions under `OnDelete`. The status counts what kube's does.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::scheduler::{selects_node, tolerates, untolerated_taint};
use super::{
    available, controller_ref, controller_uid, create, deleting, objects, ready, target,
    template_hash, update, write_status,
};
use crate::delete;
use crate::handlers::Target;
use crate::json::str_at;
use crate::registry::{
    apps::{CONTROLLER_REVISION, DAEMON_SET},
    core::POD,
};
use crate::store::State;
use crate::validate::selects;
use wasmctrl_core::sync::lock;

/// Most Pods one pass creates or deletes for one DaemonSet (kube's daemon `BurstReplicas`).
const BURST: usize = 250;
const HASH: &str = "controller-revision-hash";
const GENERATION: &str = "pod-template-generation";
/// Where kube-apiserver keeps a DaemonSet's template generation in `apps/v1`.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";
const NAME_FIELD: &str = "metadata.name";

/// Brings every DaemonSet's Pods to its Nodes; whether anything was written.
pub(crate) fn sync(st: &mut State) -> bool {
    let sets = objects(st, "apps", "daemonsets", None);
    forget_old_backoffs();
    if sets.is_empty() {
        return false;
    }
    let nodes = objects(st, "", "nodes", None);
    let mut changed = false;
    for ds in sets.iter().filter(|ds| !deleting(ds)) {
        changed |= sync_one(st, ds, &nodes);
    }
    changed
}

/// One DaemonSet's pass, in kube's order: revisions, Pods per Node, the rollout, history
/// cleanup, status.
fn sync_one(st: &mut State, ds: &Arc<Value>, nodes: &[Arc<Value>]) -> bool {
    let selector = &ds["spec"]["selector"];
    // kube refuses to act on a selector selecting every Pod.
    let empty = |k: &str| selector[k].as_object().is_none_or(Map::is_empty);
    let no_exprs = selector["matchExpressions"]
        .as_array()
        .is_none_or(Vec::is_empty);
    if selector.is_object() && empty("matchLabels") && no_exprs {
        return false;
    }
    let mut changed = false;
    let Some(history) = history(st, ds, &mut changed) else {
        return changed;
    };
    // kube-apiserver numbers templates in an annotation; where it is missing, the revision
    // counts template changes alike.
    let generation = template_generation(ds).or(Some(history.revision));
    let ctx = Ctx {
        ds,
        hash: &history.hash,
        generation,
    };
    let pods = claim_pods(st, ds, &mut changed);
    let by_node = pods_by_node(&pods, false);
    let (create_on, delete) = manage(st, &ctx, nodes, &by_node);
    let acted = !create_on.is_empty() || !delete.is_empty();
    changed |= write_pods(st, &ctx, &create_on, &delete);
    // As kube waits for its creations and deletions to be observed before rolling out.
    if !acted && ds["spec"]["updateStrategy"]["type"] == "RollingUpdate" {
        let (create_on, delete) = rolling_update(&ctx, nodes, by_node);
        changed |= write_pods(st, &ctx, &create_on, &delete);
    }
    let pods = owned_pods(st, ds);
    changed |= cleanup_history(st, ds, &history.old, &pods);
    let status = status(st, &ctx, nodes, &pods);
    changed |= write_status(st, "apps", "daemonsets", ds, status);
    changed
}

/// What the steps of one pass share.
struct Ctx<'a> {
    ds: &'a Value,
    /// The current revision's hash.
    hash: &'a str,
    /// The template generation new Pods are labelled with.
    generation: Option<i64>,
}

impl Ctx<'_> {
    fn ns(&self) -> &str {
        str_at(self.ds, "/metadata/namespace")
    }

    /// kube's `IsPodUpdated`: of the current revision, by hash or template generation.
    fn updated(&self, pod: &Value) -> bool {
        let labels = &pod["metadata"]["labels"];
        labels[HASH] == self.hash
            || self
                .generation
                .is_some_and(|g| labels[GENERATION].as_str() == Some(g.to_string().as_str()))
    }

    fn min_ready(&self) -> i64 {
        self.ds["spec"]["minReadySeconds"].as_i64().unwrap_or(0)
    }
}

/// The template generation kube-apiserver records on the DaemonSet, if it does.
fn template_generation(ds: &Value) -> Option<i64> {
    ds["metadata"]["annotations"][TEMPLATE_GENERATION]
        .as_str()?
        .parse()
        .ok()
}

// ---- Which Nodes run the daemon ----

/// kube's `NodeShouldRunDaemonPod`: whether the DaemonSet should run a Pod on `node`, and
/// whether a Pod already there may stay (a `NoSchedule` taint keeps new Pods off, only
/// `NoExecute` drives running ones away). The scheduler's rules decide what fits.
fn should_run(node: &Value, ds: &Value) -> (bool, bool) {
    let spec = &ds["spec"]["template"]["spec"];
    let pinned = str_at(spec, "/nodeName");
    if !pinned.is_empty() && pinned != str_at(node, "/metadata/name") {
        return (false, false);
    }
    if !selects_node(spec, node) {
        return (false, false);
    }
    // The Pod kube tests: the template with the daemon tolerations.
    let pod = json!({"tolerations": daemon_tolerations(spec)});
    if untolerated_taint(&pod, node).is_none() {
        return (true, true);
    }
    let evicted = (node["spec"]["taints"].as_array().into_iter().flatten())
        .any(|t| str_at(t, "/effect") == "NoExecute" && !tolerates(&pod, t));
    (false, !evicted)
}

/// The template's tolerations with those kube gives every daemon Pod
/// (`AddOrUpdateDaemonPodTolerations`): it stays on not-ready and unreachable Nodes, and goes
/// to Nodes under pressure or cordoned (and without network, if it uses the host's).
fn daemon_tolerations(spec: &Value) -> Vec<Value> {
    let mut tolerations = spec["tolerations"].as_array().cloned().unwrap_or_default();
    let mut wanted = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec["hostNetwork"] == true {
        wanted.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    for (key, effect) in wanted {
        let t = json!({"key": key, "operator": "Exists", "effect": effect});
        // kube's `AddOrUpdateTolerationInPodSpec`: one alike but for its seconds is replaced.
        let alike = |o: &Value| {
            ["key", "operator", "value", "effect"]
                .iter()
                .all(|k| str_at(o, &format!("/{k}")) == str_at(&t, &format!("/{k}")))
        };
        match tolerations.iter().position(alike) {
            Some(i) => tolerations[i] = t,
            None => tolerations.push(t),
        }
    }
    tolerations
}

/// `affinity` with its required node affinity replaced by the one term kube pins a daemon Pod
/// to its Node with (`ReplaceDaemonSetPodNodeNameNodeAffinity`); other affinities are kept.
fn pin_to(affinity: &Value, node: &str) -> Value {
    let term = json!({"matchFields": [{"key": NAME_FIELD, "operator": "In", "values": [node]}]});
    let mut affinity = if affinity.is_object() {
        affinity.clone()
    } else {
        json!({})
    };
    if !affinity["nodeAffinity"].is_object() {
        affinity["nodeAffinity"] = json!({});
    }
    let required = &mut affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    if required.is_object() {
        required["nodeSelectorTerms"] = json!([term]);
    } else {
        *required = json!({"nodeSelectorTerms": [term]});
    }
    affinity
}

/// The Node a daemon Pod is for (kube's `GetTargetNodeName`): where it is bound, else the
/// Node its affinity pins it to.
fn target_node(pod: &Value) -> Option<String> {
    let bound = str_at(pod, "/spec/nodeName");
    if !bound.is_empty() {
        return Some(bound.to_string());
    }
    let terms = pod.pointer(
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    )?;
    (terms.as_array()?.iter())
        .flat_map(|t| t["matchFields"].as_array().into_iter().flatten())
        .find(|f| f["key"] == NAME_FIELD && f["operator"] == "In")
        .and_then(|f| match f["values"].as_array() {
            Some(v) if v.len() == 1 => v[0].as_str().map(String::from),
            _ => None,
        })
}

// ---- Pods ----

fn owner_ref(ds: &Value) -> Value {
    controller_ref(
        DAEMON_SET,
        str_at(ds, "/metadata/name"),
        str_at(ds, "/metadata/uid"),
    )
}

/// The DaemonSet's Pods, after kube's `ClaimPods`: orphans its selector matches adopted, its
/// own that the selector no longer matches released.
fn claim_pods(st: &mut State, ds: &Value, changed: &mut bool) -> Vec<Arc<Value>> {
    let ns = str_at(ds, "/metadata/namespace");
    let uid = str_at(ds, "/metadata/uid");
    let selector = &ds["spec"]["selector"];
    let Some(t) = target(st, "", "pods", ns, None) else {
        return Vec::new();
    };
    let mut owned = Vec::new();
    for pod in objects(st, "", "pods", Some(ns)) {
        let matches = selects(selector, &pod["metadata"]["labels"]) == Some(true);
        let mut refs = items(&pod["metadata"]["ownerReferences"]);
        match controller_uid(&pod) {
            Some(u) if u == uid && matches => owned.push(pod),
            Some(u) if u == uid => {
                refs.retain(|r| r["uid"] != uid);
                let mut released = (*pod).clone();
                released["metadata"]["ownerReferences"] = json!(refs);
                *changed |= update(st, &t, &pod, released, "a DaemonSet's Pod");
            }
            None if matches && !deleting(&pod) => {
                refs.push(owner_ref(ds));
                let mut adopted = (*pod).clone();
                adopted["metadata"]["ownerReferences"] = json!(refs);
                if update(st, &t, &pod, adopted, "a DaemonSet's Pod") {
                    *changed = true;
                    let name = str_at(&pod, "/metadata/name");
                    owned.extend(st.get(&(String::new(), "pods".into()), ns, name));
                }
            }
            _ => {}
        }
    }
    owned
}

/// The Pods the DaemonSet controls, as they are now.
fn owned_pods(st: &State, ds: &Value) -> Vec<Arc<Value>> {
    let uid = str_at(ds, "/metadata/uid");
    objects(st, "", "pods", Some(str_at(ds, "/metadata/namespace")))
        .into_iter()
        .filter(|p| controller_uid(p) == Some(uid))
        .collect()
}

fn terminal(pod: &Value) -> bool {
    matches!(str_at(pod, "/status/phase"), "Succeeded" | "Failed")
}

/// The Pods by the Node they are for (kube's `getNodesToDaemonPods`), finished Pods being
/// deleted left out unless `with_finished`.
fn pods_by_node(pods: &[Arc<Value>], with_finished: bool) -> BTreeMap<String, Vec<Arc<Value>>> {
    let mut by_node: BTreeMap<String, Vec<Arc<Value>>> = BTreeMap::new();
    for pod in pods {
        if !with_finished && terminal(pod) && deleting(pod) {
            continue;
        }
        if let Some(node) = target_node(pod) {
            by_node.entry(node).or_default().push(pod.clone());
        }
    }
    by_node
}

/// kube's `podByCreationTimestampAndPhase`: bound Pods first, then the oldest.
fn oldest_first(pods: &mut [Arc<Value>]) {
    pods.sort_by(|a, b| {
        let key = |p: &Value| {
            (
                str_at(p, "/spec/nodeName").is_empty(),
                str_at(p, "/metadata/creationTimestamp").to_string(),
                str_at(p, "/metadata/name").to_string(),
            )
        };
        key(a).cmp(&key(b))
    });
}

/// kube's `AllowsSurge`/`SurgeCount` and `UnavailableCount` of `desired` Pods, `None` for a
/// value kube refuses.
fn rollout_counts(ds: &Value, desired: usize) -> Option<(usize, usize)> {
    let strategy = &ds["spec"]["updateStrategy"];
    if strategy["type"] != "RollingUpdate" || !strategy["rollingUpdate"].is_object() {
        return Some((0, 0));
    }
    let scaled = |v: &Value| -> Option<usize> {
        match v {
            Value::Null => Some(0),
            Value::Number(n) => n.as_u64().map(|n| n as usize),
            Value::String(s) => {
                let percent: usize = s.strip_suffix('%')?.parse().ok()?;
                Some((percent * desired).div_ceil(100))
            }
            _ => None,
        }
    };
    let rolling = &strategy["rollingUpdate"];
    Some((
        scaled(&rolling["maxSurge"])?,
        scaled(&rolling["maxUnavailable"])?,
    ))
}

fn allows_surge(ds: &Value) -> bool {
    rollout_counts(ds, 1).is_some_and(|(surge, _)| surge > 0)
}

/// kube's `podsShouldBeOnNode` over every Node, and the unbound Pods of Nodes that are gone:
/// the Nodes needing a Pod and the Pods to delete.
fn manage(
    st: &mut State,
    ctx: &Ctx<'_>,
    nodes: &[Arc<Value>],
    by_node: &BTreeMap<String, Vec<Arc<Value>>>,
) -> (Vec<String>, Vec<Arc<Value>>) {
    let ds = ctx.ds;
    let mut create_on = Vec::new();
    let mut delete = Vec::new();
    for node in nodes {
        let name = str_at(node, "/metadata/name");
        let (run, keep) = should_run(node, ds);
        let pods = by_node.get(name);
        match pods {
            None if run => create_on.push(name.to_string()),
            Some(pods) if keep => {
                let mut running = Vec::new();
                for pod in pods.iter().filter(|p| !deleting(p)) {
                    match str_at(pod, "/status/phase") {
                        // kube backs off from a Node whose daemon Pods keep failing.
                        "Failed" => match backoff(ds, name) {
                            Some(wait) => st.wake_within(wait),
                            None => delete.push(pod.clone()),
                        },
                        "Succeeded" => delete.push(pod.clone()),
                        _ => running.push(pod.clone()),
                    }
                }
                oldest_first(&mut running);
                if !allows_surge(ds) {
                    delete.extend(running.into_iter().skip(1));
                    continue;
                }
                if running.len() <= 1 {
                    if running.is_empty() && run {
                        create_on.push(name.to_string());
                    }
                    continue;
                }
                // Surging: the oldest Pod of each revision may stay, both only while the new
                // one is not yet available and the old one still ready.
                let (mut newest, mut oldest) = (None, None);
                for pod in running {
                    let slot = if pod["metadata"]["labels"][HASH] == ctx.hash {
                        &mut newest
                    } else {
                        &mut oldest
                    };
                    if slot.is_none() {
                        *slot = Some(pod);
                    } else {
                        delete.push(pod);
                    }
                }
                if let (Some(new), Some(old)) = (newest, oldest)
                    && (!ready(&old) || available(&new, ctx.min_ready()))
                {
                    delete.push(old);
                }
            }
            Some(pods) if !keep => {
                delete.extend(pods.iter().filter(|p| !deleting(p)).cloned());
            }
            _ => {}
        }
    }
    let known: HashSet<&str> = nodes.iter().map(|n| str_at(n, "/metadata/name")).collect();
    for (node, pods) in by_node {
        if !known.contains(node.as_str()) {
            let unbound = pods
                .iter()
                .filter(|p| str_at(p, "/spec/nodeName").is_empty());
            delete.extend(unbound.cloned());
        }
    }
    (create_on, delete)
}

/// A Node's Pod of the current revision and its Pod of another, if any.
type NewAndOld = (Option<Arc<Value>>, Option<Arc<Value>>);

/// kube's `rollingUpdate`: without surge, old Pods deleted (the unavailable ones, then
/// available ones while fewer than `maxUnavailable` Nodes lack an available Pod) for the next
/// pass to replace; with surge, new Pods created beside old ones (up to `maxSurge` for
/// available ones) and old Pods deleted once their replacement is available.
fn rolling_update(
    ctx: &Ctx<'_>,
    nodes: &[Arc<Value>],
    mut by_node: BTreeMap<String, Vec<Arc<Value>>>,
) -> (Vec<String>, Vec<Arc<Value>>) {
    let ds = ctx.ds;
    let mut desired = 0;
    let mut runs: HashMap<&str, bool> = HashMap::new();
    for node in nodes {
        let name = str_at(node, "/metadata/name");
        let (run, _) = should_run(node, ds);
        runs.insert(name, run);
        if run {
            desired += 1;
            by_node.entry(name.to_string()).or_default();
        }
    }
    let Some((surge, mut unavailable_max)) = rollout_counts(ds, desired) else {
        return (Vec::new(), Vec::new());
    };
    if desired > 0 && surge == 0 && unavailable_max == 0 {
        unavailable_max = 1;
    }
    if surge == 0 {
        return (Vec::new(), replace_in_place(ctx, &by_node, unavailable_max));
    }
    surge_and_replace(ctx, &by_node, &runs, surge, desired)
}

/// At most one Pod of each kind (of the current template, or an older one) on a Node, else
/// the manage step sorts it out first.
fn split(ctx: &Ctx<'_>, pods: &[Arc<Value>]) -> Option<NewAndOld> {
    let (mut new, mut old) = (None, None);
    for pod in pods.iter().filter(|p| !deleting(p)) {
        let slot = if ctx.updated(pod) { &mut new } else { &mut old };
        if slot.replace(pod.clone()).is_some() {
            return None;
        }
    }
    Some((new, old))
}

/// A rolling update without surge: old Pods to delete (and replace), unavailable ones first,
/// while at most `unavailable_max` Nodes lack an available Pod.
fn replace_in_place(
    ctx: &Ctx<'_>,
    by_node: &BTreeMap<String, Vec<Arc<Value>>>,
    unavailable_max: usize,
) -> Vec<Arc<Value>> {
    let min_ready = ctx.min_ready();
    let mut unavailable = 0;
    let mut replace = Vec::new();
    let mut candidates = Vec::new();
    for pods in by_node.values() {
        let Some(split) = split(ctx, pods) else {
            unavailable += 1;
            continue;
        };
        match split {
            (None, None) | (Some(_), Some(_)) => unavailable += 1,
            (Some(new), None) => {
                if !available(&new, min_ready) {
                    unavailable += 1;
                }
            }
            (None, Some(old)) => {
                if !available(&old, min_ready) {
                    replace.push(old);
                    unavailable += 1;
                } else if unavailable < unavailable_max {
                    candidates.push(old);
                }
            }
        }
    }
    let room = unavailable_max
        .saturating_sub(unavailable)
        .min(candidates.len());
    replace.extend(candidates.into_iter().take(room));
    replace
}

/// A rolling update with surge: the Nodes that get a new Pod beside the old one (at most
/// `surge` at once), and the old Pods to delete once their replacement is available (those on
/// Nodes the DaemonSet leaves only as Pods become available elsewhere).
fn surge_and_replace(
    ctx: &Ctx<'_>,
    by_node: &BTreeMap<String, Vec<Arc<Value>>>,
    runs: &HashMap<&str, bool>,
    surge: usize,
    desired: usize,
) -> (Vec<String>, Vec<Arc<Value>>) {
    let min_ready = ctx.min_ready();
    let mut delete = Vec::new();
    let mut leaving = Vec::new();
    let mut allowed = Vec::new();
    let mut candidates = Vec::new();
    let (mut surging, mut available_count) = (0, 0);
    for (node, pods) in by_node {
        let Some((new, old)) = split(ctx, pods) else {
            surging += 1;
            continue;
        };
        if let Some(p) = old.as_ref().or(new.as_ref())
            && available(p, min_ready)
        {
            available_count += 1;
        }
        let run = runs.get(node.as_str()).copied().unwrap_or(false);
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) => {
                if !available(&old, min_ready) {
                    if run {
                        allowed.push(node.clone());
                    } else {
                        delete.push(old);
                    }
                } else if !run {
                    leaving.push(old);
                } else if surging < surge {
                    candidates.push(node.clone());
                }
            }
            (Some(new), Some(old)) => {
                if available(&new, min_ready) {
                    delete.push(old);
                } else {
                    surging += 1;
                }
            }
        }
    }
    let spare = (available_count as i64 - desired as i64).max(0) as usize;
    delete.extend(leaving.into_iter().take(spare));
    let room = surge.saturating_sub(surging).min(candidates.len());
    allowed.extend(candidates.into_iter().take(room));
    (allowed, delete)
}

/// A Pod of the DaemonSet's template for `node` (kube's `CreatePodTemplate` and the Pod
/// control's `GetPodFromTemplate`).
fn new_pod(ctx: &Ctx<'_>, node: &str) -> Value {
    let ds = ctx.ds;
    let template = &ds["spec"]["template"];
    let mut labels = template["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if let Some(g) = ctx.generation {
        labels.insert(GENERATION.into(), json!(g.to_string()));
    }
    labels.insert(HASH.into(), json!(ctx.hash));
    let mut spec = template["spec"].clone();
    spec["tolerations"] = Value::Array(daemon_tolerations(&spec));
    spec["affinity"] = pin_to(&spec["affinity"], node);
    let mut meta = json!({"generateName": format!("{}-", str_at(ds, "/metadata/name")),
        "namespace": ctx.ns(), "labels": labels, "ownerReferences": [owner_ref(ds)]});
    for key in ["annotations", "finalizers"] {
        if let Some(v) = template["metadata"].get(key).filter(|v| !v.is_null()) {
            meta[key] = v.clone();
        }
    }
    json!({"apiVersion": POD.api_version, "kind": POD.kind, "metadata": meta, "spec": spec})
}

/// Creates a Pod on each of `create_on` and deletes `delete`, each at most a burst; whether
/// anything was written.
fn write_pods(st: &mut State, ctx: &Ctx<'_>, create_on: &[String], delete: &[Arc<Value>]) -> bool {
    let Some(t) = target(st, "", "pods", ctx.ns(), None) else {
        return false;
    };
    let mut changed = false;
    for node in create_on.iter().take(BURST) {
        if create(st, &t, new_pod(ctx, node), "a DaemonSet's Pod").is_err() {
            // As kube's slow start: the rest would most likely fail alike.
            break;
        }
        changed = true;
    }
    for pod in delete.iter().take(BURST) {
        match delete::delete_locked(st, &t, pod, false) {
            Ok(_) => changed = true,
            Err(e) => tracing::warn!(pod = %str_at(pod, "/metadata/name"), error = %e.message,
                "deleting a DaemonSet's Pod"),
        }
    }
    changed
}

// ---- Failed Pods' backoff ----

/// kube's `failedPodsBackoff` (1 s doubling to 15 min), by DaemonSet uid, observed generation
/// and Node: the delay and when it last grew. Shared by the servers of the process (uids do
/// not collide); entries idle for twice the longest delay are dropped, as kube's are.
static BACKOFF: LazyLock<Mutex<HashMap<String, (Duration, Instant)>>> =
    LazyLock::new(Default::default);
const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(900);

/// `None` when a failed Pod on `node` may be deleted now (the delay then grows), else how long
/// to wait.
fn backoff(ds: &Value, node: &str) -> Option<Duration> {
    let key = format!(
        "{}/{}/{node}",
        str_at(ds, "/metadata/uid"),
        ds["status"]["observedGeneration"].as_i64().unwrap_or(0)
    );
    let now = Instant::now();
    let mut entries = lock(&BACKOFF);
    match entries.get_mut(&key) {
        Some((delay, at)) if now.duration_since(*at) < *delay => {
            Some(*delay - now.duration_since(*at))
        }
        Some((delay, at)) if now.duration_since(*at) <= 2 * BACKOFF_MAX => {
            *delay = (*delay * 2).min(BACKOFF_MAX);
            *at = now;
            None
        }
        _ => {
            entries.insert(key, (BACKOFF_START, now));
            None
        }
    }
}

fn forget_old_backoffs() {
    let mut entries = lock(&BACKOFF);
    entries.retain(|_, (_, at)| at.elapsed() <= 2 * BACKOFF_MAX);
}

// ---- Revisions ----

/// The DaemonSet's current revision and its others.
struct History {
    hash: String,
    revision: i64,
    old: Vec<Arc<Value>>,
}

fn items(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

/// kube's `constructHistory`: the DaemonSet's revisions (orphans adopted, strays released,
/// missing hash labels added), the one of the current template found (duplicates merged) or
/// made, and renumbered above the others. `None` while a name collision is being resolved.
fn history(st: &mut State, ds: &Arc<Value>, changed: &mut bool) -> Option<History> {
    let ns = str_at(ds, "/metadata/namespace").to_string();
    let t = target(st, "apps", "controllerrevisions", &ns, None)?;
    let patch = super::revision_patch(ds, DAEMON_SET);
    let (current, old) = claim_revisions(st, ds, &t, &patch, changed)?;
    let next = old
        .iter()
        .filter_map(|r| r["revision"].as_i64())
        .max()
        .unwrap_or(0)
        + 1;
    if current.is_empty() {
        return new_revision(st, ds, &t, patch, next, old, changed);
    }
    let (hash, revision) = keep_newest(st, ds, &t, current, next, changed)?;
    Some(History {
        hash,
        revision,
        old,
    })
}

/// Some of a DaemonSet's ControllerRevisions.
type Revisions = Vec<Arc<Value>>;

/// The DaemonSet's ControllerRevisions, those its selector matches adopted and those it no
/// longer matches released, each labelled with its hash: those of the current template
/// (`patch`) and the older ones.
fn claim_revisions(
    st: &mut State,
    ds: &Arc<Value>,
    t: &Target,
    patch: &Value,
    changed: &mut bool,
) -> Option<(Revisions, Revisions)> {
    let ns = str_at(ds, "/metadata/namespace").to_string();
    let uid = str_at(ds, "/metadata/uid").to_string();
    let selector = &ds["spec"]["selector"];
    let (mut current, mut old) = (Vec::new(), Vec::new());
    for rev in objects(st, "apps", "controllerrevisions", Some(&ns)) {
        let matches = selects(selector, &rev["metadata"]["labels"]) == Some(true);
        let mut refs = items(&rev["metadata"]["ownerReferences"]);
        let mut rev = match controller_uid(&rev) {
            Some(u) if u == uid && matches => rev,
            Some(u) if u == uid => {
                refs.retain(|r| r["uid"] != uid.as_str());
                let mut released = (*rev).clone();
                released["metadata"]["ownerReferences"] = json!(refs);
                *changed |= update(st, t, &rev, released, "a ControllerRevision");
                continue;
            }
            None if matches && !deleting(&rev) => {
                refs.push(owner_ref(ds));
                let mut adopted = (*rev).clone();
                adopted["metadata"]["ownerReferences"] = json!(refs);
                *changed |= update(st, t, &rev, adopted, "a ControllerRevision");
                reread(st, &rev)?
            }
            _ => continue,
        };
        if rev["metadata"]["labels"].get(HASH).is_none() {
            let mut labelled = (*rev).clone();
            labelled["metadata"]["labels"][HASH] = rev["metadata"]["name"].clone();
            *changed |= update(st, t, &rev, labelled, "a ControllerRevision");
            rev = reread(st, &rev)?;
        }
        if rev["data"] == *patch {
            current.push(rev);
        } else {
            old.push(rev);
        }
    }
    Some((current, old))
}

/// The current template has no revision yet: one is created, numbered `next` and named by the
/// template's hash. A revision of that name holding another template is a collision, which
/// kube counts in the status (changing the hash) before trying again.
fn new_revision(
    st: &mut State,
    ds: &Arc<Value>,
    t: &Target,
    patch: Value,
    next: i64,
    old: Revisions,
    changed: &mut bool,
) -> Option<History> {
    let ns = str_at(ds, "/metadata/namespace").to_string();
    let collisions = ds["status"]["collisionCount"].as_i64();
    let hash = template_hash(&ds["spec"]["template"], collisions);
    let rev_name = format!("{}-{hash}", str_at(ds, "/metadata/name"));
    let key = ("apps".to_string(), "controllerrevisions".to_string());
    if let Some(taken) = st.get(&key, &ns, &rev_name) {
        if taken["data"] == patch {
            let revision = taken["revision"].as_i64().unwrap_or(0);
            return Some(History {
                hash,
                revision,
                old,
            });
        }
        let mut status = ds["status"].clone();
        if !status.is_object() {
            status = json!({});
        }
        status["collisionCount"] = json!(collisions.unwrap_or(0) + 1);
        *changed |= write_status(st, "apps", "daemonsets", ds, status);
        return None;
    }
    let mut labels = ds["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(HASH.into(), json!(hash));
    let mut meta = json!({"name": rev_name, "namespace": ns, "labels": labels,
        "ownerReferences": [owner_ref(ds)]});
    if let Some(a) = ds["metadata"].get("annotations").filter(|a| !a.is_null()) {
        meta["annotations"] = a.clone();
    }
    let rev = json!({"apiVersion": CONTROLLER_REVISION.api_version, "kind": CONTROLLER_REVISION.kind,
        "metadata": meta, "data": patch, "revision": next});
    create(st, t, rev, "a ControllerRevision").ok()?;
    *changed = true;
    Some(History {
        hash,
        revision: next,
        old,
    })
}

/// Of several revisions of the current template, the newest stays (renumbered `next` if it is
/// older than a revision of another template) and the Pods are relabelled to it; the others
/// go. Its hash and revision.
fn keep_newest(
    st: &mut State,
    ds: &Arc<Value>,
    t: &Target,
    mut current: Revisions,
    next: i64,
    changed: &mut bool,
) -> Option<(String, i64)> {
    let revision_of = |r: &Value| r["revision"].as_i64().unwrap_or(0);
    current.sort_by_key(|r| revision_of(r));
    let keep = current.pop()?;
    let hash = str_at(&keep, &format!("/metadata/labels/{HASH}")).to_string();
    if !current.is_empty() {
        let ns = str_at(ds, "/metadata/namespace").to_string();
        let pods_t = target(st, "", "pods", &ns, None)?;
        for pod in claim_pods(st, ds, changed) {
            if pod["metadata"]["labels"][HASH] != hash.as_str() {
                let mut relabelled = (*pod).clone();
                relabelled["metadata"]["labels"][HASH] = json!(hash);
                *changed |= update(st, &pods_t, &pod, relabelled, "a DaemonSet's Pod");
            }
        }
        for dup in current {
            *changed |= delete::delete_locked(st, t, &dup, false).is_ok();
        }
    }
    let mut revision = revision_of(&keep);
    if revision < next {
        let mut renumbered = (*keep).clone();
        renumbered["revision"] = json!(next);
        *changed |= update(st, t, &keep, renumbered, "a ControllerRevision");
        revision = next;
    }
    Some((hash, revision))
}

fn reread(st: &State, o: &Value) -> Option<Arc<Value>> {
    let key = ("apps".to_string(), "controllerrevisions".to_string());
    st.get(
        &key,
        str_at(o, "/metadata/namespace"),
        str_at(o, "/metadata/name"),
    )
}

/// kube's `cleanupHistory`: the oldest revisions beyond `revisionHistoryLimit` that no Pod
/// (finished ones included) still runs are deleted.
fn cleanup_history(st: &mut State, ds: &Value, old: &[Arc<Value>], pods: &[Arc<Value>]) -> bool {
    let limit = ds["spec"]["revisionHistoryLimit"]
        .as_i64()
        .unwrap_or(10)
        .max(0) as usize;
    let Some(mut excess) = old.len().checked_sub(limit).filter(|n| *n > 0) else {
        return false;
    };
    let live: HashSet<String> = pods_by_node(pods, true)
        .into_values()
        .flatten()
        .filter_map(|p| p["metadata"]["labels"][HASH].as_str().map(String::from))
        .collect();
    let Some(t) = target(
        st,
        "apps",
        "controllerrevisions",
        str_at(ds, "/metadata/namespace"),
        None,
    ) else {
        return false;
    };
    let mut oldest: Vec<&Arc<Value>> = old.iter().collect();
    oldest.sort_by_key(|r| r["revision"].as_i64().unwrap_or(0));
    let mut changed = false;
    for rev in oldest {
        if excess == 0 {
            break;
        }
        if live.contains(str_at(rev, &format!("/metadata/labels/{HASH}"))) {
            continue;
        }
        changed |= delete::delete_locked(st, &t, rev, false).is_ok();
        excess -= 1;
    }
    changed
}

// ---- Status ----

/// kube's `updateDaemonSetStatus`: per Node that should run the daemon, whether it has a Pod
/// and whether its oldest is ready, available and current; Pods where none should run are
/// misscheduled. The four counts kube always writes are always here, the others only when
/// not zero (Go's `omitempty`).
fn status(st: &mut State, ctx: &Ctx<'_>, nodes: &[Arc<Value>], pods: &[Arc<Value>]) -> Value {
    let ds = ctx.ds;
    let by_node = pods_by_node(pods, false);
    let min_ready = ctx.min_ready();
    let (mut desired, mut current, mut misscheduled) = (0, 0, 0);
    let (mut ready_count, mut available_count, mut updated) = (0, 0, 0);
    for node in nodes {
        let (run, _) = should_run(node, ds);
        let on_node = by_node.get(str_at(node, "/metadata/name"));
        let scheduled = on_node.is_some_and(|p| !p.is_empty());
        if !run {
            misscheduled += usize::from(scheduled);
            continue;
        }
        desired += 1;
        let Some(on_node) = on_node.filter(|_| scheduled) else {
            continue;
        };
        current += 1;
        let mut on_node = on_node.clone();
        oldest_first(&mut on_node);
        let pod = &on_node[0];
        if ready(pod) {
            ready_count += 1;
            available_count += usize::from(available(pod, min_ready));
        }
        updated += usize::from(ctx.updated(pod));
    }
    if min_ready > 0 && ready_count != available_count {
        st.wake_within(Duration::from_secs(min_ready.unsigned_abs()));
    }
    let mut status = ds["status"].as_object().cloned().unwrap_or_default();
    for (key, n) in [
        ("currentNumberScheduled", current),
        ("desiredNumberScheduled", desired),
        ("numberMisscheduled", misscheduled),
        ("numberReady", ready_count),
    ] {
        status.insert(key.into(), json!(n));
    }
    for (key, n) in [
        ("updatedNumberScheduled", updated),
        ("numberAvailable", available_count),
        ("numberUnavailable", desired - available_count),
    ] {
        if n > 0 {
            status.insert(key.into(), json!(n));
        } else {
            status.remove(key);
        }
    }
    match ds["metadata"]["generation"].as_i64().filter(|g| *g != 0) {
        Some(g) => status.insert("observedGeneration".into(), json!(g)),
        None => status.remove("observedGeneration"),
    };
    Value::Object(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: Value, taints: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}})
    }

    fn ds(spec: Value) -> Value {
        json!({"spec": {"template": {"spec": spec}}})
    }

    #[test]
    fn nodes_qualify_by_selector_affinity_and_taints() {
        let plain = node("a", json!({"role": "worker"}), json!([]));
        let tainted = node(
            "b",
            json!({"role": "worker"}),
            json!([{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]),
        );
        let evicting = node(
            "c",
            json!({"role": "worker"}),
            json!([{"key": "dedicated", "value": "infra", "effect": "NoExecute"}]),
        );
        let cordoned = node(
            "d",
            json!({"role": "worker"}),
            json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
        );
        let selected = ds(json!({"nodeSelector": {"role": "worker"}}));
        assert_eq!(should_run(&plain, &selected), (true, true));
        // A NoSchedule taint keeps new Pods off but lets running ones stay.
        assert_eq!(should_run(&tainted, &selected), (false, true));
        assert_eq!(should_run(&evicting, &selected), (false, false));
        // Daemon Pods tolerate cordoned Nodes.
        assert_eq!(should_run(&cordoned, &selected), (true, true));
        let other = ds(json!({"nodeSelector": {"role": "db"}}));
        assert_eq!(should_run(&plain, &other), (false, false));
        let tolerant = ds(json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}));
        assert_eq!(should_run(&evicting, &tolerant), (true, true));
        let wrong_value = ds(
            json!({"tolerations": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}),
        );
        assert_eq!(should_run(&tainted, &wrong_value), (false, true));
        let affinity = ds(json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["worker"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}}}));
        assert_eq!(should_run(&plain, &affinity), (true, true));
        assert_eq!(should_run(&cordoned, &affinity), (false, false));
    }

    #[test]
    fn daemon_pods_are_pinned_and_tolerate_node_conditions() {
        let spec = json!({"hostNetwork": true, "tolerations": [{"key": "node.kubernetes.io/not-ready",
            "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "x", "operator": "Exists"}]}]}},
                "podAntiAffinity": {}}});
        let tolerations = daemon_tolerations(&spec);
        assert_eq!(tolerations.len(), 7);
        // The one alike but for its seconds is replaced in place.
        assert_eq!(
            tolerations[0],
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"})
        );
        assert_eq!(
            tolerations[6]["key"],
            "node.kubernetes.io/network-unavailable"
        );
        let pinned = pin_to(&spec["affinity"], "n1");
        assert_eq!(
            pinned["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
            json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name",
                "operator": "In", "values": ["n1"]}]}]})
        );
        assert!(pinned.get("podAntiAffinity").is_some());
        let pod = json!({"spec": {"affinity": pinned}});
        assert_eq!(target_node(&pod).as_deref(), Some("n1"));
    }

    #[test]
    fn revision_hashes_are_stable_and_change_with_collisions() {
        let t = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": []}});
        let h = template_hash(&t, None);
        assert_eq!(h, template_hash(&t, None));
        assert_ne!(h, template_hash(&t, Some(1)));
        assert!(h.bytes().all(|b| crate::names::SAFE_ALPHABET.contains(&b)));
    }
}
