//! The controller101 VirtualMachine controller as a wasmctrl plugin.
//!
//! For each `VirtualMachine` (`cloudnative.tw/v1alpha1`) it validates `spec.resource`, decides the
//! phase (`Active`, `Stopped`, or `Failed` with a reason) and reports it with the server's resources
//! and `lastUpdateTime` in `.status`. It writes status only when what it reports changes, so its own
//! status writes never start a reconcile loop. An object that no longer exists is logged and left.
//!
//! It also serves the kind's webhooks, as a kubebuilder project would: a validator that refuses
//! a spec the controller would fail (CPU at least 1, memory and disk as quantities, a known
//! action) before it is stored, and a defaulter that fills in the action the tutorial leaves out
//! (`start`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasmctrl_sdk::manifest::Predicate;
use wasmctrl_sdk::tracing;
use wasmctrl_sdk::webhooks::{Admission, Defaulter, Denied, Operation, Validator, Verdict};
use wasmctrl_sdk::{
    Action, Context, CustomResource, Error, Manifest, NoSettings, Outcome, Reconcile, Reconciler,
    ResourceExt,
};

/// The requested resources and power action.
//
// The derive declares the kind, `VirtualMachine`, and its CRD (`examples/virtualmachine/crd.yaml`).
#[derive(CustomResource, Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "cloudnative.tw",
    version = "v1alpha1",
    kind = "VirtualMachine",
    namespaced,
    status = "Status",
    shortname = "vm",
    doc = "A virtual machine (the controller101 example)",
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"CPU","type":"integer","jsonPath":".spec.resource.cpu"}"#,
    printcolumn = r#"{"name":"Memory","type":"string","jsonPath":".spec.resource.memory"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    crates(
        kube_core = "::wasmctrl_sdk::kube_core",
        k8s_openapi = "::wasmctrl_sdk::k8s_openapi"
    )
)]
pub struct Spec {
    /// Requested resources.
    pub resource: Resource,
    /// start (the default) or stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["start", "stop"]))]
    pub action: Option<String>,
}

/// `spec.resource` / `status.server`: CPU count and memory / root disk quantities.
#[derive(Debug, Default, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Virtual CPUs.
    #[schemars(range(min = 1))]
    pub cpu: i64,
    /// Memory, a Kubernetes quantity such as `4Gi`.
    pub memory: String,
    /// Root disk size, a Kubernetes quantity such as `40Gi`.
    pub root_disk: String,
}

/// The machine's phase and the resources its server runs with.
#[derive(Debug, Default, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// `Active`, `Stopped` or `Failed`.
    pub phase: String,
    /// Why the phase is `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The resources the server runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<Resource>,
    /// The generation this status describes.
    #[serde(default)]
    pub observed_generation: i64,
    /// When the status last changed (RFC 3339).
    // Skipped when empty, which also keeps schemars from declaring `default: ''`, not a date-time.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("format" = "date-time"))]
    pub last_update_time: String,
}

/// The plugin.
pub struct VirtualMachineController;

impl Reconciler for VirtualMachineController {
    type Object = VirtualMachine;
    type Settings = NoSettings;

    fn manifest(_settings: &NoSettings) -> Result<Manifest, String> {
        Ok(Manifest::for_::<VirtualMachine>("virtualmachine")
            .version(env!("CARGO_PKG_VERSION"))
            // Status writes do not bump the generation, so they do not trigger us again.
            .predicate(Predicate::GenerationChanged)
            .validating(&[Operation::Create, Operation::Update])
            .defaulting())
    }

    fn reconcile(event: Reconcile<VirtualMachine>, ctx: &Context<'_>) -> Result<Outcome, Error> {
        let key = ctx.key();
        let vm = match event {
            Reconcile::Apply(vm) => vm,
            Reconcile::Cleanup(_) => {
                tracing::info!(%key, "virtualmachine is being deleted");
                return Ok(Outcome::done());
            }
            Reconcile::Gone { .. } => {
                tracing::info!(%key, "virtualmachine no longer exists");
                return Ok(Outcome::done());
            }
        };
        tracing::info!(%key, generation = vm.metadata.generation, spec = ?vm.spec, "reconciling virtualmachine");

        let desired = desired_status(&vm);
        let current = vm.status.clone().unwrap_or_default();
        if reports(&current, &desired) {
            return Ok(Outcome::done());
        }

        let status = Status {
            last_update_time: ctx.now_rfc3339(),
            ..desired
        };
        let mut outcome = Outcome::with(vec![Action::update_status(&status)?]);
        if current.phase != status.phase {
            let note = match &status.reason {
                Some(reason) => format!("{} is {}: {reason}", vm.name_any(), status.phase),
                None => format!("{} is {}", vm.name_any(), status.phase),
            };
            outcome = outcome.push(if status.phase == "Failed" {
                Action::warning("Failed", &note)
            } else {
                Action::event(&status.phase, &note)
            });
        }
        Ok(outcome)
    }
}

/// Whether `current` already reports what `desired` says (the timestamp aside), so there is
/// nothing to write.
pub fn reports(current: &Status, desired: &Status) -> bool {
    current.phase == desired.phase
        && current.reason == desired.reason
        && current.server == desired.server
        && current.observed_generation == desired.observed_generation
}

/// What is wrong with a spec, if anything: the reason a VirtualMachine fails, and what its
/// validating webhook refuses.
pub fn invalid(spec: &Spec) -> Option<String> {
    let resource = &spec.resource;
    if resource.cpu <= 0 {
        return Some(format!(
            "spec.resource.cpu must be positive, got {}",
            resource.cpu
        ));
    }
    for (field, value) in [
        ("memory", &resource.memory),
        ("rootDisk", &resource.root_disk),
    ] {
        if !is_quantity(value) {
            return Some(format!(
                "spec.resource.{field} is not a quantity: {value:?}"
            ));
        }
    }
    match spec.action.as_deref().unwrap_or("start") {
        "start" | "stop" => None,
        other => Some(format!("spec.action must be start or stop, got {other:?}")),
    }
}

/// The status the spec calls for, without a timestamp.
pub fn desired_status(vm: &VirtualMachine) -> Status {
    let generation = vm.metadata.generation.unwrap_or_default();
    if let Some(reason) = invalid(&vm.spec) {
        return Status {
            phase: "Failed".into(),
            reason: Some(reason),
            observed_generation: generation,
            ..Status::default()
        };
    }
    let resource = &vm.spec.resource;
    let phase = match vm.spec.action.as_deref() {
        Some("stop") => "Stopped",
        _ => "Active",
    };
    Status {
        phase: phase.into(),
        reason: None,
        server: Some(resource.clone()),
        observed_generation: generation,
        last_update_time: String::new(),
    }
}

/// A Kubernetes quantity: a decimal number with an optional binary or decimal suffix.
fn is_quantity(value: &str) -> bool {
    const SUFFIXES: [&str; 13] = [
        "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E", "m",
    ];
    let number = SUFFIXES
        .iter()
        .find_map(|s| value.strip_suffix(s))
        .unwrap_or(value);
    !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit() || c == '.')
        && number.chars().filter(|&c| c == '.').count() <= 1
        && number != "."
}

/// Refuses what the controller would fail, before it is stored.
impl Validator for VirtualMachineController {
    fn validate_create(vm: &VirtualMachine, _: &Admission<'_>) -> Verdict {
        match invalid(&vm.spec) {
            Some(reason) => Err(Denied::new(reason)),
            None => Ok(Vec::new()),
        }
    }

    fn validate_update(old: &VirtualMachine, new: &VirtualMachine, ctx: &Admission<'_>) -> Verdict {
        let mut warnings = Self::validate_create(new, ctx)?;
        if new.spec.resource.cpu < old.spec.resource.cpu {
            warnings.push(format!(
                "{}: fewer CPUs ({} -> {}) take effect at the next restart",
                new.name_any(),
                old.spec.resource.cpu,
                new.spec.resource.cpu
            ));
        }
        Ok(warnings)
    }
}

/// Fills in what the tutorial's manifests leave out.
impl Defaulter for VirtualMachineController {
    fn default(vm: &mut VirtualMachine, _: &Admission<'_>) -> Verdict {
        vm.spec.action.get_or_insert_with(|| "start".into());
        Ok(Vec::new())
    }
}

wasmctrl_sdk::export!(VirtualMachineController, validate, default);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wasmctrl_sdk::action::EventType;
    use wasmctrl_sdk::testing::Harness;

    fn vm(spec: serde_json::Value, status: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "cloudnative.tw/v1alpha1",
            "kind": "VirtualMachine",
            "metadata": {"name": "test-vm", "namespace": "default", "generation": 1},
            "spec": spec,
            "status": status,
        })
    }

    fn status_of(outcome: &Outcome) -> Status {
        let Some(Action::UpdateStatus(json)) = outcome.actions.first() else {
            panic!("expected a status update first, got {:?}", outcome.actions);
        };
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn new_vm_becomes_active_with_its_resources() {
        let h = Harness::new().now("2026-11-22T00:00:00Z");
        let spec = json!({"resource": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"}});
        let outcome = h
            .reconcile::<VirtualMachineController>(&vm(spec, json!(null)))
            .unwrap();
        let status = status_of(&outcome);
        assert_eq!(status.phase, "Active");
        assert_eq!(status.last_update_time, "2026-11-22T00:00:00Z");
        assert_eq!(status.server.unwrap().memory, "4Gi");
        assert!(matches!(&outcome.actions[1], Action::EmitEvent(e) if e.reason == "Active"));
    }

    #[test]
    fn unchanged_status_writes_nothing() {
        let h = Harness::new();
        let spec = json!({"resource": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"}});
        let status = json!({"phase": "Active", "observedGeneration": 1,
            "server": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"}, "lastUpdateTime": "x"});
        let outcome = h
            .reconcile::<VirtualMachineController>(&vm(spec, status))
            .unwrap();
        assert_eq!(outcome, Outcome::done());
    }

    #[test]
    fn spec_change_updates_status_without_a_second_event() {
        let h = Harness::new();
        let spec = json!({"resource": {"cpu": 4, "memory": "8Gi", "rootDisk": "40Gi"}});
        let status = json!({"phase": "Active", "observedGeneration": 0,
            "server": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"}});
        let outcome = h
            .reconcile::<VirtualMachineController>(&vm(spec, status))
            .unwrap();
        assert_eq!(status_of(&outcome).server.unwrap().cpu, 4);
        assert_eq!(outcome.actions.len(), 1);
    }

    #[test]
    fn invalid_resources_fail_with_a_warning() {
        let h = Harness::new();
        let spec = json!({"resource": {"cpu": 0, "memory": "4Gi", "rootDisk": "40Gi"}});
        let outcome = h
            .reconcile::<VirtualMachineController>(&vm(spec, json!(null)))
            .unwrap();
        let status = status_of(&outcome);
        assert_eq!(status.phase, "Failed");
        assert!(status.reason.unwrap().contains("cpu"));
        assert!(
            matches!(&outcome.actions[1], Action::EmitEvent(e) if e.type_ == EventType::Warning)
        );
        let spec = json!({"resource": {"cpu": 1, "memory": "lots", "rootDisk": "40Gi"}});
        let outcome = h
            .reconcile::<VirtualMachineController>(&vm(spec, json!(null)))
            .unwrap();
        assert!(status_of(&outcome).reason.unwrap().contains("memory"));
    }

    #[test]
    fn stop_action_stops() {
        let h = Harness::new();
        let spec =
            json!({"resource": {"cpu": 1, "memory": "1Gi", "rootDisk": "1Gi"}, "action": "stop"});
        let outcome = h
            .reconcile::<VirtualMachineController>(&vm(spec, json!(null)))
            .unwrap();
        assert_eq!(status_of(&outcome).phase, "Stopped");
    }

    #[test]
    fn deleted_vm_is_logged_and_left_alone() {
        let h = Harness::new();
        let outcome = h
            .reconcile_deleted::<VirtualMachineController>("default", "gone")
            .unwrap();
        assert_eq!(outcome, Outcome::done());
        let logs = h.logs();
        let gone = logs.iter().find(|l| l.message.contains("no longer exists"));
        let gone = gone.unwrap_or_else(|| panic!("{logs:?}"));
        assert_eq!(
            gone.fields,
            [("key".to_string(), "default/gone".to_string())]
        );
    }

    #[test]
    fn manifest_watches_virtualmachines_on_generation_changes() {
        let m = Harness::new()
            .manifest::<VirtualMachineController>()
            .unwrap();
        assert_eq!(m.watches.kind, wasmctrl_sdk::Gvk::of::<VirtualMachine>());
        assert_eq!(m.watches.predicates, vec![Predicate::GenerationChanged]);
    }

    #[test]
    fn the_webhooks_refuse_what_the_controller_would_fail_and_default_the_action() {
        use wasmctrl_sdk::webhooks::Operation;
        let h = Harness::new();
        let bad = vm(
            json!({"resource": {"cpu": 0, "memory": "4Gi", "rootDisk": "40Gi"}}),
            json!(null),
        );
        let refused = h
            .validate::<VirtualMachineController>(Operation::Create, Some(&bad), None)
            .unwrap()
            .unwrap_err();
        assert_eq!(refused.message, "spec.resource.cpu must be positive, got 0");
        assert_eq!(refused.code, 403);
        let good = vm(
            json!({"resource": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"}}),
            json!(null),
        );
        let fewer = vm(
            json!({"resource": {"cpu": 1, "memory": "4Gi", "rootDisk": "40Gi"}}),
            json!(null),
        );
        let warnings = h
            .validate::<VirtualMachineController>(Operation::Update, Some(&fewer), Some(&good))
            .unwrap()
            .unwrap();
        assert_eq!(
            warnings,
            ["test-vm: fewer CPUs (2 -> 1) take effect at the next restart"]
        );
        let mut unknown = good.clone();
        unknown["spec"]["extra"] = json!("kept");
        let (defaulted, _) = h
            .defaulted::<VirtualMachineController>(&unknown)
            .unwrap()
            .unwrap();
        assert_eq!(defaulted["spec"]["action"], "start");
        assert_eq!(
            defaulted["spec"]["extra"], "kept",
            "fields the type does not know are kept"
        );
        assert!(
            h.validate::<VirtualMachineController>(Operation::Delete, None, Some(&good))
                .is_err(),
            "deletes are not validated"
        );
    }

    #[test]
    fn crd_is_generated_from_the_types() {
        use wasmctrl_sdk::testing::check_crd;
        check_crd::<VirtualMachine>(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/virtualmachine/crd.yaml"
        ));
    }
}
