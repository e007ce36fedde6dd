//! `admissionregistration.k8s.io`'s validation of webhook configurations
//! (`pkg/apis/admissionregistration/validation`): each webhook's name, rules, policies,
//! selectors, client and match conditions, with kube's fields and words.

use std::collections::HashSet;

use serde_json::Value;
use wasmctrl_core::validation::{self as rules, FieldError};

use super::{Errors, items, label_selector, text};
use crate::schema::cel;

/// A `ValidatingWebhookConfiguration` (`mutating` false) or `MutatingWebhookConfiguration`.
pub(crate) fn webhook_configuration(obj: &Value, mutating: bool, errs: &mut Errors) {
    let mut names = HashSet::new();
    for (i, hook) in items(obj, "webhooks").iter().enumerate() {
        let path = format!("webhooks[{i}]");
        webhook(hook, mutating, &path, errs);
        review_versions(items(hook, "admissionReviewVersions"), &path, errs);
        let name = text(hook, "name");
        if !name.is_empty() && !names.insert(name) {
            errs.push(FieldError::duplicate(
                format!("{path}.name"),
                rules::quote(name),
            ));
        }
    }
}

/// One webhook (`validateValidatingWebhook`, `validateMutatingWebhook`).
fn webhook(hook: &Value, mutating: bool, path: &str, errs: &mut Errors) {
    fully_qualified_name(text(hook, "name"), &format!("{path}.name"), errs);
    for (i, rule) in items(hook, "rules").iter().enumerate() {
        rule_with_operations(rule, &format!("{path}.rules[{i}]"), errs);
    }
    let one_of = |key: &str, supported: &[&str], errs: &mut Errors| {
        if let Some(v) = hook.get(key).and_then(Value::as_str)
            && !supported.contains(&v)
        {
            errs.push(FieldError::not_supported(
                format!("{path}.{key}"),
                v,
                supported,
            ));
        }
    };
    one_of("failurePolicy", &["Fail", "Ignore"], errs);
    one_of("matchPolicy", &["Equivalent", "Exact"], errs);
    match hook.get("sideEffects").and_then(Value::as_str) {
        None => errs.push(FieldError::required(
            format!("{path}.sideEffects"),
            "must specify one of None, NoneOnDryRun",
        )),
        Some(_) => one_of("sideEffects", &["None", "NoneOnDryRun"], errs),
    }
    if let Some(t) = hook.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        errs.push(FieldError::invalid_printed(
            format!("{path}.timeoutSeconds"),
            t.to_string(),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    label_selector(
        errs,
        &format!("{path}.namespaceSelector"),
        &hook["namespaceSelector"],
    );
    label_selector(
        errs,
        &format!("{path}.objectSelector"),
        &hook["objectSelector"],
    );
    if mutating {
        one_of("reinvocationPolicy", &["IfNeeded", "Never"], errs);
    }
    client_config(&hook["clientConfig"], &format!("{path}.clientConfig"), errs);
    match_conditions(
        items(hook, "matchConditions"),
        &format!("{path}.matchConditions"),
        errs,
    );
}

/// `IsFullyQualifiedName`: a DNS subdomain of at least three segments.
fn fully_qualified_name(name: &str, path: &str, errs: &mut Errors) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let problems = rules::dns1123_subdomain(name);
    if !problems.is_empty() {
        errs.push(FieldError::invalid(path, name, problems.join(",")));
    } else if name.split('.').count() < 3 {
        errs.push(FieldError::invalid(
            path,
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

/// `validateRuleWithOperations` with `validateRule` (subresources allowed).
fn rule_with_operations(rule: &Value, path: &str, errs: &mut Errors) {
    let operations = listed(rule, "operations", "operations", path, errs);
    const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    for (i, op) in operations.iter().enumerate() {
        if !OPERATIONS.contains(op) {
            errs.push(FieldError::not_supported(
                format!("{path}.operations[{i}]"),
                op,
                OPERATIONS,
            ));
        }
    }
    listed(rule, "apiGroups", "API groups", path, errs);
    let versions = listed(rule, "apiVersions", "API versions", path, errs);
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty() {
            errs.push(FieldError::required(format!("{path}.apiVersions[{i}]"), ""));
        }
    }
    resources(
        &strings(rule, "resources"),
        &format!("{path}.resources"),
        errs,
    );
    if let Some(scope) = rule.get("scope").and_then(Value::as_str)
        && !["*", "Cluster", "Namespaced"].contains(&scope)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.scope"),
            scope,
            &["*", "Cluster", "Namespaced"],
        ));
    }
}

/// A rule's list at `key`: required, and `*` alone if present (`what` names its items in the
/// refusal, as kube words it).
fn listed<'a>(
    rule: &'a Value,
    key: &str,
    what: &str,
    path: &str,
    errs: &mut Errors,
) -> Vec<&'a str> {
    let values = strings(rule, key);
    if values.is_empty() {
        errs.push(FieldError::required(format!("{path}.{key}"), ""));
    }
    if values.len() > 1 && values.contains(&"*") {
        let elem = if key == "operations" {
            "admissionregistration.OperationType"
        } else {
            "string"
        };
        errs.push(FieldError::invalid_printed(
            format!("{path}.{key}"),
            go_slice(elem, &values),
            format!("if '*' is present, must not specify other {what}"),
        ));
    }
    values
}

/// `validateResources`: wildcards of resources and subresources used consistently.
fn resources(resources: &[&str], path: &str, errs: &mut Errors) {
    if resources.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    let mut wildcard_subresources: HashSet<&str> = HashSet::new();
    let mut wildcard_resources: HashSet<&str> = HashSet::new();
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, res_sub) in resources.iter().enumerate() {
        if res_sub.is_empty() {
            errs.push(FieldError::required(format!("{path}[{i}]"), ""));
            continue;
        }
        double |= *res_sub == "*/*";
        single |= *res_sub == "*";
        let Some((res, sub)) = res_sub.split_once('/') else {
            plain = *res_sub != "*";
            continue;
        };
        if wildcard_subresources.contains(res) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                res_sub,
                format!("if '{res}/*' is present, must not specify {res_sub}"),
            ));
        }
        if wildcard_resources.contains(sub) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                res_sub,
                format!("if '*/{sub}' is present, must not specify {res_sub}"),
            ));
        }
        if sub == "*" {
            wildcard_subresources.insert(res);
        }
        if res == "*" {
            wildcard_resources.insert(sub);
        }
    }
    if resources.len() > 1 && double {
        errs.push(FieldError::invalid_printed(
            path,
            go_slice("string", resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        errs.push(FieldError::invalid_printed(
            path,
            go_slice("string", resources),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
}

/// `validateAdmissionReviewVersions`: at least one this server speaks, no duplicates, each
/// a DNS-1035 label.
fn review_versions(versions: &[Value], path: &str, errs: &mut Errors) {
    let path = format!("{path}.admissionReviewVersions");
    if versions.is_empty() {
        errs.push(FieldError::required(
            path,
            "must specify one of v1, v1beta1",
        ));
        return;
    }
    known_review_versions(versions, &path, errs);
}

/// Review versions that are given: no duplicates, each a DNS-1035 label, one of them known
/// (`validateConversionReviewVersions`' and the admission webhooks' shared rules).
pub(super) fn known_review_versions(versions: &[Value], path: &str, errs: &mut Errors) {
    let mut seen = HashSet::new();
    let mut accepted = false;
    let all: Vec<&str> = versions
        .iter()
        .map(|v| v.as_str().unwrap_or_default())
        .collect();
    for (i, v) in all.iter().enumerate() {
        if !seen.insert(*v) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                v,
                "duplicate version",
            ));
            continue;
        }
        for problem in rules::dns1035_label(v) {
            errs.push(FieldError::invalid(format!("{path}[{i}]"), v, problem));
        }
        accepted |= matches!(*v, "v1" | "v1beta1");
    }
    if !accepted {
        errs.push(FieldError::invalid_printed(
            path,
            go_slice("string", &all),
            "must include at least one of v1, v1beta1",
        ));
    }
}

/// Exactly one of `url` (HTTPS, a host, no user, query or fragment) and `service`.
pub(super) fn client_config(cc: &Value, path: &str, errs: &mut Errors) {
    match (cc.get("url").and_then(Value::as_str), cc.get("service")) {
        (Some(url), None) => webhook_url(url, &format!("{path}.url"), errs),
        (None, Some(service)) if service.is_object() => {
            webhook_service(service, &format!("{path}.service"), errs);
        }
        _ => errs.push(FieldError::required(
            path,
            "exactly one of url or service is required",
        )),
    }
}

/// `ValidateWebhookURL` with HTTPS required.
fn webhook_url(raw: &str, path: &str, errs: &mut Errors) {
    const FORM: &str = "; desired format: https://host[/path]";
    let parsed = match url::Url::parse(raw) {
        Ok(u) => u,
        Err(e) => {
            errs.push(FieldError::required(
                path,
                format!("url must be a valid URL: {e}{FORM}"),
            ));
            return;
        }
    };
    if parsed.scheme() != "https" {
        errs.push(FieldError::invalid(
            path,
            parsed.scheme(),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        errs.push(FieldError::invalid(
            path,
            "",
            format!("host must be specified{FORM}"),
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        errs.push(FieldError::invalid(
            path,
            parsed.username(),
            "user information is not permitted in the URL",
        ));
    }
    if let Some(f) = parsed.fragment() {
        errs.push(FieldError::invalid(
            path,
            f,
            "fragments are not permitted in the URL",
        ));
    }
    if let Some(q) = parsed.query() {
        errs.push(FieldError::invalid(
            path,
            q,
            "query parameters are not permitted in the URL",
        ));
    }
}

/// `ValidateWebhookService`.
fn webhook_service(service: &Value, path: &str, errs: &mut Errors) {
    if text(service, "name").is_empty() {
        errs.push(FieldError::required(
            format!("{path}.name"),
            "service name is required",
        ));
    }
    if text(service, "namespace").is_empty() {
        errs.push(FieldError::required(
            format!("{path}.namespace"),
            "service namespace is required",
        ));
    }
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid_printed(
            format!("{path}.port"),
            port.to_string(),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let url_path = text(service, "path");
    if url_path.is_empty() || url_path == "/" {
        return;
    }
    let at = format!("{path}.path");
    if url_path == "//" {
        errs.push(FieldError::invalid(
            &at,
            url_path,
            "segment[0] may not be empty",
        ));
        return;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(&at, url_path, "must start with a '/'"));
    }
    let rest = url_path.get(1..).unwrap_or_default();
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    for (i, step) in rest.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                &at,
                url_path,
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for problem in rules::dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                &at,
                url_path,
                format!("segment[{i}]: {problem}"),
            ));
        }
    }
}

/// `validateMatchConditions`: at most 64, each named (a qualified name, once) with an
/// expression that compiles.
fn match_conditions(conditions: &[Value], path: &str, errs: &mut Errors) {
    if conditions.len() > 64 {
        errs.push(FieldError::too_many(path, conditions.len(), 64));
    }
    let mut names = HashSet::new();
    for (i, c) in conditions.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let expression = text(c, "expression").trim();
        if expression.is_empty() {
            errs.push(FieldError::required(format!("{at}.expression"), ""));
        } else if let Err(e) = cel::compile(expression) {
            errs.push(FieldError::invalid(
                format!("{at}.expression"),
                expression,
                format!("compilation failed: {e}"),
            ));
        }
        let name = text(c, "name");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{at}.name"), ""));
        } else {
            for problem in rules::qualified_name(name) {
                errs.push(FieldError::invalid(format!("{at}.name"), name, problem));
            }
            if !names.insert(name) {
                errs.push(FieldError::duplicate(
                    format!("{at}.name"),
                    rules::quote(name),
                ));
            }
        }
    }
}

fn strings<'a>(v: &'a Value, key: &str) -> Vec<&'a str> {
    items(v, key)
        .iter()
        .map(|s| s.as_str().unwrap_or_default())
        .collect()
}

/// A slice as Go's `%v` of a field error prints it: `[]string{"a", "b"}`.
fn go_slice(elem: &str, values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| rules::quote(v)).collect();
    format!("[]{elem}{{{}}}", quoted.join(", "))
}

/// A `ValidatingAdmissionPolicy` (`validateValidatingAdmissionPolicySpec`).
pub(crate) fn policy(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    match spec.get("failurePolicy").and_then(Value::as_str) {
        None => errs.push(FieldError::required("spec.failurePolicy", "")),
        Some(p) if !["Fail", "Ignore"].contains(&p) => errs.push(FieldError::not_supported(
            "spec.failurePolicy",
            p,
            &["Fail", "Ignore"],
        )),
        Some(_) => {}
    }
    let constraints = &spec["matchConstraints"];
    if constraints.is_object() {
        match_resources(constraints, "spec.matchConstraints", errs);
        if items(constraints, "resourceRules").is_empty() {
            errs.push(FieldError::required(
                "spec.matchConstraints.resourceRules",
                "",
            ));
        }
    } else {
        errs.push(FieldError::required("spec.matchConstraints", ""));
    }
    match_conditions(items(spec, "matchConditions"), "spec.matchConditions", errs);
    for (i, v) in items(spec, "variables").iter().enumerate() {
        let at = format!("spec.variables[{i}]");
        if text(v, "name").trim().is_empty() {
            errs.push(FieldError::required(
                format!("{at}.name"),
                "name is not specified",
            ));
        }
        expression(
            text(v, "expression"),
            &format!("{at}.expression"),
            "expression is not specified",
            errs,
        );
    }
    let validations = items(spec, "validations");
    if validations.is_empty() && items(spec, "auditAnnotations").is_empty() {
        let why = "validations or auditAnnotations must contain at least one item";
        errs.push(FieldError::required("spec.validations", why));
        errs.push(FieldError::required("spec.auditAnnotations", why));
    }
    for (i, v) in validations.iter().enumerate() {
        validation(v, &format!("spec.validations[{i}]"), errs);
    }
}

/// One of a policy's `validations` (`validateValidation`).
fn validation(v: &Value, at: &str, errs: &mut Errors) {
    expression(
        text(v, "expression"),
        &format!("{at}.expression"),
        "expression is not specified",
        errs,
    );
    let message_expression = text(v, "messageExpression");
    if !message_expression.is_empty() {
        if message_expression.trim().is_empty() {
            errs.push(FieldError::invalid(
                format!("{at}.messageExpression"),
                message_expression,
                "must be non-empty if specified",
            ));
        } else if let Err(e) = cel::compile(message_expression) {
            errs.push(FieldError::invalid(
                format!("{at}.messageExpression"),
                message_expression,
                format!("compilation failed: {e}"),
            ));
        }
    }
    let message = text(v, "message");
    if !message.is_empty() && message.trim().is_empty() {
        errs.push(FieldError::invalid(
            format!("{at}.message"),
            message,
            "message must be non-empty if specified",
        ));
    } else if message.trim().contains('\n') {
        errs.push(FieldError::invalid(
            format!("{at}.message"),
            message,
            "message must not contain line breaks",
        ));
    }
    const REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge"];
    if let Some(reason) = v.get("reason").and_then(Value::as_str)
        && !REASONS.contains(&reason)
    {
        errs.push(FieldError::not_supported(
            format!("{at}.reason"),
            reason,
            REASONS,
        ));
    }
}

/// A CEL expression that must be given and compile.
fn expression(expression: &str, at: &str, missing: &str, errs: &mut Errors) {
    if expression.trim().is_empty() {
        errs.push(FieldError::required(at, missing));
    } else if let Err(e) = cel::compile(expression) {
        errs.push(FieldError::invalid(
            at,
            expression,
            format!("compilation failed: {e}"),
        ));
    }
}

/// `validateMatchResources`.
fn match_resources(m: &Value, at: &str, errs: &mut Errors) {
    match m.get("matchPolicy").and_then(Value::as_str) {
        None => errs.push(FieldError::required(format!("{at}.matchPolicy"), "")),
        Some(p) if !["Equivalent", "Exact"].contains(&p) => errs.push(FieldError::not_supported(
            format!("{at}.matchPolicy"),
            p,
            &["Equivalent", "Exact"],
        )),
        Some(_) => {}
    }
    for key in ["namespaceSelector", "objectSelector"] {
        if m[key].is_object() {
            label_selector(errs, &format!("{at}.{key}"), &m[key]);
        } else {
            errs.push(FieldError::required(format!("{at}.{key}"), ""));
        }
    }
    for key in ["resourceRules", "excludeResourceRules"] {
        for (i, rule) in items(m, key).iter().enumerate() {
            let path = format!("{at}.{key}[{i}]");
            let mut names = HashSet::new();
            for (j, name) in strings(rule, "resourceNames").iter().enumerate() {
                if !names.insert(*name) {
                    errs.push(FieldError::duplicate(
                        format!("{path}.resourceNames[{j}]"),
                        rules::quote(name),
                    ));
                }
            }
            rule_with_operations(rule, &path, errs);
        }
    }
}

/// A `ValidatingAdmissionPolicyBinding` (`validateValidatingAdmissionPolicyBindingSpec`).
pub(crate) fn policy_binding(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    let policy = text(spec, "policyName");
    if policy.is_empty() {
        errs.push(FieldError::required("spec.policyName", ""));
    } else {
        for problem in rules::dns1123_subdomain(policy) {
            errs.push(FieldError::invalid("spec.policyName", policy, problem));
        }
    }
    let reference = &spec["paramRef"];
    if reference.is_object() {
        let (name, selector) = (text(reference, "name"), &reference["selector"]);
        if !name.is_empty() && selector.is_object() {
            let why = "name and selector are mutually exclusive";
            errs.push(FieldError::forbidden("spec.paramRef.name", why));
            errs.push(FieldError::forbidden("spec.paramRef.selector", why));
        }
        if name.is_empty() && !selector.is_object() {
            errs.push(FieldError::required(
                "spec.paramRef",
                "one of name or selector must be specified",
            ));
        }
        match reference
            .get("parameterNotFoundAction")
            .and_then(Value::as_str)
        {
            None | Some("") => errs.push(FieldError::required(
                "spec.paramRef.parameterNotFoundAction",
                "",
            )),
            Some(a) if !["Allow", "Deny"].contains(&a) => errs.push(FieldError::not_supported(
                "spec.paramRef.parameterNotFoundAction",
                a,
                &["Deny", "Allow"],
            )),
            Some(_) => {}
        }
    }
    if spec["matchResources"].is_object() {
        match_resources(&spec["matchResources"], "spec.matchResources", errs);
    }
    validation_actions(&strings(spec, "validationActions"), errs);
}

/// `validateValidationActions`.
fn validation_actions(actions: &[&str], errs: &mut Errors) {
    const ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
    let mut seen = HashSet::new();
    for (i, a) in actions.iter().enumerate() {
        let at = format!("spec.validationActions[{i}]");
        if !ACTIONS.contains(a) {
            errs.push(FieldError::not_supported(&at, a, ACTIONS));
        }
        if !seen.insert(*a) {
            errs.push(FieldError::duplicate(&at, rules::quote(a)));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        errs.push(FieldError::invalid_printed(
            "spec.validationActions",
            go_slice("admissionregistration.ValidationAction", actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        errs.push(FieldError::required(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
}
