//! The operator's settings (`[settings]` in `pod-restarter.toml`): which Pods, which Deployment.
//!
//! They are checked in `manifest()`, so a typo stops the plugin from loading with a message
//! naming the field instead of silently watching nothing or restarting the wrong thing.

use serde::Deserialize;

/// What the operator configures; every field has a default, so no config file is needed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Pods matching this label selector trigger a restart (default `app=nginx`).
    pub label_selector: String,
    /// The namespace of both the Pods and the Deployment (default `default`).
    pub namespace: String,
    /// The Deployment to restart (default `tools`).
    pub deployment: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            label_selector: "app=nginx".into(),
            namespace: "default".into(),
            deployment: "tools".into(),
        }
    }
}

impl Config {
    /// Checks every field; the message names the setting and what is wrong with it.
    pub fn validate(&self) -> Result<(), String> {
        if !is_dns_label(&self.namespace) {
            return Err(format!(
                "settings.namespace {:?} must be a DNS-1123 label (lowercase alphanumerics and '-', at most 63)",
                self.namespace
            ));
        }
        if !is_dns_subdomain(&self.deployment) {
            return Err(format!(
                "settings.deployment {:?} must be a DNS-1123 subdomain (lowercase alphanumerics, '-' and '.', at most 253)",
                self.deployment
            ));
        }
        check_selector(&self.label_selector)
            .map_err(|reason| format!("settings.labelSelector {:?}: {reason}", self.label_selector))
    }
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// The label selector string syntax (`app=nginx,tier in (web,api),!canary`). The host parses it
/// again when it loads the manifest; checking here keeps the message about the setting, and
/// refuses the empty selector, which would make every Pod in the namespace a trigger.
fn check_selector(selector: &str) -> Result<(), String> {
    if selector.trim().is_empty() {
        return Err("must not be empty: it would select every Pod in the namespace".into());
    }
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0u32, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            ')' if depth == 1 => depth = 0,
            '(' | ')' => return Err("unbalanced parentheses".into()),
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    terms.push(&selector[start..]);
    terms.into_iter().map(str::trim).try_for_each(check_term)
}

fn check_term(term: &str) -> Result<(), String> {
    if term.is_empty() {
        return Err("empty requirement".into());
    }
    if let Some(key) = term.strip_prefix('!') {
        return check_key(key.trim());
    }
    for op in [" notin ", " in "] {
        if let Some((key, set)) = term.split_once(op) {
            let inner = set
                .trim()
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("`{}` needs a parenthesised set", op.trim()))?;
            check_key(key.trim())?;
            return inner.split(',').map(str::trim).try_for_each(check_value);
        }
    }
    let pair = term
        .split_once("!=")
        .or_else(|| term.split_once("=="))
        .or_else(|| term.split_once('='));
    match pair {
        Some((key, value)) => {
            check_key(key.trim())?;
            check_value(value.trim())
        }
        None => check_key(term),
    }
}

fn check_key(key: &str) -> Result<(), String> {
    let name = match key.rsplit_once('/') {
        Some((prefix, name)) if is_dns_subdomain(prefix) => name,
        Some(_) => return Err(format!("invalid label key prefix in {key:?}")),
        None => key,
    };
    if name.is_empty() || name.len() > 63 || !is_label_chars(name) {
        return Err(format!("invalid label key {key:?}"));
    }
    Ok(())
}

fn check_value(value: &str) -> Result<(), String> {
    if value.len() > 63 || (!value.is_empty() && !is_label_chars(value)) {
        return Err(format!("invalid label value {value:?}"));
    }
    Ok(())
}

fn is_label_chars(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(label_selector: &str, namespace: &str, deployment: &str) -> Config {
        Config {
            label_selector: label_selector.into(),
            namespace: namespace.into(),
            deployment: deployment.into(),
        }
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(Config::default().validate(), Ok(()));
    }

    #[test]
    fn selectors_kubernetes_accepts_are_accepted() {
        for selector in [
            "app=nginx",
            "app==nginx",
            "app!=nginx",
            "app",
            "!canary",
            "app.kubernetes.io/name=web, tier in (web,api),env notin (dev)",
        ] {
            assert_eq!(
                with(selector, "default", "tools").validate(),
                Ok(()),
                "{selector}"
            );
        }
    }

    #[test]
    fn bad_values_are_rejected_naming_the_setting() {
        let cases = [
            (with("", "default", "tools"), "settings.labelSelector"),
            (with("app=nginx,", "default", "tools"), "empty requirement"),
            (with("app in (a,b", "default", "tools"), "parentheses"),
            (
                with("app=ng inx", "default", "tools"),
                "invalid label value",
            ),
            (with("-app=x", "default", "tools"), "invalid label key"),
            (with("app=nginx", "Default", "tools"), "settings.namespace"),
            (with("app=nginx", "", "tools"), "settings.namespace"),
            (with("app=nginx", "default", "Tools"), "settings.deployment"),
            (with("app=nginx", "default", "a..b"), "settings.deployment"),
        ];
        for (config, needle) in cases {
            let err = config.validate().unwrap_err();
            assert!(err.contains(needle), "{config:?}: {err}");
        }
    }
}
