//! A workload-owning reconciler, as most operators are: each `WebApp` (example.com/v1) gets a
//! headless Service, a StatefulSet of `spec.replicas` Pods of `spec.image`, each with a claim
//! from its volume claim template, and a claim they share, all applied with server-side apply
//! and owned by the WebApp. Its status reports what it reads back of them, typed as
//! k8s-openapi reads them (the Service's cluster IP, the shared claim's phase, the
//! StatefulSet's replicas and the claim size of its template), so a test sees the API server's
//! defaults and canonical quantities reach a plugin as on a cluster.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::json;
use wasmctrl_sdk::k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use wasmctrl_sdk::k8s_openapi::api::core::v1::{
    Container, ContainerPort, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, ResourceRequirements, Service,
    ServicePort, ServiceSpec, Volume, VolumeMount, VolumeResourceRequirements,
};
use wasmctrl_sdk::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use wasmctrl_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use wasmctrl_sdk::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use wasmctrl_sdk::kube::child_meta;
use wasmctrl_sdk::{
    Action, Context, CustomResource, Error, Manifest, NoSettings, Outcome, Reconcile, Reconciler,
    ResourceExt,
};

/// The plugin.
pub struct WebApps;

/// A WebApp's spec.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "WebApp",
    namespaced,
    schema = "disabled",
    crates(
        kube_core = "::wasmctrl_sdk::kube_core",
        k8s_openapi = "::wasmctrl_sdk::k8s_openapi"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WebAppSpec {
    /// Pods of the StatefulSet.
    #[serde(default = "one")]
    replicas: i32,
    /// Their image.
    image: String,
    /// Each Pod's claim and the shared claim, as a quantity (`1Gi`, or a number of bytes).
    #[serde(default = "gibibyte")]
    storage: serde_json::Value,
}

fn one() -> i32 {
    1
}

fn gibibyte() -> serde_json::Value {
    json!("1Gi")
}

/// A claim of `storage`, read-write by one node.
fn claim_spec(storage: &Quantity) -> PersistentVolumeClaimSpec {
    PersistentVolumeClaimSpec {
        access_modes: Some(vec!["ReadWriteOnce".into()]),
        resources: Some(VolumeResourceRequirements {
            requests: Some([("storage".to_string(), storage.clone())].into()),
            ..VolumeResourceRequirements::default()
        }),
        ..PersistentVolumeClaimSpec::default()
    }
}

impl Reconciler for WebApps {
    type Object = WebApp;
    type Settings = NoSettings;

    fn manifest(_settings: &NoSettings) -> Result<Manifest, String> {
        Ok(Manifest::for_::<WebApp>("webapp")
            .owns::<StatefulSet>()
            .owns::<Service>()
            .owns::<PersistentVolumeClaim>())
    }

    fn reconcile(event: Reconcile<WebApp>, ctx: &Context<'_>) -> Result<Outcome, Error> {
        // Deleted: its children go with it (garbage collection by owner reference).
        let Reconcile::Apply(app) = event else {
            return Ok(Outcome::done());
        };
        let (name, namespace) = (app.name_any(), app.namespace().unwrap_or_default());
        let shared = format!("{name}-shared");
        let storage = Quantity(match &app.spec.storage {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        let labels: BTreeMap<String, String> = [
            ("app.kubernetes.io/name".to_string(), "webapp".to_string()),
            ("app.kubernetes.io/instance".to_string(), name.clone()),
        ]
        .into();
        let service = Service {
            metadata: child_meta(&app, &name),
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".into()),
                selector: Some(labels.clone()),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: 80,
                    target_port: Some(IntOrString::String("http".into())),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        let container = Container {
            name: "web".into(),
            image: Some(app.spec.image.clone()),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                ..ContainerPort::default()
            }]),
            volume_mounts: Some(vec![
                VolumeMount {
                    name: "data".into(),
                    mount_path: "/data".into(),
                    ..VolumeMount::default()
                },
                VolumeMount {
                    name: "shared".into(),
                    mount_path: "/shared".into(),
                    ..VolumeMount::default()
                },
            ]),
            resources: Some(ResourceRequirements {
                requests: Some(
                    [
                        ("cpu".to_string(), Quantity("100m".into())),
                        ("memory".to_string(), Quantity("64Mi".into())),
                    ]
                    .into(),
                ),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        };
        let stateful_set = StatefulSet {
            metadata: child_meta(&app, &name),
            spec: Some(StatefulSetSpec {
                service_name: Some(name.clone()),
                replicas: Some(app.spec.replicas),
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
                        containers: vec![container],
                        volumes: Some(vec![Volume {
                            name: "shared".into(),
                            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                                claim_name: shared.clone(),
                                ..PersistentVolumeClaimVolumeSource::default()
                            }),
                            ..Volume::default()
                        }]),
                        ..PodSpec::default()
                    }),
                },
                volume_claim_templates: Some(vec![PersistentVolumeClaim {
                    metadata: ObjectMeta {
                        name: Some("data".into()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(claim_spec(&storage)),
                    ..PersistentVolumeClaim::default()
                }]),
                ..StatefulSetSpec::default()
            }),
            ..StatefulSet::default()
        };
        let claim = PersistentVolumeClaim {
            metadata: child_meta(&app, &shared),
            spec: Some(claim_spec(&storage)),
            ..PersistentVolumeClaim::default()
        };

        // What the server made of them last time, read as typed objects.
        let live_service = ctx.get::<Service>(&namespace, &name)?;
        let live_claim = ctx.get::<PersistentVolumeClaim>(&namespace, &shared)?;
        let live_set = ctx.get::<StatefulSet>(&namespace, &name)?;
        let set_spec = live_set.as_ref().and_then(|s| s.spec.as_ref());
        let template_storage = set_spec
            .and_then(|s| s.volume_claim_templates.as_ref())
            .and_then(|t| t.first())
            .and_then(|c| c.spec.as_ref()?.resources.as_ref()?.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone());
        let status = json!({
            "observedGeneration": app.metadata.generation,
            "serviceClusterIP": live_service.and_then(|s| s.spec?.cluster_ip),
            "claimPhase": live_claim.and_then(|c| c.status?.phase),
            "replicas": set_spec.and_then(|s| s.replicas),
            "podManagementPolicy": set_spec.and_then(|s| s.pod_management_policy.clone()),
            "claimStorage": template_storage,
        });
        Ok(Outcome::with(vec![
            Action::apply(&service)?,
            Action::apply(&stateful_set)?,
            Action::apply(&claim)?,
            Action::update_status(&status)?,
        ]))
    }
}

wasmctrl_sdk::export!(WebApps);
