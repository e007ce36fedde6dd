//! What a Workspace reports in `.status`: the phase, IP and node of its Pod and a `Ready`
//! condition whose `lastTransitionTime` moves only when its status does.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasmctrl_sdk::ResourceExt;
use wasmctrl_sdk::conditions::{Condition, find_condition, set_condition};
use wasmctrl_sdk::jiff::Timestamp;

use crate::Workspace;
use crate::pod::Pod;

/// The type of the condition this controller maintains.
pub const READY: &str = "Ready";

/// The workspace's Pod and whether it is ready.
#[derive(Debug, Default, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The phase of the workspace's current Pod; `Pending` while there is none.
    #[serde(default)]
    pub phase: String,
    /// The Pod's IP once it has one.
    #[serde(default, rename = "podIP", skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    /// The node the Pod runs on once scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The Workspace generation this status describes.
    #[serde(default)]
    pub observed_generation: i64,
    /// Ready, plus any conditions others maintain (kept as they are).
    #[serde(default)]
    #[schemars(schema_with = "wasmctrl_sdk::kube::conditions")]
    pub conditions: Vec<Condition>,
}

/// What the controller found where the workspace's Pod should be.
#[derive(Debug, Clone, Copy)]
pub enum Observed<'a> {
    /// No Pod yet: it is being created.
    Missing,
    /// A Pod built from an older spec, deleted so that it can be replaced.
    Outdated,
    /// The current Pod is being deleted (by someone else) and will be re-created.
    Terminating,
    /// The Pod built from the current spec.
    Current(&'a Pod),
}

impl Status {
    /// The `Ready` condition, if present.
    pub fn ready(&self) -> Option<&Condition> {
        find_condition(&self.conditions, READY)
    }
}

/// The status to report for `ws` given its Pod; `now` stamps a `Ready` condition that changed.
pub fn desired(ws: &Workspace, observed: Observed<'_>, now: Timestamp) -> Status {
    let name = &ws.name_any();
    let generation = ws.metadata.generation.unwrap_or_default();
    let (phase, pod_ip, node_name) = match observed {
        Observed::Current(pod) => {
            let status = pod.status.clone().unwrap_or_default();
            (
                status.phase.unwrap_or_else(|| "Pending".into()),
                status.pod_ip,
                pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            )
        }
        _ => ("Pending".into(), None, None),
    };
    let (ready, reason, message) = match observed {
        Observed::Missing => (false, "PodMissing", format!("creating Pod {name}")),
        Observed::Outdated => (
            false,
            "PodOutdated",
            format!("replacing Pod {name}: the Workspace spec changed"),
        ),
        Observed::Terminating => (
            false,
            "PodTerminating",
            format!("Pod {name} is being deleted; it will be re-created"),
        ),
        Observed::Current(pod) => match phase.as_str() {
            "Running" => (
                true,
                "PodRunning",
                format!(
                    "Pod {name} is running on {} at {}",
                    node_name.as_deref().unwrap_or("an unknown node"),
                    pod_ip.as_deref().unwrap_or("no IP yet"),
                ),
            ),
            "Pending" => (
                false,
                "PodPending",
                match &node_name {
                    Some(node) => format!("Pod {name} is starting on {node}"),
                    None => format!("Pod {name} is waiting to be scheduled"),
                },
            ),
            "Failed" => (false, "PodFailed", failure(name, "failed", pod)),
            "Succeeded" => (false, "PodSucceeded", failure(name, "exited", pod)),
            other => (
                false,
                "PodUnknown",
                format!("Pod {name} is in phase {other}"),
            ),
        },
    };

    let mut conditions = ws.status.clone().unwrap_or_default().conditions;
    let condition = Condition::new(READY, ready, reason, message).observed(generation);
    set_condition(&mut conditions, condition, now);
    Status {
        phase,
        pod_ip,
        node_name,
        observed_generation: generation,
        conditions,
    }
}

fn failure(name: &str, what: &str, pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    let details: Vec<&str> = [&status.reason, &status.message]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    if details.is_empty() {
        format!("Pod {name} {what}")
    } else {
        format!("Pod {name} {what}: {}", details.join(": "))
    }
}
