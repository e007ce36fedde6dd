//! kube-apiserver's table printers for the built-in kinds this server serves: the columns
//! `kubectl get` shows for them, and how each cell is worked out from the object (kube's
//! `pkg/printers/internalversion`). As kube's server does, every column is always sent; those
//! with priority 1 are the ones kubectl shows only with `-o wide`.
//!
//! Written by hand: the printers are Go code in kube-apiserver, and no Rust crate carries them.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::store::str_at;

/// A kind's printer: its columns and how a row's cells are computed.
pub struct Printer {
    /// `(name, type, priority)` of each column; the one named "Name" has format `name`.
    pub columns: &'static [(&'static str, &'static str, u8)],
    /// The row's cells, one per column, for the object as stored.
    pub cells: fn(&Value, DateTime<Utc>) -> Vec<Value>,
}

/// The printer of a built-in kind, by its group and kind: kube's default (Name, Created At) for
/// kinds without one of their own.
pub fn of(group: &str, kind: &str) -> &'static Printer {
    match (group, kind) {
        ("" | "events.k8s.io", "Event") => &EVENT,
        ("", "Pod") => &POD,
        ("", "Namespace") => &NAMESPACE,
        ("", "ConfigMap") => &CONFIG_MAP,
        ("", "Secret") => &SECRET,
        ("", "Service") => &SERVICE,
        ("", "ServiceAccount") => &SERVICE_ACCOUNT,
        ("apps", "Deployment") => &DEPLOYMENT,
        ("coordination.k8s.io", "Lease") => &LEASE,
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => &BINDING,
        _ => &DEFAULT,
    }
}

/// kube's default table for a kind without a printer of its own (Roles, ClusterRoles, CRDs).
static DEFAULT: Printer = Printer {
    columns: &[("Name", "string", 0), ("Created At", "date", 0)],
    cells: |o, _| vec![name(o), str_at(o, "/metadata/creationTimestamp").into()],
};

static EVENT: Printer = Printer {
    columns: &[
        ("Last Seen", "string", 0),
        ("Type", "string", 0),
        ("Reason", "string", 0),
        ("Object", "string", 0),
        ("Subobject", "string", 1),
        ("Source", "string", 1),
        ("Message", "string", 0),
        ("First Seen", "string", 1),
        ("Count", "string", 1),
        ("Name", "string", 1),
    ],
    cells: event,
};

/// An Event's row, from its core form (events.k8s.io Events are stored in it, `super::events`).
fn event(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let first = match str_at(o, "/firstTimestamp") {
        "" => since(str_at(o, "/eventTime"), now),
        t => since(t, now),
    };
    let (last, count) = match o.get("series") {
        Some(series) => (
            since(str_at(series, "/lastObservedTime"), now),
            series["count"].as_i64().unwrap_or(0),
        ),
        None => (
            match str_at(o, "/lastTimestamp") {
                "" => first.clone(),
                t => since(t, now),
            },
            o["count"].as_i64().filter(|&c| c != 0).unwrap_or(1),
        ),
    };
    let kind = str_at(o, "/involvedObject/kind").to_lowercase();
    let object = match str_at(o, "/involvedObject/name") {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let or = |a: &'static str, b: &'static str| match str_at(o, a) {
        "" => str_at(o, b),
        s => s,
    };
    let source = match (
        or("/source/component", "/reportingComponent"),
        or("/source/host", "/reportingInstance"),
    ) {
        (component, "") => component.to_string(),
        (component, instance) => format!("{component}, {instance}"),
    };
    vec![
        last.into(),
        o["type"].clone(),
        o["reason"].clone(),
        object.into(),
        str_at(o, "/involvedObject/fieldPath").into(),
        source.into(),
        str_at(o, "/message").trim().into(),
        first.into(),
        count.into(),
        name(o),
    ]
}

static POD: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Ready", "string", 0),
        ("Status", "string", 0),
        ("Restarts", "string", 0),
        ("Age", "string", 0),
        ("IP", "string", 1),
        ("Node", "string", 1),
        ("Nominated Node", "string", 1),
        ("Readiness Gates", "string", 1),
    ],
    cells: pod,
};

/// Restarts counted over some containers, and when the latest of those restarts ended.
#[derive(Default, Clone, Copy)]
struct Restarts<'a> {
    count: i64,
    last: Option<&'a str>,
}

impl<'a> Restarts<'a> {
    fn add(&mut self, status: &'a Value) {
        self.count += status["restartCount"].as_i64().unwrap_or(0);
        if let Some(t) = status["lastState"]["terminated"]["finishedAt"].as_str() {
            // RFC 3339 UTC timestamps order as strings.
            self.last = Some(self.last.map_or(t, |l| l.max(t)));
        }
    }
}

/// A Pod's row: kube's aggregate of its phase and its containers' states, sidecars (init
/// containers that restart always) counted with the containers once they started.
fn pod(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (spec, status) = (&o["spec"], &o["status"]);
    let mut reason = match str_at(status, "/reason") {
        "" => str_at(status, "/phase").to_string(),
        r => r.to_string(),
    };
    if array(&status["conditions"])
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let init_specs = array(&spec["initContainers"]);
    let is_sidecar = |name: &Value| {
        init_specs
            .iter()
            .any(|s| s["name"] == *name && s["restartPolicy"] == "Always")
    };
    let total = array(&spec["containers"]).len()
        + init_specs
            .iter()
            .filter(|s| s["restartPolicy"] == "Always")
            .count();
    let mut ready = 0;
    let (mut restarts, mut sidecar_restarts) = (Restarts::default(), Restarts::default());
    let mut initializing = false;
    for (i, c) in array(&status["initContainerStatuses"]).iter().enumerate() {
        restarts.add(c);
        let sidecar = is_sidecar(&c["name"]);
        if sidecar {
            sidecar_restarts.add(c);
        }
        let (terminated, waiting) = (&c["state"]["terminated"], &c["state"]["waiting"]);
        if terminated["exitCode"].as_i64() == Some(0) {
            continue;
        }
        if sidecar && c["started"] == true {
            ready += usize::from(c["ready"] == true);
            continue;
        }
        initializing = true;
        reason = if terminated.is_object() {
            match str_at(terminated, "/reason") {
                "" => exit(terminated, "Init:"),
                r => format!("Init:{r}"),
            }
        } else {
            match str_at(waiting, "/reason") {
                "" | "PodInitializing" => format!("Init:{i}/{}", init_specs.len()),
                r => format!("Init:{r}"),
            }
        };
        break;
    }
    if !initializing || condition(status, "Initialized") {
        restarts = sidecar_restarts;
        let mut running = false;
        for c in array(&status["containerStatuses"]).iter().rev() {
            restarts.add(c);
            let (state, terminated) = (&c["state"], &c["state"]["terminated"]);
            if let Some(r) = state["waiting"]["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
            {
                reason = r.to_string();
            } else if let Some(r) = terminated["reason"].as_str().filter(|r| !r.is_empty()) {
                reason = r.to_string();
            } else if terminated.is_object() {
                reason = exit(terminated, "");
            } else if c["ready"] == true && state["running"].is_object() {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            reason = if condition(status, "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .into();
        }
    }
    // A deleted Pod is Terminating until it has ended (Succeeded or Failed: then its reason
    // stays); one on a lost node is Unknown.
    if o["metadata"]["deletionTimestamp"].is_string() {
        if str_at(status, "/reason") == "NodeLost" {
            reason = "Unknown".into();
        } else if !matches!(str_at(status, "/phase"), "Succeeded" | "Failed") {
            reason = "Terminating".into();
        }
    }
    let restarts = match restarts.last {
        Some(t) if restarts.count != 0 => format!("{} ({} ago)", restarts.count, since(t, now)),
        _ => restarts.count.to_string(),
    };
    // kube's storage keeps podIPs[0] equal to podIP.
    let ip = match str_at(status, "/podIPs/0/ip") {
        "" => str_at(status, "/podIP"),
        ip => ip,
    };
    let gates = array(&spec["readinessGates"]);
    let gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let met = gates
            .iter()
            .filter(|g| condition(status, str_at(g, "/conditionType")))
            .count();
        format!("{met}/{}", gates.len())
    };
    vec![
        name(o),
        format!("{ready}/{total}").into(),
        reason.into(),
        restarts.into(),
        age(o, now),
        none_if_empty(ip),
        none_if_empty(str_at(spec, "/nodeName")),
        none_if_empty(str_at(status, "/nominatedNodeName")),
        gates.into(),
    ]
}

/// `Signal:9` or `ExitCode:1` of a terminated container state, after `prefix`.
fn exit(terminated: &Value, prefix: &str) -> String {
    match terminated["signal"].as_i64().filter(|&s| s != 0) {
        Some(s) => format!("{prefix}Signal:{s}"),
        None => format!(
            "{prefix}ExitCode:{}",
            terminated["exitCode"].as_i64().unwrap_or(0)
        ),
    }
}

/// Whether a status has the condition `type` with status True.
fn condition(status: &Value, ty: &str) -> bool {
    array(&status["conditions"])
        .iter()
        .any(|c| c["type"] == ty && c["status"] == "True")
}

static NAMESPACE: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Status", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| vec![name(o), o["status"]["phase"].clone(), age(o, now)],
};

static CONFIG_MAP: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Data", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| {
        let n = entries(&o["data"]) + entries(&o["binaryData"]);
        vec![name(o), n.into(), age(o, now)]
    },
};

static SECRET: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Type", "string", 0),
        ("Data", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| {
        let n = entries(&o["data"]);
        vec![name(o), o["type"].clone(), n.into(), age(o, now)]
    },
};

static SERVICE_ACCOUNT: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Secrets", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| vec![name(o), array(&o["secrets"]).len().into(), age(o, now)],
};

static SERVICE: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Type", "string", 0),
        ("Cluster-IP", "string", 0),
        ("External-IP", "string", 0),
        ("Port(s)", "string", 0),
        ("Age", "string", 0),
        ("Selector", "string", 1),
    ],
    cells: service,
};

/// A Service's row: kube's external address per type, and `port[:nodePort]/protocol` per port.
fn service(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let spec = &o["spec"];
    let ty = match str_at(spec, "/type") {
        "" => "ClusterIP",
        t => t,
    };
    let strings = |v: &Value| -> Vec<String> {
        array(v)
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let external_ips = strings(&spec["externalIPs"]);
    let external = match ty {
        "ClusterIP" | "NodePort" if external_ips.is_empty() => "<none>".to_string(),
        "ClusterIP" | "NodePort" => external_ips.join(","),
        "LoadBalancer" => {
            let mut ips: Vec<String> = array(&o["status"]["loadBalancer"]["ingress"])
                .iter()
                .filter_map(|i| {
                    [i["ip"].as_str(), i["hostname"].as_str()]
                        .into_iter()
                        .flatten()
                        .find(|s| !s.is_empty())
                        .map(str::to_string)
                })
                .collect();
            ips.extend(external_ips);
            if ips.is_empty() {
                "<pending>".to_string()
            } else {
                ips.join(",")
            }
        }
        "ExternalName" => str_at(spec, "/externalName").to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = array(&spec["ports"])
        .iter()
        .map(|p| {
            let proto = match str_at(p, "/protocol") {
                "" => "TCP",
                proto => proto,
            };
            let port = p["port"].as_i64().unwrap_or(0);
            match p["nodePort"].as_i64().filter(|&n| n != 0) {
                Some(node) => format!("{port}:{node}/{proto}"),
                None => format!("{port}/{proto}"),
            }
        })
        .collect();
    let selector = match spec["selector"].as_object() {
        Some(m) if !m.is_empty() => m
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(","),
        _ => "<none>".to_string(),
    };
    let cluster_ip = match (str_at(spec, "/clusterIPs/0"), str_at(spec, "/clusterIP")) {
        ("", "") => "<none>",
        ("", ip) | (ip, _) => ip,
    };
    vec![
        name(o),
        ty.into(),
        cluster_ip.into(),
        external.into(),
        if ports.is_empty() {
            "<none>".into()
        } else {
            ports.join(",").into()
        },
        age(o, now),
        selector.into(),
    ]
}

static DEPLOYMENT: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Ready", "string", 0),
        ("Up-to-date", "string", 0),
        ("Available", "string", 0),
        ("Age", "string", 0),
        ("Containers", "string", 1),
        ("Images", "string", 1),
        ("Selector", "string", 1),
    ],
    cells: |o, now| {
        let (spec, status) = (&o["spec"], &o["status"]);
        let count = |v: &Value| v.as_i64().unwrap_or(0);
        let containers = array(&spec["template"]["spec"]["containers"]);
        let join = |field: &str| {
            containers
                .iter()
                .map(|c| str_at(c, field))
                .collect::<Vec<_>>()
                .join(",")
        };
        vec![
            name(o),
            format!(
                "{}/{}",
                count(&status["readyReplicas"]),
                spec["replicas"].as_i64().unwrap_or(1)
            )
            .into(),
            count(&status["updatedReplicas"]).into(),
            count(&status["availableReplicas"]).into(),
            age(o, now),
            join("/name").into(),
            join("/image").into(),
            label_selector(&spec["selector"]).into(),
        ]
    },
};

/// A `metav1.LabelSelector` as kube formats it (`app=web,tier in (a,b)`); `<none>` when empty.
fn label_selector(sel: &Value) -> String {
    let mut parts: Vec<String> = sel["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for e in array(&sel["matchExpressions"]) {
        let key = str_at(e, "/key");
        let values = || {
            array(&e["values"])
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(",")
        };
        parts.push(match str_at(e, "/operator") {
            "In" => format!("{key} in ({})", values()),
            "NotIn" => format!("{key} notin ({})", values()),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            op => format!("{key} {op} ({})", values()),
        });
    }
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    }
}

static LEASE: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Holder", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| {
        vec![
            name(o),
            str_at(o, "/spec/holderIdentity").into(),
            age(o, now),
        ]
    },
};

static BINDING: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Role", "string", 0),
        ("Age", "string", 0),
        ("Users", "string", 1),
        ("Groups", "string", 1),
        ("ServiceAccounts", "string", 1),
    ],
    cells: |o, now| {
        let subjects = array(&o["subjects"]);
        let of_kind = |kind: &str| {
            subjects
                .iter()
                .filter(|s| s["kind"] == kind)
                .map(|s| match (kind, str_at(s, "/namespace")) {
                    ("ServiceAccount", ns) => format!("{ns}/{}", str_at(s, "/name")),
                    _ => str_at(s, "/name").to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let role = format!(
            "{}/{}",
            str_at(o, "/roleRef/kind"),
            str_at(o, "/roleRef/name")
        );
        vec![
            name(o),
            role.into(),
            age(o, now),
            of_kind("User").into(),
            of_kind("Group").into(),
            of_kind("ServiceAccount").into(),
        ]
    },
};

fn name(o: &Value) -> Value {
    o["metadata"]["name"].clone()
}

fn age(o: &Value, now: DateTime<Utc>) -> Value {
    since(str_at(o, "/metadata/creationTimestamp"), now).into()
}

fn array(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

fn entries(v: &Value) -> usize {
    v.as_object().map_or(0, serde_json::Map::len)
}

fn none_if_empty(s: &str) -> Value {
    json!(if s.is_empty() { "<none>" } else { s })
}

/// How long ago an RFC 3339 timestamp was, as kubectl shows ages (apimachinery's
/// `duration.HumanDuration`); `<unknown>` for none.
pub fn since(ts: &str, now: DateTime<Utc>) -> String {
    let Ok(t) = DateTime::parse_from_rfc3339(ts) else {
        return "<unknown>".into();
    };
    human_duration((now - t.with_timezone(&Utc)).num_seconds())
}

/// apimachinery's `duration.HumanDuration` of a number of seconds.
fn human_duration(s: i64) -> String {
    if s < -1 {
        return "<invalid>".into();
    }
    let s = s.max(0);
    let (m, h) = (s / 60, s / 3600);
    let (d, y) = (h / 24, h / 24 / 365);
    let pair = |a: i64, ua: &str, b: i64, ub: &str| match b {
        0 => format!("{a}{ua}"),
        b => format!("{a}{ua}{b}{ub}"),
    };
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => pair(m, "m", s % 60, "s"),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 => pair(h, "h", m % 60, "m"),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => pair(d, "d", h % 24, "h"),
        _ if h < 24 * 365 * 2 => format!("{d}d"),
        _ if h < 24 * 365 * 8 => pair(y, "y", d % 365, "d"),
        _ => format!("{y}y"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-26T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn cells(group: &str, kind: &str, o: Value) -> Vec<Value> {
        let p = of(group, kind);
        let cells = (p.cells)(&o, now());
        assert_eq!(cells.len(), p.columns.len(), "{kind}: one cell per column");
        cells
    }

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (9 * 3600, "9h"),
            (2 * 86400 + 3 * 3600, "2d3h"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400 + 86400, "3y1d"),
            (9 * 365 * 86400, "9y"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
        assert_eq!(since("2026-11-26T11:40:00Z", now()), "20m");
        assert_eq!(since("", now()), "<unknown>");
    }

    #[test]
    fn events_show_when_what_and_about_which_object() {
        let core = json!({
            "metadata": {"name": "vm.1"}, "type": "Normal", "reason": "Active",
            "message": " test-vm is Active ", "involvedObject": {"kind": "VirtualMachine", "name": "test-vm"},
            "reportingComponent": "wasmctrl/virtualmachine", "reportingInstance": "host-0",
            "eventTime": "2026-11-26T11:59:56.000000Z",
        });
        assert_eq!(
            cells("", "Event", core),
            json!([
                "4s",
                "Normal",
                "Active",
                "virtualmachine/test-vm",
                "",
                "wasmctrl/virtualmachine, host-0",
                "test-vm is Active",
                "4s",
                1,
                "vm.1"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let series = json!({
            "metadata": {"name": "e"}, "firstTimestamp": "2026-11-26T11:00:00Z",
            "lastTimestamp": "2026-11-26T11:30:00Z", "count": 9,
            "series": {"count": 4, "lastObservedTime": "2026-11-26T11:59:00.000000Z"},
            "source": {"component": "kubelet"}, "involvedObject": {"kind": "Pod", "name": "p"},
        });
        let c = cells("events.k8s.io", "Event", series);
        assert_eq!(
            (c[0].as_str(), c[5].as_str()),
            (Some("60s"), Some("kubelet"))
        );
        assert_eq!((c[7].as_str(), &c[8]), (Some("60m"), &json!(4)));
    }

    #[test]
    fn pods_aggregate_their_containers() {
        let base = |status: Value| {
            json!({
                "metadata": {"name": "p", "creationTimestamp": "2026-11-26T11:00:00Z"},
                "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
                "status": status,
            })
        };
        let running = json!({"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
             "lastState": {"terminated": {"finishedAt": "2026-11-26T11:55:00Z"}}},
            {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        ]});
        let c = cells("", "Pod", base(running));
        assert_eq!(
            c,
            json!([
                "p",
                "1/2",
                "CrashLoopBackOff",
                "2 (5m ago)",
                "60m",
                "10.0.0.7",
                "n1",
                "<none>",
                "<none>"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let pending = cells("", "Pod", base(json!({"phase": "Pending"})));
        assert_eq!(&pending[1..4], ["0/2", "Pending", "0"]);
        let init = json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "i", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}]});
        let mut o = base(init);
        o["spec"]["initContainers"] = json!([{"name": "i"}]);
        assert_eq!(cells("", "Pod", o.clone())[2], "Init:0/1");
        o["metadata"]["deletionTimestamp"] = json!("2026-11-26T11:59:00Z");
        assert_eq!(cells("", "Pod", o.clone())[2], "Terminating");
        let mut sidecar = base(json!({"phase": "Running",
            "initContainerStatuses": [{"name": "mesh", "started": true, "ready": true, "restartCount": 1,
                "state": {"running": {}}, "lastState": {"terminated": {"finishedAt": "2026-11-26T11:58:00Z"}}}],
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": true, "restartCount": 0, "state": {"running": {}}}]}));
        sidecar["spec"]["initContainers"] = json!([{"name": "mesh", "restartPolicy": "Always"}]);
        assert_eq!(
            &cells("", "Pod", sidecar)[1..4],
            ["3/3", "Running", "1 (2m ago)"]
        );
        let gated = base(json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}));
        assert_eq!(cells("", "Pod", gated)[2], "SchedulingGated");
        o["status"] = json!({"phase": "Succeeded", "containerStatuses": [
            {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]});
        assert_eq!(cells("", "Pod", o)[2], "Completed");
    }

    #[test]
    fn deployments_services_and_bindings() {
        let d = json!({"metadata": {"name": "web"}, "spec": {"replicas": 3,
            "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}, {"name": "s", "image": "envoy"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        let c = cells("apps", "Deployment", d);
        assert_eq!(&c[1..4], [json!("2/3"), json!(3), json!(2)]);
        assert_eq!(&c[5..], ["c,s", "nginx,envoy", "app=web,tier in (a,b)"]);

        let svc = json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort", "clusterIP": "10.96.0.10",
            "selector": {"app": "web"}, "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}});
        let c = cells("", "Service", svc);
        assert_eq!(
            &c[1..5],
            ["NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP"]
        );
        assert_eq!(c[6], "app=web");
        let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer"}});
        assert_eq!(cells("", "Service", lb)[3], "<pending>");

        let rb = json!({"metadata": {"name": "rb"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "w", "namespace": "wasmctrl"}]});
        let c = cells("rbac.authorization.k8s.io", "RoleBinding", rb);
        assert_eq!(c[1], "ClusterRole/view");
        assert_eq!(&c[3..], ["alice", "", "wasmctrl/w"]);
    }

    #[test]
    fn config_maps_count_their_keys_and_kinds_without_a_printer_show_created_at() {
        let cm = json!({"metadata": {"name": "c"}, "data": {"a": "1"}, "binaryData": {"b": ""}});
        assert_eq!(cells("", "ConfigMap", cm)[1], 2);
        let role = json!({"metadata": {"name": "r", "creationTimestamp": "2026-11-26T11:00:00Z"}});
        assert_eq!(
            cells("rbac.authorization.k8s.io", "Role", role),
            [json!("r"), json!("2026-11-26T11:00:00Z")]
        );
    }
}
