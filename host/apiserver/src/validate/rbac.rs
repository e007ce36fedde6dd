//! RBAC's roles and bindings (`pkg/apis/rbac/validation`).

use serde_json::Value;
use wasmctrl_core::validation::{FieldError, NameRule};

use super::{Errors, dns_subdomain, grammar, items, label_selector, text};

const GROUP: &str = "rbac.authorization.k8s.io";

/// The rules of a Role (`namespaced`) or ClusterRole (`ValidatePolicyRule`), and a ClusterRole's
/// aggregation rule.
pub(crate) fn rules(obj: &Value, namespaced: bool, errs: &mut Errors) {
    for (i, rule) in items(obj, "rules").iter().enumerate() {
        let p = format!("rules[{i}]");
        if items(rule, "verbs").is_empty() {
            errs.push(FieldError::required(
                format!("{p}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        let urls = &rule["nonResourceURLs"];
        if !items(rule, "nonResourceURLs").is_empty() {
            let printed = super::go::strings(urls);
            if namespaced {
                errs.push(FieldError::invalid_printed(
                    format!("{p}.nonResourceURLs"),
                    &printed,
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if ["apiGroups", "resources", "resourceNames"]
                .iter()
                .any(|k| !items(rule, k).is_empty())
            {
                errs.push(FieldError::invalid_printed(
                    format!("{p}.nonResourceURLs"),
                    printed,
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if items(rule, "apiGroups").is_empty() {
            errs.push(FieldError::required(
                format!("{p}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if items(rule, "resources").is_empty() {
            errs.push(FieldError::required(
                format!("{p}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
    let aggregation = &obj["aggregationRule"];
    if !namespaced && !aggregation.is_null() {
        let selectors = items(aggregation, "clusterRoleSelectors");
        if selectors.is_empty() {
            errs.push(FieldError::required(
                "aggregationRule.clusterRoleSelectors",
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        for (i, s) in selectors.iter().enumerate() {
            label_selector(
                errs,
                &format!("aggregationRule.clusterRoleSelectors[{i}]"),
                s,
            );
        }
    }
}

/// A RoleBinding (`namespaced`) or ClusterRoleBinding: its role reference and subjects.
pub(crate) fn binding(obj: &Value, namespaced: bool, errs: &mut Errors) {
    let role = &obj["roleRef"];
    let group = text(role, "apiGroup");
    if group != GROUP {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            group,
            &[GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = text(role, "kind");
    if !kinds.contains(&kind) {
        errs.push(FieldError::not_supported("roleRef.kind", kind, kinds));
    }
    match text(role, "name") {
        "" => errs.push(FieldError::required("roleRef.name", "")),
        name => grammar(
            errs,
            "roleRef.name",
            name,
            NameRule::PathSegment.check(name, false),
        ),
    }
    for (i, s) in items(obj, "subjects").iter().enumerate() {
        let p = format!("subjects[{i}]");
        let name = text(s, "name");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        }
        let group = text(s, "apiGroup");
        match text(s, "kind") {
            "ServiceAccount" => {
                if !name.is_empty() {
                    dns_subdomain(errs, &format!("{p}.name"), name);
                }
                if !group.is_empty() {
                    errs.push(FieldError::not_supported(
                        format!("{p}.apiGroup"),
                        group,
                        &[""],
                    ));
                }
                if !namespaced && text(s, "namespace").is_empty() {
                    errs.push(FieldError::required(format!("{p}.namespace"), ""));
                }
            }
            "User" | "Group" => {
                if group != GROUP {
                    errs.push(FieldError::not_supported(
                        format!("{p}.apiGroup"),
                        group,
                        &[GROUP],
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                format!("{p}.kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
}
