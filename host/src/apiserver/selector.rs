//! Label and field selectors as the list and watch query parameters spell them.
//!
//! Label selectors use the one parser the host and the SDK share (`crate::selector`); field
//! selectors are written here: `metadata.name` and `metadata.namespace` everywhere, and core
//! Events' own fields.

use serde_json::Value;

use super::events;
use super::registry::Resource;
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

/// A parsed field selector over `metadata.name` and `metadata.namespace`, and for core Events
/// also the fields kube-apiserver selects them by (`kubectl describe` finds an object's Events
/// with `involvedObject.name`, `involvedObject.namespace`, `involvedObject.kind` and
/// `involvedObject.uid`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(&'static str, bool, String)>);

/// `(field label, JSON pointer)` of the selectable fields every resource has.
const META_FIELDS: &[(&str, &str)] = &[
    ("metadata.name", "/metadata/name"),
    ("metadata.namespace", "/metadata/namespace"),
];

/// `(field label, JSON pointer)` of core/v1 Events' further selectable fields, as
/// kube-apiserver's Event strategy defines them (`source` is the source's component,
/// `reportingComponent` the reporting controller).
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject.kind", "/involvedObject/kind"),
    ("involvedObject.namespace", "/involvedObject/namespace"),
    ("involvedObject.name", "/involvedObject/name"),
    ("involvedObject.uid", "/involvedObject/uid"),
    ("involvedObject.apiVersion", "/involvedObject/apiVersion"),
    (
        "involvedObject.resourceVersion",
        "/involvedObject/resourceVersion",
    ),
    ("involvedObject.fieldPath", "/involvedObject/fieldPath"),
    ("reason", "/reason"),
    ("reportingComponent", "/reportingComponent"),
    ("source", "/source/component"),
    ("type", "/type"),
];

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter for a list or watch of `res`; fields it
    /// cannot select by are a 400 like kube-apiserver's.
    pub fn parse(s: &str, res: &Resource) -> Result<Self, ApiError> {
        let mut out = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(out));
        }
        let extra = if events::is_core_events(&res.group, &res.plural) {
            EVENT_FIELDS
        } else {
            &[]
        };
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
            let Some(&(_, ptr)) = META_FIELDS
                .iter()
                .chain(extra)
                .find(|(label, _)| *label == k)
            else {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {k}"
                )));
            };
            out.push((ptr, eq, v.trim().to_string()));
        }
        Ok(Self(out))
    }

    /// Whether the object (as stored) satisfies every term; a missing field is `""`.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(ptr, eq, v)| {
            let got = match obj.pointer(ptr) {
                Some(Value::String(s)) => s.as_str(),
                _ => "",
            };
            (got == v) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::registry::Registry;
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
        let registry = Registry::default();
        let configmaps = registry.get("", "v1", "configmaps").unwrap();
        let parse = |s| FieldSelector::parse(s, &configmaps);
        let o = json!({"metadata": {"name": "x", "namespace": "ns"}});
        assert!(parse("metadata.name=x").unwrap().matches(&o));
        assert!(!parse("metadata.namespace!=ns").unwrap().matches(&o));
        assert_eq!(parse("spec.x=1").unwrap_err().code, 400);
        assert_eq!(parse("involvedObject.name=x").unwrap_err().code, 400);
    }

    #[test]
    fn core_events_select_by_what_they_are_about() {
        let registry = Registry::default();
        let core = registry.get("", "v1", "events").unwrap();
        let ev = json!({"metadata": {"name": "vm.1", "namespace": "default"},
            "involvedObject": {"kind": "VirtualMachine", "namespace": "default", "name": "vm", "uid": "u-1"},
            "reason": "Active", "type": "Normal", "reportingComponent": "wasmctrl",
            "source": {"component": "kubelet"}});
        // What `kubectl describe vm vm` asks for.
        let describe = "involvedObject.name=vm,involvedObject.namespace=default,\
                        involvedObject.kind=VirtualMachine,involvedObject.uid=u-1";
        assert!(FieldSelector::parse(describe, &core).unwrap().matches(&ev));
        for (sel, want) in [
            ("involvedObject.name=other", false),
            ("reason=Active,type!=Warning", true),
            ("reportingComponent=wasmctrl", true),
            ("source=kubelet", true),
            ("involvedObject.fieldPath=", true),
        ] {
            assert_eq!(
                FieldSelector::parse(sel, &core).unwrap().matches(&ev),
                want,
                "{sel}"
            );
        }
        // events.k8s.io serves the same objects but, as kube-apiserver, selects by name only.
        let v1 = registry.get("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(
            FieldSelector::parse("involvedObject.name=vm", &v1)
                .unwrap_err()
                .code,
            400
        );
    }
}
