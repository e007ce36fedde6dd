//! kube's defaulting of the workload kinds, Pods and Services (`SetDefaults_*` of
//! `pkg/apis/{core,apps,batch}/v1/defaults.go` and what their strategies fill in on create), so
//! that an object read back carries what it would on a cluster: a plugin comparing what it wrote
//! with what it reads sees the same fields here as there.
//!
//! Applied to every object a client writes, before validation, as kube defaults every decoded
//! request; a field the client set is never changed.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::json::str_at;
use super::quantity::Quantity;
use super::status::{ApiError, ApiResult};
use super::store::State;

/// Sets `v[key]` to `value` when absent (or null).
fn or(v: &mut Value, key: &str, value: Value) {
    if v.get(key).is_none_or(Value::is_null) {
        v[key] = value;
    }
}

/// Each object of the array at `v[key]`, if any.
fn each(v: &mut Value, key: &str, mut f: impl FnMut(&mut Value)) {
    if let Some(items) = v.get_mut(key).and_then(Value::as_array_mut) {
        items.iter_mut().filter(|i| i.is_object()).for_each(&mut f);
    }
}

/// A probe's defaults.
fn probe(p: &mut Value) {
    or(p, "timeoutSeconds", json!(1));
    or(p, "periodSeconds", json!(10));
    or(p, "successThreshold", json!(1));
    or(p, "failureThreshold", json!(3));
    if let Some(get) = p.get_mut("httpGet").filter(|g| g.is_object()) {
        or(get, "path", json!("/"));
        or(get, "scheme", json!("HTTP"));
    }
}

/// A container's defaults (`SetDefaults_Container`, ports, probes).
fn container(c: &mut Value) {
    or(c, "terminationMessagePath", json!("/dev/termination-log"));
    or(c, "terminationMessagePolicy", json!("File"));
    or(c, "resources", json!({}));
    if c.get("imagePullPolicy").is_none_or(Value::is_null) {
        // Always for `:latest` or no tag, else IfNotPresent; a digest pins the image.
        let image = str_at(c, "/image");
        let last = image.rsplit('/').next().unwrap_or(image);
        let policy = if image.contains('@') {
            "IfNotPresent"
        } else {
            match last.split_once(':') {
                Some((_, tag)) if tag != "latest" => "IfNotPresent",
                _ => "Always",
            }
        };
        c["imagePullPolicy"] = json!(policy);
    }
    each(c, "ports", |p| or(p, "protocol", json!("TCP")));
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(key).filter(|p| p.is_object()) {
            probe(p);
        }
    }
}

/// `SetDefaults_HostPathVolumeSource`: a hostPath of no type is of type `""` (unchecked).
fn host_path(source: &mut Value) {
    if let Some(h) = source.get_mut("hostPath").filter(|h| h.is_object()) {
        or(h, "type", json!(""));
    }
}

/// `setDefaultResizePolicy` (in-place resize, beta and on in kube 1.32): a Pod's container
/// that requests or limits CPU or memory may have it resized without a restart.
fn resize_policy(c: &mut Value) {
    for resource in ["cpu", "memory"] {
        let set = ["requests", "limits"]
            .iter()
            .any(|k| !c["resources"][k][resource].is_null());
        let policies = c["resizePolicy"].as_array().cloned().unwrap_or_default();
        if set && !policies.iter().any(|p| p["resourceName"] == resource) {
            let mut policies = policies;
            policies.push(json!({"resourceName": resource, "restartPolicy": "NotRequired"}));
            c["resizePolicy"] = json!(policies);
        }
    }
}

/// A Pod spec's defaults (`SetDefaults_PodSpec`, containers, volumes).
fn pod_spec(spec: &mut Value) {
    or(spec, "restartPolicy", json!("Always"));
    or(spec, "terminationGracePeriodSeconds", json!(30));
    or(spec, "dnsPolicy", json!("ClusterFirst"));
    or(spec, "securityContext", json!({}));
    or(spec, "schedulerName", json!("default-scheduler"));
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        each(spec, key, container);
    }
    each(spec, "volumes", |v| {
        // `SetDefaults_Volume`: a volume of no source is an emptyDir.
        let sourceless = v
            .as_object()
            .is_some_and(|m| m.iter().all(|(k, x)| k == "name" || x.is_null()));
        if sourceless {
            v["emptyDir"] = json!({});
        }
        for (source, field) in [("configMap", "defaultMode"), ("secret", "defaultMode")] {
            if let Some(s) = v.get_mut(source).filter(|s| s.is_object()) {
                or(s, field, json!(420));
            }
        }
        if let Some(projected) = v.get_mut("projected").filter(|s| s.is_object()) {
            or(projected, "defaultMode", json!(420));
        }
        if let Some(api) = v.get_mut("downwardAPI").filter(|s| s.is_object()) {
            or(api, "defaultMode", json!(420));
        }
        host_path(v);
    });
}

/// A Pod template's defaults (its spec's).
fn template(t: &mut Value) {
    if let Some(spec) = t.get_mut("spec").filter(|s| s.is_object()) {
        pod_spec(spec);
    }
}

/// The spec of `obj`, created if missing.
fn spec(obj: &mut Value) -> &mut Value {
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    &mut obj["spec"]
}

/// An update strategy at `spec[field]`: `RollingUpdate` unless another type is given, and
/// for it these `rollingUpdate` defaults.
fn rolling_update(spec: &mut Value, field: &str, rolling: &[(&str, Value)]) {
    or(spec, field, json!({}));
    let strategy = &mut spec[field];
    or(strategy, "type", json!("RollingUpdate"));
    if strategy["type"] == "RollingUpdate" {
        or(strategy, "rollingUpdate", json!({}));
        for (key, value) in rolling {
            or(&mut strategy["rollingUpdate"], key, value.clone());
        }
    }
}

/// Its template's defaults, if it has one.
fn spec_template(spec: &mut Value) {
    if let Some(t) = spec.get_mut("template").filter(|t| t.is_object()) {
        template(t);
    }
}

/// A Job spec's defaults, and on create the selector and labels kube generates for it (unless
/// `manualSelector`): the Job's uid ties its Pods to it.
fn job_spec(spec: &mut Value, name: &str, uid: Option<&str>) {
    match (spec.get("completions"), spec.get("parallelism")) {
        (None, None) => {
            spec["completions"] = json!(1);
            spec["parallelism"] = json!(1);
        }
        (None, Some(_)) | (Some(_), None) => or(spec, "parallelism", json!(1)),
        _ => {}
    }
    or(spec, "backoffLimit", json!(6));
    or(spec, "completionMode", json!("NonIndexed"));
    or(spec, "suspend", json!(false));
    or(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    spec_template(spec);
    let Some(uid) = uid.filter(|_| spec["manualSelector"] != true) else {
        return;
    };
    // kube's `generateSelector`: the uid joins whatever selector was sent (a selector that
    // then does not fit the generated labels is refused in validation).
    if !spec["selector"].is_object() {
        spec["selector"] = json!({});
    }
    if !spec["selector"]["matchLabels"].is_object() {
        spec["selector"]["matchLabels"] = json!({});
    }
    or(
        &mut spec["selector"]["matchLabels"],
        "batch.kubernetes.io/controller-uid",
        json!(uid),
    );
    let labels = &mut spec["template"]["metadata"]["labels"];
    if !labels.is_object() {
        *labels = json!({});
    }
    for (key, value) in [
        ("batch.kubernetes.io/controller-uid", uid),
        ("batch.kubernetes.io/job-name", name),
        ("controller-uid", uid),
        ("job-name", name),
    ] {
        or(labels, key, json!(value));
    }
}

/// The first free address of kube-apiserver's default service range (10.96.0.0/12 here; kube's
/// flag default is 10.0.0.0/24, clusters set their own), skipping `.1`, the `kubernetes`
/// Service's.
fn allocate_cluster_ip(st: &State) -> Option<String> {
    let key = (String::new(), "services".to_string());
    let used: std::collections::BTreeSet<&str> = (st.table_of(&key).into_iter())
        .flat_map(|t| t.objects.values())
        .filter_map(|s| s.pointer("/spec/clusterIP").and_then(Value::as_str))
        .collect();
    (2u32..(1 << 20))
        .map(|n| {
            let ip = (10u32 << 24) | (96 << 16) | n;
            std::net::Ipv4Addr::from(ip).to_string()
        })
        .find(|ip| !used.contains(ip.as_str()))
}

/// A Service's defaults, and on create its cluster IP.
pub(crate) fn service(st: &State, obj: &mut Value, old: Option<&Value>) {
    let spec = spec(obj);
    or(spec, "type", json!("ClusterIP"));
    or(spec, "sessionAffinity", json!("None"));
    let external = spec["type"] == "ExternalName";
    if !external {
        or(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if spec["type"] == "NodePort" || spec["type"] == "LoadBalancer" {
        or(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if spec["type"] == "LoadBalancer" {
        or(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    each(spec, "ports", |p| {
        or(p, "protocol", json!("TCP"));
        if p.get("targetPort").is_none_or(Value::is_null) {
            p["targetPort"] = p["port"].clone();
        }
    });
    if external {
        return;
    }
    // An update keeps the address allocated (kube's `patchAllocatedValues`).
    if let Some(old) = old {
        for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if spec.get(key).is_none_or(Value::is_null) && !old["spec"][key].is_null() {
                spec[key] = old["spec"][key].clone();
            }
        }
        return;
    }
    if spec.get("clusterIP").is_none_or(|v| v.is_null() || v == "")
        && let Some(ip) = allocate_cluster_ip(st)
    {
        spec["clusterIP"] = json!(ip);
    }
    if !spec["clusterIP"].is_null() {
        or(spec, "clusterIPs", json!([spec["clusterIP"].clone()]));
    }
    or(spec, "ipFamilies", json!(["IPv4"]));
    or(spec, "ipFamilyPolicy", json!("SingleStack"));
}

/// `SetDefaults_Pod` (and its containers', probes' and volumes').
pub(crate) fn pod(obj: &mut Value) {
    let spec = spec(obj);
    pod_spec(spec);
    or(spec, "enableServiceLinks", json!(true));
    each(spec, "containers", resize_policy);
    // A container's limits stand for the requests it does not make.
    for key in ["containers", "initContainers"] {
        each(spec, key, |c| {
            let Some(limits) = c
                .pointer("/resources/limits")
                .and_then(Value::as_object)
                .cloned()
            else {
                return;
            };
            let requests = &mut c["resources"]["requests"];
            if !requests.is_object() {
                *requests = json!({});
            }
            for (name, quantity) in limits {
                or(requests, &name, quantity);
            }
        });
    }
}

/// A PodTemplate's: its template's.
pub(crate) fn pod_template(obj: &mut Value) {
    if let Some(t) = obj.get_mut("template").filter(|t| t.is_object()) {
        template(t);
    }
}

/// `SetDefaults_ReplicationController`: selector and labels from the template's.
pub(crate) fn replication_controller(obj: &mut Value) {
    let template_labels = obj.pointer("/spec/template/metadata/labels").cloned();
    if let Some(labels) = template_labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty())) {
        if obj["spec"]["selector"]
            .as_object()
            .is_none_or(|m| m.is_empty())
        {
            obj["spec"]["selector"] = labels.clone();
        }
        if obj["metadata"]["labels"]
            .as_object()
            .is_none_or(|m| m.is_empty())
        {
            obj["metadata"]["labels"] = labels;
        }
    }
    let spec = spec(obj);
    or(spec, "replicas", json!(1));
    spec_template(spec);
}

/// `SetDefaults_Secret`: `Opaque` unless typed.
pub(crate) fn secret(obj: &mut Value) {
    if obj["type"].as_str().is_none_or(str::is_empty) {
        obj["type"] = json!("Opaque");
    }
}

/// `SetDefaults_NetworkPolicy`: TCP ports, and the policy types its rules imply.
pub(crate) fn network_policy(obj: &mut Value) {
    let spec = spec(obj);
    for rules in ["ingress", "egress"] {
        each(spec, rules, |r| {
            each(r, "ports", |p| or(p, "protocol", json!("TCP")))
        });
    }
    if spec["policyTypes"].as_array().is_none_or(Vec::is_empty) {
        let mut types = vec![json!("Ingress")];
        if spec["egress"].as_array().is_some_and(|e| !e.is_empty()) {
            types.push(json!("Egress"));
        }
        spec["policyTypes"] = json!(types);
    }
}

/// `SetDefaults_Subject` and the role bindings': an empty group is rbac's (none for a
/// ServiceAccount).
pub(crate) fn role_binding(obj: &mut Value) {
    let unset = |v: &Value| v["apiGroup"].as_str().is_none_or(str::is_empty);
    if obj["roleRef"].is_object() && unset(&obj["roleRef"]) {
        obj["roleRef"]["apiGroup"] = json!("rbac.authorization.k8s.io");
    }
    each(obj, "subjects", |s| {
        if (s["kind"] == "User" || s["kind"] == "Group") && unset(s) {
            s["apiGroup"] = json!("rbac.authorization.k8s.io");
        }
    });
}

/// `SetDefaults_PersistentVolumeClaimSpec`.
pub(crate) fn claim(obj: &mut Value) {
    or(spec(obj), "volumeMode", json!("Filesystem"));
}

/// `SetDefaults_PersistentVolume`.
pub(crate) fn volume(obj: &mut Value) {
    let spec = spec(obj);
    or(spec, "volumeMode", json!("Filesystem"));
    or(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
    host_path(spec);
}

/// `SetDefaults_ValidatingWebhook` and `SetDefaults_MutatingWebhook` (`mutating`), with their
/// rules' scope and services' port.
pub(crate) fn webhook_configuration(obj: &mut Value, mutating: bool) {
    each(obj, "webhooks", |hook| {
        or(hook, "failurePolicy", json!("Fail"));
        or(hook, "matchPolicy", json!("Equivalent"));
        or(hook, "namespaceSelector", json!({}));
        or(hook, "objectSelector", json!({}));
        or(hook, "timeoutSeconds", json!(10));
        if mutating {
            or(hook, "reinvocationPolicy", json!("Never"));
        }
        each(hook, "rules", |rule| or(rule, "scope", json!("*")));
        if let Some(service) = hook
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .filter(|s| s.is_object())
        {
            or(service, "port", json!(443));
        }
    });
}

/// `SetDefaults_ValidatingAdmissionPolicySpec` with its `MatchResources`; a binding's
/// `matchResources` (`binding`) when it has one.
pub(crate) fn admission_policy(obj: &mut Value, binding: bool) {
    let key = if binding {
        "matchResources"
    } else {
        "matchConstraints"
    };
    let spec = spec(obj);
    if !binding {
        or(spec, "failurePolicy", json!("Fail"));
    }
    if let Some(m) = spec.get_mut(key).filter(|m| m.is_object()) {
        or(m, "matchPolicy", json!("Equivalent"));
        or(m, "namespaceSelector", json!({}));
        or(m, "objectSelector", json!({}));
        for rules in ["resourceRules", "excludeResourceRules"] {
            each(m, rules, |rule| or(rule, "scope", json!("*")));
        }
    }
}

/// `SetDefaults_Deployment`.
pub(crate) fn deployment(obj: &mut Value) {
    let spec = spec(obj);
    or(spec, "replicas", json!(1));
    or(spec, "revisionHistoryLimit", json!(10));
    or(spec, "progressDeadlineSeconds", json!(600));
    let rolling = [("maxUnavailable", json!("25%")), ("maxSurge", json!("25%"))];
    rolling_update(spec, "strategy", &rolling);
    spec_template(spec);
}

/// `SetDefaults_ReplicaSet`.
pub(crate) fn replica_set(obj: &mut Value) {
    let spec = spec(obj);
    or(spec, "replicas", json!(1));
    spec_template(spec);
}

/// `SetDefaults_StatefulSet`, its claim templates' included.
pub(crate) fn stateful_set(obj: &mut Value) {
    let spec = spec(obj);
    or(spec, "replicas", json!(1));
    or(spec, "podManagementPolicy", json!("OrderedReady"));
    or(spec, "revisionHistoryLimit", json!(10));
    rolling_update(spec, "updateStrategy", &[("partition", json!(0))]);
    or(
        spec,
        "persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
    each(spec, "volumeClaimTemplates", |claim| {
        or(claim, "apiVersion", json!("v1"));
        or(claim, "kind", json!("PersistentVolumeClaim"));
        or(self::spec(claim), "volumeMode", json!("Filesystem"));
        or(claim, "status", json!({}));
        or(&mut claim["status"], "phase", json!("Pending"));
    });
    spec_template(spec);
}

/// `SetDefaults_DaemonSet`.
pub(crate) fn daemon_set(obj: &mut Value) {
    let spec = spec(obj);
    or(spec, "revisionHistoryLimit", json!(10));
    let rolling = [("maxUnavailable", json!(1)), ("maxSurge", json!(0))];
    rolling_update(spec, "updateStrategy", &rolling);
    spec_template(spec);
}

/// `SetDefaults_Job`, and on create (`old` is `None`) the selector kube's strategy generates.
pub(crate) fn job(obj: &mut Value, old: Option<&Value>) {
    let name = str_at(obj, "/metadata/name").to_string();
    let uid = old
        .is_none()
        .then(|| str_at(obj, "/metadata/uid").to_string())
        .filter(|u| !u.is_empty());
    job_spec(spec(obj), &name, uid.as_deref());
    if uid.is_some() && obj["spec"]["manualSelector"].is_null() {
        obj["spec"]["manualSelector"] = json!(false);
    }
    // A Job without labels wears its Pods'.
    if obj["metadata"]["labels"]
        .as_object()
        .is_none_or(|m| m.is_empty())
        && let Some(labels) = obj.pointer("/spec/template/metadata/labels").cloned()
    {
        obj["metadata"]["labels"] = labels;
    }
}

/// `SetDefaults_CronJob`, its Job template's included.
pub(crate) fn cron_job(obj: &mut Value) {
    let spec = spec(obj);
    or(spec, "concurrencyPolicy", json!("Allow"));
    or(spec, "suspend", json!(false));
    or(spec, "successfulJobsHistoryLimit", json!(3));
    or(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job) = spec.get_mut("jobTemplate").filter(|j| j.is_object()) {
        // The Job's own selector is generated when a Job is made from it.
        job_spec(self::spec(job), "", None);
    }
}

/// The annotation marking the default StorageClass (and its beta form).
pub(crate) const IS_DEFAULT: &str = "storageclass.kubernetes.io/is-default-class";
const IS_DEFAULT_BETA: &str = "storageclass.beta.kubernetes.io/is-default-class";

/// The default StorageClass (kube's `GetDefaultClass`): of those annotated as default, the
/// newest, then the first by name.
pub(crate) fn default_class(st: &State) -> Option<Arc<Value>> {
    let is_default = |c: &Value| {
        let a = &c["metadata"]["annotations"];
        a[IS_DEFAULT] == "true" || a[IS_DEFAULT_BETA] == "true"
    };
    (st.table_of(&("storage.k8s.io".to_string(), "storageclasses".to_string()))
        .into_iter())
    .flat_map(|t| t.objects.values().cloned())
    .filter(|c| is_default(c))
    .max_by(|a, b| {
        let at = |c: &Value| str_at(c, "/metadata/creationTimestamp").to_string();
        (at(a).cmp(&at(b)))
            .then_with(|| str_at(b, "/metadata/name").cmp(str_at(a, "/metadata/name")))
    })
}

/// kube's `DefaultStorageClass` admission: a claim created without a class (and without the
/// beta class annotation) gets the default StorageClass, when there is one.
pub(crate) fn default_storage_class(st: &State, pvc: &mut Value) {
    let annotated = pvc
        .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
        .is_some();
    if pvc.pointer("/spec/storageClassName").is_some() || annotated {
        return;
    }
    if let Some(class) = default_class(st) {
        pvc["spec"]["storageClassName"] = json!(str_at(&class, "/metadata/name"));
    }
}

/// What kube does to a Pod being created beyond its defaults: the strategy's status (Pending,
/// its QoS class) and the admission plugins every cluster enables that change it: `Priority`
/// (its priority from its PriorityClass, or from the global default one, or 0) and
/// `DefaultTolerationSeconds` (five minutes on not-ready and unreachable nodes).
/// Where a controller keeps namespaces' ServiceAccounts (`State::service_accounts`), also
/// `ServiceAccount`: the Pod runs as its account (`default` unless it names one), which must
/// exist, with the account's token, the server's authority and its namespace mounted unless
/// the Pod or the account turns automounting off.
pub(crate) fn admit_pod(st: &State, pod: &mut Value) -> ApiResult<()> {
    pod["status"] = json!({"phase": "Pending", "qosClass": qos_class(&pod["spec"])});
    let pod_name = str_at(pod, "/metadata/name").to_string();
    if st.cluster.service_accounts {
        service_account(st, pod, &pod_name)?;
    }
    let spec = spec(pod);
    let classes = (
        String::from("scheduling.k8s.io"),
        String::from("priorityclasses"),
    );
    let class = match spec["priorityClassName"].as_str().filter(|n| !n.is_empty()) {
        Some(name) => {
            let found = st.get(&classes, "", name).map(|c| (*c).clone());
            let system = match name {
                "system-node-critical" => Some(2_000_001_000),
                "system-cluster-critical" => Some(2_000_000_000),
                _ => None,
            };
            let class = found.or_else(|| system.map(|v| json!({"value": v})));
            Some(class.ok_or_else(|| {
                let message = format!(
                    "pods \"{pod_name}\" is forbidden: no PriorityClass with name {name} was found"
                );
                ApiError::new(403, "Forbidden", message)
            })?)
        }
        None => {
            let global = (st.table_of(&classes).into_iter())
                .flat_map(|t| t.objects.values())
                .filter(|c| c["globalDefault"] == true)
                .min_by_key(|c| c["value"].as_i64());
            global.map(|c| {
                spec["priorityClassName"] = c["metadata"]["name"].clone();
                (**c).clone()
            })
        }
    };
    let (value, policy) = class.map_or((json!(0), json!("PreemptLowerPriority")), |c| {
        let policy = c.get("preemptionPolicy").cloned();
        (
            c["value"].clone(),
            policy.unwrap_or(json!("PreemptLowerPriority")),
        )
    });
    or(spec, "priority", value);
    or(spec, "preemptionPolicy", policy);
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerations = spec["tolerations"].as_array().cloned().unwrap_or_default();
        let tolerated = tolerations.iter().any(|t| {
            let effect = t["effect"].as_str().unwrap_or("");
            let any_key = t["key"].as_str().unwrap_or("").is_empty() && t["operator"] == "Exists";
            (effect.is_empty() || effect == "NoExecute") && (t["key"] == key || any_key)
        });
        if !tolerated {
            let mut tolerations = tolerations;
            tolerations.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300}),
            );
            spec["tolerations"] = json!(tolerations);
        }
    }
    Ok(())
}

/// The defaults of ephemeral containers added through `pods/{name}/ephemeralcontainers`
/// (kube defaults the whole Pod the request carries).
pub(crate) fn ephemeral_containers(pod: &mut Value) {
    each(spec(pod), "ephemeralContainers", container);
}

/// A CSR's conditions as kube's approval strategy stamps them (`populateConditionTimestamps`):
/// a condition without an update time updated now, one without a transition time moved when
/// its status did (now, unless it had the same status before).
pub(crate) fn condition_times(csr: &mut Value, old: &Value, now: &str) {
    let before = old["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(conditions) = csr["status"]["conditions"].as_array_mut() else {
        return;
    };
    for c in conditions {
        or(c, "lastUpdateTime", json!(now));
        if c["lastTransitionTime"].is_null() {
            let same = before
                .iter()
                .find(|b| b["type"] == c["type"] && b["status"] == c["status"]);
            let at = same.map_or(json!(now), |b| b["lastTransitionTime"].clone());
            c["lastTransitionTime"] = if at.is_null() { json!(now) } else { at };
        }
    }
}

/// Where kube mounts a Pod's service-account credentials.
const ACCOUNT_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// kube's `ServiceAccount` admission of a new Pod.
fn service_account(st: &State, pod: &mut Value, pod_name: &str) -> ApiResult<()> {
    let namespace = str_at(pod, "/metadata/namespace").to_string();
    let spec = spec(pod);
    let name = [&spec["serviceAccountName"], &spec["serviceAccount"]]
        .into_iter()
        .find_map(|n| n.as_str().filter(|n| !n.is_empty()))
        .unwrap_or("default")
        .to_string();
    spec["serviceAccountName"] = json!(name);
    spec["serviceAccount"] = json!(name);
    let accounts = (String::new(), "serviceaccounts".to_string());
    let Some(account) = st.get(&accounts, &namespace, &name) else {
        let message = format!(
            "pods \"{pod_name}\" is forbidden: error looking up service account \
             {namespace}/{name}: serviceaccount \"{name}\" not found"
        );
        return Err(ApiError::new(403, "Forbidden", message));
    };
    let automount = spec["automountServiceAccountToken"]
        .as_bool()
        .or_else(|| account["automountServiceAccountToken"].as_bool())
        .unwrap_or(true);
    let mounted = ["containers", "initContainers"].iter().any(|k| {
        (spec[*k].as_array().into_iter().flatten())
            .flat_map(|c| c["volumeMounts"].as_array().into_iter().flatten())
            .any(|m| m["mountPath"] == ACCOUNT_MOUNT)
    });
    if !automount || mounted {
        return Ok(());
    }
    let volume = format!("kube-api-access-{}", super::names::random_suffix());
    let mut volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    volumes.push(
        json!({"name": volume, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}),
    );
    spec["volumes"] = json!(volumes);
    for key in ["initContainers", "containers"] {
        each(spec, key, |c| {
            let mut mounts = c["volumeMounts"].as_array().cloned().unwrap_or_default();
            mounts.push(json!({"name": volume, "readOnly": true, "mountPath": ACCOUNT_MOUNT}));
            c["volumeMounts"] = json!(mounts);
        });
    }
    Ok(())
}

/// A Pod's QoS class as kube computes it from its containers' CPU and memory: BestEffort with
/// no requests or limits, Guaranteed when every container limits both and the requests equal
/// the limits, Burstable otherwise.
fn qos_class(spec: &Value) -> &'static str {
    let (mut requests, mut limits) = (BTreeMap::new(), BTreeMap::new());
    let mut guaranteed = true;
    let containers = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| spec[k].as_array())
        .flatten();
    for c in containers {
        for (field, sums) in [("requests", &mut requests), ("limits", &mut limits)] {
            let mut seen = 0;
            for name in ["cpu", "memory"] {
                let q = c["resources"][field][name]
                    .as_str()
                    .and_then(Quantity::parse);
                if let Some(q) = q.filter(|q| !q.is_zero()) {
                    seen += 1;
                    let sum = sums.entry(name).or_insert(Quantity::ZERO);
                    *sum = *sum + q;
                }
            }
            if field == "limits" && seen < 2 {
                guaranteed = false;
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        "BestEffort"
    } else if guaranteed && requests == limits {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_pulled_as_kube_defaults_say() {
        for (image, policy) in [
            ("busybox", "Always"),
            ("busybox:latest", "Always"),
            ("busybox:1.36", "IfNotPresent"),
            ("registry:5000/team/app", "Always"),
            ("registry:5000/team/app:v2", "IfNotPresent"),
            ("app@sha256:abcd", "IfNotPresent"),
        ] {
            let mut c = json!({"name": "c", "image": image});
            container(&mut c);
            assert_eq!(c["imagePullPolicy"], policy, "{image}");
        }
    }

    #[test]
    fn a_job_gets_its_counts_and_a_selector_tied_to_its_uid() {
        let mut spec = json!({"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}});
        job_spec(&mut spec, "pi", Some("u-1"));
        assert_eq!(
            (spec["completions"].clone(), spec["parallelism"].clone()),
            (json!(1), json!(1))
        );
        assert_eq!(
            spec["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        assert_eq!(spec["template"]["metadata"]["labels"]["job-name"], "pi");
        let mut parallel = json!({"parallelism": 3});
        job_spec(&mut parallel, "p", None);
        assert!(parallel.get("completions").is_none(), "{parallel}");
    }
}
