//! Jobs and CronJobs (`pkg/apis/batch/validation`).

use serde_json::Value;
use wasmctrl_core::validation::FieldError;

use super::{
    Errors, go, immutable, int, label_selector, nonnegative, one_of, pod, selects, set, text,
};

const UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
const NAME_LABEL: &str = "batch.kubernetes.io/job-name";
const LEGACY_UID_LABEL: &str = "controller-uid";
const LEGACY_NAME_LABEL: &str = "job-name";

/// A Job spec at `path` (`validateJobSpec`): counts, completion mode, its template, and Pods
/// that do not restart `Always`.
fn job_spec(spec: &Value, path: &str, errs: &mut Errors) {
    for key in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        nonnegative(errs, &format!("{path}.{key}"), int(spec, key));
    }
    if set(spec, "maxFailedIndexes") && !set(spec, "backoffLimitPerIndex") {
        errs.push(FieldError::required(
            format!("{path}.backoffLimitPerIndex"),
            "when maxFailedIndexes is specified",
        ));
    }
    completion_mode(spec, path, errs);
    if set(spec, "podReplacementPolicy") {
        let policy = text(spec, "podReplacementPolicy");
        if set(spec, "podFailurePolicy") && policy != "Failed" {
            errs.push(FieldError::not_supported(
                format!("{path}.podReplacementPolicy"),
                policy,
                &["Failed"],
            ));
        } else if !matches!(policy, "TerminatingOrFailed" | "Failed") {
            errs.push(FieldError::not_supported(
                format!("{path}.podReplacementPolicy"),
                policy,
                &["TerminatingOrFailed", "Failed"],
            ));
        }
    }
    pod::template(&spec["template"], &format!("{path}.template"), errs);
    let restart = format!("{path}.template.spec.restartPolicy");
    match text(&spec["template"]["spec"], "restartPolicy") {
        "Always" | "" => errs.push(FieldError::required(
            restart,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        "OnFailure" | "Never" => {
            let policy = text(&spec["template"]["spec"], "restartPolicy");
            if set(spec, "podFailurePolicy") && policy != "Never" {
                errs.push(FieldError::invalid(
                    restart,
                    policy,
                    "only \"Never\" is supported when podFailurePolicy is specified",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            restart,
            other,
            &["OnFailure", "Never"],
        )),
    }
}

/// A Job spec's completion mode: `NonIndexed` or `Indexed`, the latter with completions, and
/// only it with per-index backoff limits.
fn completion_mode(spec: &Value, path: &str, errs: &mut Errors) {
    let indexed = text(spec, "completionMode") == "Indexed";
    if set(spec, "completionMode") {
        let mode = text(spec, "completionMode");
        if !matches!(mode, "NonIndexed" | "Indexed") {
            errs.push(FieldError::not_supported(
                format!("{path}.completionMode"),
                mode,
                &["NonIndexed", "Indexed"],
            ));
        }
        if indexed && !set(spec, "completions") {
            errs.push(FieldError::required(
                format!("{path}.completions"),
                "when completion mode is Indexed",
            ));
        }
    }
    if !indexed {
        for key in ["backoffLimitPerIndex", "maxFailedIndexes"] {
            if let Some(n) = int(spec, key) {
                errs.push(FieldError::invalid_printed(
                    format!("{path}.{key}"),
                    n.to_string(),
                    "requires indexed completion mode",
                ));
            }
        }
    }
}

/// A Job (`ValidateJob`): its generated selector, its spec, its selector.
pub(crate) fn job(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    let selector = &spec["selector"];
    if spec["manualSelector"] != true && !selector.is_null() {
        let uid = obj
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let expected = serde_json::json!({
            UID_LABEL: uid, NAME_LABEL: name, LEGACY_UID_LABEL: uid, LEGACY_NAME_LABEL: name,
        });
        if selects(selector, &expected) == Some(false) {
            errs.push(FieldError::invalid_printed(
                "spec.selector",
                go::label_selector(selector),
                "`selector` not auto-generated",
            ));
        }
    }
    validate_job_spec(spec, errs);
}

/// A Job's spec with its selector (`ValidateJobSpec`): required, and matching the template.
fn validate_job_spec(spec: &Value, errs: &mut Errors) {
    job_spec(spec, "spec", errs);
    let selector = &spec["selector"];
    if selector.is_null() {
        errs.push(FieldError::required("spec.selector", ""));
    } else {
        label_selector(errs, "spec.selector", selector);
    }
    let labels = &spec["template"]["metadata"]["labels"];
    if selects(selector, labels) == Some(false) {
        errs.push(FieldError::invalid_printed(
            "spec.template.metadata.labels",
            go::string_map(labels),
            "`selector` does not match template `labels`",
        ));
    }
}

/// A Job update (`ValidateJobSpecUpdate`): what a started Job keeps.
pub(crate) fn job_update(new: &Value, old: &Value, errs: &mut Errors) {
    let (ns, os) = (&new["spec"], &old["spec"]);
    validate_job_spec(ns, errs);
    if text(ns, "completionMode") == "Indexed" {
        if ns["completions"] != os["completions"]
            && set(ns, "completions")
            && ns["completions"] != ns["parallelism"]
        {
            errs.push(FieldError::invalid_printed(
                "spec.completions",
                go::int(&ns["completions"]),
                "can only be modified in tandem with spec.parallelism",
            ));
        }
    } else {
        immutable(
            errs,
            "spec.completions",
            &ns["completions"],
            &os["completions"],
            go::int,
        );
    }
    immutable(
        errs,
        "spec.selector",
        &ns["selector"],
        &os["selector"],
        go::label_selector,
    );
    // A suspended Job that never started may have its scheduling directives changed.
    let mut old_template = os["template"].clone();
    let never_started = old.pointer("/status/startTime").is_none_or(Value::is_null);
    if ns["suspend"] == true && os["suspend"] == true && never_started {
        let new_template = &ns["template"];
        for key in ["nodeSelector", "tolerations", "schedulingGates", "affinity"] {
            old_template["spec"][key] = new_template["spec"][key].clone();
        }
        for key in ["annotations", "labels"] {
            old_template["metadata"][key] = new_template["metadata"][key].clone();
        }
        strip_nulls(&mut old_template);
    }
    let template = |v: &Value| go::structure("core.PodTemplateSpec", v);
    let mut new_template = ns["template"].clone();
    strip_nulls(&mut new_template);
    immutable(
        errs,
        "spec.template",
        &new_template,
        &old_template,
        template,
    );
    let fields: [(&str, go::Print); 5] = [
        ("completionMode", go::text),
        ("podFailurePolicy", |v| {
            go::structure("batch.PodFailurePolicy", v)
        }),
        ("backoffLimitPerIndex", go::int),
        ("managedBy", go::text),
        ("successPolicy", |v| go::structure("batch.SuccessPolicy", v)),
    ];
    for (key, print) in fields {
        immutable(errs, &format!("spec.{key}"), &ns[key], &os[key], print);
    }
}

/// Removes the null members of `v`'s objects, which stand for absent fields.
fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// A CronJob (`ValidateCronJobCreate`, or `ValidateCronJobUpdate` given the old one).
pub(crate) fn cron_job(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
    let spec = &obj["spec"];
    let old_spec = old.map(|o| &o["spec"]);
    let schedule = text(spec, "schedule");
    if schedule.is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    } else {
        if let Err(e) = crate::cron::parse(schedule) {
            errs.push(FieldError::invalid("spec.schedule", schedule, e));
        }
        let tz_allowed = old_spec.is_some_and(|o| text(o, "schedule").contains("TZ"));
        if tz_allowed && schedule.contains("TZ") && set(spec, "timeZone") {
            errs.push(FieldError::invalid(
                "spec.schedule",
                schedule,
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            ));
        } else if !tz_allowed && schedule.contains("TZ") {
            errs.push(FieldError::invalid(
                "spec.schedule",
                schedule,
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        }
    }
    nonnegative(
        errs,
        "spec.startingDeadlineSeconds",
        int(spec, "startingDeadlineSeconds"),
    );
    if old_spec.is_none_or(|o| o["timeZone"] != spec["timeZone"]) {
        time_zone(&spec["timeZone"], errs);
    }
    one_of(
        errs,
        "spec.concurrencyPolicy",
        text(spec, "concurrencyPolicy"),
        &["Allow", "Forbid", "Replace"],
    );
    let job = &spec["jobTemplate"]["spec"];
    job_spec(job, "spec.jobTemplate.spec", errs);
    if set(job, "selector") {
        errs.push(FieldError::invalid_printed(
            "spec.jobTemplate.spec.selector",
            go::label_selector(&job["selector"]),
            "`selector` will be auto-generated",
        ));
    }
    if job["manualSelector"] == true {
        errs.push(FieldError::not_supported_printed(
            "spec.jobTemplate.spec.manualSelector",
            "true",
            &["nil", "false"],
        ));
    }
    nonnegative(
        errs,
        "spec.successfulJobsHistoryLimit",
        int(spec, "successfulJobsHistoryLimit"),
    );
    nonnegative(
        errs,
        "spec.failedJobsHistoryLimit",
        int(spec, "failedJobsHistoryLimit"),
    );
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if old.is_none() && name.len() > 52 {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be no more than 52 characters",
        ));
    }
}

/// A CronJob's `timeZone` (`validateTimeZone`): an IANA zone name the zone database has.
fn time_zone(zone: &Value, errs: &mut Errors) {
    let Some(zone) = zone.as_str() else {
        return;
    };
    if zone.is_empty() {
        errs.push(FieldError::invalid(
            "spec.timeZone",
            zone,
            "timeZone must be nil or non-empty string",
        ));
        return;
    }
    let part_ok = |p: &str| {
        p != "."
            && p != ".."
            && !p.starts_with('-')
            && (1..=14).contains(&p.len())
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
    };
    let unknown =
        || FieldError::invalid("spec.timeZone", zone, format!("unknown time zone {zone}"));
    if !zone.split('/').all(part_ok) {
        errs.push(unknown());
        return;
    }
    if zone.eq_ignore_ascii_case("Local") {
        errs.push(FieldError::invalid(
            "spec.timeZone",
            zone,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    } else if zone.parse::<chrono_tz::Tz>().is_err() {
        errs.push(unknown());
    }
}
