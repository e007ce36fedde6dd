//! kube-controller-manager's two endpoint controllers, for dev mode. Every Service with a
//! selector (and not of type `ExternalName`) gets:
//!
//! - EndpointSlices (the EndpointSlice controller, `k8s.io/endpointslice`'s reconciler): one
//!   group of slices per distinct set of resolved ports and per address type of the Service's
//!   IP families, at most 100 endpoints a slice, each endpoint a selected Pod with an IP (its
//!   `ready`/`serving`/`terminating` conditions, node, zone, hostname, target reference); kept
//!   in place (an endpoint keeps its slice and position; new ones fill the fullest slices
//!   first), a placeholder slice with no endpoints when nothing is selected, and slices of
//!   another owner or of ports no longer wanted deleted;
//! - the legacy `v1` Endpoints named as the Service (the Endpoints controller kube 1.32 still
//!   runs): the same Pods packed into `subsets` of ready and not-ready addresses per port set,
//!   truncated at 1000 addresses as kube truncates them.
//!
//! Both carry `endpoints.kubernetes.io/last-change-trigger-time` as kube's trigger-time
//! tracker computes it, and are written only when they change (this runs after every burst of
//! writes). Services without a selector are left to their clients; the Endpoints of a Service
//! that is gone are deleted (slices go with their owner, through the garbage collector).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Timelike, Utc};
use serde_json::{Map, Value, json};

use super::{MANAGER, condition, controller_ref, create, deleting, objects, ready, target, update};
use crate::delete;
use crate::json::str_at;
use crate::registry::{
    core::{ENDPOINTS, POD, SERVICE},
    discovery::ENDPOINT_SLICE,
};
use crate::store::State;
use wasmctrl_core::sync::lock;

/// The EndpointSlice controller's name, in its slices' `managed-by` label.
const CONTROLLER: &str = "endpointslice-controller.k8s.io";
const SERVICE_NAME: &str = "kubernetes.io/service-name";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const HEADLESS: &str = "service.kubernetes.io/headless";
const TRIGGER: &str = "endpoints.kubernetes.io/last-change-trigger-time";
const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// An Endpoints object that is a leader-election lock, which has no Service.
const LEADER: &str = "control-plane.alpha.kubernetes.io/leader";
const ZONE: &str = "topology.kubernetes.io/zone";
/// kube-controller-manager's `--max-endpoints-per-slice` default.
const PER_SLICE: usize = 100;
/// The most addresses the Endpoints controller keeps in one Endpoints object.
const CAPACITY: usize = 1000;
const GROUP: &str = "discovery.k8s.io";
const SLICES: &str = "endpointslices";

/// Keeps every selecting Service's EndpointSlices and Endpoints; whether anything was written.
pub(crate) fn sync(st: &mut State) -> bool {
    let services = objects(st, "", "services", None);
    let nodes: HashMap<String, Arc<Value>> = objects(st, "", "nodes", None)
        .into_iter()
        .map(|n| (str_at(&n, "/metadata/name").to_string(), n))
        .collect();
    let mut pods_by_ns: HashMap<String, Vec<Arc<Value>>> = HashMap::new();
    for pod in objects(st, "", "pods", None) {
        let ns = str_at(&pod, "/metadata/namespace").to_string();
        pods_by_ns.entry(ns).or_default().push(pod);
    }
    let mut changed = false;
    for svc in &services {
        if str_at(svc, "/spec/type") == "ExternalName" {
            continue;
        }
        // A selector that is absent or empty selects nothing here (kube stores `{}` as none).
        let Some(selector) = svc["spec"]["selector"]
            .as_object()
            .filter(|m| !m.is_empty())
        else {
            continue;
        };
        let ns = str_at(svc, "/metadata/namespace");
        let pods: Vec<&Arc<Value>> = (pods_by_ns.get(ns).into_iter().flatten())
            .filter(|p| {
                let labels = &p["metadata"]["labels"];
                selector.iter().all(|(k, v)| labels[k] == *v)
            })
            .collect();
        let trigger = trigger_time(svc, &pods);
        changed |= sync_slices(st, svc, &pods, &nodes, trigger.as_deref());
        changed |= sync_endpoints(st, svc, &pods, trigger.as_deref());
    }
    changed |= delete_leftovers(st, &services);
    forget_old_services();
    changed
}

// ---- What both controllers compute from a Pod ----

/// Whether `pod` is an endpoint at all (kube's `ShouldPodBeInEndpoints`): not finished, with an
/// IP, and not being deleted unless `terminating` ones count.
fn should_be_in(pod: &Value, terminating: bool) -> bool {
    let phase = str_at(pod, "/status/phase");
    if phase == "Succeeded" || phase == "Failed" || pod_ips(pod).is_empty() {
        return false;
    }
    terminating || !deleting(pod)
}

/// `status.podIPs`, or `status.podIP` where only that was written (kube's conversion fills
/// one from the other).
fn pod_ips(pod: &Value) -> Vec<&str> {
    let ips: Vec<&str> = (pod.pointer("/status/podIPs").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["ip"].as_str())
        .filter(|ip| !ip.is_empty())
        .collect();
    if !ips.is_empty() {
        return ips;
    }
    Some(str_at(pod, "/status/podIP"))
        .filter(|ip| !ip.is_empty())
        .into_iter()
        .collect()
}

/// kube's `ShouldSetHostname`: the Pod names a hostname and the Service as its subdomain.
fn hostname<'a>(pod: &'a Value, svc: &Value) -> Option<&'a str> {
    let host = str_at(pod, "/spec/hostname");
    (!host.is_empty()
        && str_at(pod, "/spec/subdomain") == str_at(svc, "/metadata/name")
        && str_at(pod, "/metadata/namespace") == str_at(svc, "/metadata/namespace"))
    .then_some(host)
}

fn target_ref(pod: &Value) -> Value {
    json!({"kind": POD.kind, "namespace": str_at(pod, "/metadata/namespace"),
        "name": str_at(pod, "/metadata/name"), "uid": str_at(pod, "/metadata/uid")})
}

/// The container port a Service port reaches on `pod` (kube's `FindPort`): a numeric
/// `targetPort` as is, a named one looked up in the containers' (and restartable init
/// containers') ports of the Service port's protocol.
fn find_port(pod: &Value, port: &Value) -> Option<i64> {
    let protocol = port["protocol"].as_str().unwrap_or("TCP");
    match &port["targetPort"] {
        Value::Number(n) => n.as_i64(),
        Value::String(name) => {
            let sidecars = (pod["spec"]["initContainers"]
                .as_array()
                .into_iter()
                .flatten())
            .filter(|c| c["restartPolicy"] == "Always");
            (pod["spec"]["containers"].as_array().into_iter().flatten())
                .chain(sidecars)
                .flat_map(|c| c["ports"].as_array().into_iter().flatten())
                .find(|p| {
                    p["name"] == name.as_str()
                        && p["protocol"].as_str().unwrap_or("TCP") == protocol
                })
                .and_then(|p| p["containerPort"].as_i64())
        }
        // Defaulting sets it to the port; a Service stored without it means the same.
        _ => port["port"].as_i64(),
    }
}

fn publishes_unready(svc: &Value) -> bool {
    svc["spec"]["publishNotReadyAddresses"] == true
}

fn cluster_ip(svc: &Value) -> &str {
    str_at(svc, "/spec/clusterIP")
}

/// kube's `IsServiceIPSet`: neither headless nor unallocated.
fn ip_set(svc: &Value) -> bool {
    !matches!(cluster_ip(svc), "None" | "")
}

fn labels_of(o: &Value) -> Map<String, Value> {
    o["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn is_ipv6(ip: &str) -> bool {
    ip.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv6())
}

// ---- The trigger-time tracker ----

/// What the tracker saw of a Service at its last sync.
struct Seen {
    service: DateTime<Utc>,
    pods: HashMap<String, DateTime<Utc>>,
    at: Instant,
}

/// kube's `TriggerTimeTracker` state, by Service uid. The controllers are passes over the
/// store with nothing of their own between passes, so it lives here; every server of the
/// process shares it (uids never collide), and a Service unseen for a while is forgotten.
static SEEN: LazyLock<Mutex<HashMap<String, Seen>>> = LazyLock::new(Default::default);

/// How long a Service's tracker state outlives its last sync (a live server syncs each
/// Service at least every second).
const FORGET_AFTER: Duration = Duration::from_secs(600);

fn parse_time(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t).ok().map(|t| t.to_utc())
}

/// Go's `time.RFC3339Nano` in UTC: fractional seconds only when there are some, without
/// trailing zeros.
fn format_time(t: DateTime<Utc>) -> String {
    let mut out = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    if t.nanosecond() > 0 {
        let frac = format!("{:09}", t.nanosecond());
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// The `last-change-trigger-time` a sync of `svc` now writes (kube's
/// `ComputeEndpointLastChangeTriggerTime`): a Service seen for the first time, its creation;
/// otherwise the earliest of the changes since the last sync (a Pod's Ready condition moving,
/// the Service recreated), or none.
fn trigger_time(svc: &Value, pods: &[&Arc<Value>]) -> Option<String> {
    let uid = str_at(svc, "/metadata/uid").to_string();
    let created = parse_time(str_at(svc, "/metadata/creationTimestamp"))?;
    let mut seen = lock(&SEEN);
    let known = seen.get(&uid);
    let mut earliest: Option<DateTime<Utc>> = None;
    let mut pod_times = HashMap::new();
    for pod in pods {
        let Some(t) = condition(pod, "Ready")
            .and_then(|c| c["lastTransitionTime"].as_str())
            .and_then(parse_time)
        else {
            continue;
        };
        let name = str_at(pod, "/metadata/name").to_string();
        if known.is_none_or(|k| k.pods.get(&name).is_none_or(|before| t > *before)) {
            earliest = Some(earliest.map_or(t, |e| e.min(t)));
        }
        pod_times.insert(name, t);
    }
    if known.is_some_and(|k| created > k.service) {
        earliest = Some(earliest.map_or(created, |e| e.min(created)));
    }
    let first = known.is_none();
    seen.insert(
        uid,
        Seen {
            service: created,
            pods: pod_times,
            at: Instant::now(),
        },
    );
    let at = if first { Some(created) } else { earliest };
    at.map(format_time)
}

fn forget_old_services() {
    let mut seen = lock(&SEEN);
    seen.retain(|_, s| s.at.elapsed() < FORGET_AFTER);
}

/// Sets (or, with no trigger time, clears) the trigger annotation of `o`, dropping an emptied
/// annotation map as kube's storage does.
fn set_trigger(o: &mut Value, trigger: Option<&str>, over_capacity: Option<bool>) {
    let mut annotations = o["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    match trigger {
        Some(t) => annotations.insert(TRIGGER.into(), json!(t)),
        None => annotations.remove(TRIGGER),
    };
    match over_capacity {
        Some(true) => annotations.insert(OVER_CAPACITY.into(), json!("truncated")),
        Some(false) => annotations.remove(OVER_CAPACITY),
        None => None,
    };
    set_map(&mut o["metadata"], "annotations", annotations);
}

/// `meta[key] = map`, or no `key` at all for an empty map.
fn set_map(meta: &mut Value, key: &str, map: Map<String, Value>) {
    if map.is_empty() {
        if let Some(m) = meta.as_object_mut() {
            m.remove(key);
        }
    } else {
        meta[key] = Value::Object(map);
    }
}

// ---- EndpointSlices ----

/// The address types of the Service's IP families (kube's `getAddressTypesForService`),
/// guessed from the cluster IP (both for a headless Service) when it names none.
fn address_types(svc: &Value) -> BTreeSet<&'static str> {
    let mut types: BTreeSet<&'static str> = (svc["spec"]["ipFamilies"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|f| match f.as_str() {
            Some("IPv4") => Some("IPv4"),
            Some("IPv6") => Some("IPv6"),
            _ => None,
        })
        .collect();
    if types.is_empty() {
        if ip_set(svc) {
            types.insert(if is_ipv6(cluster_ip(svc)) {
                "IPv6"
            } else {
                "IPv4"
            });
        } else {
            types.extend(["IPv4", "IPv6"]);
        }
    }
    types
}

/// The endpoint ports of the Service on `pod` (kube's `getEndpointPorts`): each Service port
/// whose target the Pod has, named (`""` for an unnamed one) as the Service port.
fn slice_ports(svc: &Value, pod: &Value) -> Vec<Value> {
    let ports = svc["spec"]["ports"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for port in &ports {
        let Some(number) = find_port(pod, port) else {
            continue;
        };
        let mut p = json!({"name": port["name"].as_str().unwrap_or(""), "port": number,
            "protocol": port["protocol"].as_str().unwrap_or("TCP")});
        if let Some(app) = port.get("appProtocol").filter(|a| !a.is_null()) {
            p["appProtocol"] = app.clone();
        }
        out.push(p);
    }
    out
}

/// The key grouping slices by port set (kube's `PortMapKey`: the ports in a canonical order).
fn port_key(ports: &Value) -> String {
    let mut each: Vec<String> = (ports.as_array().into_iter().flatten())
        .map(Value::to_string)
        .collect();
    each.sort();
    each.join(",")
}

/// An endpoint's identity within its port group (kube's `hashEndpoint`): addresses,
/// hostname and the Pod it stands for; conditions, node and zone may change in place.
fn endpoint_key(ep: &Value) -> String {
    let mut addresses: Vec<&str> = (ep["addresses"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    addresses.sort_unstable();
    format!(
        "{}|{}|{}/{}",
        addresses.join(","),
        ep["hostname"].as_str().unwrap_or(""),
        str_at(ep, "/targetRef/namespace"),
        str_at(ep, "/targetRef/name"),
    )
}

/// The endpoint of `pod` for `svc` and `family` (kube's `podToEndpoint`), with the hints of
/// `trafficDistribution: PreferClose` (its own zone).
fn endpoint(pod: &Value, node: Option<&Value>, svc: &Value, family: &str) -> Value {
    let serving = ready(pod);
    let terminating = deleting(pod);
    let addresses: Vec<String> = (pod_ips(pod).into_iter())
        .filter_map(|ip| ip.parse::<IpAddr>().ok())
        .filter(|ip| ip.is_ipv6() == (family == "IPv6"))
        .map(|ip| ip.to_string())
        .collect();
    // Never ready while terminating, unless the Service publishes unready addresses.
    let ready = publishes_unready(svc) || (serving && !terminating);
    let mut ep = json!({"addresses": addresses,
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "targetRef": target_ref(pod)});
    let node_name = str_at(pod, "/spec/nodeName");
    if !node_name.is_empty() {
        ep["nodeName"] = json!(node_name);
    }
    let zone = node.map_or("", |n| n["metadata"]["labels"][ZONE].as_str().unwrap_or(""));
    if !zone.is_empty() {
        ep["zone"] = json!(zone);
        if svc["spec"]["trafficDistribution"] == "PreferClose" {
            ep["hints"] = json!({"forZones": [{"name": zone}]});
        }
    }
    if let Some(host) = hostname(pod, svc) {
        ep["hostname"] = json!(host);
    }
    ep
}

/// A slice's labels for `svc` (kube's `setEndpointSliceLabels`): the Service's, less the
/// reserved ones, plus the headless marker, the Service's name and the manager; and whether
/// the Service's own labels differ from the slice's.
fn slice_labels(slice: &Value, svc: &Value) -> (Map<String, Value>, bool) {
    let reserved = |k: &String| k == SERVICE_NAME || k == MANAGED_BY || k == HEADLESS;
    let unreserved = |m: Map<String, Value>| -> Map<String, Value> {
        m.into_iter().filter(|(k, _)| !reserved(k)).collect()
    };
    let current = unreserved(labels_of(slice));
    let mut labels = unreserved(labels_of(svc));
    let changed = current != labels;
    if !ip_set(svc) {
        labels.insert(HEADLESS.into(), json!(""));
    }
    labels.insert(SERVICE_NAME.into(), json!(str_at(svc, "/metadata/name")));
    labels.insert(MANAGED_BY.into(), json!(CONTROLLER));
    (labels, changed)
}

/// A list field as kube's storage writes it: an empty list is `null`.
fn list(items: Vec<Value>) -> Value {
    if items.is_empty() {
        Value::Null
    } else {
        Value::Array(items)
    }
}

fn items(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

/// A new slice of `svc` (kube's `newEndpointSlice`), named by the server.
fn new_slice(svc: &Value, family: &str, ports: &Value) -> Value {
    let name = str_at(svc, "/metadata/name");
    let (labels, _) = slice_labels(&json!({}), svc);
    json!({"apiVersion": ENDPOINT_SLICE.api_version, "kind": ENDPOINT_SLICE.kind,
        "metadata": {"generateName": format!("{name}-"),
            "namespace": str_at(svc, "/metadata/namespace"), "labels": labels,
            "ownerReferences": [controller_ref(SERVICE, name, str_at(svc, "/metadata/uid"))]},
        "addressType": family, "endpoints": Value::Null, "ports": ports})
}

fn owned_by(slice: &Value, svc: &Value) -> bool {
    (slice["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten())
    .any(|r| r["uid"] == svc["metadata"]["uid"] && SERVICE.named_by(r))
}

/// What one reconcile writes: slices to create, to replace (current, wanted) and to delete.
#[derive(Default)]
struct Plan {
    create: Vec<Value>,
    update: Vec<(Arc<Value>, Value)>,
    delete: Vec<Arc<Value>>,
}

/// The endpoints wanted in one port group, by identity, in a stable order.
struct Wanted {
    ports: Value,
    endpoints: BTreeMap<String, Value>,
}

fn sync_slices(
    st: &mut State,
    svc: &Arc<Value>,
    pods: &[&Arc<Value>],
    nodes: &HashMap<String, Arc<Value>>,
    trigger: Option<&str>,
) -> bool {
    let ns = str_at(svc, "/metadata/namespace");
    let name = str_at(svc, "/metadata/name");
    let existing: Vec<Arc<Value>> = objects(st, GROUP, SLICES, Some(ns))
        .into_iter()
        .filter(|s| {
            let labels = &s["metadata"]["labels"];
            labels[SERVICE_NAME] == name && labels[MANAGED_BY] == CONTROLLER && !deleting(s)
        })
        .collect();
    let families = address_types(svc);
    let mut plan = Plan::default();
    let (supported, unsupported): (Vec<_>, Vec<_>) = existing
        .into_iter()
        .partition(|s| families.contains(str_at(s, "/addressType")));
    plan.delete.extend(unsupported);
    for family in families {
        let of_family: Vec<Arc<Value>> = (supported.iter())
            .filter(|s| str_at(s, "/addressType") == family)
            .cloned()
            .collect();
        let part = reconcile_family(svc, pods, nodes, of_family, family);
        plan.create.extend(part.create);
        plan.update.extend(part.update);
        plan.delete.extend(part.delete);
    }
    finalize(st, svc, plan, trigger)
}

/// kube's `reconcileByAddressType`: the slices of one address type.
fn reconcile_family(
    svc: &Value,
    pods: &[&Arc<Value>],
    nodes: &HashMap<String, Arc<Value>>,
    existing: Vec<Arc<Value>>,
    family: &str,
) -> Plan {
    let mut plan = Plan::default();
    let total = existing.len();
    let mut by_ports: BTreeMap<String, Vec<Arc<Value>>> = BTreeMap::new();
    for slice in existing {
        if owned_by(&slice, svc) {
            by_ports
                .entry(port_key(&slice["ports"]))
                .or_default()
                .push(slice);
        } else {
            plan.delete.push(slice);
        }
    }
    let mut wanted: BTreeMap<String, Wanted> = BTreeMap::new();
    for pod in pods {
        if !should_be_in(pod, true) {
            continue;
        }
        let ports = Value::Array(slice_ports(svc, pod));
        let group = wanted.entry(port_key(&ports)).or_insert_with(|| Wanted {
            ports,
            endpoints: BTreeMap::new(),
        });
        let node = nodes.get(str_at(pod, "/spec/nodeName"));
        // A Pod on a Node that does not exist is left out (kube retries until the Node comes
        // or the Pod goes), unless unready addresses are published anyway.
        if node.is_none() && !publishes_unready(svc) {
            continue;
        }
        let ep = endpoint(pod, node.map(|n| &**n), svc, family);
        if ep["addresses"].as_array().is_some_and(|a| !a.is_empty()) {
            group.endpoints.insert(endpoint_key(&ep), ep);
        }
    }
    for (key, group) in wanted.iter_mut() {
        let slices = by_ports.get(key).map_or(&[][..], Vec::as_slice);
        let part = reconcile_ports(svc, slices, group, family);
        plan.create.extend(part.create);
        plan.update.extend(part.update);
        plan.delete.extend(part.delete);
    }
    for (key, slices) in by_ports {
        if !wanted.contains_key(&key) {
            plan.delete.extend(slices);
        }
    }
    // Nothing would be left: one placeholder slice without endpoints says so.
    if total == plan.delete.len() && plan.create.is_empty() {
        let placeholder = new_slice(svc, family, &Value::Null);
        if plan.delete.len() == 1 && same_placeholder(&plan.delete[0], &placeholder) {
            plan.delete.clear();
        } else {
            plan.create.push(placeholder);
        }
    }
    plan
}

/// Whether `slice` already is the placeholder kube would write (its comparison: namespace,
/// labels, owners, address type, no endpoints, no ports).
fn same_placeholder(slice: &Value, placeholder: &Value) -> bool {
    let empty = |v: &Value| v.as_array().is_none_or(Vec::is_empty);
    str_at(slice, "/metadata/namespace") == str_at(placeholder, "/metadata/namespace")
        && labels_of(slice) == labels_of(placeholder)
        && slice["metadata"]["ownerReferences"] == placeholder["metadata"]["ownerReferences"]
        && slice["addressType"] == placeholder["addressType"]
        && empty(&slice["endpoints"])
        && empty(&slice["ports"])
}

/// kube's `reconcileByPortMapping`: keeps each wanted endpoint where it is (updated in place),
/// drops the unwanted, fills the slices being written anyway (fullest first), then the
/// unchanged slice closest to full that takes the rest, then new slices.
fn reconcile_ports(
    svc: &Value,
    existing: &[Arc<Value>],
    wanted: &mut Wanted,
    family: &str,
) -> Plan {
    let mut plan = Plan::default();
    let mut work = keep_in_place(svc, existing, wanted, &mut plan);
    place_the_rest(svc, family, wanted, &mut work, &mut plan);
    for name in work.to_update {
        if let Some(entry) = work.slices.remove(&name) {
            plan.update.push(entry);
        }
    }
    plan
}

/// The existing slices of one port mapping while they are reconciled: each as read and as it
/// will be written, by name, and which are unchanged so far and which will be updated.
#[derive(Default)]
struct Working {
    slices: BTreeMap<String, (Arc<Value>, Value)>,
    unchanged: BTreeSet<String>,
    to_update: BTreeSet<String>,
}

/// The first pass: each wanted endpoint stays in the slice that holds it (updated in place),
/// unwanted ones go, and a slice left empty is deleted.
fn keep_in_place(
    svc: &Value,
    existing: &[Arc<Value>],
    wanted: &mut Wanted,
    plan: &mut Plan,
) -> Working {
    let mut work = Working::default();
    for slice in existing {
        let name = str_at(slice, "/metadata/name").to_string();
        let current = items(&slice["endpoints"]);
        let mut kept = Vec::new();
        let mut updated = false;
        for ep in &current {
            if let Some(want) = wanted.endpoints.remove(&endpoint_key(ep)) {
                updated |= want != *ep;
                kept.push(want);
            }
        }
        let (labels, labels_changed) = slice_labels(slice, svc);
        let mut new = (**slice).clone();
        if updated || kept.len() != current.len() {
            if kept.is_empty() {
                plan.delete.push(slice.clone());
                continue;
            }
            new["endpoints"] = Value::Array(kept);
            new["metadata"]["labels"] = Value::Object(labels);
            work.to_update.insert(name.clone());
        } else if labels_changed {
            new["metadata"]["labels"] = Value::Object(labels);
            work.to_update.insert(name.clone());
        } else {
            work.unchanged.insert(name.clone());
        }
        work.slices.insert(name, (slice.clone(), new));
    }
    work
}

/// The second pass: the endpoints not yet placed fill the slices being written anyway
/// (fullest first), then the unchanged slice closest to full that takes the rest, then new
/// slices.
fn place_the_rest(
    svc: &Value,
    family: &str,
    wanted: &mut Wanted,
    work: &mut Working,
    plan: &mut Plan,
) {
    let len = |v: &Value| v["endpoints"].as_array().map_or(0, Vec::len);
    if !wanted.endpoints.is_empty() && !work.to_update.is_empty() {
        let mut fullest: Vec<&String> = work.to_update.iter().collect();
        fullest.sort_by_key(|n| std::cmp::Reverse(len(&work.slices[*n].1)));
        for name in fullest {
            if let Some((_, slice)) = work.slices.get_mut(name) {
                fill(slice, &mut wanted.endpoints);
            }
        }
    }
    while !wanted.endpoints.is_empty() {
        let left = wanted.endpoints.len();
        let mut closest: Option<(usize, &String)> = None;
        if left < PER_SLICE {
            for name in &work.unchanged {
                let room = PER_SLICE as i64 - (left + len(&work.slices[name].1)) as i64;
                if room >= 0 && closest.is_none_or(|(best, _)| (room as usize) < best) {
                    closest = Some((room as usize, name));
                }
            }
        }
        match closest.map(|(_, n)| n.clone()) {
            Some(name) => {
                if let Some((_, slice)) = work.slices.get_mut(&name) {
                    fill(slice, &mut wanted.endpoints);
                }
                work.unchanged.remove(&name);
                work.to_update.insert(name);
            }
            None => {
                let mut slice = new_slice(svc, family, &list(items(&wanted.ports)));
                fill(&mut slice, &mut wanted.endpoints);
                plan.create.push(slice);
            }
        }
    }
}

/// Moves wanted endpoints into `slice` up to its capacity.
fn fill(slice: &mut Value, wanted: &mut BTreeMap<String, Value>) {
    let mut eps = items(&slice["endpoints"]);
    while eps.len() < PER_SLICE {
        let Some((_, ep)) = wanted.pop_first() else {
            break;
        };
        eps.push(ep);
    }
    slice["endpoints"] = list(eps);
}

/// kube's `finalize`: a slice to create replaces one to delete of the same address type by
/// updating it instead, then the writes, each stamped with the trigger time. No new slices
/// for a Service being deleted.
fn finalize(st: &mut State, svc: &Value, mut plan: Plan, trigger: Option<&str>) -> bool {
    let ns = str_at(svc, "/metadata/namespace").to_string();
    let Some(t) = target(st, GROUP, SLICES, &ns, None) else {
        return false;
    };
    let mut i = 0;
    while i < plan.delete.len() {
        let Some(last) = plan.create.last() else {
            break;
        };
        let old = &plan.delete[i];
        if old["addressType"] == last["addressType"] && owned_by(old, svc) {
            let Some(wanted) = plan.create.pop() else {
                break;
            };
            let old = plan.delete.remove(i);
            let mut new = (*old).clone();
            for key in ["labels", "annotations", "ownerReferences"] {
                new["metadata"][key] = wanted["metadata"][key].clone();
            }
            for key in ["addressType", "endpoints", "ports"] {
                new[key] = wanted[key].clone();
            }
            plan.update.push((old, new));
        } else {
            i += 1;
        }
    }
    let mut changed = false;
    if !deleting(svc) {
        for mut slice in plan.create {
            set_trigger(&mut slice, trigger, None);
            changed |= create(st, &t, slice, "an EndpointSlice").is_ok();
        }
    }
    for (cur, mut new) in plan.update {
        set_trigger(&mut new, trigger, None);
        changed |= update(st, &t, &cur, new, "an EndpointSlice");
    }
    for slice in plan.delete {
        match delete::delete_locked(st, &t, &slice, false) {
            Ok(_) => changed = true,
            Err(e) => tracing::warn!(namespace = %ns, name = %str_at(&slice, "/metadata/name"),
                error = %e.message, "deleting an EndpointSlice"),
        }
    }
    changed
}

// ---- Endpoints ----

/// The address of `pod` for `svc` (kube's `podToEndpointAddressForService`): its first IP of
/// the Service's first family.
fn endpoint_address(svc: &Value, pod: &Value) -> Option<Value> {
    let v6 = match svc["spec"]["ipFamilies"][0].as_str() {
        Some(family) => family == "IPv6",
        None if ip_set(svc) => is_ipv6(cluster_ip(svc)),
        None => is_ipv6(str_at(pod, "/status/podIP")),
    };
    let ip = pod_ips(pod).into_iter().find(|ip| is_ipv6(ip) == v6)?;
    let mut address = json!({"ip": ip, "targetRef": target_ref(pod)});
    // kube writes the Pod's node even when it has none, which its validation then refuses;
    // an IP without a node does not happen on a cluster, so here it is left out.
    let node = str_at(pod, "/spec/nodeName");
    if !node.is_empty() {
        address["nodeName"] = json!(node);
    }
    if let Some(host) = hostname(pod, svc) {
        address["hostname"] = json!(host);
    }
    Some(address)
}

/// The identity of an address (kube's `addressKey`): its IP and its Pod's uid.
type AddressKey = (String, String);

/// Addresses with whether they are ready.
type Readiness = BTreeMap<AddressKey, bool>;

fn address_key(a: &Value) -> AddressKey {
    (
        str_at(a, "/ip").to_string(),
        str_at(a, "/targetRef/uid").to_string(),
    )
}

/// Packs (address, ready, port) triples into kube's canonical subsets (`RepackSubsets`):
/// each set of addresses with the ports they all offer, an address unready on a port if it is
/// so anywhere for it, addresses without ports (a headless Service's) in a subset of their own.
fn repack(entries: Vec<(Value, bool, Option<Value>)>) -> Vec<Value> {
    let mut addresses: BTreeMap<AddressKey, Value> = BTreeMap::new();
    let mut by_port: BTreeMap<String, (Option<Value>, Readiness)> = BTreeMap::new();
    for (address, ready, port) in entries {
        let key = address_key(&address);
        addresses.entry(key.clone()).or_insert(address);
        let port_id = port.as_ref().map_or_else(String::new, Value::to_string);
        let (_, set) = by_port
            .entry(port_id)
            .or_insert_with(|| (port, BTreeMap::new()));
        let was = set.entry(key).or_insert(ready);
        *was &= ready;
    }
    let mut groups: BTreeMap<String, (Readiness, Vec<Value>)> = BTreeMap::new();
    for (_, (port, set)) in by_port {
        let id = format!("{set:?}");
        let group = groups.entry(id).or_insert_with(|| (set, Vec::new()));
        group.1.extend(port);
    }
    let mut subsets: Vec<Value> = groups
        .into_values()
        .map(|(set, mut ports)| {
            let (mut ready, mut unready): (Vec<_>, Vec<_>) = (Vec::new(), Vec::new());
            for (key, is_ready) in set {
                let a = addresses[&key].clone();
                if is_ready {
                    ready.push(a)
                } else {
                    unready.push(a)
                }
            }
            // kube's order: IP bytes, then Pod uid.
            ready.sort_by_key(address_key);
            unready.sort_by_key(address_key);
            ports.sort_by_key(Value::to_string);
            let mut subset = json!({});
            for (key, list) in [
                ("addresses", ready),
                ("notReadyAddresses", unready),
                ("ports", ports),
            ] {
                if !list.is_empty() {
                    subset[key] = Value::Array(list);
                }
            }
            subset
        })
        .collect();
    subsets.sort_by_key(Value::to_string);
    subsets
}

/// Cuts the addresses down to kube's capacity (`truncateEndpoints`): ready ones first, each
/// subset keeping its share (rounded up); whether it had to.
fn truncate(subsets: &mut [Value]) -> bool {
    let count = |s: &Value, key: &str| s[key].as_array().map_or(0, Vec::len);
    let ready: usize = subsets.iter().map(|s| count(s, "addresses")).sum();
    let unready: usize = subsets.iter().map(|s| count(s, "notReadyAddresses")).sum();
    if ready + unready <= CAPACITY {
        return false;
    }
    let truncate_ready = ready > CAPACITY;
    let (max, total) = if truncate_ready {
        (CAPACITY, ready)
    } else {
        (CAPACITY - ready, unready)
    };
    let mut room = max;
    for subset in subsets.iter_mut() {
        let key = if truncate_ready {
            "addresses"
        } else {
            "notReadyAddresses"
        };
        let share = (count(subset, key) as f64 / total as f64 * max as f64).ceil() as usize;
        let keep = share.min(room);
        let mut list = items(&subset[key]);
        list.truncate(keep);
        room -= list.len();
        let object = subset.as_object_mut();
        if let Some(o) = object {
            if list.is_empty() {
                o.remove(key);
            } else {
                o.insert(key.into(), Value::Array(list));
            }
            if truncate_ready {
                o.remove("notReadyAddresses");
            }
        }
    }
    true
}

/// `subsets` without the resourceVersion of their target references, which kube ignores when
/// comparing.
fn comparable(subsets: &Value) -> Value {
    let mut s = subsets.clone();
    for subset in s.as_array_mut().into_iter().flatten() {
        for key in ["addresses", "notReadyAddresses"] {
            for a in subset[key].as_array_mut().into_iter().flatten() {
                if let Some(r) = a.get_mut("targetRef").and_then(Value::as_object_mut) {
                    r.remove("resourceVersion");
                }
            }
        }
    }
    if s.is_null() { json!([]) } else { s }
}

/// kube's endpoints controller for one Service: writes its Endpoints when the addresses the
/// Pods give, or the labels, differ from what is stored (or the stored one is over capacity).
fn sync_endpoints(
    st: &mut State,
    svc: &Value,
    pods: &[&Arc<Value>],
    trigger: Option<&str>,
) -> bool {
    let ns = str_at(svc, "/metadata/namespace").to_string();
    let name = str_at(svc, "/metadata/name").to_string();
    let mut subsets = repack(endpoint_entries(svc, pods));
    let key = (String::new(), "endpoints".to_string());
    let current = st.get(&key, &ns, &name);
    let svc_labels = labels_of(svc);
    if current
        .as_deref()
        .is_some_and(|cur| up_to_date(cur, &subsets, &svc_labels))
    {
        return false;
    }
    let mut new = current.as_deref().cloned().unwrap_or_else(
        || json!({"apiVersion": ENDPOINTS.api_version, "kind": ENDPOINTS.kind, "metadata": {"name": name}}),
    );
    let truncated = truncate(&mut subsets);
    if subsets.is_empty() {
        if let Some(o) = new.as_object_mut() {
            o.remove("subsets");
        }
    } else {
        new["subsets"] = Value::Array(subsets);
    }
    let mut labels = svc_labels;
    if ip_set(svc) {
        labels.remove(HEADLESS);
    } else {
        labels.insert(HEADLESS.into(), json!(""));
    }
    set_map(&mut new["metadata"], "labels", labels);
    set_trigger(&mut new, trigger, Some(truncated));
    let Some(t) = target(st, "", "endpoints", &ns, None) else {
        return false;
    };
    match &current {
        Some(cur) => update(st, &t, cur, new, "an Endpoints"),
        None => create(st, &t, new, "an Endpoints").is_ok(),
    }
}

/// One (address, ready, port) per Pod that belongs in the Service's Endpoints and per Service
/// port the Pod serves; a headless Service without ports lists its addresses alone.
fn endpoint_entries(svc: &Value, pods: &[&Arc<Value>]) -> Vec<(Value, bool, Option<Value>)> {
    let publish = publishes_unready(svc);
    let ports = items(&svc["spec"]["ports"]);
    let mut entries = Vec::new();
    for pod in pods {
        if !should_be_in(pod, publish) {
            continue;
        }
        let Some(address) = endpoint_address(svc, pod) else {
            continue;
        };
        let is_ready = publish || ready(pod);
        if ports.is_empty() {
            if cluster_ip(svc) == "None" {
                entries.push((address, is_ready, None));
            }
            continue;
        }
        for port in &ports {
            let Some(number) = find_port(pod, port) else {
                continue;
            };
            let mut p = json!({"port": number});
            for key in ["name", "protocol", "appProtocol"] {
                if let Some(v) = port[key].as_str().filter(|v| !v.is_empty()) {
                    p[key] = json!(v);
                }
            }
            entries.push((address.clone(), is_ready, Some(p)));
        }
    }
    entries
}

/// Whether the stored Endpoints already say what `subsets` and the Service's labels say, and
/// are within capacity (kube rewrites an over-capacity one to truncate it).
fn up_to_date(cur: &Value, subsets: &[Value], svc_labels: &Map<String, Value>) -> bool {
    let mut cur_labels = labels_of(cur);
    cur_labels.remove(HEADLESS);
    let addresses: usize = (items(&cur["subsets"]).iter())
        .map(|s| items(&s["addresses"]).len() + items(&s["notReadyAddresses"]).len())
        .sum();
    let capacity_ok = addresses <= CAPACITY
        && cur
            .pointer(&format!(
                "/metadata/annotations/{}",
                OVER_CAPACITY.replace('/', "~1")
            ))
            .is_none();
    comparable(&cur["subsets"]) == Value::Array(subsets.to_vec())
        && cur_labels == *svc_labels
        && capacity_ok
}

/// Deletes the Endpoints this controller wrote for Services that are gone (kube deletes them
/// when it sees the Service go, and any left over when it starts).
fn delete_leftovers(st: &mut State, services: &[Arc<Value>]) -> bool {
    let live: HashSet<(&str, &str)> = services
        .iter()
        .map(|s| {
            (
                str_at(s, "/metadata/namespace"),
                str_at(s, "/metadata/name"),
            )
        })
        .collect();
    let ours = |e: &Value| {
        (e["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten())
        .any(|f| f["manager"] == MANAGER)
    };
    let stale: Vec<Arc<Value>> = objects(st, "", "endpoints", None)
        .into_iter()
        .filter(|e| {
            !live.contains(&(
                str_at(e, "/metadata/namespace"),
                str_at(e, "/metadata/name"),
            )) && e["metadata"]["annotations"].get(LEADER).is_none()
                && ours(e)
                && !deleting(e)
        })
        .collect();
    let mut changed = false;
    for e in stale {
        let Some(t) = target(st, "", "endpoints", str_at(&e, "/metadata/namespace"), None) else {
            continue;
        };
        match delete::delete_locked(st, &t, &e, false) {
            Ok(_) => changed = true,
            Err(err) => tracing::warn!(name = %str_at(&e, "/metadata/name"),
                error = %err.message, "deleting the Endpoints of a deleted Service"),
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(ip: &str, uid: &str) -> Value {
        json!({"ip": ip, "targetRef": {"kind": POD.kind, "namespace": "d", "name": uid, "uid": uid}})
    }

    #[test]
    fn subsets_pack_addresses_by_the_ports_they_share() {
        let http = json!({"name": "http", "port": 80, "protocol": "TCP"});
        let admin = json!({"name": "admin", "port": 9000, "protocol": "TCP"});
        let metrics = json!({"name": "metrics", "port": 9100, "protocol": "TCP"});
        let mut entries = Vec::new();
        for port in [&http, &admin, &metrics] {
            entries.push((address("10.0.0.2", "b"), true, Some(port.clone())));
        }
        entries.push((address("10.0.0.1", "a"), true, Some(http.clone())));
        // Twice on one port, once unready: unready wins there, and only there.
        entries.push((address("10.0.0.1", "a"), false, Some(admin.clone())));
        entries.push((address("10.0.0.1", "a"), true, Some(admin.clone())));
        entries.push((address("10.0.0.1", "a"), false, Some(metrics.clone())));
        let subsets = repack(entries);
        // admin and metrics reach the same addresses alike; http another way.
        assert_eq!(subsets.len(), 2);
        let shared = subsets
            .iter()
            .find(|s| items(&s["ports"]).len() == 2)
            .unwrap();
        assert_eq!(shared["addresses"], json!([address("10.0.0.2", "b")]));
        assert_eq!(
            shared["notReadyAddresses"],
            json!([address("10.0.0.1", "a")])
        );
        let one = subsets
            .iter()
            .find(|s| items(&s["ports"]).len() == 1)
            .unwrap();
        // Ordered by IP.
        assert_eq!(
            one["addresses"],
            json!([address("10.0.0.1", "a"), address("10.0.0.2", "b")])
        );
        assert!(one.get("notReadyAddresses").is_none());
        assert_eq!(one["ports"], json!([http]));
    }

    #[test]
    fn headless_addresses_without_ports_stand_alone() {
        let subsets = repack(vec![(address("10.0.0.1", "a"), true, None)]);
        assert_eq!(
            subsets,
            vec![json!({"addresses": [address("10.0.0.1", "a")]})]
        );
    }

    #[test]
    fn endpoints_over_capacity_keep_ready_addresses_first() {
        let many = |n: usize, base: u32| -> Vec<Value> {
            (0..n)
                .map(|i| {
                    address(
                        &format!("10.{base}.{}.{}", i / 250, i % 250),
                        &i.to_string(),
                    )
                })
                .collect()
        };
        let mut subsets = vec![
            json!({"addresses": many(900, 1), "notReadyAddresses": many(300, 2),
            "ports": [{"port": 80}]}),
        ];
        assert!(truncate(&mut subsets));
        assert_eq!(items(&subsets[0]["addresses"]).len(), 900);
        assert_eq!(items(&subsets[0]["notReadyAddresses"]).len(), 100);
    }

    #[test]
    fn trigger_times_print_as_go_does() {
        let t = parse_time("2024-05-06T07:08:09Z").unwrap();
        assert_eq!(format_time(t), "2024-05-06T07:08:09Z");
        let t = parse_time("2024-05-06T07:08:09.500+02:00").unwrap();
        assert_eq!(format_time(t), "2024-05-06T05:08:09.5Z");
    }

    #[test]
    fn named_ports_resolve_against_the_pods_containers() {
        let pod = json!({"spec": {"containers": [{"name": "c",
            "ports": [{"name": "web", "containerPort": 8080, "protocol": "TCP"}]}],
            "initContainers": [{"name": "s", "restartPolicy": "Always",
                "ports": [{"name": "metrics", "containerPort": 9090}]}]}});
        let port = |target: Value| json!({"port": 80, "protocol": "TCP", "targetPort": target});
        assert_eq!(find_port(&pod, &port(json!("web"))), Some(8080));
        assert_eq!(find_port(&pod, &port(json!("metrics"))), Some(9090));
        assert_eq!(find_port(&pod, &port(json!(81))), Some(81));
        assert_eq!(find_port(&pod, &port(json!("missing"))), None);
        let udp = json!({"port": 80, "protocol": "UDP", "targetPort": "web"});
        assert_eq!(find_port(&pod, &udp), None);
    }
}
