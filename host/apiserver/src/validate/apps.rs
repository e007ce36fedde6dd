//! The workload kinds of `apps` and the ReplicationController (`pkg/apis/apps/validation`,
//! `ValidateReplicationController`).

use serde_json::Value;
use wasmctrl_core::validation::FieldError;

use super::{
    Errors, go, int, label_selector, labels, nonnegative, pod, selector_empty, selects, set, text,
};

/// A selector that is required, checked, and not empty (`empty selector is invalid for <kind>`).
fn required_selector(spec: &Value, kind: &str, errs: &mut Errors) {
    let selector = &spec["selector"];
    if selector.is_null() {
        errs.push(FieldError::required("spec.selector", ""));
        return;
    }
    label_selector(errs, "spec.selector", selector);
    if selector_empty(selector) {
        errs.push(FieldError::invalid_printed(
            "spec.selector",
            go::label_selector(selector),
            format!("empty selector is invalid for {kind}"),
        ));
    }
}

/// `` `selector` does not match template `labels` `` when it does not.
fn template_labels_match(spec: &Value, errs: &mut Errors) {
    let labels = &spec["template"]["metadata"]["labels"];
    errs.push(FieldError::invalid_printed(
        "spec.template.metadata.labels",
        go::string_map(labels),
        "`selector` does not match template `labels`",
    ));
}

/// The template of a controller whose Pods always restart, for `kind` in the messages
/// (`ValidatePodTemplateSpecForReplicaSet`), `full`: its spec validated too.
fn restarting_template(spec: &Value, kind: &str, full: bool, errs: &mut Errors) {
    let selector = &spec["selector"];
    match selects(selector, &spec["template"]["metadata"]["labels"]) {
        None => {
            errs.push(FieldError::invalid_printed(
                "spec.selector",
                go::label_selector(selector),
                "invalid label selector",
            ));
            return;
        }
        Some(false) if !selector_empty(selector) => template_labels_match(spec, errs),
        Some(_) => {}
    }
    let template = &spec["template"];
    if full {
        pod::template(template, "spec.template", errs);
    }
    always_restarts(template, kind, errs);
}

/// Pods that restart `Always` and have no deadline.
fn always_restarts(template: &Value, kind: &str, errs: &mut Errors) {
    let policy = text(&template["spec"], "restartPolicy");
    if policy != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            policy,
            &["Always"],
        ));
    }
    if set(&template["spec"], "activeDeadlineSeconds") {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
}

/// apimachinery's `IsValidPercent`.
fn valid_percent(s: &str) -> bool {
    s.strip_suffix('%')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `ValidatePositiveIntOrPercent`.
fn int_or_percent(v: &Value, path: &str, errs: &mut Errors) {
    match v {
        Value::String(s) if !valid_percent(s) => errs.push(FieldError::invalid_printed(
            path,
            go::int_or_string(v),
            "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
        )),
        Value::Number(_) => nonnegative(errs, path, v.as_i64()),
        _ => {}
    }
}

/// The number an int-or-percent stands for (`getIntOrPercentValue`: a percent's number).
fn int_or_percent_value(v: &Value) -> i64 {
    match v {
        Value::String(s) if valid_percent(s) => s.trim_end_matches('%').parse().unwrap_or(0),
        Value::String(s) => s.parse().unwrap_or(0),
        other => other.as_i64().unwrap_or(0),
    }
}

/// `must not be greater than 100%` (`IsNotMoreThan100Percent`).
fn at_most_all(v: &Value, path: &str, errs: &mut Errors) {
    if v.as_str().is_some_and(valid_percent) && int_or_percent_value(v) > 100 {
        errs.push(FieldError::invalid_printed(
            path,
            go::int_or_string(v),
            "must not be greater than 100%",
        ));
    }
}

/// A Deployment (`ValidateDeploymentSpec`).
pub(crate) fn deployment(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    nonnegative(errs, "spec.replicas", int(spec, "replicas"));
    required_selector(spec, "deployment", errs);
    restarting_template(spec, "ReplicaSet", true, errs);
    let strategy = &spec["strategy"];
    let rolling = &strategy["rollingUpdate"];
    match text(strategy, "type") {
        "Recreate" if !rolling.is_null() => errs.push(FieldError::forbidden(
            "spec.strategy.rollingUpdate",
            "may not be specified when strategy `type` is 'Recreate'",
        )),
        "Recreate" => {}
        "RollingUpdate" if rolling.is_null() => errs.push(FieldError::required(
            "spec.strategy.rollingUpdate",
            "this should be defaulted and never be nil",
        )),
        "RollingUpdate" => {
            let (unavailable, surge) = (&rolling["maxUnavailable"], &rolling["maxSurge"]);
            int_or_percent(
                unavailable,
                "spec.strategy.rollingUpdate.maxUnavailable",
                errs,
            );
            int_or_percent(surge, "spec.strategy.rollingUpdate.maxSurge", errs);
            if int_or_percent_value(unavailable) == 0 && int_or_percent_value(surge) == 0 {
                errs.push(FieldError::invalid_printed(
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    go::int_or_string(unavailable),
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
            at_most_all(
                unavailable,
                "spec.strategy.rollingUpdate.maxUnavailable",
                errs,
            );
        }
        _ => errs.push(FieldError::not_supported_printed(
            "spec.strategy",
            go::strategy(strategy, "DeploymentStrategy", "RollingUpdateDeployment"),
            &["Recreate", "RollingUpdate"],
        )),
    }
    let min_ready = int(spec, "minReadySeconds");
    nonnegative(errs, "spec.minReadySeconds", min_ready);
    nonnegative(
        errs,
        "spec.revisionHistoryLimit",
        int(spec, "revisionHistoryLimit"),
    );
    if let Some(deadline) = int(spec, "progressDeadlineSeconds") {
        nonnegative(errs, "spec.progressDeadlineSeconds", Some(deadline));
        if deadline <= min_ready.unwrap_or(0) {
            errs.push(FieldError::invalid_printed(
                "spec.progressDeadlineSeconds",
                deadline.to_string(),
                "must be greater than minReadySeconds",
            ));
        }
    }
}

/// A ReplicaSet (`ValidateReplicaSetSpec`; kube words its empty selector as a Deployment's).
pub(crate) fn replica_set(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    nonnegative(errs, "spec.replicas", int(spec, "replicas"));
    nonnegative(errs, "spec.minReadySeconds", int(spec, "minReadySeconds"));
    required_selector(spec, "deployment", errs);
    restarting_template(spec, "ReplicaSet", true, errs);
}

/// A StatefulSet (`ValidateStatefulSetSpec`; kube does not validate its template's Pod spec).
pub(crate) fn stateful_set(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    match text(spec, "podManagementPolicy") {
        "" => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(FieldError::invalid(
            "spec.podManagementPolicy",
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    stateful_set_strategy(&spec["updateStrategy"], errs);
    let retention = &spec["persistentVolumeClaimRetentionPolicy"];
    if !retention.is_null() {
        for key in ["whenDeleted", "whenScaled"] {
            let value = text(retention, key);
            if !matches!(value, "Retain" | "Delete") {
                errs.push(FieldError::not_supported(
                    format!("spec.persistentVolumeClaimRetentionPolicy.{key}"),
                    value,
                    &["Retain", "Delete"],
                ));
            }
        }
    }
    nonnegative(errs, "spec.replicas", int(spec, "replicas"));
    nonnegative(errs, "spec.minReadySeconds", int(spec, "minReadySeconds"));
    nonnegative(
        errs,
        "spec.ordinals.start",
        spec.pointer("/ordinals/start").and_then(Value::as_i64),
    );
    required_selector(spec, "statefulset", errs);
    let selector = &spec["selector"];
    match selects(selector, &spec["template"]["metadata"]["labels"]) {
        None => errs.push(FieldError::invalid_printed(
            "spec.selector",
            go::label_selector(selector),
            "",
        )),
        Some(false) if !selector_empty(selector) => template_labels_match(spec, errs),
        Some(_) => {}
    }
    let meta = &spec["template"]["metadata"];
    labels(errs, "spec.template.labels", &meta["labels"]);
    super::annotations(errs, "spec.template", meta);
    always_restarts(&spec["template"], "StatefulSet", errs);
}

/// A StatefulSet's `updateStrategy`: `RollingUpdate` (its partition and maxUnavailable) or
/// `OnDelete` (with no rolling-update parameters).
fn stateful_set_strategy(strategy: &Value, errs: &mut Errors) {
    let rolling = &strategy["rollingUpdate"];
    match text(strategy, "type") {
        "" => errs.push(FieldError::required("spec.updateStrategy", "")),
        "OnDelete" if !rolling.is_null() => errs.push(FieldError::invalid_printed(
            "spec.updateStrategy.rollingUpdate",
            "(*apps.RollingUpdateStatefulSetStrategy)(…)",
            "only allowed for updateStrategy 'RollingUpdate'",
        )),
        "OnDelete" => {}
        "RollingUpdate" if !rolling.is_null() => {
            nonnegative(
                errs,
                "spec.updateStrategy.rollingUpdate.partition",
                int(rolling, "partition"),
            );
            let unavailable = &rolling["maxUnavailable"];
            if !unavailable.is_null() {
                let p = "spec.updateStrategy.rollingUpdate.maxUnavailable";
                int_or_percent(unavailable, p, errs);
                if int_or_percent_value(unavailable) == 0 {
                    errs.push(FieldError::invalid_printed(
                        p,
                        go::int_or_string(unavailable),
                        "cannot be 0",
                    ));
                }
                at_most_all(unavailable, p, errs);
            }
        }
        "RollingUpdate" => {}
        _ => errs.push(FieldError::invalid_printed(
            "spec.updateStrategy",
            go::strategy(
                strategy,
                "StatefulSetUpdateStrategy",
                "RollingUpdateStatefulSetStrategy",
            ),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
}

/// A StatefulSet update: only replicas, ordinals, template, updateStrategy, the claims'
/// retention policy and minReadySeconds change.
pub(crate) fn stateful_set_update(new: &Value, old: &Value, errs: &mut Errors) {
    stateful_set(new, errs);
    let mutable = [
        "replicas",
        "template",
        "updateStrategy",
        "minReadySeconds",
        "ordinals",
        "persistentVolumeClaimRetentionPolicy",
    ];
    let rest = |spec: &Value| {
        let mut s = spec.clone();
        if let Some(m) = s.as_object_mut() {
            m.retain(|k, _| !mutable.contains(&k.as_str()));
        }
        s
    };
    if rest(&new["spec"]) != rest(&old["spec"]) {
        errs.push(FieldError::forbidden(
            "spec",
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        ));
    }
}

/// A DaemonSet (`ValidateDaemonSetSpec`).
pub(crate) fn daemon_set(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    let selector = &spec["selector"];
    label_selector(errs, "spec.selector", selector);
    if selects(selector, &spec["template"]["metadata"]["labels"]) == Some(false) {
        template_labels_match(spec, errs);
    }
    if selector_empty(selector) {
        errs.push(FieldError::invalid_printed(
            "spec.selector",
            go::label_selector(selector),
            "empty selector is invalid for daemonset",
        ));
    }
    pod::template(&spec["template"], "spec.template", errs);
    always_restarts(&spec["template"], "DaemonSet", errs);
    nonnegative(errs, "spec.minReadySeconds", int(spec, "minReadySeconds"));
    nonnegative(
        errs,
        "spec.templateGeneration",
        int(spec, "templateGeneration"),
    );
    let strategy = &spec["updateStrategy"];
    let rolling = &strategy["rollingUpdate"];
    match text(strategy, "type") {
        "OnDelete" => {}
        "RollingUpdate" if rolling.is_null() => errs.push(FieldError::required(
            "spec.updateStrategy.rollingUpdate",
            "",
        )),
        "RollingUpdate" => {
            let p = "spec.updateStrategy.rollingUpdate";
            let (unavailable, surge) = (&rolling["maxUnavailable"], &rolling["maxSurge"]);
            int_or_percent(unavailable, &format!("{p}.maxUnavailable"), errs);
            int_or_percent(surge, &format!("{p}.maxSurge"), errs);
            at_most_all(unavailable, &format!("{p}.maxUnavailable"), errs);
            at_most_all(surge, &format!("{p}.maxSurge"), errs);
            match (
                int_or_percent_value(unavailable) != 0,
                int_or_percent_value(surge) != 0,
            ) {
                (true, true) => errs.push(FieldError::invalid_printed(
                    format!("{p}.maxSurge"),
                    go::int_or_string(surge),
                    "may not be set when maxUnavailable is non-zero",
                )),
                (false, false) => errs.push(FieldError::required(
                    format!("{p}.maxUnavailable"),
                    "cannot be 0 when maxSurge is 0",
                )),
                _ => {}
            }
        }
        _ => errs.push(FieldError::not_supported_printed(
            "spec.updateStrategy",
            go::strategy(
                strategy,
                "DaemonSetUpdateStrategy",
                "RollingUpdateDaemonSet",
            ),
            &["RollingUpdate", "OnDelete"],
        )),
    }
    nonnegative(
        errs,
        "spec.revisionHistoryLimit",
        int(spec, "revisionHistoryLimit"),
    );
}

/// A ReplicationController (`ValidateReplicationControllerSpec`): its selector is a map.
pub(crate) fn replication_controller(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    nonnegative(errs, "spec.minReadySeconds", int(spec, "minReadySeconds"));
    nonnegative(errs, "spec.replicas", int(spec, "replicas"));
    let selector = &spec["selector"];
    if selector.as_object().is_none_or(|m| m.is_empty()) {
        errs.push(FieldError::required("spec.selector", ""));
    } else {
        labels(errs, "spec.selector", selector);
    }
    let template = &spec["template"];
    if template.is_null() {
        if int(spec, "replicas").unwrap_or(0) > 0 {
            errs.push(FieldError::required("spec.template", ""));
        }
        return;
    }
    let template_labels = &template["metadata"]["labels"];
    let matches = (selector.as_object().into_iter().flatten())
        .all(|(k, v)| template_labels.get(k) == Some(v));
    if selector.as_object().is_some_and(|m| !m.is_empty()) && !matches {
        template_labels_match(spec, errs);
    }
    pod::template(template, "spec.template", errs);
    always_restarts(template, "ReplicationController", errs);
}

/// A ControllerRevision (`ValidateControllerRevisionCreate`): data, a revision not below zero.
pub(crate) fn controller_revision(obj: &Value, errs: &mut Errors) {
    if obj["data"].is_null() {
        errs.push(FieldError::required("data", "data is mandatory"));
    }
    nonnegative(errs, "revision", obj["revision"].as_i64());
}
