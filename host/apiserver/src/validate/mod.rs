//! kube-apiserver's validation of the built-in kinds users write most: Pods and Pod templates,
//! the workload kinds, Services, PersistentVolumeClaims, ConfigMaps and Secrets, Ingresses,
//! NetworkPolicies, RBAC and Leases, on create and on update (immutable fields), with kube's
//! causes (`pkg/apis/<group>/validation`, the checks its registry strategies add).
//!
//! Run on the defaulted object (`defaults`), as kube validates after defaulting, so a field kube
//! always defaults is never reported missing. Each refusal names kube's field and reason and,
//! where kube prints the refused value as a Go structure, prints it as Go does (`go`), so the
//! messages read the same as a cluster's. Hand-written: these rules exist only in kube's Go
//! sources, and what users and tests compare is their wording.
//!
//! The checks are those kube makes of the fields a controller writes; kube checks more (volume
//! sources' own fields, probes' handlers, security contexts, affinity terms) that are not
//! repeated here and are stored as sent.

pub(crate) mod admissionregistration;
pub(crate) mod apiextensions;
pub(crate) mod apps;
pub(crate) mod batch;
pub(crate) mod coordination;
pub(crate) mod core;
mod go;
pub(crate) mod networking;
pub(crate) mod pod;
pub(crate) mod rbac;

use serde_json::Value;
use wasmctrl_core::validation::{self as rules, FieldError};

/// Refused fields, in the order kube reports them.
pub(crate) type Errors = Vec<FieldError>;

/// What kube refuses of an update of a workload whose selector is immutable (Deployments,
/// ReplicaSets, DaemonSets): the new object's own checks (`create`), then the selector.
pub(crate) fn with_immutable_selector(
    create: fn(&Value, &mut Errors),
    new: &Value,
    old: &Value,
    errs: &mut Errors,
) {
    create(new, errs);
    immutable(
        errs,
        "spec.selector",
        &new["spec"]["selector"],
        &old["spec"]["selector"],
        go::label_selector,
    );
}

/// What kube refuses of an update of a RoleBinding (`namespaced`) or ClusterRoleBinding: the
/// new binding's own checks, then a changed `roleRef`.
pub(crate) fn binding_update(new: &Value, old: &Value, namespaced: bool, errs: &mut Errors) {
    rbac::binding(new, namespaced, errs);
    if new["roleRef"] != old["roleRef"] {
        errs.push(FieldError::invalid_printed(
            "roleRef",
            go::role_ref(&new["roleRef"]),
            "cannot change roleRef",
        ));
    }
}

/// The string at `v[key]`, `""` when absent.
fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The integer at `v[key]`, if any.
fn int(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
}

/// The array at `v[key]`, empty when absent.
fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Whether `v[key]` is set (present and not null).
fn set(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| !x.is_null())
}

/// apimachinery's `ValidateNonnegativeField`.
fn nonnegative(errs: &mut Errors, path: &str, value: Option<i64>) {
    if let Some(n) = value.filter(|n| *n < 0) {
        errs.push(FieldError::invalid_printed(
            path,
            n.to_string(),
            "must be greater than or equal to 0",
        ));
    }
}

/// apimachinery's `ValidateImmutableField`: the new value, printed by `print`, if it changed.
fn immutable(errs: &mut Errors, path: &str, new: &Value, old: &Value, print: go::Print) {
    if new != old {
        errs.push(FieldError::invalid_printed(
            path,
            print(new),
            "field is immutable",
        ));
    }
}

/// `Unsupported value` unless `value` is one of `supported` (`Required` when empty).
fn one_of(errs: &mut Errors, path: &str, value: &str, supported: &[&str]) {
    if value.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else if !supported.contains(&value) {
        errs.push(FieldError::not_supported(path, value, supported));
    }
}

/// Each message of a grammar check as an `Invalid` of `value` at `path`.
fn grammar(errs: &mut Errors, path: &str, value: &str, messages: Vec<String>) {
    errs.extend(
        messages
            .into_iter()
            .map(|m| FieldError::invalid(path, value, m)),
    );
}

/// Label keys and values of the map `labels` at `path` (`ValidateLabels`).
fn labels(errs: &mut Errors, path: &str, labels: &Value) {
    let meta = serde_json::json!({ "labels": labels });
    errs.extend(
        rules::labels(&meta)
            .into_iter()
            .map(|e| at(e, "metadata.labels", path)),
    );
}

/// The annotations of `meta` at `<path>.annotations` (`ValidateAnnotations`).
fn annotations(errs: &mut Errors, path: &str, meta: &Value) {
    let field = format!("{path}.annotations");
    errs.extend(
        rules::annotations(meta)
            .into_iter()
            .map(|e| at(e, "metadata.annotations", &field)),
    );
}

/// `e` reported at `to` instead of `from`.
fn at(mut e: FieldError, from: &str, to: &str) -> FieldError {
    if let Some(rest) = e.field.strip_prefix(from) {
        e.field = format!("{to}{rest}");
    }
    e
}

/// A label name (`ValidateLabelName`): a qualified name.
fn label_name(errs: &mut Errors, path: &str, name: &str) {
    grammar(errs, path, name, rules::qualified_name(name));
}

/// A label selector's own rules (`ValidateLabelSelector`, label values checked strictly).
fn label_selector(errs: &mut Errors, path: &str, selector: &Value) {
    if selector.is_null() {
        return;
    }
    for (i, req) in items(selector, "matchExpressions").iter().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let values = items(req, "values");
        match text(req, "operator") {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                format!("{p}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                format!("{p}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => errs.push(FieldError::invalid(
                format!("{p}.operator"),
                op,
                "not a valid selector operator",
            )),
        }
        label_name(errs, &format!("{p}.key"), text(req, "key"));
        for (j, v) in values.iter().enumerate() {
            let v = v.as_str().unwrap_or_default();
            grammar(errs, &format!("{p}.values[{j}]"), v, rules::label_value(v));
        }
    }
    labels(
        errs,
        &format!("{path}.matchLabels"),
        &selector["matchLabels"],
    );
}

/// Whether `selector` (a `LabelSelector`) selects `labels`: `None` when it is not a selector
/// kube can convert (an unknown operator). A null selector selects nothing, an empty one
/// everything (apimachinery's `LabelSelectorAsSelector`).
pub(crate) fn selects(selector: &Value, labels: &Value) -> Option<bool> {
    if selector.is_null() {
        return Some(false);
    }
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = (selector["matchLabels"].as_object().into_iter().flatten())
        .all(|(k, v)| label(k) == v.as_str());
    let mut by_expressions = true;
    for req in items(selector, "matchExpressions") {
        let key = text(req, "key");
        let values: Vec<&str> = items(req, "values")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let held = match text(req, "operator") {
            "In" => label(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => label(key).is_some(),
            "DoesNotExist" => label(key).is_none(),
            _ => return None,
        };
        by_expressions &= held;
    }
    Some(by_labels && by_expressions)
}

/// Whether `selector` has neither labels nor expressions (`Selector.Empty()` of a non-null one).
fn selector_empty(selector: &Value) -> bool {
    !selector.is_null()
        && selector["matchLabels"]
            .as_object()
            .is_none_or(|m| m.is_empty())
        && items(selector, "matchExpressions").is_empty()
}

/// A name that must be a DNS-1123 label (`ValidateDNS1123Label`).
fn dns_label(errs: &mut Errors, path: &str, name: &str) {
    grammar(errs, path, name, rules::dns1123_label(name));
}

/// A name that must be a DNS-1123 subdomain.
fn dns_subdomain(errs: &mut Errors, path: &str, name: &str) {
    grammar(errs, path, name, rules::dns1123_subdomain(name));
}
