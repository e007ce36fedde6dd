//! Label and field selectors as the list and watch query parameters spell them.
//!
//! Label selectors use the one parser the host and the SDK share (`crate::selector`); field
//! selectors are written here: only `metadata.name` and `metadata.namespace` are served.

use serde_json::Value;

use super::status::ApiError;
use crate::selector::Selector;

/// A parsed label selector (the shared grammar, `crate::selector`); the empty selector
/// matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Selector);

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        Selector::parse(s)
            .map(Self)
            .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.is_empty() || self.0.matches(&obj["metadata"]["labels"])
    }
}

/// A parsed field selector over `metadata.name` and `metadata.namespace`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter; other fields are a 400 like kube-apiserver's.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut out = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(out));
        }
        for part in s.split(',') {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let k = k.trim();
            if k != "metadata.name" && k != "metadata.namespace" {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {k}"
                )));
            }
            out.push((k.to_string(), eq, v.trim().to_string()));
        }
        Ok(Self(out))
    }

    /// Whether the object satisfies every term.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(k, eq, v)| {
            let ptr = if k == "metadata.name" {
                "/metadata/name"
            } else {
                "/metadata/namespace"
            };
            let got = obj.pointer(ptr).and_then(Value::as_str).unwrap_or("");
            (got == v) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_operators() {
        let o = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing,app=web", true),
            ("app in (db),tier", false),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("a b c").is_err());
    }

    #[test]
    fn field_selector() {
        let o = json!({"metadata": {"name": "x", "namespace": "ns"}});
        assert!(FieldSelector::parse("metadata.name=x").unwrap().matches(&o));
        assert!(
            !FieldSelector::parse("metadata.namespace!=ns")
                .unwrap()
                .matches(&o)
        );
        assert_eq!(FieldSelector::parse("spec.x=1").unwrap_err().code, 400);
    }
}
