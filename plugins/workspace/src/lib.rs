//! The cloud-IDE Workspace controller as a wasmctrl plugin.
//!
//! For each `Workspace` (`ide.wasmctrl.io/v1alpha1`) it keeps one Pod of the same name running
//! the workspace's IDE image on its port with its resource limits ([`pod`]), and reports that
//! Pod's phase, IP and node with a `Ready` condition in `.status` ([`status`]). The Pod is owned
//! by the Workspace, so its events reconcile the Workspace and garbage collection removes it with
//! the Workspace. Pods are mostly immutable, so a spec change replaces the Pod: the stale one is
//! deleted, and its deletion event brings the reconcile that creates the new one.

pub mod pod;
pub mod status;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasmctrl_sdk::manifest::Predicate;
use wasmctrl_sdk::tracing;
use wasmctrl_sdk::{
    Action, Condition, Context, CustomResource, Error, Manifest, NoSettings, ObjectRef, Outcome,
    Reconcile, Reconciler, ResourceExt,
};

use crate::pod::{Cached, Pod};
use crate::status::{Observed, Status};

/// What the IDE Pod runs.
//
// The derive declares the kind, `Workspace`, and its CRD (`examples/workspace/crd.yaml`). The
// fields parse when missing or invalid so that `pod::validate` can name the field in its error
// (a server that does not enforce the schema); empty ones are not serialized, which also keeps
// schemars from declaring `default`s the schema would then refuse.
#[derive(CustomResource, Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "ide.wasmctrl.io",
    version = "v1alpha1",
    kind = "Workspace",
    namespaced,
    status = "Status",
    shortname = "ws",
    doc = "A cloud IDE workspace: one Pod running its IDE image",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Pod IP","type":"string","jsonPath":".status.podIP"}"#,
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".status.nodeName"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    crates(
        kube_core = "::wasmctrl_sdk::kube_core",
        k8s_openapi = "::wasmctrl_sdk::k8s_openapi"
    )
)]
#[schemars(extend("required" = ["image", "port"]))]
pub struct Spec {
    /// The IDE container image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1))]
    pub image: String,
    /// The port the IDE listens on (the container port named http).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i64,
    /// Limits of the IDE container; absent ones are not limited.
    #[serde(default, skip_serializing_if = "Resources::is_empty")]
    pub resources: Resources,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// A Kubernetes quantity, as the API server's own schema for one checks it.
const QUANTITY: &str = r"^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Limits of the IDE container, each a Kubernetes quantity; absent ones are not limited.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
pub struct Resources {
    /// CPU limit, a Kubernetes quantity such as 500m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = QUANTITY))]
    pub cpu: Option<String>,
    /// Memory limit, a Kubernetes quantity such as 1Gi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = QUANTITY))]
    pub memory: Option<String>,
    /// Ephemeral storage limit, a Kubernetes quantity such as 2Gi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = QUANTITY))]
    pub storage: Option<String>,
}

impl Resources {
    fn is_empty(&self) -> bool {
        self.fields().iter().all(|(_, value)| value.is_none())
    }

    /// The fields by their `spec.resources` names.
    pub fn fields(&self) -> [(&'static str, Option<&str>); 3] {
        [
            ("cpu", self.cpu.as_deref()),
            ("memory", self.memory.as_deref()),
            ("storage", self.storage.as_deref()),
        ]
    }
}

/// The plugin.
pub struct WorkspaceController;

impl Reconciler for WorkspaceController {
    type Object = Workspace;
    type Settings = NoSettings;

    fn manifest(_settings: &NoSettings) -> Result<Manifest, String> {
        Ok(Manifest::for_::<Workspace>("workspace")
            .version(env!("CARGO_PKG_VERSION"))
            // Our own status writes do not bump the generation, so they do not trigger us again;
            // Pod events reach us through `owns` regardless.
            .predicate(Predicate::GenerationChanged)
            .owns::<Pod>())
    }

    fn reconcile(event: Reconcile<Workspace>, ctx: &Context<'_>) -> Result<Outcome, Error> {
        let key = ctx.key();
        let ws = match event {
            Reconcile::Apply(ws) => ws,
            // Garbage collection removes the owned Pod; nothing of ours holds the deletion up.
            Reconcile::Cleanup(_) | Reconcile::Gone { .. } => {
                tracing::debug!(%key, "workspace deleted");
                return Ok(Outcome::done());
            }
        };
        pod::validate(&ws).map_err(|e| Error::terminal(format!("Workspace {key}: {e}")))?;

        let (desired, hash) = pod::desired(&ws);
        let (namespace, name) = (ws.namespace().unwrap_or_default(), ws.name_any());
        let (namespace, name) = (namespace.as_str(), name.as_str());
        let cached = ctx.get::<Pod>(namespace, name)?;
        let mut actions = Vec::new();
        let observed = match &cached {
            None => {
                actions.push(Action::apply(&desired)?);
                Observed::Missing
            }
            Some(p) if ws.uid().is_some() && p.controller_uid() != ws.uid().as_deref() => {
                // Retried with backoff rather than terminal: the other Pod's removal (or garbage
                // collection of a previous Workspace's Pod) need not come back to us as an event.
                return Err(Error::retryable(format!(
                    "Workspace {key}: Pod {namespace}/{name} already exists and is not controlled \
                     by this Workspace; delete or rename it"
                )));
            }
            Some(p) if p.deleting() => Observed::Terminating,
            Some(p) if p.spec_hash() != Some(hash.as_str()) => {
                let had = p.spec_hash().unwrap_or("none");
                tracing::info!(pod = name, hash = had, want = %hash, "replacing outdated pod");
                actions.push(Action::delete(ObjectRef::of::<Pod>(namespace, name)));
                actions.push(Action::event(
                    "ReplacingPod",
                    &format!("deleting Pod {name} to re-create it with spec {hash}"),
                ));
                Observed::Outdated
            }
            Some(p) => {
                // Re-applied every time: the host skips it unless the Pod drifted from it.
                actions.push(Action::apply(&desired)?);
                Observed::Current(p)
            }
        };

        let current = ws.status.clone().unwrap_or_default();
        let status = status::desired(&ws, observed, ctx.now());
        if status != current {
            let became_ready = status.ready().is_some_and(Condition::is_true)
                && !current.ready().is_some_and(Condition::is_true);
            let note = status
                .ready()
                .map(|c| c.message.clone())
                .unwrap_or_default();
            actions.push(Action::update_status(&status)?);
            if became_ready {
                actions.push(Action::event("PodRunning", &note));
            }
        }
        Ok(Outcome::with(actions))
    }
}

wasmctrl_sdk::export!(WorkspaceController);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use wasmctrl_sdk::testing::Harness;

    const UID: &str = "0f9e3c1a-7d0b-4c84-9f3e-2b7a1c5d6e01";
    const NOW: &str = "2026-11-22T10:00:00Z";

    fn workspace(spec: Value, status: Value) -> Value {
        json!({
            "apiVersion": "ide.wasmctrl.io/v1alpha1",
            "kind": "Workspace",
            "metadata": {"name": "alice", "namespace": "default", "uid": UID, "generation": 1},
            "spec": spec,
            "status": status,
        })
    }

    fn sample_spec() -> Value {
        json!({"image": "codercom/code-server:4.8.3", "port": 8080,
            "resources": {"cpu": "500m", "memory": "1Gi", "storage": "2Gi"}})
    }

    /// The Pod the plugin would apply for `ws`, as the API server would hold it: owned by the
    /// Workspace, with `node`, `phase` and `ip` filled in as a scheduler and kubelet would.
    fn cached_pod(ws: &Value, node: Option<&str>, phase: &str, ip: Option<&str>) -> Value {
        let parsed: Workspace = serde_json::from_value(ws.clone()).unwrap();
        let mut pod = serde_json::to_value(pod::desired(&parsed).0).unwrap();
        pod["metadata"]["uid"] = json!("pod-uid-1");
        pod["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "ide.wasmctrl.io/v1alpha1", "kind": "Workspace", "name": "alice",
            "uid": UID, "controller": true, "blockOwnerDeletion": true,
        }]);
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        pod["status"] = json!({"phase": phase});
        if let Some(ip) = ip {
            pod["status"]["podIP"] = json!(ip);
        }
        pod
    }

    fn reconcile(h: &Harness, ws: &Value) -> Outcome {
        h.reconcile::<WorkspaceController>(ws).unwrap()
    }

    fn applied(outcome: &Outcome) -> Option<Value> {
        outcome.actions.iter().find_map(|a| match a {
            Action::Apply(json) => Some(serde_json::from_str(json).unwrap()),
            _ => None,
        })
    }

    fn status_of(outcome: &Outcome) -> Option<Status> {
        outcome.status()
    }

    fn event_reasons(outcome: &Outcome) -> Vec<String> {
        outcome.events().map(|e| e.reason.clone()).collect()
    }

    #[test]
    fn crd_is_generated_from_the_types() {
        wasmctrl_sdk::testing::check_crd::<Workspace>(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/workspace/crd.yaml"
        ));
    }

    #[test]
    fn manifest_watches_workspaces_and_owns_pods() {
        let m = Harness::new().manifest::<WorkspaceController>().unwrap();
        assert_eq!(m.name, "workspace");
        assert_eq!(m.watches.kind, wasmctrl_sdk::Gvk::of::<Workspace>());
        assert_eq!(m.owns, vec![wasmctrl_sdk::Gvk::of::<Pod>()]);
        assert_eq!(m.watches.predicates, vec![Predicate::GenerationChanged]);
    }

    #[test]
    fn new_workspace_applies_its_pod_and_reports_pending() {
        let h = Harness::new().now(NOW);
        let outcome = reconcile(&h, &workspace(sample_spec(), json!(null)));
        let pod = applied(&outcome).expect("a Pod to apply");
        assert_eq!(pod["apiVersion"], "v1");
        assert_eq!(pod["kind"], "Pod");
        assert_eq!(pod["metadata"]["name"], "alice");
        assert_eq!(pod["metadata"]["namespace"], "default");
        assert_eq!(
            pod["metadata"]["labels"],
            json!({"app.kubernetes.io/name": "workspace",
                "app.kubernetes.io/managed-by": "wasmctrl",
                "ide.wasmctrl.io/workspace": "alice"})
        );
        assert_eq!(
            pod["metadata"]["annotations"][pod::SPEC_HASH],
            pod::spec_hash(&pod["spec"])
        );
        let containers = pod["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1);
        assert_eq!(
            containers[0],
            json!({
                "name": "ide",
                "image": "codercom/code-server:4.8.3",
                "imagePullPolicy": "IfNotPresent",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2Gi"}},
            })
        );

        let status = status_of(&outcome).expect("a status update");
        assert_eq!(status.phase, "Pending");
        assert_eq!(status.pod_ip, None);
        assert_eq!(status.observed_generation, 1);
        let ready = status.ready().unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "PodMissing")
        );
        assert_eq!(ready.last_transition_time, Some(NOW.parse().unwrap()));
        assert!(event_reasons(&outcome).is_empty());
    }

    #[test]
    fn only_given_limits_are_set() {
        let h = Harness::new();
        let spec = json!({"image": "ide:1", "port": 3000, "resources": {"memory": "512Mi"}});
        let pod = applied(&reconcile(&h, &workspace(spec, json!(null)))).unwrap();
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"limits": {"memory": "512Mi"}})
        );
        let spec = json!({"image": "ide:1", "port": 3000});
        let pod = applied(&reconcile(&h, &workspace(spec, json!(null)))).unwrap();
        assert!(pod["spec"]["containers"][0].get("resources").is_none());
        assert_eq!(
            pod["spec"]["containers"][0]["ports"][0]["containerPort"],
            3000
        );
    }

    #[test]
    fn pending_pod_is_reported_and_keeps_the_transition_time() {
        let earlier = "2026-11-22T09:00:00Z";
        let ws = workspace(
            sample_spec(),
            json!({"phase": "Pending", "observedGeneration": 1, "conditions": [{
                "type": "Ready", "status": "False", "reason": "PodMissing",
                "message": "creating Pod alice", "lastTransitionTime": earlier, "observedGeneration": 1}]}),
        );
        let h = Harness::new()
            .now(NOW)
            .object(cached_pod(&ws, Some("node-1"), "Pending", None));
        let outcome = reconcile(&h, &ws);
        assert!(applied(&outcome).is_some(), "the current Pod is re-applied");
        let status = status_of(&outcome).unwrap();
        assert_eq!(status.phase, "Pending");
        assert_eq!(status.node_name.as_deref(), Some("node-1"));
        let ready = status.ready().unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "PodPending")
        );
        assert_eq!(ready.last_transition_time, Some(earlier.parse().unwrap()));
    }

    #[test]
    fn running_pod_makes_the_workspace_ready_once() {
        let ws = workspace(sample_spec(), json!(null));
        let pod = cached_pod(&ws, Some("node-1"), "Running", Some("10.244.0.7"));
        let h = Harness::new().now(NOW).object(pod);
        let outcome = reconcile(&h, &ws);
        let status = status_of(&outcome).unwrap();
        assert_eq!(status.phase, "Running");
        assert_eq!(status.pod_ip.as_deref(), Some("10.244.0.7"));
        assert_eq!(status.node_name.as_deref(), Some("node-1"));
        let ready = status.ready().unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", "PodRunning")
        );
        assert_eq!(ready.last_transition_time, Some(NOW.parse().unwrap()));
        assert_eq!(event_reasons(&outcome), vec!["PodRunning"]);

        // With that status written, the next reconcile changes nothing but re-applies the Pod.
        let ws = workspace(sample_spec(), serde_json::to_value(&status).unwrap());
        let later = Harness::new()
            .now("2026-11-22T11:00:00Z")
            .object(cached_pod(
                &ws,
                Some("node-1"),
                "Running",
                Some("10.244.0.7"),
            ));
        let outcome = reconcile(&later, &ws);
        assert_eq!(outcome.actions.len(), 1, "{:?}", outcome.actions);
        assert!(applied(&outcome).is_some());
    }

    #[test]
    fn failed_pod_is_not_ready_with_its_reason() {
        let ws = workspace(sample_spec(), json!(null));
        let mut pod = cached_pod(&ws, Some("node-1"), "Failed", None);
        pod["status"]["reason"] = json!("Evicted");
        let outcome = reconcile(&Harness::new().object(pod), &ws);
        let status = status_of(&outcome).unwrap();
        assert_eq!(status.phase, "Failed");
        let ready = status.ready().unwrap();
        assert_eq!(ready.reason, "PodFailed");
        assert!(ready.message.contains("Evicted"), "{}", ready.message);
    }

    #[test]
    fn spec_change_deletes_the_stale_pod_instead_of_applying() {
        let old = workspace(sample_spec(), json!(null));
        let pod = cached_pod(&old, Some("node-1"), "Running", Some("10.244.0.7"));
        let mut spec = sample_spec();
        spec["image"] = json!("codercom/code-server:4.9.0");
        let mut ws = workspace(spec, json!(null));
        ws["metadata"]["generation"] = json!(2);
        let outcome = reconcile(&Harness::new().now(NOW).object(pod), &ws);
        assert!(applied(&outcome).is_none(), "{:?}", outcome.actions);
        let deletes: Vec<_> = outcome
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Delete(deletion) => Some(deletion.target.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(deletes, vec![ObjectRef::of::<Pod>("default", "alice")]);
        let status = status_of(&outcome).unwrap();
        assert_eq!(status.phase, "Pending");
        assert_eq!(status.pod_ip, None);
        assert_eq!(status.observed_generation, 2);
        assert_eq!(status.ready().unwrap().reason, "PodOutdated");
    }

    #[test]
    fn terminating_pod_is_left_to_finish() {
        let ws = workspace(sample_spec(), json!(null));
        let mut pod = cached_pod(&ws, Some("node-1"), "Running", Some("10.244.0.7"));
        pod["metadata"]["deletionTimestamp"] = json!("2026-11-22T09:59:00Z");
        let outcome = reconcile(&Harness::new().object(pod), &ws);
        assert_eq!(outcome.actions.len(), 1, "{:?}", outcome.actions);
        assert_eq!(
            status_of(&outcome).unwrap().ready().unwrap().reason,
            "PodTerminating"
        );
    }

    #[test]
    fn a_pod_of_the_same_name_owned_by_someone_else_is_retried_not_taken_over() {
        let ws = workspace(sample_spec(), json!(null));
        let mut pod = cached_pod(&ws, None, "Pending", None);
        pod["metadata"]["ownerReferences"][0]["uid"] = json!("another-uid");
        let err = Harness::new()
            .object(pod)
            .reconcile::<WorkspaceController>(&ws)
            .unwrap_err();
        assert!(err.retryable);
        assert!(err.message.contains("default/alice"), "{}", err.message);
        assert!(err.message.contains("not controlled"), "{}", err.message);
    }

    #[test]
    fn invalid_specs_are_terminal_errors_naming_the_object_and_field() {
        let h = Harness::new();
        let cases = [
            (json!({"image": "ide:1", "port": 0}), "spec.port"),
            (json!({"image": "ide:1", "port": 70000}), "spec.port"),
            (json!({"image": "", "port": 8080}), "spec.image"),
            (json!({"port": 8080}), "spec.image"),
            (
                json!({"image": "ide:1", "port": 8080, "resources": {"memory": "lots"}}),
                "spec.resources.memory",
            ),
        ];
        for (spec, field) in cases {
            let err = h
                .reconcile::<WorkspaceController>(&workspace(spec.clone(), json!(null)))
                .unwrap_err();
            assert!(!err.retryable, "{spec}: {err:?}");
            assert!(
                err.message.starts_with("Workspace default/alice: "),
                "{}",
                err.message
            );
            assert!(err.message.contains(field), "{spec}: {}", err.message);
        }
    }

    #[test]
    fn deleted_or_deleting_workspace_needs_nothing() {
        let h = Harness::new();
        let outcome = h
            .reconcile_deleted::<WorkspaceController>("default", "alice")
            .unwrap();
        assert_eq!(outcome, Outcome::done());

        let mut ws = workspace(sample_spec(), json!(null));
        ws["metadata"]["deletionTimestamp"] = json!(NOW);
        let h = Harness::new().object(cached_pod(&ws, None, "Pending", None));
        assert_eq!(reconcile(&h, &ws), Outcome::done());
    }
}
