//! Kubernetes label selectors in their string form (`app=nginx,tier in (web,api),!canary`).
//!
//! Written by hand: kube-core models selectors but does not parse the string syntax, and both the
//! plugin manifests and the cache's `list` import receive strings. This is the one parser: the
//! host, the SDK's test harness and the scope checks all use it.

use std::collections::BTreeMap;
use std::fmt;

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A selector string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {reason}")]
pub struct ParseError {
    selector: String,
    reason: String,
}

impl LabelSelector {
    /// Parses the string form; `""` selects everything.
    pub fn parse(selector: &str) -> Result<Self, ParseError> {
        let err = |reason: &str| ParseError {
            selector: selector.into(),
            reason: reason.into(),
        };
        let mut requirements = Vec::new();
        for term in split_terms(selector).map_err(|r| err(&r))? {
            let term = term.trim();
            if term.is_empty() {
                return Err(err("empty requirement"));
            }
            requirements.push(parse_term(term).map_err(|r| err(&r))?);
        }
        Ok(Self { requirements })
    }

    /// True when it has no requirements.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether labels (a JSON object of strings, or null) satisfy every requirement.
    pub fn matches_json(&self, labels: &serde_json::Value) -> bool {
        self.matches(labels)
    }

    /// Whether a label map satisfies every requirement.
    pub fn matches_map(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches(labels)
    }

    /// Whether no labels at all can satisfy both selectors (`app=a` and `app=b`, `x` and `!x`,
    /// `tier in (a)` and `tier notin (a)`): requirements on different keys never conflict, so
    /// it is decided key by key.
    pub fn disjoint(&self, other: &LabelSelector) -> bool {
        let all: Vec<&Requirement> = self
            .requirements
            .iter()
            .chain(&other.requirements)
            .collect();
        let keys: std::collections::BTreeSet<&str> = all.iter().map(|r| r.key()).collect();
        keys.into_iter().any(|key| {
            let on_key: Vec<&&Requirement> = all.iter().filter(|r| r.key() == key).collect();
            let must_exist = on_key
                .iter()
                .any(|r| matches!(r, Requirement::In(..) | Requirement::Exists(_)));
            let must_not = on_key
                .iter()
                .any(|r| matches!(r, Requirement::DoesNotExist(_)));
            if must_exist && must_not {
                return true;
            }
            // Values every `In` allows and no `NotIn` forbids; unconstrained without an `In`.
            let mut allowed: Option<Vec<&String>> = None;
            for r in &on_key {
                if let Requirement::In(_, values) = r {
                    allowed = Some(match allowed {
                        None => values.iter().collect(),
                        Some(a) => a.into_iter().filter(|v| values.contains(v)).collect(),
                    });
                }
            }
            let Some(mut allowed) = allowed else {
                return false;
            };
            for r in &on_key {
                if let Requirement::NotIn(_, values) = r {
                    allowed.retain(|v| !values.contains(v));
                }
            }
            allowed.is_empty()
        })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::In(k, vs) => labels.label(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            Requirement::NotIn(k, vs) => labels.label(k).is_none_or(|v| vs.iter().all(|x| x != v)),
            Requirement::Exists(k) => labels.label(k).is_some(),
            Requirement::DoesNotExist(k) => labels.label(k).is_none(),
        })
    }
}

impl Requirement {
    fn key(&self) -> &str {
        match self {
            Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k) => k,
        }
    }
}

/// An object's labels, however they are held.
pub trait Labels {
    /// The value of label `key`, if set.
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// A `metadata.labels` JSON object (or null: no labels).
impl Labels for serde_json::Value {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(|v| v.as_str())
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r {
                Requirement::In(k, vs) if vs.len() == 1 => write!(f, "{k}={}", vs[0])?,
                Requirement::In(k, vs) => write!(f, "{k} in ({})", vs.join(","))?,
                Requirement::NotIn(k, vs) if vs.len() == 1 => write!(f, "{k}!={}", vs[0])?,
                Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", vs.join(","))?,
                Requirement::Exists(k) => f.write_str(k)?,
                Requirement::DoesNotExist(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}

/// Splits on commas that are not inside a parenthesised value set.
fn split_terms(selector: &str) -> Result<Vec<&str>, String> {
    if selector.trim().is_empty() {
        return Ok(Vec::new());
    }
    let (mut depth, mut start, mut terms) = (0i32, 0, Vec::new());
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err("unbalanced parentheses".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    terms.push(&selector[start..]);
    Ok(terms)
}

fn parse_term(term: &str) -> Result<Requirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(label_key(key.trim())?));
    }
    for (op, negate) in [(" notin ", true), (" in ", false)] {
        if let Some((key, set)) = term.split_once(op) {
            let set = set.trim();
            let inner = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("`{op}` needs a parenthesised set, got {set:?}"))?;
            let values = inner
                .split(',')
                .map(|v| label_value(v.trim()))
                .collect::<Result<Vec<_>, _>>()?;
            let key = label_key(key.trim())?;
            return Ok(if negate {
                Requirement::NotIn(key, values)
            } else {
                Requirement::In(key, values)
            });
        }
    }
    if let Some((key, value)) = term.split_once("!=") {
        return Ok(Requirement::NotIn(
            label_key(key.trim())?,
            vec![label_value(value.trim())?],
        ));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Requirement::In(
            label_key(key.trim())?,
            vec![label_value(value.trim())?],
        ));
    }
    Ok(Requirement::Exists(label_key(term)?))
}

/// `[prefix/]name`: prefix a DNS subdomain, name 1-63 alphanumerics, `-`, `_`, `.`.
fn label_key(key: &str) -> Result<String, String> {
    let name = match key.rsplit_once('/') {
        Some((prefix, name)) => {
            let ok = !prefix.is_empty()
                && prefix.len() <= 253
                && prefix
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
            if !ok {
                return Err(format!("invalid label key prefix in {key:?}"));
            }
            name
        }
        None => key,
    };
    if name.is_empty() || name.len() > 63 || !is_label_chars(name) {
        return Err(format!("invalid label key {key:?}"));
    }
    Ok(key.into())
}

fn label_value(value: &str) -> Result<String, String> {
    if value.len() > 63 || (!value.is_empty() && !is_label_chars(value)) {
        return Err(format!("invalid label value {value:?}"));
    }
    Ok(value.into())
}

fn is_label_chars(s: &str) -> bool {
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    edge_ok(s.chars().next())
        && edge_ok(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(sel: &str, labels: serde_json::Value) -> bool {
        LabelSelector::parse(sel).unwrap().matches_json(&labels)
    }

    #[test]
    fn every_operator_matches_like_kubernetes() {
        let l = json!({"app": "nginx", "tier": "web"});
        assert!(m("", json!(null)));
        assert!(m("app=nginx", l.clone()) && m("app==nginx", l.clone()));
        assert!(!m("app!=nginx", l.clone()) && m("app!=other", l.clone()));
        assert!(
            m("app!=x", json!({})),
            "!= matches objects without the label"
        );
        assert!(m("tier in (web, api)", l.clone()) && !m("tier in (api)", l.clone()));
        assert!(m("tier notin (api)", l.clone()) && !m("tier notin (web)", l.clone()));
        assert!(m("app", l.clone()) && !m("!app", l.clone()) && m("!canary", l.clone()));
        assert!(m("app=nginx,tier in (web),!canary", l.clone()));
        assert!(!m("app=nginx,tier=api", l));
    }

    #[test]
    fn bad_selectors_are_rejected_with_the_selector_named() {
        for bad in [
            "app=",
            "=x",
            "a in web",
            "a in (b",
            "app=ngi nx",
            ",",
            "-a=b",
            "a=b,",
        ] {
            if bad == "app=" {
                assert!(LabelSelector::parse(bad).is_ok(), "empty values are legal");
                continue;
            }
            let e = LabelSelector::parse(bad).unwrap_err();
            assert!(e.to_string().contains(bad), "{e}");
        }
    }

    #[test]
    fn disjoint_selectors_are_those_no_labels_satisfy() {
        let d = |a: &str, b: &str| {
            LabelSelector::parse(a)
                .unwrap()
                .disjoint(&LabelSelector::parse(b).unwrap())
        };
        assert!(d("app=a", "app=b") && d("x", "!x") && d("t in (a)", "t notin (a)"));
        assert!(d("t in (a,b)", "t in (c)") && d("app=a", "!app"));
        assert!(!d("app=a", "") && !d("app=a", "tier=web") && !d("t in (a,b)", "t=b"));
        assert!(!d("app!=a", "app=b") && !d("app!=a", "!app") && !d("x", "x=1"));
    }

    #[test]
    fn display_round_trips() {
        let s = LabelSelector::parse("app=nginx,tier in (web,api),!canary,x!=y,k").unwrap();
        assert_eq!(LabelSelector::parse(&s.to_string()).unwrap(), s);
    }
}
