//! Object specs are validated as kube-apiserver validates them, with kube's causes: one table
//! per validation family (Pods and their templates, the workload kinds, Services,
//! PersistentVolumeClaims, Ingresses, NetworkPolicies, ConfigMaps and Secrets, RBAC, Leases),
//! each row a create (or an update of an object created first) and the causes kube answers with
//! (`reason` and `field`, and the message where it names a value), or none when kube accepts it.
//!
//! The expectations were read off kube-apiserver 1.32: with `WASMCTRL_VALIDATION_KUBECONFIG`
//! naming a kubeconfig, the same table runs against that server instead, and prints what it
//! answered for every row.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use serde_json::{Value, json};

use common::process::Cluster;

/// One row: a create of `object` at `path` (`{ns}` replaced by the test's namespace), or, with
/// `base`, a create of `base` then an update of what the server stored: `object` merged into it,
/// or, given as `[[pointer, value], ...]`, those fields set.
struct Case {
    what: &'static str,
    path: &'static str,
    base: Option<Value>,
    object: Value,
    /// `"<reason> <field>"` or `"<reason> <field>: <message>"`, in any order; none = accepted.
    causes: &'static [&'static str],
}

fn create(
    what: &'static str,
    path: &'static str,
    object: Value,
    causes: &'static [&'static str],
) -> Case {
    Case {
        what,
        path,
        base: None,
        object,
        causes,
    }
}

fn update(
    what: &'static str,
    path: &'static str,
    base: Value,
    change: Value,
    causes: &'static [&'static str],
) -> Case {
    Case {
        what,
        path,
        base: Some(base),
        object: change,
        causes,
    }
}

const LABELS_MISMATCH: &str = "FieldValueInvalid spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`";
const JOB_RESTART: &str = "FieldValueRequired spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"";
const PVC_IMMUTABLE: &str = "FieldValueForbidden spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims…";
const CONFIG_KEY_A_B: &str = "FieldValueInvalid data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

const PODS: &str = "/api/v1/namespaces/{ns}/pods";
const SERVICES: &str = "/api/v1/namespaces/{ns}/services";
const PVCS: &str = "/api/v1/namespaces/{ns}/persistentvolumeclaims";
const CONFIGMAPS: &str = "/api/v1/namespaces/{ns}/configmaps";
const SECRETS: &str = "/api/v1/namespaces/{ns}/secrets";
const SERVICEACCOUNTS: &str = "/api/v1/namespaces/{ns}/serviceaccounts";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/{ns}/deployments";
const REPLICASETS: &str = "/apis/apps/v1/namespaces/{ns}/replicasets";
const STATEFULSETS: &str = "/apis/apps/v1/namespaces/{ns}/statefulsets";
const DAEMONSETS: &str = "/apis/apps/v1/namespaces/{ns}/daemonsets";
const JOBS: &str = "/apis/batch/v1/namespaces/{ns}/jobs";
const CRONJOBS: &str = "/apis/batch/v1/namespaces/{ns}/cronjobs";
const INGRESSES: &str = "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses";
const NETWORKPOLICIES: &str = "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies";
const ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles";
const ROLEBINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings";
const CLUSTERROLES: &str = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
const CLUSTERROLEBINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases";
const RESOURCEQUOTAS: &str = "/api/v1/namespaces/{ns}/resourcequotas";
const PDBS: &str = "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets";
const CONTROLLERREVISIONS: &str = "/apis/apps/v1/namespaces/{ns}/controllerrevisions";

fn container() -> Value {
    json!({"name": "app", "image": "busybox"})
}

/// A Pod (or template) spec of `containers`, with `extra` merged in.
fn pod_spec(containers: Value, extra: Value) -> Value {
    let mut spec = json!({"containers": containers});
    json_patch::merge(&mut spec, &extra);
    spec
}

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "spec": spec})
}

fn template(spec: Value) -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": spec})
}

fn selector() -> Value {
    json!({"matchLabels": {"app": "web"}})
}

/// A workload of `kind` with a valid selector and template, `extra` merged into its spec.
fn workload(kind: &str, extra: Value) -> Value {
    let mut spec = json!({"selector": selector(), "template": template(pod_spec(json!([container()]), json!({})))});
    match kind {
        "StatefulSet" => spec["serviceName"] = json!("web"),
        "Job" => {
            spec = json!({"template": {"spec": pod_spec(json!([container()]), json!({"restartPolicy": "Never"}))}})
        }
        _ => {}
    }
    json_patch::merge(&mut spec, &extra);
    let api_version = if kind == "Job" { "batch/v1" } else { "apps/v1" };
    json!({"apiVersion": api_version, "kind": kind, "spec": spec})
}

fn cronjob(extra: Value) -> Value {
    let mut spec = json!({"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec":
        pod_spec(json!([container()]), json!({"restartPolicy": "OnFailure"}))}}}});
    json_patch::merge(&mut spec, &extra);
    json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": spec})
}

fn service(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "spec": spec})
}

fn pvc(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "spec": spec})
}

fn claim_spec() -> Value {
    json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}})
}

fn ingress(spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "spec": spec})
}

fn ingress_path(path: Value) -> Value {
    json!({"rules": [{"host": "example.com", "http": {"paths": [path]}}]})
}

fn backend() -> Value {
    json!({"service": {"name": "web", "port": {"number": 80}}})
}

fn network_policy(spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "spec": spec})
}

fn configmap(body: Value) -> Value {
    let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    json_patch::merge(&mut o, &body);
    o
}

fn secret(body: Value) -> Value {
    let mut o = json!({"apiVersion": "v1", "kind": "Secret"});
    json_patch::merge(&mut o, &body);
    o
}

fn rbac(kind: &str, body: Value) -> Value {
    let mut o = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind});
    json_patch::merge(&mut o, &body);
    o
}

fn binding(kind: &str, role_ref: Value, subjects: Value) -> Value {
    rbac(kind, json!({"roleRef": role_ref, "subjects": subjects}))
}

fn view() -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"})
}

fn lease(spec: Value) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": spec})
}

fn pods() -> Vec<Case> {
    let c = container;
    vec![
        create(
            "a valid Pod",
            PODS,
            pod(pod_spec(json!([c()]), json!({}))),
            &[],
        ),
        create(
            "no containers",
            PODS,
            pod(pod_spec(json!([]), json!({}))),
            &["FieldValueRequired spec.containers: Required value"],
        ),
        create(
            "a container name that is no DNS label",
            PODS,
            pod(pod_spec(
                json!([{"name": "App_1", "image": "busybox"}]),
                json!({}),
            )),
            &[
                "FieldValueInvalid spec.containers[0].name: Invalid value: \"App_1\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ],
        ),
        create(
            "two containers of one name",
            PODS,
            pod(pod_spec(json!([c(), c()]), json!({}))),
            &["FieldValueDuplicate spec.containers[1].name: Duplicate value: \"app\""],
        ),
        create(
            "a container without an image",
            PODS,
            pod(pod_spec(json!([{"name": "app"}]), json!({}))),
            &["FieldValueRequired spec.containers[0].image: Required value"],
        ),
        create(
            "an imagePullPolicy kube does not know",
            PODS,
            pod(pod_spec(
                json!([{"name": "app", "image": "busybox", "imagePullPolicy": "Sometimes"}]),
                json!({}),
            )),
            &[
                "FieldValueNotSupported spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
            ],
        ),
        create(
            "a container port out of range",
            PODS,
            pod(pod_spec(
                json!([{"name": "app", "image": "busybox", "ports": [{"containerPort": 70000}]}]),
                json!({}),
            )),
            &[
                "FieldValueInvalid spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ],
        ),
        create(
            "a port protocol kube does not know",
            PODS,
            pod(pod_spec(
                json!([{"name": "app", "image": "busybox", "ports": [{"containerPort": 80, "protocol": "ICMP"}]}]),
                json!({}),
            )),
            &[
                "FieldValueNotSupported spec.containers[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ],
        ),
        create(
            "a restartPolicy kube does not know",
            PODS,
            pod(pod_spec(
                json!([c()]),
                json!({"restartPolicy": "Sometimes"}),
            )),
            &[
                "FieldValueNotSupported spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ],
        ),
        create(
            "a dnsPolicy kube does not know",
            PODS,
            pod(pod_spec(json!([c()]), json!({"dnsPolicy": "Nearby"}))),
            &[
                "FieldValueNotSupported spec.dnsPolicy: Unsupported value: \"Nearby\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"",
            ],
        ),
        create(
            "a mount of no volume",
            PODS,
            pod(pod_spec(
                json!([{"name": "app", "image": "busybox", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]),
                json!({}),
            )),
            &["FieldValueNotFound spec.containers[0].volumeMounts[0].name: Not found: \"data\""],
        ),
        create(
            "two volumes of one name",
            PODS,
            pod(pod_spec(
                json!([c()]),
                json!({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]}),
            )),
            &["FieldValueDuplicate spec.volumes[1].name: Duplicate value: \"v\""],
        ),
        create(
            "requests above limits",
            PODS,
            pod(pod_spec(
                json!([{"name": "app", "image": "busybox", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]),
                json!({}),
            )),
            &[
                "FieldValueInvalid spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
            ],
        ),
        create(
            "an env var without a name",
            PODS,
            pod(pod_spec(
                json!([{"name": "app", "image": "busybox", "env": [{"value": "x"}]}]),
                json!({}),
            )),
            &["FieldValueRequired spec.containers[0].env[0].name: Required value"],
        ),
        create(
            "a negative activeDeadlineSeconds",
            PODS,
            pod(pod_spec(json!([c()]), json!({"activeDeadlineSeconds": 0}))),
            &[
                "FieldValueInvalid spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
            ],
        ),
        update(
            "a Pod's new image",
            PODS,
            pod(pod_spec(
                json!([{"name": "app", "image": "busybox:1.36"}]),
                json!({}),
            )),
            json!([["/spec/containers/0/image", "busybox:1.37"]]),
            &[],
        ),
        update(
            "a Pod's container renamed",
            PODS,
            pod(pod_spec(json!([c()]), json!({}))),
            json!([["/spec/containers/0/name", "other"]]),
            &[
                "FieldValueForbidden spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)…",
            ],
        ),
    ]
}

fn workloads() -> Vec<Case> {
    let revision = |extra: Value| {
        let mut r = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {}});
        json_patch::merge(&mut r, &extra);
        r
    };
    vec![
        create(
            "a ControllerRevision",
            CONTROLLERREVISIONS,
            revision(json!({"data": {"spec": {}}, "revision": 2})),
            &[],
        ),
        create(
            "a ControllerRevision without data",
            CONTROLLERREVISIONS,
            revision(json!({"revision": 1})),
            &["FieldValueRequired data: Required value: data is mandatory"],
        ),
        create(
            "a negative revision",
            CONTROLLERREVISIONS,
            revision(json!({"data": {}, "revision": -1})),
            &["FieldValueInvalid revision: Invalid value: -1: must be greater than or equal to 0"],
        ),
        create(
            "a valid Deployment",
            DEPLOYMENTS,
            workload("Deployment", json!({})),
            &[],
        ),
        create(
            "a Deployment without a selector",
            DEPLOYMENTS,
            workload("Deployment", json!({"selector": null})),
            &[
                "FieldValueRequired spec.selector: Required value",
                LABELS_MISMATCH,
            ],
        ),
        create(
            "a selector its template's labels do not match",
            DEPLOYMENTS,
            workload(
                "Deployment",
                json!({"selector": {"matchLabels": {"app": "db"}}}),
            ),
            &[LABELS_MISMATCH],
        ),
        create(
            "an empty selector",
            DEPLOYMENTS,
            workload("Deployment", json!({"selector": {"matchLabels": null}})),
            &[
                "FieldValueInvalid spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment",
            ],
        ),
        create(
            "negative replicas",
            DEPLOYMENTS,
            workload("Deployment", json!({"replicas": -1})),
            &[
                "FieldValueInvalid spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ],
        ),
        create(
            "a Deployment's Pods that do not restart",
            DEPLOYMENTS,
            workload(
                "Deployment",
                json!({"template": {"spec": {"restartPolicy": "Never"}}}),
            ),
            &[
                "FieldValueNotSupported spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            ],
        ),
        create(
            "a strategy kube does not know",
            DEPLOYMENTS,
            workload("Deployment", json!({"strategy": {"type": "Sideways"}})),
            &[
                "FieldValueNotSupported spec.strategy: Unsupported value: apps.DeploymentStrategy{Type:\"Sideways\", RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: \"Recreate\", \"RollingUpdate\"",
            ],
        ),
        create(
            "maxSurge and maxUnavailable both 0",
            DEPLOYMENTS,
            workload(
                "Deployment",
                json!({"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}),
            ),
            &[
                "FieldValueInvalid spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0",
            ],
        ),
        create(
            "maxUnavailable above 100%",
            DEPLOYMENTS,
            workload(
                "Deployment",
                json!({"strategy": {"rollingUpdate": {"maxUnavailable": "150%"}}}),
            ),
            &[
                "FieldValueInvalid spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%",
            ],
        ),
        create(
            "a template without containers",
            DEPLOYMENTS,
            workload(
                "Deployment",
                json!({"template": {"spec": {"containers": []}}}),
            ),
            &["FieldValueRequired spec.template.spec.containers: Required value"],
        ),
        update(
            "a Deployment scaled",
            DEPLOYMENTS,
            workload("Deployment", json!({})),
            json!({"spec": {"replicas": 3}}),
            &[],
        ),
        update(
            "a Deployment's selector changed",
            DEPLOYMENTS,
            workload("Deployment", json!({})),
            json!({"spec": {"selector": {"matchLabels": {"tier": "web"}}, "template": {"metadata": {"labels": {"tier": "web"}}}}}),
            &[
                "FieldValueInvalid spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"tier\":\"web\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable",
            ],
        ),
        create(
            "a ReplicaSet whose selector its template does not match",
            REPLICASETS,
            workload(
                "ReplicaSet",
                json!({"selector": {"matchLabels": {"app": "db"}}}),
            ),
            &[LABELS_MISMATCH],
        ),
        create(
            "a valid StatefulSet",
            STATEFULSETS,
            workload("StatefulSet", json!({})),
            &[],
        ),
        create(
            "a podManagementPolicy kube does not know",
            STATEFULSETS,
            workload("StatefulSet", json!({"podManagementPolicy": "Random"})),
            &[
                "FieldValueInvalid spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'",
            ],
        ),
        create(
            "a StatefulSet updateStrategy kube does not know",
            STATEFULSETS,
            workload(
                "StatefulSet",
                json!({"updateStrategy": {"type": "Sideways"}}),
            ),
            &[
                "FieldValueInvalid spec.updateStrategy: Invalid value: apps.StatefulSetUpdateStrategy{Type:\"Sideways\", RollingUpdate:(*apps.RollingUpdateStatefulSetStrategy)(nil)}: must be 'RollingUpdate' or 'OnDelete'",
            ],
        ),
        create(
            "a volumeClaimTemplate without access modes (kube does not validate templates' claims)",
            STATEFULSETS,
            workload(
                "StatefulSet",
                json!({"volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]}),
            ),
            &[],
        ),
        update(
            "a StatefulSet scaled and its image changed",
            STATEFULSETS,
            workload("StatefulSet", json!({})),
            json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "app", "image": "busybox:1.37"}]}}}}),
            &[],
        ),
        update(
            "a StatefulSet's serviceName changed",
            STATEFULSETS,
            workload("StatefulSet", json!({})),
            json!({"spec": {"serviceName": "other"}}),
            &[
                "FieldValueForbidden spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ],
        ),
        create(
            "a DaemonSet's Pods that restart on failure only",
            DAEMONSETS,
            workload(
                "DaemonSet",
                json!({"template": {"spec": {"restartPolicy": "OnFailure"}}}),
            ),
            &[
                "FieldValueNotSupported spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
            ],
        ),
        create(
            "a DaemonSet update strategy kube does not know",
            DAEMONSETS,
            workload("DaemonSet", json!({"updateStrategy": {"type": "Sideways"}})),
            &[
                "FieldValueNotSupported spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:\"Sideways\", RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: \"RollingUpdate\", \"OnDelete\"",
            ],
        ),
        create("a valid Job", JOBS, workload("Job", json!({})), &[]),
        create(
            "a Job's Pods that always restart",
            JOBS,
            workload(
                "Job",
                json!({"template": {"spec": {"restartPolicy": "Always"}}}),
            ),
            &[JOB_RESTART],
        ),
        create(
            "a Job without a restartPolicy",
            JOBS,
            workload(
                "Job",
                json!({"template": {"spec": {"restartPolicy": null}}}),
            ),
            &[JOB_RESTART],
        ),
        create(
            "negative parallelism",
            JOBS,
            workload("Job", json!({"parallelism": -1})),
            &[
                "FieldValueInvalid spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
            ],
        ),
        create(
            "a negative backoffLimit",
            JOBS,
            workload("Job", json!({"backoffLimit": -1})),
            &[
                "FieldValueInvalid spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
            ],
        ),
        create(
            "a selector set by hand without manualSelector",
            JOBS,
            workload(
                "Job",
                json!({"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}}}),
            ),
            &[
                "FieldValueInvalid spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"batch.kubernetes.io/controller-uid\":…",
            ],
        ),
        update(
            "a Job's template changed",
            JOBS,
            workload("Job", json!({})),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "busybox:1.37"}]}}}}),
            &["FieldValueInvalid spec.template: Invalid value: core.PodTemplateSpec{…"],
        ),
        update(
            "a Job's completions changed",
            JOBS,
            workload("Job", json!({})),
            json!({"spec": {"completions": 5}}),
            &["FieldValueInvalid spec.completions: Invalid value: 5: field is immutable"],
        ),
        update(
            "a Job suspended",
            JOBS,
            workload("Job", json!({})),
            json!({"spec": {"suspend": true}}),
            &[],
        ),
        create("a valid CronJob", CRONJOBS, cronjob(json!({})), &[]),
        create(
            "a schedule that does not parse",
            CRONJOBS,
            cronjob(json!({"schedule": "every minute"})),
            &[
                "FieldValueInvalid spec.schedule: Invalid value: \"every minute\": expected exactly 5 fields, found 2: [every minute]",
            ],
        ),
        create(
            "a CronJob without a schedule",
            CRONJOBS,
            cronjob(json!({"schedule": null})),
            &["FieldValueRequired spec.schedule: Required value"],
        ),
        create(
            "a concurrencyPolicy kube does not know",
            CRONJOBS,
            cronjob(json!({"concurrencyPolicy": "Sometimes"})),
            &[
                "FieldValueNotSupported spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
            ],
        ),
        create(
            "a time zone that does not exist",
            CRONJOBS,
            cronjob(json!({"timeZone": "Mars/Olympus_Mons"})),
            &[
                "FieldValueInvalid spec.timeZone: Invalid value: \"Mars/Olympus_Mons\": unknown time zone Mars/Olympus_Mons",
            ],
        ),
        create(
            "a CronJob's Pods that always restart",
            CRONJOBS,
            cronjob(
                json!({"jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Always"}}}}}),
            ),
            &[
                "FieldValueRequired spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
            ],
        ),
    ]
}

fn services() -> Vec<Case> {
    let port = |p: Value| service(json!({"selector": {"app": "web"}, "ports": [p]}));
    vec![
        create(
            "a valid Service",
            SERVICES,
            port(json!({"port": 80, "targetPort": "http"})),
            &[],
        ),
        create(
            "a Service without ports",
            SERVICES,
            service(json!({"selector": {"app": "web"}})),
            &["FieldValueRequired spec.ports: Required value"],
        ),
        create(
            "a port out of range",
            SERVICES,
            port(json!({"port": 70000})),
            &[
                "FieldValueInvalid spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "FieldValueInvalid spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ],
        ),
        create(
            "a targetPort that is no port name",
            SERVICES,
            port(json!({"port": 80, "targetPort": "not a name"})),
            &[
                "FieldValueInvalid spec.ports[0].targetPort: Invalid value: \"not a name\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            ],
        ),
        create(
            "two ports without names",
            SERVICES,
            service(json!({"ports": [{"port": 80}, {"port": 443}]})),
            &[
                "FieldValueRequired spec.ports[0].name: Required value",
                "FieldValueRequired spec.ports[1].name: Required value",
            ],
        ),
        create(
            "two ports of one name",
            SERVICES,
            service(json!({"ports": [{"name": "web", "port": 80}, {"name": "web", "port": 443}]})),
            &["FieldValueDuplicate spec.ports[1].name: Duplicate value: \"web\""],
        ),
        create(
            "a port protocol kube does not know",
            SERVICES,
            port(json!({"port": 80, "protocol": "ICMP"})),
            &[
                "FieldValueNotSupported spec.ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ],
        ),
        create(
            "a Service type kube does not know",
            SERVICES,
            service(json!({"type": "Magic", "ports": [{"port": 80}]})),
            &[
                "FieldValueNotSupported spec.type: Unsupported value: \"Magic\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
            ],
        ),
        create(
            "a clusterIP that is no address",
            SERVICES,
            service(json!({"clusterIP": "300.1.1.1", "ports": [{"port": 80}]})),
            &[
                "FieldValueInvalid spec.clusterIPs[0]: Invalid value: \"300.1.1.1\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ],
        ),
        create(
            "an IP family kube does not know",
            SERVICES,
            service(json!({"ipFamilies": ["IPv5"], "ports": [{"port": 80}]})),
            &[
                "FieldValueNotSupported spec.ipFamilies[0]: Unsupported value: \"IPv5\": supported values: \"IPv4\", \"IPv6\"",
            ],
        ),
        create(
            "an ExternalName Service without a name",
            SERVICES,
            service(json!({"type": "ExternalName"})),
            &["FieldValueRequired spec.externalName: Required value"],
        ),
        create(
            "a nodePort on a ClusterIP Service",
            SERVICES,
            port(json!({"port": 80, "nodePort": 30080})),
            &[
                "FieldValueForbidden spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
            ],
        ),
        create(
            "a sessionAffinity kube does not know",
            SERVICES,
            service(json!({"sessionAffinity": "Sticky", "ports": [{"port": 80}]})),
            &[
                "FieldValueNotSupported spec.sessionAffinity: Unsupported value: \"Sticky\": supported values: \"ClientIP\", \"None\"",
            ],
        ),
        update(
            "a Service's clusterIP changed",
            SERVICES,
            port(json!({"port": 80})),
            json!({"spec": {"clusterIP": "10.96.0.77", "clusterIPs": ["10.96.0.77"]}}),
            &[
                "FieldValueInvalid spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.77\"}: may not change once set",
            ],
        ),
        update(
            "a Service's ports changed",
            SERVICES,
            port(json!({"port": 80})),
            json!({"spec": {"ports": [{"port": 8080}]}}),
            &[],
        ),
        create("a valid PVC", PVCS, pvc(claim_spec()), &[]),
        create(
            "a PVC without access modes",
            PVCS,
            pvc(json!({"resources": {"requests": {"storage": "1Gi"}}})),
            &[
                "FieldValueRequired spec.accessModes: Required value: at least 1 access mode is required",
            ],
        ),
        create(
            "an access mode kube does not know",
            PVCS,
            pvc(
                json!({"accessModes": ["ReadMostly"], "resources": {"requests": {"storage": "1Gi"}}}),
            ),
            &[
                "FieldValueNotSupported spec.accessModes: Unsupported value: \"ReadMostly\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
            ],
        ),
        create(
            "a PVC without a storage request",
            PVCS,
            pvc(json!({"accessModes": ["ReadWriteOnce"]})),
            &["FieldValueRequired spec.resources[storage]: Required value"],
        ),
        update(
            "a PVC's storage class set where there was none (kube's retroactive default class)",
            PVCS,
            pvc(claim_spec()),
            json!({"spec": {"storageClassName": "fast"}}),
            &[],
        ),
        update(
            "a PVC's storage class changed",
            PVCS,
            pvc(
                json!({"storageClassName": "standard", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}),
            ),
            json!({"spec": {"storageClassName": "fast"}}),
            &[PVC_IMMUTABLE],
        ),
        update(
            "an unbound PVC's request changed",
            PVCS,
            pvc(claim_spec()),
            json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
            &[PVC_IMMUTABLE],
        ),
    ]
}

fn networking() -> Vec<Case> {
    vec![
        create(
            "a valid Ingress",
            INGRESSES,
            ingress(ingress_path(
                json!({"path": "/", "pathType": "Prefix", "backend": backend()}),
            )),
            &[],
        ),
        create(
            "an Ingress of nothing",
            INGRESSES,
            ingress(json!({})),
            &[
                "FieldValueInvalid spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified",
            ],
        ),
        create(
            "a path without a pathType",
            INGRESSES,
            ingress(ingress_path(json!({"path": "/", "backend": backend()}))),
            &[
                "FieldValueRequired spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
            ],
        ),
        create(
            "a Prefix path that is not absolute",
            INGRESSES,
            ingress(ingress_path(
                json!({"path": "api", "pathType": "Prefix", "backend": backend()}),
            )),
            &[
                "FieldValueInvalid spec.rules[0].http.paths[0].path: Invalid value: \"api\": must be an absolute path",
            ],
        ),
        create(
            "a host that is no DNS name",
            INGRESSES,
            ingress(
                json!({"rules": [{"host": "Bad_Host", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend()}]}}]}),
            ),
            &[
                "FieldValueInvalid spec.rules[0].host: Invalid value: \"Bad_Host\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ],
        ),
        create(
            "a backend of neither a Service nor a resource",
            INGRESSES,
            ingress(ingress_path(
                json!({"path": "/", "pathType": "Prefix", "backend": {}}),
            )),
            &[
                "FieldValueInvalid spec.rules[0].http.paths[0].backend: Invalid value: \"\": resource or service backend is required",
            ],
        ),
        create(
            "a valid NetworkPolicy",
            NETWORKPOLICIES,
            network_policy(json!({"podSelector": {}})),
            &[],
        ),
        create(
            "a policy type kube does not know",
            NETWORKPOLICIES,
            network_policy(json!({"podSelector": {}, "policyTypes": ["Sideways"]})),
            &[
                "FieldValueNotSupported spec.policyTypes[0]: Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\"",
            ],
        ),
        create(
            "a CIDR that does not parse",
            NETWORKPOLICIES,
            network_policy(
                json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}),
            ),
            &[
                "FieldValueInvalid spec.ingress[0].from[0].ipBlock.cidr: Invalid value: \"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            ],
        ),
        create(
            "a selector operator kube does not know",
            NETWORKPOLICIES,
            network_policy(
                json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["a"]}]}}),
            ),
            &[
                "FieldValueInvalid spec.podSelector.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator",
            ],
        ),
        create(
            "a NetworkPolicy port protocol kube does not know",
            NETWORKPOLICIES,
            network_policy(
                json!({"podSelector": {}, "ingress": [{"ports": [{"protocol": "ICMP", "port": 80}]}]}),
            ),
            &[
                "FieldValueNotSupported spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"TCP\", \"UDP\", \"SCTP\"",
            ],
        ),
    ]
}

fn config() -> Vec<Case> {
    let big = "x".repeat(1024 * 1024);
    vec![
        create(
            "a valid ConfigMap",
            CONFIGMAPS,
            configmap(json!({"data": {"a.conf": "x"}})),
            &[],
        ),
        create(
            "a key that is no config key",
            CONFIGMAPS,
            configmap(json!({"data": {"a b": "x"}})),
            &[CONFIG_KEY_A_B],
        ),
        create(
            "one key in data and binaryData",
            CONFIGMAPS,
            configmap(json!({"data": {"k": "x"}, "binaryData": {"k": "eA=="}})),
            &[
                "FieldValueInvalid data[k]: Invalid value: \"k\": duplicate of key present in binaryData",
            ],
        ),
        create(
            "a ConfigMap of more than 1 MiB",
            CONFIGMAPS,
            configmap(json!({"data": {"a": big, "b": "x"}})),
            &["FieldValueTooLong []: Too long: may not be more than 1048576 bytes"],
        ),
        update(
            "an immutable ConfigMap's data changed",
            CONFIGMAPS,
            configmap(json!({"data": {"a": "x"}, "immutable": true})),
            json!({"data": {"a": "y"}}),
            &["FieldValueForbidden data: Forbidden: field is immutable when `immutable` is set"],
        ),
        update(
            "an immutable ConfigMap made mutable",
            CONFIGMAPS,
            configmap(json!({"data": {"a": "x"}, "immutable": true})),
            json!({"immutable": false}),
            &[
                "FieldValueForbidden immutable: Forbidden: field is immutable when `immutable` is set",
            ],
        ),
        create(
            "a valid Secret",
            SECRETS,
            secret(json!({"stringData": {"password": "x"}})),
            &[],
        ),
        create(
            "a Secret key that is no config key",
            SECRETS,
            secret(json!({"data": {"a/b": "eA=="}})),
            &[
                "FieldValueInvalid data[a/b]: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            ],
        ),
        create(
            "a TLS Secret without its key",
            SECRETS,
            secret(json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}})),
            &["FieldValueRequired data[tls.key]: Required value"],
        ),
        create(
            "a docker config Secret that is not JSON",
            SECRETS,
            secret(
                json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "eA=="}}),
            ),
            &[
                "FieldValueInvalid data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": …",
            ],
        ),
        update(
            "a Secret's type changed",
            SECRETS,
            secret(json!({"stringData": {"a": "x"}})),
            json!({"type": "example.com/other"}),
            &["FieldValueInvalid type: Invalid value: \"example.com/other\": field is immutable"],
        ),
        create(
            "a ServiceAccount with a secret of no name",
            SERVICEACCOUNTS,
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "secrets": [{"namespace": "x"}]}),
            &[],
        ),
    ]
}

fn access() -> Vec<Case> {
    vec![
        create(
            "a valid Role",
            ROLES,
            rbac(
                "Role",
                json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
            ),
            &[],
        ),
        create(
            "a rule without verbs",
            ROLES,
            rbac(
                "Role",
                json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": []}]}),
            ),
            &[
                "FieldValueRequired rules[0].verbs: Required value: verbs must contain at least one value",
            ],
        ),
        create(
            "a resource rule without API groups",
            ROLES,
            rbac(
                "Role",
                json!({"rules": [{"resources": ["pods"], "verbs": ["get"]}]}),
            ),
            &[
                "FieldValueRequired rules[0].apiGroups: Required value: resource rules must supply at least one api group",
            ],
        ),
        create(
            "a Role's rule of non-resource URLs",
            ROLES,
            rbac(
                "Role",
                json!({"rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}),
            ),
            &[
                "FieldValueInvalid rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs",
            ],
        ),
        create(
            "a ClusterRole rule of resources and non-resource URLs",
            CLUSTERROLES,
            rbac(
                "ClusterRole",
                json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}),
            ),
            &[
                "FieldValueInvalid rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: rules cannot apply to both regular resources and non-resource URLs",
            ],
        ),
        create(
            "a valid RoleBinding",
            ROLEBINDINGS,
            binding(
                "RoleBinding",
                view(),
                json!([{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]),
            ),
            &[],
        ),
        create(
            "a roleRef of a kind kube does not know",
            ROLEBINDINGS,
            binding(
                "RoleBinding",
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Policy", "name": "view"}),
                json!([]),
            ),
            &[
                "FieldValueNotSupported roleRef.kind: Unsupported value: \"Policy\": supported values: \"Role\", \"ClusterRole\"",
            ],
        ),
        create(
            "a roleRef without a name",
            ROLEBINDINGS,
            binding(
                "RoleBinding",
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ""}),
                json!([]),
            ),
            &["FieldValueRequired roleRef.name: Required value"],
        ),
        create(
            "a subject of a kind kube does not know",
            ROLEBINDINGS,
            binding(
                "RoleBinding",
                view(),
                json!([{"kind": "Robot", "name": "r2"}]),
            ),
            &[
                "FieldValueNotSupported subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
            ],
        ),
        create(
            "a User subject without a group (defaulted to rbac's)",
            ROLEBINDINGS,
            binding(
                "RoleBinding",
                view(),
                json!([{"kind": "User", "name": "alice"}]),
            ),
            &[],
        ),
        create(
            "a User subject outside rbac's group",
            ROLEBINDINGS,
            binding(
                "RoleBinding",
                view(),
                json!([{"kind": "User", "name": "alice", "apiGroup": "example.com"}]),
            ),
            &[
                "FieldValueNotSupported subjects[0].apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\"",
            ],
        ),
        create(
            "a cluster binding of a ServiceAccount without a namespace",
            CLUSTERROLEBINDINGS,
            binding(
                "ClusterRoleBinding",
                view(),
                json!([{"kind": "ServiceAccount", "name": "default"}]),
            ),
            &["FieldValueRequired subjects[0].namespace: Required value"],
        ),
        update(
            "a RoleBinding's roleRef changed",
            ROLEBINDINGS,
            binding("RoleBinding", view(), json!([])),
            json!({"roleRef": {"name": "edit"}}),
            &[
                "FieldValueInvalid roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef",
            ],
        ),
        create(
            "a valid Lease",
            LEASES,
            lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 15})),
            &[],
        ),
        create(
            "a Lease of no duration",
            LEASES,
            lease(json!({"leaseDurationSeconds": 0})),
            &[
                "FieldValueInvalid spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
            ],
        ),
        create(
            "negative leaseTransitions",
            LEASES,
            lease(json!({"leaseTransitions": -1})),
            &[
                "FieldValueInvalid spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
            ],
        ),
    ]
}

/// Sends `body` with `method` to `path`: the status and the body.
async fn send(client: &kube::Client, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let (status, _, body) = common::http::send(client, method, path, body).await;
    (status, body)
}

/// Runs one row: `None` when the server answered as expected, else what differs.
async fn run(client: &kube::Client, ns: &str, i: usize, case: Case) -> (String, Option<String>) {
    let path = case.path.replace("{ns}", ns);
    let name = format!("v{i}");
    let named = |mut o: Value| {
        o["metadata"]["name"] = json!(name);
        o
    };
    let (status, body) = match case.base {
        None => send(client, "POST", &path, &named(case.object)).await,
        Some(base) => {
            let (status, mut stored) = send(client, "POST", &path, &named(base)).await;
            assert_eq!(status, 201, "{}: the base was refused: {stored}", case.what);
            match &case.object {
                Value::Array(sets) => {
                    for set in sets {
                        *stored.pointer_mut(set[0].as_str().unwrap()).unwrap() = set[1].clone();
                    }
                }
                change => json_patch::merge(&mut stored, change),
            }
            send(client, "PUT", &format!("{path}/{name}"), &stored).await
        }
    };
    let got: Vec<String> = if status == 422 {
        causes_of(&body)
    } else if status < 300 {
        Vec::new()
    } else {
        vec![format!("HTTP {status}: {body}")]
    };
    let summary = format!("{}: {status} {got:#?}", case.what);
    let expected_ok = case.causes.is_empty();
    // A message ending in `…` is matched by its beginning (kube prints some values as Go
    // structures too long to restate); one without a message by reason and field.
    let matches = |want: &str| {
        got.iter().any(|g| match want.strip_suffix('…') {
            Some(prefix) => g.starts_with(prefix),
            None if want.contains(": ") => g == want,
            None => g.starts_with(&format!("{want}:")),
        })
    };
    let fine = if expected_ok {
        status < 300
    } else {
        status == 422 && got.len() == case.causes.len() && case.causes.iter().all(|w| matches(w))
    };
    (
        summary.clone(),
        (!fine).then(|| format!("{summary}\n  expected {:?}", case.causes)),
    )
}

/// The server the tables run against: the embedded one, or the one
/// `WASMCTRL_VALIDATION_KUBECONFIG` names (then `true`). The first value keeps it running.
async fn server() -> (Option<(tempfile::TempDir, Cluster)>, kube::Client, bool) {
    match std::env::var("WASMCTRL_VALIDATION_KUBECONFIG") {
        Ok(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path).unwrap();
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .unwrap();
            (None, kube::Client::try_from(config).unwrap(), true)
        }
        Err(_) => {
            let dir = tempfile::tempdir().unwrap();
            // As the real server it is compared with runs: without kube-controller-manager.
            let cluster = Cluster::in_memory_with(dir.path(), &["--controllers="]);
            let client = cluster.client().await;
            (Some((dir, cluster)), client, false)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_kube_refuses_is_refused_with_kubes_causes() {
    let (_server, client, external) = server().await;
    let ns = format!("validation-{}", std::process::id());
    let (status, body) = send(
        &client,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // Pods need their ServiceAccount (kube's admission looks it up; no controller makes it here).
    let account =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    let (status, body) = send(
        &client,
        "POST",
        &SERVICEACCOUNTS.replace("{ns}", &ns),
        &account,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let cases = [
        pods(),
        workloads(),
        services(),
        networking(),
        config(),
        access(),
    ]
    .into_iter()
    .flatten();
    let mut failures = Vec::new();
    for (i, case) in cases.enumerate() {
        let (summary, failure) = run(&client, &ns, i, case).await;
        if external {
            println!("{summary}");
        }
        failures.extend(failure);
    }
    // Cluster-scoped rows leave objects behind on a shared server.
    if external {
        for path in [CLUSTERROLES, CLUSTERROLEBINDINGS] {
            let _ = send(
                &client,
                "DELETE",
                &format!("{path}?labelSelector="),
                &json!({}),
            )
            .await;
        }
    }
    assert!(
        failures.is_empty(),
        "{} rows differ from kube:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Built-in objects read back as kube-apiserver 1.32 returns them (each value read off it):
/// quantities in canonical form (numbers as strings, resource lists rounded up to a
/// thousandth), the fields Go's JSON always writes (`status: {}`, a template's
/// `creationTimestamp: null`, `rules: null`), and what kube's strategies and default admission
/// plugins set on create (a Pod's QoS class, priority, default tolerations and resize policy;
/// claims and volumes Pending; a Job's labels from its Pods').
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_objects_read_back_as_kube_returns_them() {
    let (_server, client, _) = server().await;
    let ns = format!("readback-{}", std::process::id());
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    let (status, body) = send(&client, "POST", "/api/v1/namespaces", &namespace).await;
    assert_eq!(status, 201, "{body}");
    let account =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    let path = SERVICEACCOUNTS.replace("{ns}", &ns);
    assert_eq!(send(&client, "POST", &path, &account).await.0, 201);
    let mut limited = container();
    limited["resources"] = json!({"limits": {"cpu": 1, "memory": "1Gi"}});
    // Where to create, what, and the values kube reads back at JSON pointers.
    type ReadBack = (&'static str, Value, Vec<(&'static str, Value)>);
    let cases: Vec<ReadBack> = vec![
        (
            RESOURCEQUOTAS,
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                "spec": {"hard": {"requests.cpu": "1.0000000001", "limits.cpu": 2.5,
                    "requests.memory": "1.5Gi", "limits.memory": "1000",
                    "requests.storage": "2048Ki", "pods": "10"}}}),
            vec![(
                "/spec/hard",
                json!({"requests.cpu": "1001m", "limits.cpu": "2500m",
                    "requests.memory": "1536Mi", "limits.memory": "1k",
                    "requests.storage": "2Mi", "pods": "10"}),
            )],
        ),
        (
            PODS,
            pod(pod_spec(json!([limited]), json!({}))),
            vec![
                (
                    "/spec/containers/0/resources",
                    json!({"limits": {"cpu": "1", "memory": "1Gi"},
                        "requests": {"cpu": "1", "memory": "1Gi"}}),
                ),
                (
                    "/spec/containers/0/resizePolicy",
                    json!([{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                        {"resourceName": "memory", "restartPolicy": "NotRequired"}]),
                ),
                ("/status/qosClass", json!("Guaranteed")),
                ("/status/phase", json!("Pending")),
                ("/spec/priority", json!(0)),
                ("/spec/preemptionPolicy", json!("PreemptLowerPriority")),
                (
                    "/spec/tolerations",
                    json!([
                        {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                            "effect": "NoExecute", "tolerationSeconds": 300},
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                            "effect": "NoExecute", "tolerationSeconds": 300}]),
                ),
            ],
        ),
        (
            PODS,
            pod(pod_spec(
                json!([container()]),
                json!({"priorityClassName": "system-cluster-critical",
                    "tolerations": [{"operator": "Exists"}]}),
            )),
            vec![
                ("/status/qosClass", json!("BestEffort")),
                ("/spec/priority", json!(2_000_000_000)),
                ("/spec/tolerations", json!([{"operator": "Exists"}])),
            ],
        ),
        (
            DEPLOYMENTS,
            workload("Deployment", json!({})),
            vec![
                ("/status", json!({})),
                ("/spec/template/metadata/creationTimestamp", Value::Null),
            ],
        ),
        (
            SERVICES,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
            vec![("/status", json!({"loadBalancer": {}}))],
        ),
        (
            ROLES,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {}}),
            vec![("/rules", Value::Null)],
        ),
        (
            PVCS,
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {},
                "spec": {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}}),
            vec![("/status", json!({"phase": "Pending"}))],
        ),
        (
            JOBS,
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {},
                "spec": {"template": {"spec": {"restartPolicy": "Never",
                    "containers": [container()]}}}}),
            vec![("/spec/manualSelector", json!(false))],
        ),
        (
            PDBS,
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
            vec![(
                "/status",
                json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                    "expectedPods": 0}),
            )],
        ),
    ];
    let mut failures = Vec::new();
    for (i, (path, mut object, expected)) in cases.into_iter().enumerate() {
        let path = path.replace("{ns}", &ns);
        let name = format!("r{i}");
        object["metadata"]["name"] = json!(name);
        let (status, body) = send(&client, "POST", &path, &object).await;
        assert_eq!(status, 201, "{path}: {body}");
        let (status, read) = send(&client, "GET", &format!("{path}/{name}"), &json!(null)).await;
        assert_eq!(status, 200, "{path}/{name}: {read}");
        for (pointer, want) in expected {
            let got = read.pointer(pointer).cloned();
            if got.as_ref() != Some(&want) {
                failures.push(format!("{path}/{name} {pointer}: {got:?}, kube: {want}"));
            }
        }
        if path.ends_with("/jobs") {
            let labels = &read["metadata"]["labels"];
            if labels["job-name"] != json!(name) {
                failures.push(format!("a Job's labels are its Pods': {labels}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A certificate request for `CN=alice` (P-256), as `openssl req -new` writes one.
const CSR_PEM: &str = "-----BEGIN CERTIFICATE REQUEST-----
MIHKMHICAQAwEDEOMAwGA1UEAwwFYWxpY2UwWTATBgcqhkjOPQIBBggqhkjOPQMB
BwNCAASAWQ4NbFulhHyCR3Z2YA3m1FWU7R8sBWN0+NqMoyHwBc5ETr0xfZssYhNg
TevZ3nyVEa/mOlipA3DDCX4b2O5ZoAAwCgYIKoZIzj0EAwIDSAAwRQIhANI01Z7b
rARIkkUNM5wIXnnkCdvpj3w3wW+cutWmOhJlAiAgeapnkMpDCP+VJW4f7W7kpa53
PhHUIZX6YP/Ri6fw0A==
-----END CERTIFICATE REQUEST-----
";

/// Writes `object` (read, then changed by `change`) back through `path`: the status, the
/// answer and the causes of a refusal.
async fn put_changed(
    client: &kube::Client,
    path: &str,
    object: &Value,
    change: impl FnOnce(&mut Value),
) -> (u16, Value, Vec<String>) {
    let mut object = object.clone();
    change(&mut object);
    let (status, body) = send(client, "PUT", path, &object).await;
    (status, body.clone(), causes_of(&body))
}

/// The subresources that write one part of an object do as kube-apiserver 1.32 does (each
/// answer read off it): `pods/{name}/ephemeralcontainers` adds ephemeral containers (defaulted;
/// only their own fields; never changing or removing one) and nothing else of the Pod;
/// `certificatesigningrequests/{name}/approval` sets the conditions only (kube's rules for
/// Approved and Denied), stamping their times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_containers_and_approvals_write_only_their_part() {
    let (_server, client, _) = server().await;
    let ns = format!("parts-{}", std::process::id());
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    assert_eq!(
        send(&client, "POST", "/api/v1/namespaces", &namespace)
            .await
            .0,
        201
    );
    let account =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    let accounts = SERVICEACCOUNTS.replace("{ns}", &ns);
    assert_eq!(send(&client, "POST", &accounts, &account).await.0, 201);
    let pods = PODS.replace("{ns}", &ns);
    let mut p = pod(pod_spec(json!([container()]), json!({})));
    p["metadata"]["name"] = json!("p");
    assert_eq!(send(&client, "POST", &pods, &p).await.0, 201);
    let sub = format!("{pods}/p/ephemeralcontainers");
    let (_, stored) = send(&client, "GET", &sub, &json!(null)).await;

    let debugger = json!({"name": "dbg", "image": "busybox", "stdin": true});
    let (status, pod, _) = put_changed(&client, &sub, &stored, |p| {
        p["spec"]["ephemeralContainers"] = json!([debugger]);
        p["metadata"]["labels"] = json!({"changed": "yes"});
        p["spec"]["containers"][0]["image"] = json!("nginx");
    })
    .await;
    assert_eq!(status, 200, "{pod}");
    assert_eq!(
        pod["spec"]["ephemeralContainers"],
        json!([{"name": "dbg", "image": "busybox", "stdin": true, "resources": {},
            "imagePullPolicy": "Always", "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File"}])
    );
    assert!(pod["metadata"]["labels"].is_null(), "{}", pod["metadata"]);
    assert_eq!(pod["spec"]["containers"][0]["image"], "busybox");

    let refusals: Vec<(Value, Vec<&str>)> = vec![
        (
            json!([pod["spec"]["ephemeralContainers"][0], {"name": "x", "image": "busybox",
                "ports": [{"containerPort": 80}], "resources": {"limits": {"cpu": "1"}},
                "readinessProbe": {"exec": {"command": ["true"]}}}]),
            vec![
                "FieldValueForbidden spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container",
                "FieldValueForbidden spec.ephemeralContainers[1].resources: Forbidden: cannot be set for an Ephemeral Container",
                "FieldValueForbidden spec.ephemeralContainers[1].readinessProbe: Forbidden: cannot be set for an Ephemeral Container",
            ],
        ),
        (
            json!([pod["spec"]["ephemeralContainers"][0], {"name": "app", "image": "busybox"}]),
            vec!["FieldValueDuplicate spec.ephemeralContainers[1].name: Duplicate value: \"app\""],
        ),
        (
            json!([pod["spec"]["ephemeralContainers"][0], {"name": "noimage"}]),
            vec!["FieldValueRequired spec.ephemeralContainers[1].image: Required value"],
        ),
        (
            json!([]),
            vec![
                "FieldValueForbidden spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be removed\n",
            ],
        ),
    ];
    for (containers, want) in refusals {
        let (status, body, causes) = put_changed(&client, &sub, &pod, |p| {
            p["spec"]["ephemeralContainers"] = containers
        })
        .await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(causes, want);
    }
    let (status, body, causes) = put_changed(&client, &sub, &pod, |p| {
        p["spec"]["ephemeralContainers"][0]["image"] = json!("alpine");
    })
    .await;
    assert_eq!(status, 422, "{body}");
    let changed = "FieldValueForbidden spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be changed\n";
    assert!(
        causes.len() == 1 && causes[0].starts_with(changed),
        "{causes:?}"
    );

    let request = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, CSR_PEM);
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let name = format!("alice-{}", std::process::id());
    let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name}, "spec": {"request": request,
            "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}});
    let (status, csr) = send(&client, "POST", csrs, &csr).await;
    assert_eq!(status, 201, "{csr}");
    let approval = format!("{csrs}/{name}/approval");
    let condition =
        |kind: &str, status: &str| json!({"type": kind, "status": status, "reason": "Test"});
    let (status, approved, _) = put_changed(&client, &approval, &csr, |c| {
        c["status"] = json!({"conditions": [condition("Approved", "True")]});
        c["spec"]["usages"] = json!(["server auth"]);
    })
    .await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["spec"]["usages"], json!(["client auth"]));
    let stamped = &approved["status"]["conditions"][0];
    assert!(stamped["lastTransitionTime"].is_string() && stamped["lastUpdateTime"].is_string());
    let refusals: Vec<(Value, Vec<&str>)> = vec![
        (
            json!([condition("Approved", "False"), condition("Denied", "True")]),
            vec![
                "FieldValueNotSupported status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\"",
                "FieldValueInvalid status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive",
            ],
        ),
        (
            json!([]),
            vec![
                "FieldValueForbidden status.conditions: Forbidden: updates may not remove a condition of type \"Approved\"",
            ],
        ),
        (
            json!([
                condition("Approved", "True"),
                condition("Approved", "True"),
                condition("", "True")
            ]),
            vec![
                "FieldValueDuplicate status.conditions[1].type: Duplicate value: \"Approved\"",
                "FieldValueRequired status.conditions[2].type: Required value",
            ],
        ),
    ];
    for (conditions, want) in refusals {
        let (status, body, causes) = put_changed(&client, &approval, &approved, |c| {
            c["status"]["conditions"] = conditions;
        })
        .await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(causes, want);
    }
    let _ = send(&client, "DELETE", &format!("{csrs}/{name}"), &json!({})).await;
}

/// A CRD exercising what kube enforces of custom resources beyond types and bounds: `default`s
/// (nested, and inside defaulted values), string `format`s, `set` and `map` lists.
fn gadgets_crd(name: &str, group: &str) -> Value {
    let ports = json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "port": {"type": "integer", "default": 80}}}});
    let limits = json!({"type": "object", "default": {"cpu": "1"}, "properties": {
        "cpu": {"type": "string"}, "memory": {"type": "string", "default": "1Gi"}}});
    let mut spec = json!({
        "replicas": {"type": "integer", "default": 1},
        "mode": {"type": "string", "default": "auto"},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
    });
    for (field, format) in [
        ("id", "uuid"),
        ("contact", "email"),
        ("host", "hostname"),
        ("addr", "ipv4"),
        ("net", "cidr"),
        ("since", "date-time"),
        ("day", "date"),
    ] {
        spec[field] = json!({"type": "string", "format": format});
    }
    spec["ports"] = ports;
    spec["limits"] = limits;
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "default": {}, "properties": spec}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{name}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"kind": "Gadget", "plural": name, "singular": "gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}})
}

/// Custom resources are defaulted and validated as kube-apiserver 1.32 does (each row read off
/// it): defaults on create, nested and inside defaulted values, and on read for objects stored
/// before a default existed; formats; duplicates in `set` and `map` lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_are_defaulted_and_checked_as_kube_does() {
    let (_server, client, _) = server().await;
    // A group of its own per run, so a shared server keeps no state between runs.
    let group = format!("r{}.example.com", std::process::id());
    let plural = "gadgets";
    let (status, body) = send(
        &client,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &gadgets_crd(plural, &group),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let path = format!("/apis/{group}/v1/namespaces/default/{plural}");
    let gadget = |name: &str, spec: Option<Value>| {
        let mut g = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget", "metadata": {"name": name}});
        if let Some(spec) = spec {
            g["spec"] = spec;
        }
        g
    };
    // A CRD is served once established (at once here, within seconds on kube).
    common::process::wait_for(30, "the CRD to be served", || {
        futures::executor::block_on(send(&client, "GET", &path, &Value::Null)).0 == 200
    });
    let uuid_ok = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
    // What a create sends as its spec, and the spec stored or the causes of its refusal.
    type Row<'a> = (&'a str, Option<Value>, Result<Value, Vec<&'a str>>);
    let rows: Vec<Row<'_>> = vec![
        (
            "no spec: every default",
            None,
            Ok(json!({"limits": {"cpu": "1", "memory": "1Gi"}, "mode": "auto", "replicas": 1})),
        ),
        (
            "defaults inside what was sent",
            Some(json!({"limits": {}, "ports": [{"name": "http"}]})),
            Ok(
                json!({"limits": {"memory": "1Gi"}, "mode": "auto", "ports": [{"name": "http", "port": 80}], "replicas": 1}),
            ),
        ),
        (
            "values of their formats",
            Some(
                json!({"id": uuid_ok, "contact": "a@b.c", "host": "example.com", "addr": "1.2.3.4",
                "net": "10.0.0.0/8", "since": "2026-01-01T00:00:00Z", "day": "2026-01-01"}),
            ),
            Ok(
                json!({"id": uuid_ok, "contact": "a@b.c", "host": "example.com", "addr": "1.2.3.4", "net": "10.0.0.0/8",
                "since": "2026-01-01T00:00:00Z", "day": "2026-01-01", "limits": {"cpu": "1", "memory": "1Gi"}, "mode": "auto", "replicas": 1}),
            ),
        ),
        (
            "values not of their formats",
            Some(
                json!({"id": "x", "contact": "y", "host": "a.b", "addr": "1.2.3", "net": "1.2.3.4",
                "since": "yesterday", "day": "2026-13-01"}),
            ),
            Err(vec![
                "FieldValueTypeInvalid spec.id: Invalid value: \"x\": spec.id in body must be of type uuid: \"x\"",
                "FieldValueTypeInvalid spec.contact: Invalid value: \"y\": spec.contact in body must be of type email: \"y\"",
                "FieldValueTypeInvalid spec.host: Invalid value: \"a.b\": spec.host in body must be of type hostname: \"a.b\"",
                "FieldValueTypeInvalid spec.addr: Invalid value: \"1.2.3\": spec.addr in body must be of type ipv4: \"1.2.3\"",
                "FieldValueTypeInvalid spec.net: Invalid value: \"1.2.3.4\": spec.net in body must be of type cidr: \"1.2.3.4\"",
                "FieldValueTypeInvalid spec.since: Invalid value: \"yesterday\": spec.since in body must be of type date-time: \"yesterday\"",
                "FieldValueTypeInvalid spec.day: Invalid value: \"2026-13-01\": spec.day in body must be of type date: \"2026-13-01\"",
            ]),
        ),
        (
            "a set and a map holding an item twice",
            Some(
                json!({"tags": ["a", "b", "a"], "ports": [{"name": "x", "port": 1}, {"name": "x", "port": 2}]}),
            ),
            Err(vec![
                "FieldValueDuplicate spec.tags[2]: Duplicate value: \"a\"",
                "FieldValueDuplicate spec.ports[1]: Duplicate value: map[string]interface {}{\"name\":\"x\"}",
            ]),
        ),
    ];
    let mut failures = Vec::new();
    for (i, (what, spec, expected)) in rows.into_iter().enumerate() {
        let (status, body) = send(
            &client,
            "POST",
            &format!("{path}?dryRun=All"),
            &gadget(&format!("g{i}"), spec),
        )
        .await;
        let got: Result<Value, Vec<String>> = if status == 201 {
            Ok(body["spec"].clone())
        } else {
            Err(causes_of(&body))
        };
        let same = match (&got, &expected) {
            (Ok(a), Ok(b)) => a == b,
            (Err(a), Err(b)) => a.len() == b.len() && b.iter().all(|c| a.iter().any(|g| g == c)),
            _ => false,
        };
        if !same {
            failures.push(format!(
                "{what}: {status} {got:#?}\n  expected {expected:#?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Read back with a default added after it was stored: the default, the same version.
    let (status, stored) = send(
        &client,
        "POST",
        &path,
        &gadget("stored", Some(json!({"mode": "manual"}))),
    )
    .await;
    assert_eq!(status, 201, "{stored}");
    let crd_path =
        format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{group}");
    let (_, mut crd) = send(&client, "GET", &crd_path, &Value::Null).await;
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["zone"] =
        json!({"type": "string", "default": "eu-west"});
    let (status, body) = send(&client, "PUT", &crd_path, &crd).await;
    assert_eq!(status, 200, "{body}");
    let read = format!("{path}/stored");
    common::process::wait_for(30, "the new default to be read", || {
        futures::executor::block_on(send(&client, "GET", &read, &Value::Null)).1["spec"]["zone"]
            == "eu-west"
    });
    let (_, again) = send(&client, "GET", &read, &Value::Null).await;
    assert_eq!(
        again["metadata"]["resourceVersion"],
        stored["metadata"]["resourceVersion"]
    );
    assert_eq!(again["spec"]["mode"], "manual");
    let (status, _) = send(&client, "DELETE", &crd_path, &Value::Null).await;
    assert_eq!(status, 200);
}

/// A CRD whose rules kube 1.32 accepts (its cost estimate needs lists and strings bounded).
fn scalers_crd(group: &str) -> Value {
    let spec_rules = json!([
        {"rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not exceed maxReplicas"},
        {"rule": "!has(self.name) || size(self.name) > 2"},
        {"rule": "self.maxReplicas < 100", "message": "maxReplicas is too many", "reason": "FieldValueForbidden", "fieldPath": ".maxReplicas"},
    ]);
    let properties = json!({
        "minReplicas": {"type": "integer"}, "maxReplicas": {"type": "integer"},
        "name": {"type": "string", "maxLength": 20},
        "mode": {"type": "string", "maxLength": 20, "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "mode is immutable"}]},
        "tags": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 20},
            "x-kubernetes-validations": [{"rule": "self.all(t, t.startsWith('x-'))"}]},
    });
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": spec_rules, "properties": properties}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("scalers.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"kind": "Scaler", "plural": "scalers", "singular": "scaler", "listKind": "ScalerList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}})
}

/// The causes of a 422, as `"<reason> <field>: <message>"`.
fn causes_of(body: &Value) -> Vec<String> {
    (body
        .pointer("/details/causes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten())
    .map(|c| {
        let at = |k: &str| c[k].as_str().unwrap_or_default().to_string();
        format!("{} {}: {}", at("reason"), at("field"), at("message"))
    })
    .collect()
}

/// CEL rules (`x-kubernetes-validations`) hold as on kube-apiserver 1.32 (each answer read off
/// it): a failed rule named by its message or as `failed rule: <rule>`, at its node or its
/// `fieldPath`, with its `reason`; a transition rule (`oldSelf`) on updates only; a rule that
/// cannot be evaluated reported with the evaluation's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_rules_of_custom_resources_hold_as_on_kube() {
    let (_server, client, _) = server().await;
    let group = format!("c{}.example.com", std::process::id());
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, body) = send(&client, "POST", crds, &scalers_crd(&group)).await;
    assert_eq!(status, 201, "{body}");
    let path = format!("/apis/{group}/v1/namespaces/default/scalers");
    common::process::wait_for(30, "the CRD to be served", || {
        futures::executor::block_on(send(&client, "GET", &path, &Value::Null)).0 == 200
    });
    let scaler = |name: &str, spec: Value| json!({"apiVersion": format!("{group}/v1"), "kind": "Scaler", "metadata": {"name": name}, "spec": spec});
    let (status, body) = send(
        &client,
        "POST",
        &path,
        &scaler(
            "a",
            json!({"minReplicas": 5, "maxReplicas": 200, "name": "ab", "tags": ["x-a", "b"]}),
        ),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    let mut got = causes_of(&body);
    got.sort();
    assert_eq!(
        got,
        [
            "FieldValueForbidden spec.maxReplicas: Forbidden: maxReplicas is too many",
            "FieldValueInvalid spec.tags: Invalid value: \"array\": failed rule: self.all(t, t.startsWith('x-'))",
            "FieldValueInvalid spec: Invalid value: \"object\": failed rule: !has(self.name) || size(self.name) > 2",
        ]
    );
    let (status, body) = send(
        &client,
        "POST",
        &path,
        &scaler("c", json!({"minReplicas": 1})),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        causes_of(&body),
        [
            "FieldValueInvalid spec: Invalid value: \"object\": no such key: maxReplicas evaluating rule: minReplicas must not exceed maxReplicas",
            "FieldValueInvalid spec: Invalid value: \"object\": no such key: maxReplicas evaluating rule: maxReplicas is too many",
        ]
    );
    let (status, created) = send(
        &client,
        "POST",
        &path,
        &scaler(
            "b",
            json!({"minReplicas": 1, "maxReplicas": 2, "mode": "fast"}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let item = format!("{path}/b");
    let mut changed = created.clone();
    changed["spec"]["mode"] = json!("slow");
    let (status, body) = send(&client, "PUT", &item, &changed).await;
    assert_eq!(
        (status, causes_of(&body)),
        (
            422,
            vec![
                "FieldValueInvalid spec.mode: Invalid value: \"string\": mode is immutable"
                    .to_string()
            ]
        )
    );
    let mut changed = created.clone();
    changed["spec"]["maxReplicas"] = json!(3);
    let (status, body) = send(&client, "PUT", &item, &changed).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = send(
        &client,
        "DELETE",
        &format!("{crds}/scalers.{group}"),
        &Value::Null,
    )
    .await;
    assert_eq!(status, 200);
}

/// A CRD whose rules call kube's CEL libraries and set `messageExpression`s.
fn probes_crd(group: &str) -> Value {
    let string = |max: u64, rule: &str, message: &str| {
        json!({"type": "string", "maxLength": max,
            "x-kubernetes-validations": [{"rule": rule, "message": message}]})
    };
    let spec = json!({
        "name": string(63, "self.matches('^[a-z]+$')", "name must be lower-case letters"),
        "host": string(100, "self.lowerAscii() == self", "host must be lower-case"),
        "version": string(20, "self.find('[0-9]+') != ''", "version needs a number"),
        "link": string(200, "isURL(self)", "link must be a URL"),
        "size": string(20, "isQuantity(self)", "size must be a quantity"),
        "address": string(50, "isIP(self)", "address must be an IP"),
        "tags": {"type": "array", "maxItems": 10,
            "items": {"type": "string", "maxLength": 20},
            "x-kubernetes-validations": [{"rule": "self.isSorted()", "message": "tags must be sorted"}]},
        "weights": {"type": "array", "maxItems": 10, "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.sum() <= 100",
                "messageExpression": "size(self) > 1 ? 'the weights add up to more than 100' : 'the weight is more than 100'"}]},
        "limits": {"type": "array", "maxItems": 10, "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.max() < 10", "message": "limits too large",
                "messageExpression": "'first line\\nsecond line'"}]},
    });
    let schema =
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": spec}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("probes.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"kind": "Probe", "plural": "probes", "singular": "probe", "listKind": "ProbeList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}})
}

/// CEL rules calling kube's libraries (regular expressions, the strings extension, lists,
/// `isURL`, `isQuantity`, `isIP`) and `messageExpression`s hold as on kube-apiserver 1.32 (each
/// answer read off it): a message expression's one-line string is the message, one of two
/// lines falls back to `message`; one that does not compile refuses the CRD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_libraries_and_message_expressions_hold_as_on_kube() {
    let (_server, client, _) = server().await;
    let group = format!("l{}.example.com", std::process::id());
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let mut broken = probes_crd(&group);
    broken["metadata"]["name"] = json!(format!("broken.{group}"));
    broken["spec"]["names"] = json!({"kind": "Broken", "plural": "broken", "singular": "broken", "listKind": "BrokenList"});
    broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["weights"]["x-kubernetes-validations"][0]["messageExpression"] = json!("'a' +");
    let (status, body) = send(&client, "POST", crds, &broken).await;
    assert_eq!(status, 422, "{body}");
    let causes = causes_of(&body);
    // Kube's parse error follows, in cel-go's words.
    let at = "FieldValueInvalid spec.validation.openAPIV3Schema.properties[spec].properties[weights].x-kubernetes-validations[0].messageExpression: Invalid value: apiextensions.ValidationRule{Rule:\"self.sum() <= 100\", Message:\"\", MessageExpression:\"'a' +\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: messageExpression compilation failed: ";
    assert!(causes.len() == 1 && causes[0].starts_with(at), "{causes:?}");

    let (status, body) = send(&client, "POST", crds, &probes_crd(&group)).await;
    assert_eq!(status, 201, "{body}");
    let path = format!("/apis/{group}/v1/namespaces/default/probes");
    common::process::wait_for(30, "the CRD to be served", || {
        futures::executor::block_on(send(&client, "GET", &path, &Value::Null)).0 == 200
    });
    let probe = |name: &str, spec: Value| json!({"apiVersion": format!("{group}/v1"), "kind": "Probe", "metadata": {"name": name}, "spec": spec});
    let good = json!({"name": "web", "host": "example.com", "version": "v1.2", "link": "https://example.com/a",
        "size": "1Gi", "address": "10.0.0.1", "tags": ["a", "b"], "weights": [50, 50], "limits": [1, 9]});
    let (status, body) = send(&client, "POST", &path, &probe("good", good)).await;
    assert_eq!(status, 201, "{body}");
    let bad = json!({"name": "Web1", "host": "Example.com", "version": "vX", "link": "not a url",
        "size": "1 GB", "address": "10.0.0.300", "tags": ["b", "a"], "weights": [60, 50], "limits": [10]});
    let (status, body) = send(&client, "POST", &path, &probe("bad", bad)).await;
    assert_eq!(status, 422, "{body}");
    let mut got = causes_of(&body);
    got.sort();
    assert_eq!(
        got,
        [
            "FieldValueInvalid spec.address: Invalid value: \"string\": address must be an IP",
            "FieldValueInvalid spec.host: Invalid value: \"string\": host must be lower-case",
            "FieldValueInvalid spec.limits: Invalid value: \"array\": limits too large",
            "FieldValueInvalid spec.link: Invalid value: \"string\": link must be a URL",
            "FieldValueInvalid spec.name: Invalid value: \"string\": name must be lower-case letters",
            "FieldValueInvalid spec.size: Invalid value: \"string\": size must be a quantity",
            "FieldValueInvalid spec.tags: Invalid value: \"array\": tags must be sorted",
            "FieldValueInvalid spec.version: Invalid value: \"string\": version needs a number",
            "FieldValueInvalid spec.weights: Invalid value: \"array\": the weights add up to more than 100",
        ]
    );
    for crd in [format!("probes.{group}")] {
        let _ = send(&client, "DELETE", &format!("{crds}/{crd}"), &Value::Null).await;
    }
}
