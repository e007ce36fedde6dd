//! A kubelet stand-in, in the manner of KWOK: fake Nodes that report Ready with capacity, and
//! the Pods bound to them going through the stages a kubelet reports, without containers.
//!
//! Nodes: `wasmctrl-node-0` … `wasmctrl-node-<n-1>` are kept (registered again when deleted,
//! as a kubelet does); any Node annotated `kubelet.wasmctrl.dev/fake: "true"` is run too, so
//! users add Nodes (with their own labels and taints) by creating them.
//!
//! Pods, from what their status already says (so a restarted server carries on):
//! bound → `Pending`, containers `ContainerCreating` → after `Kubelet::start`, `Running` with a
//! `podIP` from the Node's `podCIDR`, containers started → `Ready` once every container is
//! (at once, or after its readiness probe's `initialDelaySeconds`) → for Pods that do not restart
//! their containers (`restartPolicy` `Never`/`OnFailure`, a Job's), after `Kubelet::run` the
//! containers exit 0 and the Pod `Succeeded`. A Pod being deleted is removed once its containers
//! have stopped (at once, within its grace period). Annotations change one Pod's course:
//!
//! | annotation (`kubelet.wasmctrl.dev/…`) | effect |
//! |---|---|
//! | `start-seconds: "S"` | containers take S seconds to start |
//! | `run-seconds: "S"` | containers exit after running S seconds (also with `restartPolicy: Always`, which restarts them) |
//! | `exit-code: "N"` | containers exit with N: the Pod `Failed` (`Never`) or crash-looping with kube's back-off (`OnFailure` and `Always`); with no `run-seconds`, they exit as soon as they start |
//! | `ready: "false"` | containers never become ready (a failing readiness probe) |
//! | `stop-seconds: "S"` | on deletion, containers take S seconds to stop (at most the grace period) |
//!
//! A Pod whose status a client set past `Pending` before the stand-in started it (a test playing
//! kubelet) is left to that client.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Source, condition, deleting, objects, record, seconds_since, target};
use crate::admission::now;
use crate::delete;
use crate::handlers::Query;
use crate::json::str_at;
use crate::registry::core::NODE;
use crate::store::State;
use crate::write;

/// The kubelet stand-in's settings.
#[derive(Debug, Clone)]
pub struct Kubelet {
    /// Fake Nodes kept: `wasmctrl-node-0`, `wasmctrl-node-1`, ...
    pub nodes: usize,
    /// How long a bound Pod's containers take to start (`ContainerCreating`).
    pub start: Duration,
    /// How long the containers of a Pod that does not restart them (`restartPolicy` `Never` or
    /// `OnFailure`: a Job's) run before they exit.
    pub run: Duration,
}

impl Default for Kubelet {
    fn default() -> Self {
        Self {
            nodes: 3,
            start: Duration::from_secs(1),
            run: Duration::from_secs(5),
        }
    }
}

/// The annotation marking a Node this stand-in runs.
pub const FAKE: &str = "kubelet.wasmctrl.dev/fake";

/// Who writes Pods' and Nodes' status, as a kubelet's requests are named.
const MANAGER: &str = "kubelet";

/// The kubelet version the Nodes report: the API this server serves.
const VERSION: &str = "v1.32.0";

/// Longest crash-loop back-off (kubelet's `MaxContainerBackOff`).
const MAX_BACKOFF: f64 = 300.0;

fn node_name(i: usize) -> String {
    format!("wasmctrl-node-{i}")
}

fn fake(node: &Value) -> bool {
    node.pointer(&format!(
        "/metadata/annotations/{}",
        FAKE.replace('/', "~1")
    ))
    .and_then(Value::as_str)
        == Some("true")
}

/// Registers the fake Nodes and keeps their status; whether anything was written.
pub(crate) fn nodes(st: &mut State, kubelet: &Kubelet) -> bool {
    let Some(t) = target(st, "", "nodes", "", None) else {
        return false;
    };
    let mut changed = false;
    let key = (String::new(), "nodes".to_string());
    for i in 0..kubelet.nodes {
        let name = node_name(i);
        if st.get(&key, "", &name).is_some() {
            continue;
        }
        let node = json!({"apiVersion": NODE.api_version, "kind": NODE.kind,
            "metadata": {"name": name, "annotations": {FAKE: "true", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux", "type": "fake"}},
            "spec": {"podCIDR": format!("10.244.{i}.0/24"), "podCIDRs": [format!("10.244.{i}.0/24")]}});
        changed |= write::create_locked(st, &t, &Query::new(), node, Some(MANAGER))
            .inspect_err(
                |e| tracing::warn!(node = %name, error = %e.message, "registering a fake Node"),
            )
            .is_ok();
    }
    let all = objects(st, "", "nodes", None);
    for (i, node) in all.iter().filter(|n| fake(n) && !deleting(n)).enumerate() {
        let status = node_status(node, i);
        if node["status"] != status {
            changed |= write_status(st, "nodes", node, status);
        }
    }
    changed
}

/// A Ready Node's status, keeping what is already there (capacity a user set, say).
fn node_status(node: &Value, i: usize) -> Value {
    let mut status = node["status"].clone();
    if !status.is_object() {
        status = json!({});
    }
    let name = str_at(node, "/metadata/name");
    let capacity = json!({"cpu": "32", "memory": "256Gi", "pods": "110",
        "ephemeral-storage": "1Ti", "hugepages-1Gi": "0", "hugepages-2Mi": "0"});
    if !status["capacity"].is_object() {
        status["capacity"] = capacity;
    }
    if !status["allocatable"].is_object() {
        status["allocatable"] = status["capacity"].clone();
    }
    if !status["addresses"].is_array() {
        status["addresses"] = json!([{"type": "InternalIP", "address": format!("172.18.0.{}", 2 + i % 250)},
            {"type": "Hostname", "address": name}]);
    }
    if !status["nodeInfo"].is_object() {
        let id = hex::encode(&Sha256::digest(name.as_bytes())[..16]);
        status["nodeInfo"] = json!({"architecture": "amd64", "bootID": id, "machineID": id,
            "systemUUID": id, "containerRuntimeVersion": "fake://wasmctrl",
            "kernelVersion": "6.1.0", "kubeProxyVersion": VERSION, "kubeletVersion": VERSION,
            "operatingSystem": "linux", "osImage": "wasmctrl fake node"});
    }
    status["daemonEndpoints"] = json!({"kubeletEndpoint": {"Port": 10250}});
    let mut conditions: Vec<Value> = Vec::new();
    for (kind, ok, reason, message) in [
        (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        (
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        (
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        (
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        ),
    ] {
        let since = condition(node, kind)
            .filter(|c| c["status"] == ok)
            .map_or_else(|| json!(now()), |c| c["lastTransitionTime"].clone());
        conditions.push(
            json!({"type": kind, "status": ok, "reason": reason, "message": message,
            "lastHeartbeatTime": since, "lastTransitionTime": since}),
        );
    }
    status["conditions"] = json!(conditions);
    status
}

/// Writes `status` as object `o`'s (of core resource `plural`) as the kubelet.
fn write_status(st: &mut State, plural: &str, o: &Arc<Value>, status: Value) -> bool {
    let ns = str_at(o, "/metadata/namespace").to_string();
    let Some(t) = target(st, "", plural, &ns, Some("status")) else {
        return false;
    };
    let mut new = (**o).clone();
    new["status"] = status;
    match write::update_locked(st, &t, &Query::new(), o, new, write::Via::Put, MANAGER) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(name = %str_at(o, "/metadata/name"), namespace = %ns,
                error = %e.message, "writing the status of {plural}");
            false
        }
    }
}

/// Writes a Pod's status as `manager` (the scheduler's conditions, the kubelet's stages).
pub(crate) fn write_pod_status(
    st: &mut State,
    pod: &Arc<Value>,
    status: Value,
    manager: &str,
) -> bool {
    let ns = str_at(pod, "/metadata/namespace").to_string();
    let Some(t) = target(st, "", "pods", &ns, Some("status")) else {
        return false;
    };
    let mut new = (**pod).clone();
    new["status"] = status;
    match write::update_locked(st, &t, &Query::new(), pod, new, write::Via::Put, manager) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(pod = %str_at(pod, "/metadata/name"), namespace = %ns,
                error = %e.message, "writing a Pod's status");
            false
        }
    }
}

/// One Pod's settings: the stand-in's, as its annotations change them.
struct Course {
    start: f64,
    /// Seconds the containers run before exiting; `None`: until stopped.
    run: Option<f64>,
    exit_code: i64,
    ready: bool,
    stop: f64,
}

impl Course {
    fn of(pod: &Value, kubelet: &Kubelet) -> Self {
        let note = |k: &str| {
            pod.pointer(&format!("/metadata/annotations/kubelet.wasmctrl.dev~1{k}"))
                .and_then(Value::as_str)
        };
        let seconds = |k: &str| {
            note(k)
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|s| *s >= 0.0)
        };
        let exit_code = note("exit-code").and_then(|v| v.parse().ok()).unwrap_or(0);
        let restarts = matches!(str_at(pod, "/spec/restartPolicy"), "" | "Always");
        let run = seconds("run-seconds").or(if exit_code != 0 {
            Some(0.0)
        } else if restarts {
            None
        } else {
            Some(kubelet.run.as_secs_f64())
        });
        Self {
            start: seconds("start-seconds").unwrap_or(kubelet.start.as_secs_f64()),
            run,
            exit_code,
            ready: note("ready") != Some("false"),
            stop: seconds("stop-seconds").unwrap_or(0.0),
        }
    }
}

/// Moves the Pods on fake Nodes along their course; whether anything was written.
pub(crate) fn pods(st: &mut State, kubelet: &Kubelet) -> bool {
    let nodes: Vec<Arc<Value>> = objects(st, "", "nodes", None)
        .into_iter()
        .filter(|n| fake(n))
        .collect();
    if nodes.is_empty() {
        return false;
    }
    let mut changed = false;
    for pod in objects(st, "", "pods", None) {
        let Some((i, node)) = nodes
            .iter()
            .enumerate()
            .find(|(_, n)| str_at(n, "/metadata/name") == str_at(&pod, "/spec/nodeName"))
        else {
            continue;
        };
        let course = Course::of(&pod, kubelet);
        let wake = if deleting(&pod) {
            stop(st, &pod, &course, &mut changed)
        } else {
            let (status, wake) = advance(&pod, node, i, &course, st);
            if let Some(status) = status.filter(|s| *s != pod["status"])
                && write_pod_status(st, &pod, status.clone(), MANAGER)
            {
                changed = true;
                container_events(st, &pod, &status, str_at(node, "/metadata/name"));
            }
            wake
        };
        if let Some(after) = wake {
            st.wake_within(Duration::from_secs_f64(after.clamp(0.01, 3600.0)));
        }
    }
    changed
}

/// A Pod being deleted: removed once its containers have stopped; seconds until then.
fn stop(st: &mut State, pod: &Arc<Value>, course: &Course, changed: &mut bool) -> Option<f64> {
    let grace = (pod.pointer("/metadata/deletionGracePeriodSeconds"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if grace == 0 {
        // Already removed as far as the kubelet goes (finalizers keep it).
        return None;
    }
    let end = str_at(pod, "/metadata/deletionTimestamp");
    // Deleted `grace` seconds before the end of its grace period.
    let since = seconds_since(end).map_or(0.0, |s| s + grace as f64);
    let left = course.stop.min(grace as f64) - since;
    if left > 0.0 {
        return Some(left);
    }
    let ns = str_at(pod, "/metadata/namespace").to_string();
    let t = target(st, "", "pods", &ns, None)?;
    let source = Source {
        component: MANAGER,
        host: Some(str_at(pod, "/spec/nodeName")),
    };
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        let message = format!("Stopping container {}", str_at(c, "/name"));
        record(st, pod, "Normal", "Killing", &message, &source);
    }
    match delete::delete_within(st, &t, pod, false, Some(0)) {
        Ok(_) => *changed = true,
        Err(e) => tracing::warn!(pod = %str_at(pod, "/metadata/name"), namespace = %ns,
            error = %e.message, "removing a stopped Pod"),
    }
    None
}

/// The Events a kubelet records as a Pod's containers change (`old` → `status`): `Pulled`,
/// `Created` and `Started` when one starts (again), `BackOff` when one waits out a crash.
fn container_events(st: &mut State, pod: &Value, status: &Value, node: &str) {
    let source = Source {
        component: MANAGER,
        host: Some(node),
    };
    let before = pod["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for c in status["containerStatuses"].as_array().into_iter().flatten() {
        let name = str_at(c, "/name");
        let old = before.iter().find(|o| o["name"] == c["name"]);
        let was_running = old.is_some_and(|o| {
            o.pointer("/state/running").is_some() && o["restartCount"] == c["restartCount"]
        });
        if c.pointer("/state/running").is_some() && !was_running {
            let image = (pod["spec"]["containers"].as_array().into_iter().flatten())
                .find(|s| s["name"] == c["name"])
                .map_or("", |s| str_at(s, "/image"));
            let pulled = format!("Container image \"{image}\" already present on machine");
            record(st, pod, "Normal", "Pulled", &pulled, &source);
            record(
                st,
                pod,
                "Normal",
                "Created",
                &format!("Created container: {name}"),
                &source,
            );
            record(
                st,
                pod,
                "Normal",
                "Started",
                &format!("Started container {name}"),
                &source,
            );
        }
        let crashing = |s: &Value| {
            s.pointer("/state/waiting/reason").and_then(Value::as_str) == Some("CrashLoopBackOff")
        };
        if crashing(c) && !old.is_some_and(crashing) {
            let message = format!(
                "Back-off restarting failed container {name} in pod {}_{}({})",
                str_at(pod, "/metadata/name"),
                str_at(pod, "/metadata/namespace"),
                str_at(pod, "/metadata/uid")
            );
            record(st, pod, "Warning", "BackOff", &message, &source);
        }
    }
}

/// The status a Pod bound to fake Node `node` (the `i`th) has now, and the seconds until it
/// changes next.
fn advance(
    pod: &Value,
    node: &Value,
    i: usize,
    course: &Course,
    st: &State,
) -> (Option<Value>, Option<f64>) {
    let phase = str_at(pod, "/status/phase");
    if matches!(phase, "Succeeded" | "Failed") {
        return (None, None);
    }
    let Some(started) = pod.pointer("/status/startTime").and_then(Value::as_str) else {
        if !matches!(phase, "" | "Pending") {
            // A client reported this Pod's course itself (playing kubelet, as on a cluster
            // without nodes): it is left to it.
            return (None, None);
        }
        return (Some(admitted(pod, node, i)), Some(course.start));
    };
    let age = seconds_since(started).unwrap_or(0.0);
    if age < course.start {
        return (None, Some(course.start - age));
    }
    let mut status = pod["status"].clone();
    if str_at(pod, "/status/podIP").is_empty() {
        let ip = if pod["spec"]["hostNetwork"] == true {
            host_ip(node, i)
        } else {
            pod_ip(node, i, st)
        };
        started_up(pod, &ip, &mut status);
        let wake = readiness(pod, course, &mut status);
        return (Some(status), wake);
    }
    // Running: an exit when the course has one, and readiness.
    let (statuses, all_exited, mut wake) = containers_run(pod, course, &status);
    status["containerStatuses"] = json!(statuses);
    if all_exited && !statuses.is_empty() {
        let failed = statuses.iter().any(|c| {
            c.pointer("/state/terminated/exitCode")
                .and_then(Value::as_i64)
                != Some(0)
        });
        status["phase"] = json!(if failed { "Failed" } else { "Succeeded" });
        set_pod_conditions(&mut status, pod, true, false);
        return (Some(status), None);
    }
    wake = min_some(wake, readiness(pod, course, &mut status));
    (Some(status), wake)
}

/// A Pod just bound to `node` (its `i`th): the kubelet admits it and starts creating its
/// containers.
fn admitted(pod: &Value, node: &Value, i: usize) -> Value {
    let mut status = pod["status"].clone();
    let host = host_ip(node, i);
    status["phase"] = json!("Pending");
    status["hostIP"] = json!(host);
    status["hostIPs"] = json!([{"ip": host}]);
    status["startTime"] = json!(now());
    status["containerStatuses"] = json!(containers(pod, "containers", |c| waiting(
        c,
        "ContainerCreating",
        None
    )));
    if pod.pointer("/spec/initContainers").is_some() {
        status["initContainerStatuses"] = json!(containers(pod, "initContainers", |c| waiting(
            c,
            "PodInitializing",
            None
        )));
    }
    set_pod_conditions(&mut status, pod, false, false);
    status
}

/// The sandbox is up: the Pod's address `ip`, then its containers start (init containers have
/// run to completion, sidecars keep running).
fn started_up(pod: &Value, ip: &str, status: &mut Value) {
    status["podIP"] = json!(ip);
    status["podIPs"] = json!([{"ip": ip}]);
    status["phase"] = json!("Running");
    let at = now();
    status["containerStatuses"] =
        json!(containers(pod, "containers", |c| running(c, &at, 0, None)));
    if pod.pointer("/spec/initContainers").is_some() {
        status["initContainerStatuses"] = json!(containers(pod, "initContainers", |c| {
            if c["restartPolicy"] == "Always" {
                running(c, &at, 0, None)
            } else {
                terminated(c, 0, &at, &at, 0, None)
            }
        }));
    }
}

/// The running Pod's containers moved along its course: each that has run its time exits, and
/// restarts after kube's back-off where the restart policy says so. The new statuses, whether
/// every container has exited for good, and when to look again.
fn containers_run(pod: &Value, course: &Course, status: &Value) -> (Vec<Value>, bool, Option<f64>) {
    let mut wake = None;
    let mut statuses = status["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    // `Never` keeps exited containers; `OnFailure` restarts failed ones; `Always` every one.
    let restarts = match str_at(pod, "/spec/restartPolicy") {
        "Never" => false,
        "OnFailure" => course.exit_code != 0,
        _ => true,
    };
    let mut all_exited = true;
    for c in statuses.iter_mut() {
        let count = c["restartCount"].as_i64().unwrap_or(0);
        if let Some(since) = c
            .pointer("/state/running/startedAt")
            .and_then(Value::as_str)
            .map(str::to_owned)
        {
            let ran = seconds_since(&since).unwrap_or(0.0);
            match course.run {
                Some(run) if ran >= run => {
                    let exit = terminated(c, course.exit_code, &since, &now(), count, None);
                    if restarts {
                        let backoff = crash_loop(c, pod, exit, count);
                        all_exited = false;
                        wake = min_some(wake, Some(backoff));
                    } else {
                        *c = exit;
                    }
                }
                Some(run) => {
                    all_exited = false;
                    wake = min_some(wake, Some(run - ran));
                }
                None => all_exited = false,
            }
        } else if c.pointer("/state/waiting").is_some() {
            all_exited = false;
            // Back-off over: the container runs again.
            let ended = c
                .pointer("/lastState/terminated/finishedAt")
                .and_then(Value::as_str)
                .and_then(seconds_since)
                .unwrap_or(f64::MAX);
            let backoff = (10.0 * 2f64.powi((count - 1).clamp(0, 10) as i32)).min(MAX_BACKOFF);
            if ended >= backoff {
                let last = c["lastState"].clone();
                *c = running(c, &now(), count, Some(last));
            } else {
                wake = min_some(wake, Some(backoff - ended));
            }
        }
    }
    (statuses, all_exited, wake)
}

/// Container `c` of `pod` exited (`exit`, its `count`th restart to come) and waits out kube's
/// back-off (10 s, doubling) in `CrashLoopBackOff`; the back-off, in seconds.
fn crash_loop(c: &mut Value, pod: &Value, exit: Value, count: i64) -> f64 {
    let backoff = (10.0 * 2f64.powi(count.min(10) as i32)).min(MAX_BACKOFF);
    let message = format!(
        "back-off {}s restarting failed container={} pod={}_{}({})",
        backoff as i64,
        str_at(c, "/name"),
        str_at(pod, "/metadata/name"),
        str_at(pod, "/metadata/namespace"),
        str_at(pod, "/metadata/uid")
    );
    let mut next = waiting(c, "CrashLoopBackOff", Some(&message));
    next["lastState"] = json!({"terminated": exit["state"]["terminated"].clone()});
    next["restartCount"] = json!(count + 1);
    *c = next;
    backoff
}

fn min_some(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Marks running containers ready when their readiness probe would pass and sets the Pod's
/// conditions; seconds until a container becomes ready.
fn readiness(pod: &Value, course: &Course, status: &mut Value) -> Option<f64> {
    let specs = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut wake = None;
    if let Some(statuses) = status["containerStatuses"].as_array_mut() {
        for c in statuses.iter_mut() {
            let Some(since) = c
                .pointer("/state/running/startedAt")
                .and_then(Value::as_str)
            else {
                c["ready"] = json!(false);
                continue;
            };
            let spec = specs.iter().find(|s| s["name"] == c["name"]);
            let delay = spec
                .and_then(|s| s.pointer("/readinessProbe"))
                .map(|p| p["initialDelaySeconds"].as_f64().unwrap_or(0.0));
            let ran = seconds_since(since).unwrap_or(0.0);
            let ready = course.ready && delay.is_none_or(|d| ran >= d);
            if course.ready && !ready {
                wake = min_some(wake, delay.map(|d| d - ran));
            }
            c["ready"] = json!(ready);
        }
    }
    let all_ready = status["containerStatuses"]
        .as_array()
        .is_some_and(|a| !a.is_empty() && a.iter().all(|c| c["ready"] == true));
    set_pod_conditions(status, pod, false, all_ready);
    wake
}

/// The Pod's conditions as a kubelet writes them (the scheduler's `PodScheduled` kept).
fn set_pod_conditions(status: &mut Value, pod: &Value, finished: bool, ready: bool) {
    let running = !str_at(status, "/podIP").is_empty();
    let unready: Vec<String> = (status["containerStatuses"].as_array().into_iter().flatten())
        .filter(|c| c["ready"] != true)
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect();
    let (reason, message) = if finished {
        (json!("PodCompleted"), Value::Null)
    } else if ready {
        (Value::Null, Value::Null)
    } else {
        (
            json!("ContainersNotReady"),
            json!(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    };
    let bool_str = |b: bool| if b { "True" } else { "False" };
    let mut wanted = vec![
        (
            "PodReadyToStartContainers",
            bool_str(running || finished),
            Value::Null,
            Value::Null,
        ),
        ("Initialized", "True", Value::Null, Value::Null),
        (
            "Ready",
            bool_str(ready && !finished),
            reason.clone(),
            message.clone(),
        ),
        (
            "ContainersReady",
            bool_str(ready && !finished),
            reason,
            message,
        ),
    ];
    if finished {
        wanted[0].1 = "False";
    }
    let old = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut conditions = Vec::new();
    for (kind, ok, reason, message) in wanted {
        let since = old
            .iter()
            .find(|c| c["type"] == kind && c["status"] == ok)
            .map_or_else(|| json!(now()), |c| c["lastTransitionTime"].clone());
        let mut c =
            json!({"type": kind, "status": ok, "lastProbeTime": null, "lastTransitionTime": since});
        if !reason.is_null() {
            c["reason"] = reason;
        }
        if !message.is_null() {
            c["message"] = message;
        }
        conditions.push(c);
    }
    conditions.extend(old.into_iter().filter(|c| c["type"] == "PodScheduled"));
    status["conditions"] = json!(conditions);
}

/// One status per container of list `which` (`containers`, `initContainers`).
fn containers(pod: &Value, which: &str, each: impl Fn(&Value) -> Value) -> Vec<Value> {
    (pod["spec"][which].as_array().into_iter().flatten())
        .map(|c| {
            let mut s = each(&json!({"name": c["name"], "image": image(str_at(c, "/image"))}));
            s["name"] = c["name"].clone();
            s
        })
        .collect()
}

fn waiting(c: &Value, reason: &str, message: Option<&str>) -> Value {
    let mut state = json!({"reason": reason});
    if let Some(m) = message {
        state["message"] = json!(m);
    }
    json!({"name": c["name"], "image": c["image"], "imageID": c.get("imageID").cloned().unwrap_or(json!("")),
        "lastState": c.get("lastState").cloned().unwrap_or(json!({})), "ready": false,
        "restartCount": c.get("restartCount").cloned().unwrap_or(json!(0)), "started": false,
        "state": {"waiting": state}})
}

fn running(c: &Value, at: &str, restarts: i64, last: Option<Value>) -> Value {
    let image = str_at(c, "/image").to_string();
    json!({"name": c["name"], "image": image, "imageID": image_id(&image),
        "containerID": container_id(c, restarts), "lastState": last.unwrap_or(json!({})),
        "ready": false, "restartCount": restarts, "started": true,
        "state": {"running": {"startedAt": at}}})
}

fn terminated(
    c: &Value,
    code: i64,
    started: &str,
    ended: &str,
    restarts: i64,
    last: Option<Value>,
) -> Value {
    let image = str_at(c, "/image").to_string();
    json!({"name": c["name"], "image": image, "imageID": image_id(&image),
        "containerID": container_id(c, restarts), "lastState": last.unwrap_or(json!({})),
        "ready": false, "restartCount": restarts, "started": false,
        "state": {"terminated": {"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" },
            "startedAt": started, "finishedAt": ended, "containerID": container_id(c, restarts)}}})
}

/// An image reference as container runtimes report it (`nginx` → `docker.io/library/nginx:latest`).
fn image(reference: &str) -> String {
    let (first, rest) = reference.split_once('/').unwrap_or(("", reference));
    let registry = first.contains('.') || first.contains(':') || first == "localhost";
    let mut full = match (registry, first.is_empty()) {
        (true, _) => reference.to_string(),
        (false, true) => format!("docker.io/library/{rest}"),
        (false, false) => format!("docker.io/{reference}"),
    };
    let name = full.rsplit('/').next().unwrap_or("");
    if !name.contains(':') && !name.contains('@') {
        full.push_str(":latest");
    }
    full
}

/// A digest standing for the image's (there is no registry to ask).
fn image_id(image: &str) -> String {
    let repo = image.split(['@']).next().unwrap_or(image);
    let repo = match repo.rsplit_once(':') {
        Some((r, tag)) if !tag.contains('/') => r,
        _ => repo,
    };
    format!(
        "{repo}@sha256:{}",
        hex::encode(Sha256::digest(image.as_bytes()))
    )
}

fn container_id(c: &Value, restarts: i64) -> String {
    let seed = format!("{}/{}/{restarts}", str_at(c, "/name"), str_at(c, "/image"));
    format!("fake://{}", hex::encode(Sha256::digest(seed.as_bytes())))
}

fn host_ip(node: &Value, i: usize) -> String {
    (node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .into_iter())
    .flatten()
    .find(|a| a["type"] == "InternalIP")
    .and_then(|a| a["address"].as_str())
    .map_or_else(|| format!("172.18.0.{}", 2 + i % 250), String::from)
}

/// The next free address of the Node's `podCIDR` (a /24), after the highest in use, as
/// kube's host-local IPAM hands them out.
fn pod_ip(node: &Value, i: usize, st: &State) -> String {
    let cidr = str_at(node, "/spec/podCIDR");
    let prefix = cidr
        .split('/')
        .next()
        .and_then(|ip| ip.rsplit_once('.'))
        .map_or_else(|| format!("10.244.{}", i % 256), |(p, _)| p.to_string());
    let name = str_at(node, "/metadata/name");
    let used: Vec<u32> = objects(st, "", "pods", None)
        .iter()
        .filter(|p| str_at(p, "/spec/nodeName") == name)
        .filter_map(|p| {
            str_at(p, "/status/podIP")
                .strip_prefix(&format!("{prefix}."))
                .and_then(|h| h.parse().ok())
        })
        .collect();
    let start = used.iter().max().map_or(2, |m| m + 1);
    let host = (0..253)
        .map(|k| 2 + (start - 2 + k) % 253)
        .find(|h| !used.contains(h))
        .unwrap_or(2);
    format!("{prefix}.{host}")
}
