//! kube-apiserver's table printers for the built-in kinds this server serves: the columns
//! `kubectl get` shows for them, and how each cell is worked out from the object (kube's
//! `pkg/printers/internalversion`). As kube's server does, every column is always sent; those
//! with priority 1 are the ones kubectl shows only with `-o wide`.
//!
//! Written by hand: the printers are Go code in kube-apiserver, and no Rust crate carries them.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::json::str_at;

/// A kind's printer: its columns and how a row's cells are computed.
pub struct Printer {
    /// `(name, type, priority)` of each column; the one named "Name" has format `name`.
    pub columns: &'static [(&'static str, &'static str, u8)],
    /// The row's cells, one per column, for the object as stored.
    pub cells: fn(&Value, DateTime<Utc>) -> Vec<Value>,
}

/// kube's default table for a kind without a printer of its own (Roles, ClusterRoles, CRDs).
pub(crate) static DEFAULT: Printer = Printer {
    columns: &[("Name", "string", 0), ("Created At", "date", 0)],
    cells: |o, _| vec![name(o), str_at(o, "/metadata/creationTimestamp").into()],
};

pub(crate) static EVENT: Printer = Printer {
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

pub(crate) static POD: Printer = Printer {
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
    let mut state = PodState::of(status);
    let init_specs = array(&spec["initContainers"]);
    let total = array(&spec["containers"]).len()
        + (init_specs.iter())
            .filter(|s| s["restartPolicy"] == "Always")
            .count();
    let (initializing, sidecar_restarts) = state.init_containers(init_specs, status);
    if !initializing || condition(status, "Initialized") {
        state.restarts = sidecar_restarts;
        state.containers(status);
    }
    // A deleted Pod is Terminating until it has ended (Succeeded or Failed: then its reason
    // stays); one on a lost node is Unknown.
    if o["metadata"]["deletionTimestamp"].is_string() {
        if str_at(status, "/reason") == "NodeLost" {
            state.reason = "Unknown".into();
        } else if !matches!(str_at(status, "/phase"), "Succeeded" | "Failed") {
            state.reason = "Terminating".into();
        }
    }
    let restarts = match state.restarts.last {
        Some(t) if state.restarts.count != 0 => {
            format!("{} ({} ago)", state.restarts.count, since(t, now))
        }
        _ => state.restarts.count.to_string(),
    };
    // kube's storage keeps podIPs[0] equal to podIP.
    let ip = match str_at(status, "/podIPs/0/ip") {
        "" => str_at(status, "/podIP"),
        ip => ip,
    };
    vec![
        name(o),
        format!("{}/{total}", state.ready).into(),
        state.reason.into(),
        restarts.into(),
        age(o, now),
        none_if_empty(ip),
        none_if_empty(str_at(spec, "/nodeName")),
        none_if_empty(str_at(status, "/nominatedNodeName")),
        readiness_gates(spec, status).into(),
    ]
}

/// What a Pod's row says of it while its containers are looked at in turn.
struct PodState<'a> {
    reason: String,
    ready: usize,
    restarts: Restarts<'a>,
}

impl<'a> PodState<'a> {
    /// From the Pod's status alone: its reason or phase, or `SchedulingGated`.
    fn of(status: &Value) -> Self {
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
        Self {
            reason,
            ready: 0,
            restarts: Restarts::default(),
        }
    }

    /// The init containers, in order: the first that has not completed (nor started, for a
    /// sidecar) gives the reason (`Init:1/2`, `Init:Error`). Whether one is still
    /// initializing, and the sidecars' restarts.
    fn init_containers(&mut self, init_specs: &[Value], status: &'a Value) -> (bool, Restarts<'a>) {
        let is_sidecar = |name: &Value| {
            (init_specs.iter()).any(|s| s["name"] == *name && s["restartPolicy"] == "Always")
        };
        let mut sidecar_restarts = Restarts::default();
        for (i, c) in array(&status["initContainerStatuses"]).iter().enumerate() {
            self.restarts.add(c);
            let sidecar = is_sidecar(&c["name"]);
            if sidecar {
                sidecar_restarts.add(c);
            }
            let (terminated, waiting) = (&c["state"]["terminated"], &c["state"]["waiting"]);
            if terminated["exitCode"].as_i64() == Some(0) {
                continue;
            }
            if sidecar && c["started"] == true {
                self.ready += usize::from(c["ready"] == true);
                continue;
            }
            self.reason = if terminated.is_object() {
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
            return (true, sidecar_restarts);
        }
        (false, sidecar_restarts)
    }

    /// The containers, last first: a waiting or terminated one's reason, or ready and
    /// running; a Pod `Completed` with a container still running is `Running` or `NotReady`.
    fn containers(&mut self, status: &'a Value) {
        let mut running = false;
        for c in array(&status["containerStatuses"]).iter().rev() {
            self.restarts.add(c);
            let (state, terminated) = (&c["state"], &c["state"]["terminated"]);
            if let Some(r) = state["waiting"]["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
            {
                self.reason = r.to_string();
            } else if let Some(r) = terminated["reason"].as_str().filter(|r| !r.is_empty()) {
                self.reason = r.to_string();
            } else if terminated.is_object() {
                self.reason = exit(terminated, "");
            } else if c["ready"] == true && state["running"].is_object() {
                running = true;
                self.ready += 1;
            }
        }
        if self.reason == "Completed" && running {
            self.reason = if condition(status, "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .into();
        }
    }
}

/// How many of a Pod's readiness gates are met (`1/2`), `<none>` without any.
fn readiness_gates(spec: &Value, status: &Value) -> String {
    let gates = array(&spec["readinessGates"]);
    if gates.is_empty() {
        return "<none>".to_string();
    }
    let met = (gates.iter())
        .filter(|g| condition(status, str_at(g, "/conditionType")))
        .count();
    format!("{met}/{}", gates.len())
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

pub(crate) static NAMESPACE: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Status", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| vec![name(o), o["status"]["phase"].clone(), age(o, now)],
};

pub(crate) static CONFIG_MAP: Printer = Printer {
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

pub(crate) static SECRET: Printer = Printer {
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

pub(crate) static SERVICE_ACCOUNT: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Secrets", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| vec![name(o), array(&o["secrets"]).len().into(), age(o, now)],
};

pub(crate) static SERVICE: Printer = Printer {
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
        labels(&spec["selector"]).into(),
    ]
}

pub(crate) static DEPLOYMENT: Printer = Printer {
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
        let [names, images] = containers(&spec["template"]);
        vec![
            name(o),
            format!("{}/{}", int(&status["readyReplicas"]), replicas(spec)).into(),
            int(&status["updatedReplicas"]).into(),
            int(&status["availableReplicas"]).into(),
            age(o, now),
            names,
            images,
            label_selector(&spec["selector"]).into(),
        ]
    },
};

/// The columns of ReplicaSets and ReplicationControllers.
const REPLICAS_COLUMNS: &[(&str, &str, u8)] = &[
    ("Name", "string", 0),
    ("Desired", "integer", 0),
    ("Current", "integer", 0),
    ("Ready", "integer", 0),
    ("Age", "string", 0),
    ("Containers", "string", 1),
    ("Images", "string", 1),
    ("Selector", "string", 1),
];

pub(crate) static REPLICA_SET: Printer = Printer {
    columns: REPLICAS_COLUMNS,
    cells: |o, now| replica_counts(o, now, label_selector(&o["spec"]["selector"])),
};

/// A ReplicationController's selector is a plain label map.
pub(crate) static REPLICATION_CONTROLLER: Printer = Printer {
    columns: REPLICAS_COLUMNS,
    cells: |o, now| replica_counts(o, now, labels(&o["spec"]["selector"])),
};

/// The row of a ReplicaSet or ReplicationController, its selector already formatted.
fn replica_counts(o: &Value, now: DateTime<Utc>, selector: String) -> Vec<Value> {
    let (spec, status) = (&o["spec"], &o["status"]);
    let [names, images] = containers(&spec["template"]);
    vec![
        name(o),
        replicas(spec).into(),
        int(&status["replicas"]).into(),
        int(&status["readyReplicas"]).into(),
        age(o, now),
        names,
        images,
        selector.into(),
    ]
}

pub(crate) static STATEFUL_SET: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Ready", "string", 0),
        ("Age", "string", 0),
        ("Containers", "string", 1),
        ("Images", "string", 1),
    ],
    cells: |o, now| {
        let spec = &o["spec"];
        let [names, images] = containers(&spec["template"]);
        let ready = int(&o["status"]["readyReplicas"]);
        vec![
            name(o),
            format!("{ready}/{}", replicas(spec)).into(),
            age(o, now),
            names,
            images,
        ]
    },
};

pub(crate) static DAEMON_SET: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Desired", "integer", 0),
        ("Current", "integer", 0),
        ("Ready", "integer", 0),
        ("Up-to-date", "integer", 0),
        ("Available", "integer", 0),
        ("Node Selector", "string", 0),
        ("Age", "string", 0),
        ("Containers", "string", 1),
        ("Images", "string", 1),
        ("Selector", "string", 1),
    ],
    cells: |o, now| {
        let (spec, status) = (&o["spec"], &o["status"]);
        let [names, images] = containers(&spec["template"]);
        vec![
            name(o),
            int(&status["desiredNumberScheduled"]).into(),
            int(&status["currentNumberScheduled"]).into(),
            int(&status["numberReady"]).into(),
            int(&status["updatedNumberScheduled"]).into(),
            int(&status["numberAvailable"]).into(),
            labels(&spec["template"]["spec"]["nodeSelector"]).into(),
            age(o, now),
            names,
            images,
            label_selector(&spec["selector"]).into(),
        ]
    },
};

pub(crate) static CONTROLLER_REVISION: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Controller", "string", 0),
        ("Revision", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| {
        // `kind.group/name` of the controller, lowercased as kubectl names resources.
        let controller = array(&o["metadata"]["ownerReferences"])
            .iter()
            .find(|r| r["controller"] == true)
            .map_or_else(
                || "<none>".to_string(),
                |r| {
                    let group = str_at(r, "/apiVersion")
                        .split_once('/')
                        .map_or("", |(g, _)| g);
                    let (kind, name) = (str_at(r, "/kind"), str_at(r, "/name"));
                    match (kind, group) {
                        ("", "") => name.to_string(),
                        (kind, "") => format!("{}/{name}", kind.to_lowercase()),
                        (kind, group) => {
                            format!("{}.{}/{name}", kind.to_lowercase(), group.to_lowercase())
                        }
                    }
                },
            );
        vec![
            name(o),
            controller.into(),
            int(&o["revision"]).into(),
            age(o, now),
        ]
    },
};

pub(crate) static JOB: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Status", "string", 0),
        ("Completions", "string", 0),
        ("Duration", "string", 0),
        ("Age", "string", 0),
        ("Containers", "string", 1),
        ("Images", "string", 1),
        ("Selector", "string", 1),
    ],
    cells: job,
};

/// A Job's row: its outcome as its conditions say (Complete and Failed before a deletion,
/// Suspended and FailureTarget after), `succeeded/completions`, and how long it has run.
fn job(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (spec, status) = (&o["spec"], &o["status"]);
    let succeeded = int(&status["succeeded"]);
    let completions = match (spec["completions"].as_i64(), int(&spec["parallelism"])) {
        (Some(n), _) => format!("{succeeded}/{n}"),
        (None, p) if p > 1 => format!("{succeeded}/1 of {p}"),
        (None, _) => format!("{succeeded}/1"),
    };
    let duration = match (
        str_at(status, "/startTime"),
        str_at(status, "/completionTime"),
    ) {
        ("", _) => String::new(),
        (start, "") => since(start, now),
        (start, end) => since(start, time(end).unwrap_or(now)),
    };
    let state = if condition(status, "Complete") {
        "Complete"
    } else if condition(status, "Failed") {
        "Failed"
    } else if o["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else if condition(status, "Suspended") {
        "Suspended"
    } else if condition(status, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let [names, images] = containers(&spec["template"]);
    vec![
        name(o),
        state.into(),
        completions.into(),
        duration.into(),
        age(o, now),
        names,
        images,
        label_selector(&spec["selector"]).into(),
    ]
}

pub(crate) static CRON_JOB: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Schedule", "string", 0),
        ("Timezone", "string", 0),
        ("Suspend", "boolean", 0),
        ("Active", "integer", 0),
        ("Last Schedule", "string", 0),
        ("Age", "string", 0),
        ("Containers", "string", 1),
        ("Images", "string", 1),
        ("Selector", "string", 1),
    ],
    cells: |o, now| {
        let (spec, status) = (&o["spec"], &o["status"]);
        let job = &spec["jobTemplate"]["spec"];
        let [names, images] = containers(&job["template"]);
        // kube prints the Suspend cell as text, though its column says boolean.
        let suspend = match spec["suspend"].as_bool() {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        };
        let last = match str_at(status, "/lastScheduleTime") {
            "" => "<none>".to_string(),
            t => since(t, now),
        };
        vec![
            name(o),
            spec["schedule"].clone(),
            spec["timeZone"].as_str().unwrap_or("<none>").into(),
            suspend.into(),
            array(&status["active"]).len().into(),
            last.into(),
            age(o, now),
            names,
            images,
            label_selector(&job["selector"]).into(),
        ]
    },
};

pub(crate) static NODE: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Status", "string", 0),
        ("Roles", "string", 0),
        ("Age", "string", 0),
        ("Version", "string", 0),
        ("Internal-IP", "string", 1),
        ("External-IP", "string", 1),
        ("OS-Image", "string", 1),
        ("Kernel-Version", "string", 1),
        ("Container-Runtime", "string", 1),
    ],
    cells: node,
};

/// A Node's row: Ready, NotReady or Unknown (no Ready condition) by its last Ready condition,
/// then SchedulingDisabled when cordoned; its roles from `node-role.kubernetes.io/<role>` and
/// `kubernetes.io/role` labels.
fn node(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let status = &o["status"];
    let ready = array(&status["conditions"])
        .iter()
        .rev()
        .find(|c| c["type"] == "Ready");
    let mut state = match ready {
        Some(c) if c["status"] == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }
    .to_string();
    if o["spec"]["unschedulable"] == true {
        state.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<&str> = (o["metadata"]["labels"].as_object().into_iter().flatten())
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) => Some(role),
            None if k == "kubernetes.io/role" => v.as_str(),
            None => None,
        })
        .filter(|role| !role.is_empty())
        .collect();
    roles.sort_unstable();
    roles.dedup();
    let address = |ty: &str| {
        array(&status["addresses"])
            .iter()
            .find(|a| a["type"] == ty)
            .map_or("<none>", |a| str_at(a, "/address"))
    };
    let info = |field: &str| match str_at(&status["nodeInfo"], field) {
        "" => "<unknown>",
        s => s,
    };
    vec![
        name(o),
        state.into(),
        if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }
        .into(),
        age(o, now),
        str_at(status, "/nodeInfo/kubeletVersion").into(),
        address("InternalIP").into(),
        address("ExternalIP").into(),
        info("/osImage").into(),
        info("/kernelVersion").into(),
        info("/containerRuntimeVersion").into(),
    ]
}

pub(crate) static PERSISTENT_VOLUME: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Capacity", "string", 0),
        ("Access Modes", "string", 0),
        ("Reclaim Policy", "string", 0),
        ("Status", "string", 0),
        ("Claim", "string", 0),
        ("StorageClass", "string", 0),
        ("VolumeAttributesClass", "string", 0),
        ("Reason", "string", 0),
        ("Age", "string", 0),
        ("VolumeMode", "string", 1),
    ],
    cells: |o, now| {
        let spec = &o["spec"];
        let claim = if spec["claimRef"].is_object() {
            let claim = |field: &str| str_at(&spec["claimRef"], field);
            format!("{}/{}", claim("/namespace"), claim("/name"))
        } else {
            String::new()
        };
        vec![
            name(o),
            storage(&spec["capacity"]).into(),
            access_modes(&spec["accessModes"]).into(),
            str_at(spec, "/persistentVolumeReclaimPolicy").into(),
            volume_phase(o).into(),
            claim.into(),
            storage_class(o, "/spec/storageClassName").into(),
            unset_if_absent(&spec["volumeAttributesClassName"]),
            str_at(o, "/status/reason").into(),
            age(o, now),
            unset_if_absent(&spec["volumeMode"]),
        ]
    },
};

pub(crate) static PERSISTENT_VOLUME_CLAIM: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Status", "string", 0),
        ("Volume", "string", 0),
        ("Capacity", "string", 0),
        ("Access Modes", "string", 0),
        ("StorageClass", "string", 0),
        ("VolumeAttributesClass", "string", 0),
        ("Age", "string", 0),
        ("VolumeMode", "string", 1),
    ],
    cells: |o, now| {
        let (spec, status) = (&o["spec"], &o["status"]);
        let volume = str_at(spec, "/volumeName");
        // Capacity and access modes are the bound volume's: none before binding.
        let (capacity, modes) = match volume {
            "" => (String::new(), String::new()),
            _ => (
                storage(&status["capacity"]),
                access_modes(&status["accessModes"]),
            ),
        };
        vec![
            name(o),
            volume_phase(o).into(),
            volume.into(),
            capacity.into(),
            modes.into(),
            storage_class(o, "/spec/storageClassName").into(),
            unset_if_absent(&spec["volumeAttributesClassName"]),
            age(o, now),
            unset_if_absent(&spec["volumeMode"]),
        ]
    },
};

/// The phase of a PersistentVolume or claim, or Terminating once it is being deleted.
fn volume_phase(o: &Value) -> &str {
    if o["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else {
        str_at(o, "/status/phase")
    }
}

/// The `storage` quantity of a resource list (stored in canonical form); `0` for none.
fn storage(resources: &Value) -> String {
    resources["storage"].as_str().unwrap_or("0").to_string()
}

/// Access modes abbreviated, in kube's fixed order (`RWO,ROX,RWX,RWOP`), each once.
fn access_modes(modes: &Value) -> String {
    let modes = array(modes);
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .into_iter()
    .filter(|(mode, _)| modes.iter().any(|m| m.as_str() == Some(*mode)))
    .map(|(_, short)| short)
    .collect::<Vec<_>>()
    .join(",")
}

/// A volume's or claim's class: the legacy beta annotation, when present, wins over the field.
fn storage_class<'a>(o: &'a Value, field: &str) -> &'a str {
    match o["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"].as_str() {
        Some(class) => class,
        None => str_at(o, field),
    }
}

pub(crate) static STORAGE_CLASS: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Provisioner", "string", 0),
        ("ReclaimPolicy", "string", 0),
        ("VolumeBindingMode", "string", 0),
        ("AllowVolumeExpansion", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| {
        let annotations = &o["metadata"]["annotations"];
        let default = [
            "storageclass.kubernetes.io/is-default-class",
            "storageclass.beta.kubernetes.io/is-default-class",
        ]
        .iter()
        .any(|a| annotations[a] == "true");
        let name = str_at(o, "/metadata/name");
        let or = |field: &str, unset: &'static str| match o[field].as_str() {
            Some(s) => Value::from(s),
            None => unset.into(),
        };
        vec![
            if default {
                format!("{name} (default)")
            } else {
                name.to_string()
            }
            .into(),
            o["provisioner"].clone(),
            or("reclaimPolicy", "Delete"),
            or("volumeBindingMode", "Immediate"),
            // A boolean cell, though its column says string.
            o["allowVolumeExpansion"].as_bool().unwrap_or(false).into(),
            age(o, now),
        ]
    },
};

pub(crate) static ENDPOINTS: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Endpoints", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| vec![name(o), endpoints(o).into(), age(o, now)],
};

/// The first three `ip:port` of an Endpoints' ready addresses (bare IPs for a subset without
/// ports, as a headless Service may have), then `+ N more...`; `<none>` without subsets.
fn endpoints(o: &Value) -> String {
    const MAX: usize = 3;
    let subsets = array(&o["subsets"]);
    if subsets.is_empty() {
        return "<none>".into();
    }
    let (mut list, mut count, mut more) = (Vec::new(), 0, false);
    for subset in subsets {
        let addresses = array(&subset["addresses"]);
        let ports: Vec<Option<i64>> = match array(&subset["ports"]) {
            [] => vec![None],
            ports => ports.iter().map(|p| Some(int(&p["port"]))).collect(),
        };
        for port in ports {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                let ip = str_at(a, "/ip");
                list.push(match port {
                    None => ip.to_string(),
                    Some(port) if ip.contains(':') => format!("[{ip}]:{port}"),
                    Some(port) => format!("{ip}:{port}"),
                });
            }
        }
    }
    let list = list.join(",");
    if more {
        format!("{list} + {} more...", count - MAX)
    } else {
        list
    }
}

pub(crate) static ENDPOINT_SLICE: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("AddressType", "string", 0),
        ("Ports", "string", 0),
        ("Endpoints", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| {
        // A port without a number shows its name, one without either `*`.
        let ports =
            array(&o["ports"])
                .iter()
                .map(|p| match (p["port"].as_i64(), p["name"].as_str()) {
                    (Some(port), _) => port.to_string(),
                    (None, Some(name)) => name.to_string(),
                    (None, None) => "*".to_string(),
                });
        let addresses = (array(&o["endpoints"]).iter())
            .flat_map(|e| array(&e["addresses"]))
            .map(|a| a.as_str().unwrap_or_default().to_string());
        vec![
            name(o),
            o["addressType"].clone(),
            first_three(ports).into(),
            first_three(addresses).into(),
            age(o, now),
        ]
    },
};

/// The first three items, then `+ N more...`; `<unset>` for none.
fn first_three(items: impl Iterator<Item = String>) -> String {
    const MAX: usize = 3;
    let (mut list, mut count) = (Vec::new(), 0);
    for item in items {
        if list.len() < MAX {
            list.push(item);
        }
        count += 1;
    }
    let list = list.join(",");
    match count {
        _ if count > MAX => format!("{list} + {} more...", count - MAX),
        _ if list.is_empty() => "<unset>".into(),
        _ => list,
    }
}

pub(crate) static POD_DISRUPTION_BUDGET: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Min Available", "string", 0),
        ("Max Unavailable", "string", 0),
        ("Allowed Disruptions", "integer", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| {
        // An int-or-string: `2` or `50%`.
        let bound = |v: &Value| match v {
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            _ => "N/A".to_string(),
        };
        vec![
            name(o),
            bound(&o["spec"]["minAvailable"]).into(),
            bound(&o["spec"]["maxUnavailable"]).into(),
            int(&o["status"]["disruptionsAllowed"]).into(),
            age(o, now),
        ]
    },
};

pub(crate) static HORIZONTAL_POD_AUTOSCALER: Printer = Printer {
    columns: &[
        ("Name", "string", 0),
        ("Reference", "string", 0),
        ("Targets", "string", 0),
        ("MinPods", "string", 0),
        ("MaxPods", "string", 0),
        ("Replicas", "string", 0),
        ("Age", "string", 0),
    ],
    cells: |o, now| {
        let (spec, status) = (&o["spec"], &o["status"]);
        let target = &spec["scaleTargetRef"];
        let min = match spec["minReplicas"].as_i64() {
            Some(n) => n.to_string(),
            None => "<unset>".to_string(),
        };
        vec![
            name(o),
            format!("{}/{}", str_at(target, "/kind"), str_at(target, "/name")).into(),
            hpa_targets(spec, status).into(),
            min.into(),
            int(&spec["maxReplicas"]).into(),
            int(&status["currentReplicas"]).into(),
            age(o, now),
        ]
    },
};

/// An HPA's metrics as `current/target` (`cpu: 40%/80%`, `<unknown>` before a measurement),
/// the first two, then `+ N more...`; `<none>` without metrics. An `autoscaling/v1` object's
/// CPU target reads as the one Resource metric kube converts it to.
fn hpa_targets(spec: &Value, status: &Value) -> String {
    const MAX: usize = 2;
    let v1;
    let (specs, statuses) = match spec["targetCPUUtilizationPercentage"].as_i64() {
        Some(target) => {
            let cpu = |key: &str, utilization: i64| {
                let mut metric = json!({"type": "Resource", "resource": {"name": "cpu"}});
                metric["resource"][key] = json!({ "averageUtilization": utilization });
                metric
            };
            let current = status["currentCPUUtilizationPercentage"].as_i64();
            v1 = [
                vec![cpu("target", target)],
                current.map(|c| cpu("current", c)).into_iter().collect(),
            ];
            (v1[0].as_slice(), v1[1].as_slice())
        }
        None => (array(&spec["metrics"]), array(&status["currentMetrics"])),
    };
    if specs.is_empty() {
        return "<none>".into();
    }
    let list: Vec<String> = (specs.iter().enumerate())
        .map(|(i, metric)| hpa_metric(metric, statuses.get(i)))
        .collect();
    match list.len() {
        n if n > MAX => format!("{} + {} more...", list[..MAX].join(", "), n - MAX),
        _ => list.join(", "),
    }
}

/// One HPA metric as `current/target`, `current` from its status, if it has one yet.
fn hpa_metric(metric: &Value, status: Option<&Value>) -> String {
    let ty = str_at(metric, "/type");
    // A metric's source is the field named after its type.
    let key = match ty {
        "External" => "external",
        "Object" => "object",
        "Pods" => "pods",
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        _ => return "<unknown type>".into(),
    };
    let (source, target) = (&metric[key], &metric[key]["target"]);
    let current = (status.map(|s| &s[key]))
        .filter(|s| s.is_object())
        .map(|s| &s["current"]);
    // A missing quantity prints as Go prints a nil one.
    let quantity = |v: &Value| v.as_str().unwrap_or("<nil>").to_string();
    let current_quantity =
        |field: &str| current.map_or("<unknown>".into(), |c| quantity(&c[field]));
    let average = !target["averageValue"].is_null();
    match ty {
        "External" | "Object" if average => {
            let current = current.and_then(|c| c["averageValue"].as_str());
            let current = current.unwrap_or("<unknown>");
            format!("{current}/{} (avg)", quantity(&target["averageValue"]))
        }
        "External" | "Object" => format!(
            "{}/{}",
            current_quantity("value"),
            quantity(&target["value"])
        ),
        "Pods" => format!(
            "{}/{}",
            current_quantity("averageValue"),
            quantity(&target["averageValue"])
        ),
        _ if average => format!(
            "{}: {}/{}",
            str_at(source, "/name"),
            current_quantity("averageValue"),
            quantity(&target["averageValue"])
        ),
        _ => {
            let percent = |v: &Value| v.as_i64().map(|u| format!("{u}%"));
            let current = current.and_then(|c| percent(&c["averageUtilization"]));
            let target = percent(&target["averageUtilization"]);
            format!(
                "{}: {}/{}",
                str_at(source, "/name"),
                current.as_deref().unwrap_or("<unknown>"),
                target.as_deref().unwrap_or("<auto>")
            )
        }
    }
}

/// A `metav1.LabelSelector` as kube formats it (`app=web,tier in (a,b)`, requirements by key,
/// values sorted); `<none>` when empty.
fn label_selector(sel: &Value) -> String {
    let mut parts: Vec<(&str, String)> = (sel["matchLabels"].as_object().into_iter().flatten())
        .map(|(k, v)| {
            (
                k.as_str(),
                format!("{k}={}", v.as_str().unwrap_or_default()),
            )
        })
        .collect();
    for e in array(&sel["matchExpressions"]) {
        let key = str_at(e, "/key");
        let values = || {
            let mut values: Vec<&str> = array(&e["values"])
                .iter()
                .filter_map(Value::as_str)
                .collect();
            values.sort_unstable();
            values.join(",")
        };
        let part = match str_at(e, "/operator") {
            "In" => format!("{key} in ({})", values()),
            "NotIn" => format!("{key} notin ({})", values()),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            op => format!("{key} {op} ({})", values()),
        };
        parts.push((key, part));
    }
    parts.sort_by_key(|&(key, _)| key);
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts
            .into_iter()
            .map(|(_, part)| part)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A label map as kube formats it (`a=1,b=2`, by key); `<none>` when empty.
fn labels(map: &Value) -> String {
    match map.as_object() {
        // serde_json's maps are ordered by key.
        Some(m) if !m.is_empty() => m
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(","),
        _ => "<none>".to_string(),
    }
}

/// The names and the images of a Pod template's containers, each comma-joined.
fn containers(template: &Value) -> [Value; 2] {
    let containers = array(&template["spec"]["containers"]);
    let join = |field: &str| {
        let all: Vec<&str> = containers.iter().map(|c| str_at(c, field)).collect();
        Value::from(all.join(","))
    };
    [join("/name"), join("/image")]
}

/// A workload's `spec.replicas`, 1 when unset as kube defaults it.
fn replicas(spec: &Value) -> i64 {
    spec["replicas"].as_i64().unwrap_or(1)
}

/// A count that may be absent (then 0).
fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// An optional string field, `<unset>` when absent.
fn unset_if_absent(v: &Value) -> Value {
    json!(v.as_str().unwrap_or("<unset>"))
}

pub(crate) static LEASE: Printer = Printer {
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

pub(crate) static BINDING: Printer = Printer {
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
    match time(ts) {
        Some(t) => human_duration((now - t).num_seconds()),
        None => "<unknown>".into(),
    }
}

/// An RFC 3339 timestamp, if it is one.
fn time(ts: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.with_timezone(&Utc))
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

    /// The printer of `group`'s `kind`, as its strategy gives it.
    fn of(group: &str, kind: &str) -> &'static Printer {
        let catalog = crate::catalog::Catalog::default();
        let res = (catalog.all())
            .find(|r| r.group == group && r.kind == kind)
            .unwrap_or_else(|| panic!("{group}/{kind} is not a built-in kind"));
        crate::registry::of(res).printer()
    }

    fn cells(group: &str, kind: &str, o: Value) -> Vec<Value> {
        let p = of(group, kind);
        let cells = (p.cells)(&o, now());
        assert_eq!(cells.len(), p.columns.len(), "{kind}: one cell per column");
        cells
    }

    /// A printer's columns, each as `Name`, with `:type` when not a string and ` (wide)` when
    /// only `-o wide` shows it.
    fn header(group: &str, kind: &str) -> Vec<String> {
        (of(group, kind).columns.iter())
            .map(|&(name, ty, priority)| match (ty, priority) {
                ("string", 0) => name.to_string(),
                ("string", _) => format!("{name} (wide)"),
                (ty, 0) => format!("{name}:{ty}"),
                (ty, _) => format!("{name}:{ty} (wide)"),
            })
            .collect()
    }

    fn row(cells: Value) -> Vec<Value> {
        cells.as_array().unwrap().clone()
    }

    const CREATED: &str = "2026-11-26T11:00:00Z";

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

    #[test]
    fn nodes_show_readiness_roles_version_and_addresses() {
        assert_eq!(
            header("", "Node"),
            [
                "Name",
                "Status",
                "Roles",
                "Age",
                "Version",
                "Internal-IP (wide)",
                "External-IP (wide)",
                "OS-Image (wide)",
                "Kernel-Version (wide)",
                "Container-Runtime (wide)"
            ]
        );
        // As the kubelet stand-in registers one.
        let node = json!({"metadata": {"name": "wasmctrl-node-0", "creationTimestamp": CREATED,
            "labels": {"kubernetes.io/hostname": "wasmctrl-node-0", "kubernetes.io/os": "linux"}},
            "spec": {},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": "172.18.0.2"},
                {"type": "Hostname", "address": "wasmctrl-node-0"}],
            "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "wasmctrl fake node",
                "kernelVersion": "6.1.0", "containerRuntimeVersion": "fake://wasmctrl"}}});
        assert_eq!(
            cells("", "Node", node.clone()),
            row(json!([
                "wasmctrl-node-0",
                "Ready",
                "<none>",
                "60m",
                "v1.32.0",
                "172.18.0.2",
                "<none>",
                "wasmctrl fake node",
                "6.1.0",
                "fake://wasmctrl"
            ]))
        );
        let mut cordoned = node.clone();
        cordoned["spec"]["unschedulable"] = json!(true);
        cordoned["status"]["conditions"][1]["status"] = json!("Unknown");
        cordoned["metadata"]["labels"] = json!({"node-role.kubernetes.io/control-plane": "",
            "node-role.kubernetes.io/": "", "kubernetes.io/role": "worker"});
        let c = cells("", "Node", cordoned);
        assert_eq!(
            &c[1..3],
            ["NotReady,SchedulingDisabled", "control-plane,worker"]
        );
        let mut new = node;
        new["status"] = json!({"addresses": [{"type": "ExternalIP", "address": "203.0.113.9"}]});
        let c = cells("", "Node", new);
        assert_eq!((&c[1], &c[4]), (&json!("Unknown"), &json!("")));
        assert_eq!(
            &c[5..],
            [
                "<none>",
                "203.0.113.9",
                "<unknown>",
                "<unknown>",
                "<unknown>"
            ]
        );
    }

    #[test]
    fn replica_sets_and_replication_controllers_count_their_replicas() {
        let columns = [
            "Name",
            "Desired:integer",
            "Current:integer",
            "Ready:integer",
            "Age",
            "Containers (wide)",
            "Images (wide)",
            "Selector (wide)",
        ];
        assert_eq!(header("apps", "ReplicaSet"), columns);
        assert_eq!(header("", "ReplicationController"), columns);
        let template = json!({"spec": {"containers": [{"name": "web", "image": "nginx:1.27"},
            {"name": "proxy", "image": "envoy"}]}});
        let rs = json!({"metadata": {"name": "web-7d9f8b6c5", "creationTimestamp": CREATED},
            "spec": {"replicas": 3, "template": template,
                "selector": {"matchLabels": {"pod-template-hash": "7d9f8b6c5", "app": "web"}}},
            "status": {"replicas": 3, "readyReplicas": 2, "availableReplicas": 2}});
        assert_eq!(
            cells("apps", "ReplicaSet", rs),
            row(json!([
                "web-7d9f8b6c5",
                3,
                3,
                2,
                "60m",
                "web,proxy",
                "nginx:1.27,envoy",
                "app=web,pod-template-hash=7d9f8b6c5"
            ]))
        );
        let rc = json!({"metadata": {"name": "legacy", "creationTimestamp": CREATED},
            "spec": {"replicas": 0, "selector": {"app": "legacy"}}, "status": {"replicas": 0}});
        assert_eq!(
            cells("", "ReplicationController", rc),
            row(json!(["legacy", 0, 0, 0, "60m", "", "", "app=legacy"]))
        );
    }

    #[test]
    fn stateful_sets_show_ready_of_desired() {
        assert_eq!(
            header("apps", "StatefulSet"),
            ["Name", "Ready", "Age", "Containers (wide)", "Images (wide)"]
        );
        let sts = json!({"metadata": {"name": "db", "creationTimestamp": CREATED},
            "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                "template": {"spec": {"containers": [{"name": "pg", "image": "postgres:16"}]}}},
            "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            cells("apps", "StatefulSet", sts),
            row(json!(["db", "1/3", "60m", "pg", "postgres:16"]))
        );
    }

    #[test]
    fn daemon_sets_count_their_nodes_and_show_their_node_selector() {
        assert_eq!(
            header("apps", "DaemonSet"),
            [
                "Name",
                "Desired:integer",
                "Current:integer",
                "Ready:integer",
                "Up-to-date:integer",
                "Available:integer",
                "Node Selector",
                "Age",
                "Containers (wide)",
                "Images (wide)",
                "Selector (wide)"
            ]
        );
        let ds = json!({"metadata": {"name": "agent", "creationTimestamp": CREATED},
            "spec": {"selector": {"matchLabels": {"app": "agent"}, "matchExpressions": [
                    {"key": "zone", "operator": "NotIn", "values": ["b", "a"]},
                    {"key": "arch", "operator": "Exists"}]},
                "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"},
                    "containers": [{"name": "agent", "image": "busybox"}]}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                "updatedNumberScheduled": 3, "numberAvailable": 2, "numberMisscheduled": 0}});
        assert_eq!(
            cells("apps", "DaemonSet", ds),
            row(json!([
                "agent",
                3,
                3,
                2,
                3,
                2,
                "kubernetes.io/os=linux",
                "60m",
                "agent",
                "busybox",
                "app=agent,arch,zone notin (a,b)"
            ]))
        );
        let bare = json!({"metadata": {"name": "b"}, "spec": {"template": {"spec": {}}}});
        assert_eq!(
            cells("apps", "DaemonSet", bare)[1..7],
            row(json!([0, 0, 0, 0, 0, "<none>"]))
        );
    }

    #[test]
    fn controller_revisions_name_their_controller() {
        assert_eq!(
            header("apps", "ControllerRevision"),
            ["Name", "Controller", "Revision", "Age"]
        );
        let rev = json!({"metadata": {"name": "db-6c4f9d8b7", "creationTimestamp": CREATED,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                "uid": "u1", "controller": true, "blockOwnerDeletion": true}]},
            "data": {}, "revision": 2});
        assert_eq!(
            cells("apps", "ControllerRevision", rev),
            row(json!(["db-6c4f9d8b7", "statefulset.apps/db", 2, "60m"]))
        );
        let core = json!({"metadata": {"name": "r", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u0"},
            {"apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "uid": "u2", "controller": true}]},
            "revision": 1});
        assert_eq!(
            cells("apps", "ControllerRevision", core)[1],
            "replicationcontroller/rc"
        );
        let orphan = json!({"metadata": {"name": "o"}, "revision": 1});
        assert_eq!(cells("apps", "ControllerRevision", orphan)[1], "<none>");
    }

    #[test]
    fn jobs_show_their_outcome_completions_and_duration() {
        assert_eq!(
            header("batch", "Job"),
            [
                "Name",
                "Status",
                "Completions",
                "Duration",
                "Age",
                "Containers (wide)",
                "Images (wide)",
                "Selector (wide)"
            ]
        );
        let job = |spec: Value, status: Value| {
            let mut spec = spec;
            spec["selector"] =
                json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "8f1c"}});
            spec["template"] =
                json!({"spec": {"containers": [{"name": "pi", "image": "perl:5.34"}]}});
            json!({"metadata": {"name": "pi", "creationTimestamp": CREATED}, "spec": spec, "status": status})
        };
        let running = job(
            json!({"completions": 3, "parallelism": 1}),
            json!({"startTime": "2026-11-26T11:55:00Z", "active": 1, "succeeded": 1}),
        );
        assert_eq!(
            cells("batch", "Job", running),
            row(json!([
                "pi",
                "Running",
                "1/3",
                "5m",
                "60m",
                "pi",
                "perl:5.34",
                "batch.kubernetes.io/controller-uid=8f1c"
            ]))
        );
        let complete = job(
            json!({"completions": 1, "parallelism": 1}),
            json!({"startTime": "2026-11-26T11:00:00Z", "completionTime": "2026-11-26T11:02:30Z",
                "succeeded": 1, "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                    {"type": "Complete", "status": "True"}]}),
        );
        let c = cells("batch", "Job", complete.clone());
        assert_eq!(&c[1..4], ["Complete", "1/1", "2m30s"]);
        let mut deleted = complete;
        deleted["metadata"]["deletionTimestamp"] = json!("2026-11-26T11:59:00Z");
        assert_eq!(cells("batch", "Job", deleted.clone())[1], "Complete");
        deleted["status"]["conditions"] = json!([]);
        assert_eq!(cells("batch", "Job", deleted)[1], "Terminating");
        let workers = job(json!({"parallelism": 2}), json!({}));
        assert_eq!(
            &cells("batch", "Job", workers)[1..4],
            ["Running", "0/1 of 2", ""]
        );
        for (ty, status) in [
            ("Failed", "Failed"),
            ("Suspended", "Suspended"),
            ("FailureTarget", "FailureTarget"),
        ] {
            let j = job(
                json!({"completions": 2}),
                json!({"conditions": [{"type": ty, "status": "True"}]}),
            );
            assert_eq!(cells("batch", "Job", j)[1], status, "{ty}");
        }
        let resumed = job(
            json!({"completions": 2}),
            json!({"conditions": [{"type": "Suspended", "status": "False"}]}),
        );
        assert_eq!(cells("batch", "Job", resumed)[1], "Running");
    }

    #[test]
    fn cron_jobs_show_their_schedule_and_last_run() {
        assert_eq!(
            header("batch", "CronJob"),
            [
                "Name",
                "Schedule",
                "Timezone",
                "Suspend:boolean",
                "Active:integer",
                "Last Schedule",
                "Age",
                "Containers (wide)",
                "Images (wide)",
                "Selector (wide)"
            ]
        );
        let cj = json!({"metadata": {"name": "nightly", "creationTimestamp": "2026-11-20T00:00:00Z"},
            "spec": {"schedule": "0 3 * * *", "suspend": false, "concurrencyPolicy": "Allow",
                "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                    "containers": [{"name": "backup", "image": "restic"}]}}}}},
            "status": {"active": [{"kind": "Job", "name": "nightly-29400660"}],
                "lastScheduleTime": "2026-11-26T03:00:00Z"}});
        assert_eq!(
            cells("batch", "CronJob", cj),
            row(json!([
                "nightly",
                "0 3 * * *",
                "<none>",
                "False",
                1,
                "9h",
                "6d12h",
                "backup",
                "restic",
                "<none>"
            ]))
        );
        let new = json!({"metadata": {"name": "n"}, "spec": {"schedule": "@hourly",
            "timeZone": "Europe/Paris"}});
        assert_eq!(
            cells("batch", "CronJob", new)[2..6],
            [
                json!("Europe/Paris"),
                json!("<unset>"),
                json!(0),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn claims_show_their_binding_and_the_bound_volumes_size() {
        assert_eq!(
            header("", "PersistentVolumeClaim"),
            [
                "Name",
                "Status",
                "Volume",
                "Capacity",
                "Access Modes",
                "StorageClass",
                "VolumeAttributesClass",
                "Age",
                "VolumeMode (wide)"
            ]
        );
        let pvc = json!({"metadata": {"name": "data-db-0", "creationTimestamp": CREATED},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": "standard", "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"}});
        assert_eq!(
            cells("", "PersistentVolumeClaim", pvc.clone()),
            row(json!([
                "data-db-0",
                "Pending",
                "",
                "",
                "",
                "standard",
                "<unset>",
                "60m",
                "Filesystem"
            ]))
        );
        let mut bound = pvc;
        bound["spec"]["volumeName"] = json!("pvc-3f2a");
        bound["status"] = json!({"phase": "Bound", "capacity": {"storage": "2Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]});
        assert_eq!(
            cells("", "PersistentVolumeClaim", bound.clone())[1..5],
            ["Bound", "pvc-3f2a", "2Gi", "RWO,RWX"]
        );
        bound["metadata"]["deletionTimestamp"] = json!("2026-11-26T11:59:00Z");
        bound["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/storage-class": ""});
        bound["spec"]["volumeAttributesClassName"] = json!("gold");
        let c = cells("", "PersistentVolumeClaim", bound);
        assert_eq!(
            (&c[1], &c[5], &c[6]),
            (&json!("Terminating"), &json!(""), &json!("gold"))
        );
    }

    #[test]
    fn volumes_show_their_size_policy_and_claim() {
        assert_eq!(
            header("", "PersistentVolume"),
            [
                "Name",
                "Capacity",
                "Access Modes",
                "Reclaim Policy",
                "Status",
                "Claim",
                "StorageClass",
                "VolumeAttributesClass",
                "Reason",
                "Age",
                "VolumeMode (wide)"
            ]
        );
        let pv = json!({"metadata": {"name": "pvc-3f2a", "creationTimestamp": CREATED},
            "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOncePod", "ReadOnlyMany"],
                "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard",
                "volumeMode": "Filesystem", "hostPath": {"path": "/tmp/pvc-3f2a"},
                "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data-db-0"}},
            "status": {"phase": "Bound"}});
        assert_eq!(
            cells("", "PersistentVolume", pv),
            row(json!([
                "pvc-3f2a",
                "2Gi",
                "ROX,RWOP",
                "Delete",
                "Bound",
                "default/data-db-0",
                "standard",
                "<unset>",
                "",
                "60m",
                "Filesystem"
            ]))
        );
        let failed = json!({"metadata": {"name": "old", "deletionTimestamp": "2026-11-26T11:59:00Z",
                "annotations": {"volume.beta.kubernetes.io/storage-class": "slow"}},
            "spec": {"persistentVolumeReclaimPolicy": "Recycle", "storageClassName": "standard"},
            "status": {"phase": "Failed", "reason": "RecyclerFailed"}});
        assert_eq!(
            cells("", "PersistentVolume", failed),
            row(json!([
                "old",
                "0",
                "",
                "Recycle",
                "Terminating",
                "",
                "slow",
                "<unset>",
                "RecyclerFailed",
                "<unknown>",
                "<unset>"
            ]))
        );
    }

    #[test]
    fn storage_classes_mark_the_default_and_show_defaults_for_unset_fields() {
        assert_eq!(
            header("storage.k8s.io", "StorageClass"),
            [
                "Name",
                "Provisioner",
                "ReclaimPolicy",
                "VolumeBindingMode",
                "AllowVolumeExpansion",
                "Age"
            ]
        );
        let sc = json!({"metadata": {"name": "standard", "creationTimestamp": CREATED,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path", "reclaimPolicy": "Retain",
            "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true});
        assert_eq!(
            cells("storage.k8s.io", "StorageClass", sc),
            row(json!([
                "standard (default)",
                "rancher.io/local-path",
                "Retain",
                "WaitForFirstConsumer",
                true,
                "60m"
            ]))
        );
        let plain = json!({"metadata": {"name": "fast", "creationTimestamp": CREATED,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "false"}},
            "provisioner": "csi.example.com"});
        assert_eq!(
            cells("storage.k8s.io", "StorageClass", plain),
            row(json!([
                "fast",
                "csi.example.com",
                "Delete",
                "Immediate",
                false,
                "60m"
            ]))
        );
    }

    #[test]
    fn endpoints_list_three_addresses_then_how_many_more() {
        assert_eq!(header("", "Endpoints"), ["Name", "Endpoints", "Age"]);
        let ips = |n: usize| -> Value {
            (1..=n)
                .map(|i| json!({"ip": format!("10.244.0.{i}")}))
                .collect()
        };
        let ep = json!({"metadata": {"name": "web", "creationTimestamp": CREATED},
            "subsets": [{"addresses": ips(5), "notReadyAddresses": [{"ip": "10.244.1.9"}],
                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}]});
        assert_eq!(
            cells("", "Endpoints", ep),
            row(json!([
                "web",
                "10.244.0.1:80,10.244.0.2:80,10.244.0.3:80 + 2 more...",
                "60m"
            ]))
        );
        let two_ports = json!({"metadata": {"name": "w"}, "subsets": [{"addresses": ips(2),
            "ports": [{"port": 80}, {"port": 443}]}]});
        assert_eq!(
            cells("", "Endpoints", two_ports)[1],
            "10.244.0.1:80,10.244.0.2:80,10.244.0.1:443 + 1 more..."
        );
        let headless = json!({"metadata": {"name": "h"}, "subsets": [
            {"addresses": [{"ip": "fd00::1"}]},
            {"addresses": [{"ip": "fd00::2"}], "ports": [{"port": 53}]}]});
        assert_eq!(cells("", "Endpoints", headless)[1], "fd00::1,[fd00::2]:53");
        let unready = json!({"metadata": {"name": "u"},
            "subsets": [{"notReadyAddresses": [{"ip": "10.244.0.1"}], "ports": [{"port": 80}]}]});
        assert_eq!(cells("", "Endpoints", unready)[1], "");
        let none = json!({"metadata": {"name": "n"}});
        assert_eq!(cells("", "Endpoints", none)[1], "<none>");
    }

    #[test]
    fn endpoint_slices_list_three_ports_and_addresses_then_how_many_more() {
        assert_eq!(
            header("discovery.k8s.io", "EndpointSlice"),
            ["Name", "AddressType", "Ports", "Endpoints", "Age"]
        );
        let endpoint = |ip: &str| json!({"addresses": [ip], "conditions": {"ready": true}});
        let slice = json!({"metadata": {"name": "web-x7k2p", "creationTimestamp": CREATED},
            "addressType": "IPv4",
            "endpoints": [endpoint("10.244.0.1"), endpoint("10.244.0.2"),
                {"addresses": ["10.244.0.3", "10.244.0.4"]}],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "metrics", "protocol": "TCP"}]});
        assert_eq!(
            cells("discovery.k8s.io", "EndpointSlice", slice),
            row(json!([
                "web-x7k2p",
                "IPv4",
                "80,metrics",
                "10.244.0.1,10.244.0.2,10.244.0.3 + 1 more...",
                "60m"
            ]))
        );
        let empty = json!({"metadata": {"name": "e"}, "addressType": "IPv6", "endpoints": [],
            "ports": [{}, {"port": 1}, {"port": 2}, {"port": 3}]});
        assert_eq!(
            cells("discovery.k8s.io", "EndpointSlice", empty)[2..4],
            ["*,1,2 + 1 more...", "<unset>"]
        );
    }

    #[test]
    fn disruption_budgets_show_their_bounds_and_allowed_disruptions() {
        assert_eq!(
            header("policy", "PodDisruptionBudget"),
            [
                "Name",
                "Min Available",
                "Max Unavailable",
                "Allowed Disruptions:integer",
                "Age"
            ]
        );
        let pdb = json!({"metadata": {"name": "web", "creationTimestamp": CREATED},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"currentHealthy": 3, "desiredHealthy": 2, "disruptionsAllowed": 1, "expectedPods": 3}});
        assert_eq!(
            cells("policy", "PodDisruptionBudget", pdb),
            row(json!(["web", "2", "N/A", 1, "60m"]))
        );
        let percent = json!({"metadata": {"name": "p"}, "spec": {"maxUnavailable": "50%"}});
        assert_eq!(
            cells("policy", "PodDisruptionBudget", percent)[1..4],
            [json!("N/A"), json!("50%"), json!(0)]
        );
    }

    #[test]
    fn autoscalers_show_current_against_target_metrics() {
        assert_eq!(
            header("autoscaling", "HorizontalPodAutoscaler"),
            [
                "Name",
                "Reference",
                "Targets",
                "MinPods",
                "MaxPods",
                "Replicas",
                "Age"
            ]
        );
        let hpa = json!({"metadata": {"name": "web", "creationTimestamp": CREATED},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1, "maxReplicas": 10, "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 80}}},
                    {"type": "Resource", "resource": {"name": "memory",
                        "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                    {"type": "Pods", "pods": {"metric": {"name": "packets"},
                        "target": {"type": "AverageValue", "averageValue": "1k"}}}]},
            "status": {"currentReplicas": 2, "desiredReplicas": 2, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 40, "averageValue": "120m"}}},
                {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "300Mi"}}}]}});
        assert_eq!(
            cells("autoscaling", "HorizontalPodAutoscaler", hpa),
            row(json!([
                "web",
                "Deployment/web",
                "cpu: 40%/80%, memory: 300Mi/500Mi + 1 more...",
                "1",
                10,
                2,
                "60m"
            ]))
        );
        let targets = |spec: Value, status: Value| {
            let hpa = json!({"metadata": {"name": "h"}, "spec": spec, "status": status});
            cells("autoscaling", "HorizontalPodAutoscaler", hpa)[2].clone()
        };
        let unmeasured = json!({"metrics": [
            {"type": "Pods", "pods": {"target": {"averageValue": "1k"}}},
            {"type": "External", "external": {"target": {"type": "AverageValue", "averageValue": "30"}}}]});
        assert_eq!(
            targets(unmeasured, json!({})),
            "<unknown>/1k, <unknown>/30 (avg)"
        );
        let object = json!({"metrics": [{"type": "Object", "object": {"target": {"value": "2k"}}},
            {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app",
                "target": {"type": "Utilization"}}}]});
        let status = json!({"currentMetrics": [{"type": "Object", "object": {"current": {"value": "1500"}}}]});
        assert_eq!(targets(object, status), "1500/2k, cpu: <unknown>/<auto>");
        let v1 = json!({"targetCPUUtilizationPercentage": 50});
        assert_eq!(
            targets(v1.clone(), json!({"currentCPUUtilizationPercentage": 12})),
            "cpu: 12%/50%"
        );
        assert_eq!(targets(v1, json!({})), "cpu: <unknown>/50%");
        let hpa = json!({"metadata": {"name": "h"}, "spec": {"maxReplicas": 3}});
        let c = cells("autoscaling", "HorizontalPodAutoscaler", hpa);
        assert_eq!(
            c[1..6],
            [
                json!("/"),
                json!("<none>"),
                json!("<unset>"),
                json!(3),
                json!(0)
            ]
        );
    }
}
