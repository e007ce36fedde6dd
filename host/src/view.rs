//! What a plugin may read: a read-only view of cached objects, as JSON.
//!
//! The informer cache implements [`View`] in the controller; [`StaticView`] holds a fixed set of
//! objects for `wasmctrl test` and tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::core::GroupVersionKind;

use crate::selector::Selector;

/// Read access to cached objects. Implementations return JSON without `managedFields`.
pub trait View: Send + Sync {
    /// One object, or `None` when it is not cached.
    fn get(&self, kind: &GroupVersionKind, namespace: &str, name: &str) -> Option<Arc<str>>;
    /// Objects of `kind` in `namespace` (empty: all) matching `selector`, in namespace/name order.
    fn list(&self, kind: &GroupVersionKind, namespace: &str, selector: &Selector) -> Vec<Arc<str>>;
}

/// A view over nothing: every read finds no object.
#[derive(Debug, Default, Clone, Copy)]
pub struct EmptyView;

impl View for EmptyView {
    fn get(&self, _: &GroupVersionKind, _: &str, _: &str) -> Option<Arc<str>> {
        None
    }

    fn list(&self, _: &GroupVersionKind, _: &str, _: &Selector) -> Vec<Arc<str>> {
        Vec::new()
    }
}

type Kind = (String, String, String);

#[derive(Debug)]
struct Entry {
    labels: serde_json::Value,
    json: Arc<str>,
}

/// A fixed set of objects, keyed by kind, namespace and name.
#[derive(Debug, Default)]
pub struct StaticView {
    objects: BTreeMap<Kind, BTreeMap<(String, String), Entry>>,
}

/// An object that cannot go in a view because it lacks what identifies it.
#[derive(Debug, thiserror::Error)]
#[error("object has no {0}")]
pub struct MissingField(&'static str);

impl StaticView {
    /// An empty view.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) an object; it must carry apiVersion, kind and metadata.name.
    pub fn insert(&mut self, mut object: serde_json::Value) -> Result<(), MissingField> {
        let text = |v: &serde_json::Value, field| {
            v.as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or(MissingField(field))
        };
        let api_version = text(&object["apiVersion"], "apiVersion")?;
        let kind = text(&object["kind"], "kind")?;
        let name = text(&object["metadata"]["name"], "metadata.name")?;
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(meta) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.remove("managedFields");
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version),
        };
        let entry = Entry {
            labels: object["metadata"]["labels"].clone(),
            json: Arc::from(object.to_string()),
        };
        self.objects
            .entry((group, version, kind))
            .or_default()
            .insert((namespace, name), entry);
        Ok(())
    }

    fn kind(&self, kind: &GroupVersionKind) -> impl Iterator<Item = (&(String, String), &Entry)> {
        let key = (kind.group.clone(), kind.version.clone(), kind.kind.clone());
        self.objects.get(&key).into_iter().flatten()
    }
}

impl View for StaticView {
    fn get(&self, kind: &GroupVersionKind, namespace: &str, name: &str) -> Option<Arc<str>> {
        self.kind(kind)
            .find(|((ns, n), _)| ns == namespace && n == name)
            .map(|(_, e)| e.json.clone())
    }

    fn list(&self, kind: &GroupVersionKind, namespace: &str, selector: &Selector) -> Vec<Arc<str>> {
        self.kind(kind)
            .filter(|((ns, _), _)| namespace.is_empty() || ns == namespace)
            .filter(|(_, e)| selector.matches_json(&e.labels))
            .map(|(_, e)| e.json.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_by_key_and_selector_without_managed_fields() {
        let mut view = StaticView::new();
        for (ns, name, app) in [
            ("a", "p1", "nginx"),
            ("a", "p2", "other"),
            ("b", "p3", "nginx"),
        ] {
            view.insert(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"namespace": ns, "name": name, "labels": {"app": app},
                             "managedFields": [{"manager": "x"}]}}))
                .unwrap();
        }
        let pod = GroupVersionKind::gvk("", "v1", "Pod");
        let got = view.get(&pod, "a", "p1").unwrap();
        assert!(!got.contains("managedFields"));
        assert!(view.get(&pod, "b", "p1").is_none());
        let nginx = Selector::parse("app=nginx").unwrap();
        assert_eq!(view.list(&pod, "", &nginx).len(), 2);
        assert_eq!(view.list(&pod, "a", &nginx).len(), 1);
        assert_eq!(view.list(&pod, "a", &Selector::default()).len(), 2);
        let cm = GroupVersionKind::gvk("", "v1", "ConfigMap");
        assert!(view.list(&cm, "", &Selector::default()).is_empty());
        assert!(view.insert(json!({"kind": "Pod"})).is_err());
    }
}
