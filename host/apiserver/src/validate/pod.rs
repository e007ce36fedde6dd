//! Pods and Pod templates (`ValidatePodSpec`, `ValidatePodTemplateSpec`, `ValidatePodUpdate`
//! of `pkg/apis/core/validation`).

use std::collections::BTreeSet;

use serde_json::Value;
use wasmctrl_core::validation::{self as rules, FieldError};

use super::{
    Errors, annotations, dns_label, dns_subdomain, grammar, int, items, label_name, labels, one_of,
    set, text,
};
use crate::quantity::Quantity;

/// The volume sources kube knows; a volume has exactly one.
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// A Pod on create (`ValidatePodCreate`).
pub(crate) fn pod(obj: &Value, errs: &mut Errors) {
    spec(&obj["spec"], "spec", errs);
}

/// A Pod template at `path` (`ValidatePodTemplateSpec`): its labels, annotations and spec.
pub(crate) fn template(t: &Value, path: &str, errs: &mut Errors) {
    let meta = &t["metadata"];
    labels(errs, &format!("{path}.labels"), &meta["labels"]);
    annotations(errs, path, meta);
    spec(&t["spec"], &format!("{path}.spec"), errs);
    if !items(&t["spec"], "ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden(
            format!("{path}.spec.ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
}

/// A Pod spec at `path` (`ValidatePodSpec`).
pub(crate) fn spec(spec: &Value, path: &str, errs: &mut Errors) {
    if !set(spec, "terminationGracePeriodSeconds") {
        errs.push(FieldError::required(
            format!("{path}.terminationGracePeriodSeconds"),
            "",
        ));
    }
    let volumes = volumes(items(spec, "volumes"), &format!("{path}.volumes"), errs);
    containers(spec, path, &volumes, errs);
    one_of(
        errs,
        &format!("{path}.restartPolicy"),
        text(spec, "restartPolicy"),
        &["Always", "OnFailure", "Never"],
    );
    one_of(
        errs,
        &format!("{path}.dnsPolicy"),
        text(spec, "dnsPolicy"),
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    );
    labels(errs, &format!("{path}.nodeSelector"), &spec["nodeSelector"]);
    for (key, check) in [
        (
            "serviceAccountName",
            dns_subdomain as fn(&mut Errors, &str, &str),
        ),
        ("nodeName", dns_subdomain),
        ("hostname", dns_label),
        ("subdomain", dns_label),
        ("priorityClassName", dns_subdomain),
    ] {
        let value = text(spec, key);
        if !value.is_empty() {
            check(errs, &format!("{path}.{key}"), value);
        }
    }
    if let Some(n) =
        int(spec, "activeDeadlineSeconds").filter(|n| !(1..=i64::from(i32::MAX)).contains(n))
    {
        errs.push(FieldError::invalid_printed(
            format!("{path}.activeDeadlineSeconds"),
            n.to_string(),
            rules::inclusive_range_error(1, i64::from(i32::MAX)),
        ));
    }
    tolerations(
        items(spec, "tolerations"),
        &format!("{path}.tolerations"),
        errs,
    );
}

/// A Pod spec's containers (at least one, none with a restart policy) and init containers,
/// every name unique across both.
fn containers(spec: &Value, path: &str, volumes: &BTreeSet<String>, errs: &mut Errors) {
    let containers = items(spec, "containers");
    let p = format!("{path}.containers");
    if containers.is_empty() {
        errs.push(FieldError::required(&p, ""));
    }
    let mut names = BTreeSet::new();
    for (i, c) in containers.iter().enumerate() {
        let cp = format!("{p}[{i}]");
        container(c, volumes, &cp, errs);
        let name = text(c, "name");
        if !names.insert(name) {
            errs.push(FieldError::duplicate(
                format!("{cp}.name"),
                rules::quote(name),
            ));
        }
        if set(c, "restartPolicy") {
            errs.push(FieldError::forbidden(
                format!("{cp}.restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    let p = format!("{path}.initContainers");
    let mut init_names = BTreeSet::new();
    for (i, c) in items(spec, "initContainers").iter().enumerate() {
        let cp = format!("{p}[{i}]");
        container(c, volumes, &cp, errs);
        let name = text(c, "name");
        if names.contains(name) || !init_names.insert(name) {
            errs.push(FieldError::duplicate(
                format!("{cp}.name"),
                rules::quote(name),
            ));
        }
    }
}

/// The volumes at `path` (`ValidateVolumes`): the names of those without errors, which
/// mounts may name.
fn volumes(volumes: &[Value], path: &str, errs: &mut Errors) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, v) in volumes.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let mut own = Errors::new();
        let sources: Vec<&str> = VOLUME_SOURCES
            .iter()
            .copied()
            .filter(|s| set(v, s))
            .collect();
        match sources.as_slice() {
            [] => own.push(FieldError::required(&p, "must specify a volume type")),
            [_] => {}
            [_, more @ ..] => own.extend(more.iter().map(|s| {
                FieldError::forbidden(
                    format!("{p}.{s}"),
                    "may not specify more than 1 volume type",
                )
            })),
        }
        let name = text(v, "name");
        if name.is_empty() {
            own.push(FieldError::required(format!("{p}.name"), ""));
        } else {
            dns_label(&mut own, &format!("{p}.name"), name);
        }
        if names.contains(name) {
            own.push(FieldError::duplicate(
                format!("{p}.name"),
                rules::quote(name),
            ));
        }
        if own.is_empty() {
            names.insert(name.to_string());
        }
        errs.extend(own);
    }
    names
}

/// A container at `path` (`validateContainerCommon`).
fn container(c: &Value, volumes: &BTreeSet<String>, path: &str, errs: &mut Errors) {
    let name = text(c, "name");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else {
        dns_label(errs, &format!("{path}.name"), name);
    }
    if text(c, "image").is_empty() {
        errs.push(FieldError::required(format!("{path}.image"), ""));
    }
    one_of(
        errs,
        &format!("{path}.terminationMessagePolicy"),
        text(c, "terminationMessagePolicy"),
        &["File", "FallbackToLogsOnError"],
    );
    ports(items(c, "ports"), &format!("{path}.ports"), errs);
    for (i, e) in items(c, "env").iter().enumerate() {
        let p = format!("{path}.env[{i}].name");
        match text(e, "name") {
            "" => errs.push(FieldError::required(p, "")),
            n => grammar(errs, &p, n, rules::env_var_name(n)),
        }
    }
    let mut mount_paths = BTreeSet::new();
    for (i, m) in items(c, "volumeMounts").iter().enumerate() {
        let p = format!("{path}.volumeMounts[{i}]");
        let name = text(m, "name");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        }
        if !volumes.contains(name) {
            errs.push(FieldError::not_found(format!("{p}.name"), name));
        }
        let mount_path = text(m, "mountPath");
        if mount_path.is_empty() {
            errs.push(FieldError::required(format!("{p}.mountPath"), ""));
        }
        if !mount_paths.insert(mount_path) {
            errs.push(FieldError::invalid(
                format!("{p}.mountPath"),
                mount_path,
                "must be unique",
            ));
        }
    }
    one_of(
        errs,
        &format!("{path}.imagePullPolicy"),
        text(c, "imagePullPolicy"),
        &["Always", "IfNotPresent", "Never"],
    );
    resources(&c["resources"], &format!("{path}.resources"), errs);
}

/// A container's ports (`validateContainerPorts`).
fn ports(ports: &[Value], path: &str, errs: &mut Errors) {
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let name = text(port, "name");
        if !name.is_empty() {
            let messages = rules::port_name(name);
            if !messages.is_empty() {
                grammar(errs, &format!("{p}.name"), name, messages);
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(
                    format!("{p}.name"),
                    rules::quote(name),
                ));
            }
        }
        match int(port, "containerPort").unwrap_or(0) {
            0 => errs.push(FieldError::required(format!("{p}.containerPort"), "")),
            n => port_number(errs, &format!("{p}.containerPort"), n),
        }
        if let Some(n) = int(port, "hostPort").filter(|n| *n != 0) {
            port_number(errs, &format!("{p}.hostPort"), n);
        }
        one_of(
            errs,
            &format!("{p}.protocol"),
            text(port, "protocol"),
            &["SCTP", "TCP", "UDP"],
        );
    }
}

/// A port number's range.
pub(crate) fn port_number(errs: &mut Errors, path: &str, n: i64) {
    for m in rules::port_number(n) {
        errs.push(FieldError::invalid_printed(path, n.to_string(), m));
    }
}

/// Whether kube lets a request of `resource` differ from its limit: native resources but
/// huge pages (`IsOvercommitAllowed`).
fn overcommit_allowed(resource: &str) -> bool {
    let native = !resource.contains('/') || resource.contains("kubernetes.io/");
    native && !resource.starts_with("hugepages-")
}

/// A container's resources (`validateResourceRequirements`): quantities not negative,
/// requests within limits.
fn resources(r: &Value, path: &str, errs: &mut Errors) {
    let limits = r["limits"].as_object();
    for (which, map) in [("limits", limits), ("requests", r["requests"].as_object())] {
        for (name, q) in map.into_iter().flatten() {
            let text = q.as_str().unwrap_or_default();
            let p = format!("{path}.{which}[{name}]");
            if name.is_empty() {
                errs.push(FieldError::required(&p, ""));
            } else if name.contains('/') {
                label_name(errs, &p, name);
            }
            if Quantity::parse(text).is_some_and(Quantity::is_negative) {
                errs.push(FieldError::invalid(
                    &p,
                    text,
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    for (name, request) in r["requests"].as_object().into_iter().flatten() {
        let request_text = request.as_str().unwrap_or_default();
        let limit = limits.and_then(|l| l.get(name));
        let reqs = format!("{path}.requests");
        match limit {
            Some(limit) => {
                let limit_text = limit.as_str().unwrap_or_default();
                let (Some(rq), Some(lq)) =
                    (Quantity::parse(request_text), Quantity::parse(limit_text))
                else {
                    continue;
                };
                if rq != lq && !overcommit_allowed(name) {
                    errs.push(FieldError::invalid(
                        reqs,
                        request_text,
                        format!("must be equal to {name} limit of {limit_text}"),
                    ));
                } else if rq > lq {
                    errs.push(FieldError::invalid(
                        reqs,
                        request_text,
                        format!("must be less than or equal to {name} limit of {limit_text}"),
                    ));
                }
            }
            None if !overcommit_allowed(name) => errs.push(FieldError::required(
                format!("{path}.limits"),
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
    }
}

/// Tolerations (`ValidateTolerations`).
fn tolerations(tolerations: &[Value], path: &str, errs: &mut Errors) {
    for (i, t) in tolerations.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let (key, operator, value, effect) = (
            text(t, "key"),
            text(t, "operator"),
            text(t, "value"),
            text(t, "effect"),
        );
        if !key.is_empty() {
            label_name(errs, &format!("{p}.key"), key);
        }
        if key.is_empty() && operator != "Exists" {
            errs.push(FieldError::invalid(
                format!("{p}.operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if set(t, "tolerationSeconds") && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                format!("{p}.effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "Equal" | "" => {
                let messages = rules::label_value(value);
                if !messages.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{p}.operator"),
                        value,
                        messages.join(";"),
                    ));
                }
            }
            "Exists" if !value.is_empty() => errs.push(FieldError::invalid(
                format!("{p}.operator"),
                value,
                "value must be empty when `operator` is 'Exists'",
            )),
            "Exists" => {}
            other => errs.push(FieldError::not_supported(
                format!("{p}.operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() {
            let known = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
            if !known.contains(&effect) {
                errs.push(FieldError::not_supported(
                    format!("{p}.effect"),
                    effect,
                    &known,
                ));
            }
        }
    }
}

/// What kube lists as the fields a Pod update may change.
const UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// A Pod update (`ValidatePodUpdate`): the new spec's own checks, then nothing changed but
/// images, a shorter deadline, added tolerations and removed scheduling gates.
pub(crate) fn pod_update(new: &Value, old: &Value, errs: &mut Errors) {
    spec(&new["spec"], "spec", errs);
    let (ns, os) = (&new["spec"], &old["spec"]);
    for key in ["containers", "initContainers"] {
        if items(ns, key).len() != items(os, key).len() {
            errs.push(FieldError::forbidden(
                format!("spec.{key}"),
                "pod updates may not add or remove containers",
            ));
            return;
        }
    }
    if !active_deadline_update(ns, os, errs) {
        return;
    }
    tolerations_update(ns, os, errs);
    if only_updatable_changed(ns, os) != *os {
        errs.push(FieldError::forbidden(
            "spec",
            format!("pod updates may not change fields other than {UPDATABLE}"),
        ));
    }
}

/// `activeDeadlineSeconds` may be set or shortened, never lengthened or unset; false when the
/// rest of the update is not worth checking (kube returns at once there).
fn active_deadline_update(ns: &Value, os: &Value, errs: &mut Errors) -> bool {
    match (
        int(ns, "activeDeadlineSeconds"),
        int(os, "activeDeadlineSeconds"),
    ) {
        (Some(n), _) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            errs.push(FieldError::invalid_printed(
                "spec.activeDeadlineSeconds",
                n.to_string(),
                rules::inclusive_range_error(0, i64::from(i32::MAX)),
            ));
            false
        }
        (Some(n), Some(o)) if o < n => {
            errs.push(FieldError::invalid_printed(
                "spec.activeDeadlineSeconds",
                n.to_string(),
                "must be less than or equal to previous value",
            ));
            false
        }
        (None, Some(_)) => {
            errs.push(FieldError::invalid_printed(
                "spec.activeDeadlineSeconds",
                "null",
                "must not update from a positive integer to nil value",
            ));
            true
        }
        _ => true,
    }
}

/// Tolerations may be added, and their `tolerationSeconds` changed; no existing one removed
/// or otherwise modified.
fn tolerations_update(ns: &Value, os: &Value, errs: &mut Errors) {
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    let kept: Vec<Value> = items(ns, "tolerations")
        .iter()
        .map(without_seconds)
        .collect();
    if !items(os, "tolerations")
        .iter()
        .all(|t| kept.contains(&without_seconds(t)))
    {
        errs.push(FieldError::forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }
}

/// The new spec with what an update may change taken from the old one: anything else that
/// differs from the old spec is refused.
fn only_updatable_changed(ns: &Value, os: &Value) -> Value {
    let mut munged = ns.clone();
    for key in ["containers", "initContainers"] {
        if let Some(cs) = munged.get_mut(key).and_then(Value::as_array_mut) {
            for (c, o) in cs.iter_mut().zip(items(os, key)) {
                c["image"] = o["image"].clone();
            }
        }
    }
    for key in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
        match os.get(key) {
            Some(v) => munged[key] = v.clone(),
            None => {
                if let Some(m) = munged.as_object_mut() {
                    m.remove(key);
                }
            }
        }
    }
    if int(os, "terminationGracePeriodSeconds").is_some_and(|g| g < 0)
        && int(ns, "terminationGracePeriodSeconds") == Some(1)
    {
        munged["terminationGracePeriodSeconds"] = os["terminationGracePeriodSeconds"].clone();
    }
    munged
}

/// What an ephemeral container may not set, in the order of kube's Container type (kube's
/// `allowedEphemeralContainerFields` lists the rest): an ephemeral container may not be relied
/// on for the Pod's own service.
const NOT_EPHEMERAL: &[&str] = &[
    "ports",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
];

/// An update through `pods/{name}/ephemeralcontainers`
/// (`ValidatePodEphemeralContainersUpdate`): every ephemeral container a valid container of
/// only the fields it may set, named unlike the Pod's other containers, aimed at one of them;
/// those already there neither removed nor changed.
pub(crate) fn ephemeral_containers_update(new: &Value, old: &Value, errs: &mut Errors) {
    let spec = &new["spec"];
    let volumes = volumes(items(spec, "volumes"), "spec.volumes", &mut Errors::new());
    let others: BTreeSet<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|k| items(spec, k))
        .map(|c| text(c, "name"))
        .collect();
    let mut names = others.clone();
    let ephemeral = items(spec, "ephemeralContainers");
    for (i, c) in ephemeral.iter().enumerate() {
        let path = format!("spec.ephemeralContainers[{i}]");
        container(c, &volumes, &path, errs);
        let name = text(c, "name");
        if !names.insert(name) {
            errs.push(FieldError::duplicate(
                format!("{path}.name"),
                rules::quote(name),
            ));
        }
        let target = text(c, "targetContainerName");
        if !target.is_empty() && !others.contains(target) {
            errs.push(FieldError::not_found(
                format!("{path}.targetContainerName"),
                target,
            ));
        }
        for field in NOT_EPHEMERAL {
            let zero = match &c[field] {
                Value::Null => true,
                Value::Object(m) => m.is_empty(),
                Value::Array(a) => a.is_empty(),
                Value::String(s) => s.is_empty(),
                Value::Bool(b) => !b,
                Value::Number(n) => n.as_f64() == Some(0.0),
            };
            if !zero {
                errs.push(FieldError::forbidden(
                    format!("{path}.{field}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
        for (j, m) in items(c, "volumeMounts").iter().enumerate() {
            for key in ["subPath", "subPathExpr"] {
                if !text(m, key).is_empty() {
                    errs.push(FieldError::forbidden(
                        format!("{path}.volumeMounts[{j}].{key}"),
                        "cannot be set for an Ephemeral Container",
                    ));
                }
            }
        }
    }
    for before in items(&old["spec"], "ephemeralContainers") {
        let name = text(before, "name");
        let message = match ephemeral.iter().find(|c| text(c, "name") == name) {
            None => format!(
                "existing ephemeral containers {} may not be removed\n",
                rules::quote(name)
            ),
            Some(now) if now != before => format!(
                "existing ephemeral containers {} may not be changed\n-{before}\n+{now}",
                rules::quote(name)
            ),
            Some(_) => continue,
        };
        errs.push(FieldError::forbidden("spec.ephemeralContainers", message));
    }
}
