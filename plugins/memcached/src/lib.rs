//! operator-sdk's Memcached tutorial (`cache.example.com/v1alpha1`) as a wasmctrl plugin.
//!
//! For each `Memcached` it keeps one Deployment of the same name running `size` memcached Pods,
//! owned by the Memcached (so Deployment changes reconcile it and garbage collection removes the
//! Deployment with it), and reports `Available` in `.status.conditions`: `Unknown` while the
//! Deployment's Pods come up, `True` once `size` of them are available. Like the tutorial it
//! holds the Memcached with the finalizer `cache.example.com/finalizer`, added by hand in the
//! first pass, and on deletion reports `Degraded`, records a `Deleting` Warning Event and removes
//! the finalizer, all in one reconcile (the SDK's docs, "Finalizers: two patterns").
//!
//! The kind is also served as `v1beta1` ([`v1beta1`], `size` renamed `replicas`), stored as
//! `v1alpha1`; the plugin's conversion webhook converts between the two.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasmctrl_sdk::conditions::{find_condition, set_condition};
use wasmctrl_sdk::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use wasmctrl_sdk::k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, PodSecurityContext, PodSpec, PodTemplateSpec,
    SeccompProfile, SecurityContext,
};
use wasmctrl_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use wasmctrl_sdk::kube::child_meta;
use wasmctrl_sdk::tracing;
use wasmctrl_sdk::webhooks::{Converter, HubAndSpoke};
use wasmctrl_sdk::{
    Action, Condition, Context, CustomResource, Error, Manifest, NoSettings, Outcome, Reconcile,
    Reconciler, ResourceExt,
};

/// The finalizer the tutorial's controller holds its Memcacheds with.
pub const FINALIZER: &str = "cache.example.com/finalizer";

/// The memcached image the tutorial runs.
pub const IMAGE: &str = "memcached:1.6.26-alpine3.19";

/// How many memcached Pods a Memcached without `size` runs.
pub const DEFAULT_SIZE: i32 = 1;

/// What a Memcached asks for.
//
// `size` is kubebuilder's `+optional` `*int32` with `Minimum=1`, `Maximum=3`: an `Option`
// without a schema default (a bare `#[serde(default)]` would declare `default: 0`, below the
// minimum, and kube-apiserver would refuse the CRD; `check_crd` says so).
#[derive(CustomResource, Debug, Default, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "cache.example.com",
    version = "v1alpha1",
    kind = "Memcached",
    namespaced,
    status = "MemcachedStatus",
    doc = "Memcached is the Schema for the memcacheds API",
    printcolumn = r#"{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}"#,
    printcolumn = r#"{"name": "Available", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Available\")].status"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    crates(
        kube_core = "::wasmctrl_sdk::kube_core",
        k8s_openapi = "::wasmctrl_sdk::k8s_openapi"
    )
)]
pub struct MemcachedSpec {
    /// The number of memcached Pods (1 to 3; 1 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3))]
    pub size: Option<i32>,
}

/// What the controller reports.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct MemcachedStatus {
    /// `Available` (the Deployment runs `size` available Pods) and, while it is deleted,
    /// `Degraded`.
    #[serde(default)]
    #[schemars(schema_with = "wasmctrl_sdk::kube::conditions")]
    pub conditions: Vec<Condition>,
}

impl Memcached {
    /// The Pods it asks for.
    pub fn size(&self) -> i32 {
        self.spec.size.unwrap_or(DEFAULT_SIZE)
    }
}

/// The plugin.
pub struct MemcachedController;

impl Reconciler for MemcachedController {
    type Object = Memcached;
    type Settings = NoSettings;

    fn manifest(_settings: &NoSettings) -> Result<Manifest, String> {
        // No predicate, as in the tutorial: every change of a Memcached reconciles it, and the
        // Deployment's changes reach it through `owns`.
        Ok(Manifest::for_::<Memcached>("memcached")
            .version(env!("CARGO_PKG_VERSION"))
            .owns::<Deployment>()
            .converting(&["v1alpha1", "v1beta1"]))
    }

    fn reconcile(event: Reconcile<Memcached>, ctx: &Context<'_>) -> Result<Outcome, Error> {
        match event {
            Reconcile::Apply(memcached) => apply(&memcached, ctx),
            Reconcile::Cleanup(memcached) => cleanup(&memcached, ctx),
            // Garbage collection removes the Deployment.
            Reconcile::Gone { .. } => Ok(Outcome::done()),
        }
    }
}

impl Converter for MemcachedController {
    fn convert(object: Value, api_version: &str, _settings: &NoSettings) -> Result<Value, String> {
        HubAndSpoke::<Memcached>::new("cache.example.com", "v1alpha1")
            .spoke::<v1beta1::Memcached>("v1beta1")
            .convert(object, api_version)
    }
}

wasmctrl_sdk::export!(MemcachedController, convert);

/// A live Memcached: its finalizer, its Deployment at `size` replicas, its `Available`
/// condition from that Deployment's status.
fn apply(memcached: &Memcached, ctx: &Context<'_>) -> Result<Outcome, Error> {
    let mut actions = Vec::new();
    if !memcached.finalizers().iter().any(|f| f == FINALIZER) {
        actions.push(Action::add_finalizer(FINALIZER));
    }
    let name = memcached.name_any();
    let namespace = memcached.namespace().unwrap_or_default();
    // Applied every time: the host skips an apply that changes nothing, and puts back a
    // Deployment someone scaled by hand, as the tutorial's size check does.
    actions.push(Action::apply(&deployment(memcached))?);
    let available = ctx
        .get::<Deployment>(&namespace, &name)?
        .and_then(|d| d.status)
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    let size = memcached.size();
    let generation = memcached.metadata.generation.unwrap_or_default();
    let condition = if available >= size {
        let message =
            format!("Deployment for custom resource ({name}) with {size} replicas is available");
        Condition::new("Available", true, "Reconciling", message)
    } else {
        let message = format!("{available} of {size} replicas of Deployment {name} available");
        Condition::unknown("Available", "Progressing", message)
    };
    let mut status = memcached.status.clone().unwrap_or_default();
    if set_condition(
        &mut status.conditions,
        condition.observed(generation),
        ctx.now(),
    ) {
        tracing::debug!(available, size, "status changed");
        actions.push(Action::update_status(&status)?);
    }
    Ok(Outcome::with(actions))
}

/// A Memcached being deleted, held by our finalizer: report `Degraded`, record the tutorial's
/// Warning, then let it go. The finalizer's removal comes last, so that the status and the
/// Event are written while the object still exists.
fn cleanup(memcached: &Memcached, ctx: &Context<'_>) -> Result<Outcome, Error> {
    if !memcached.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Outcome::done());
    }
    let name = memcached.name_any();
    let namespace = memcached.namespace().unwrap_or_default();
    let mut status = memcached.status.clone().unwrap_or_default();
    let generation = memcached.metadata.generation.unwrap_or_default();
    let message = format!(
        "Finalizer operations for custom resource {name} name were successfully accomplished"
    );
    let degraded = Condition::new("Degraded", true, "Finalizing", message).observed(generation);
    set_condition(&mut status.conditions, degraded, ctx.now());
    let note = format!("Custom Resource {name} is being deleted from the namespace {namespace}");
    Ok(Outcome::with(vec![
        Action::update_status(&status)?,
        Action::warning("Deleting", &note),
        Action::remove_finalizer(FINALIZER),
    ]))
}

/// The tutorial's Deployment: `size` replicas of memcached on port 11211, non-root, with the
/// restricted Pod Security Standard's settings.
pub fn deployment(memcached: &Memcached) -> Deployment {
    let name = memcached.name_any();
    let labels: std::collections::BTreeMap<String, String> = [
        ("app.kubernetes.io/name", "memcached-operator"),
        ("app.kubernetes.io/instance", name.as_str()),
        ("app.kubernetes.io/managed-by", "wasmctrl"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let container = Container {
        name: "memcached".into(),
        image: Some(IMAGE.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(
            ["memcached", "--memory-limit=64", "-o", "modern", "-v"]
                .map(String::from)
                .to_vec(),
        ),
        ports: Some(vec![ContainerPort {
            container_port: 11211,
            name: Some("memcached".into()),
            ..ContainerPort::default()
        }]),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(1001),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Capabilities::default()
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    Deployment {
        metadata: child_meta(memcached, &name),
        spec: Some(DeploymentSpec {
            replicas: Some(memcached.size()),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..SeccompProfile::default()
                        }),
                        ..PodSecurityContext::default()
                    }),
                    containers: vec![container],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// The `Available` condition, if reported.
pub fn available(status: &MemcachedStatus) -> Option<&Condition> {
    find_condition(&status.conditions, "Available")
}

pub mod v1beta1;

#[cfg(test)]
mod tests;
