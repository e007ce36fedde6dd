//! What a plugin may read: a read-only view of cached objects, as JSON, limited to what the
//! plugin's scope admits ([`Reads`], from `Scope::check_read`).
//!
//! The informer cache implements [`View`] in the controller; [`StaticView`] holds a fixed set of
//! objects for `wasmctrl test` and tests.

use std::collections::BTreeMap;
use std::sync::Arc;
use wasmctrl_core::{Gvk, Labels, Reads};

use crate::selector::LabelSelector;

/// The answer to a read of one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The object, as JSON.
    Found(Arc<str>),
    /// Not cached.
    Absent,
    /// Cached, but outside what the reader may see (its labels).
    OutOfScope,
}

impl Lookup {
    /// The answer for a cached object in `namespace` (or none), given what `reads` admits.
    pub fn of<L: Labels + ?Sized>(
        namespace: &str,
        cached: Option<(&L, &Arc<str>)>,
        reads: &Reads<'_>,
    ) -> Self {
        match cached {
            None => Lookup::Absent,
            Some((labels, json)) if reads.admits(namespace, labels) => Lookup::Found(json.clone()),
            Some(_) => Lookup::OutOfScope,
        }
    }
}

/// Read access to cached objects. Implementations return JSON without `managedFields`.
pub trait View: Send + Sync {
    /// One object, if cached and admitted by `reads`.
    fn get(&self, kind: &Gvk, namespace: &str, name: &str, reads: &Reads<'_>) -> Lookup;
    /// Objects of `kind` in `namespace` (empty: all) matching `selector` and admitted by
    /// `reads`, in namespace/name order.
    fn list(
        &self,
        kind: &Gvk,
        namespace: &str,
        selector: &LabelSelector,
        reads: &Reads<'_>,
    ) -> Vec<Arc<str>>;
    /// Objects of `kind` in `namespace` (empty: all) that the object with `owner_uid` controls,
    /// admitted by `reads`, in namespace/name order. This default reads every object `list`
    /// finds; a view with an owner index answers from it.
    fn children(
        &self,
        kind: &Gvk,
        namespace: &str,
        owner_uid: &str,
        reads: &Reads<'_>,
    ) -> Vec<Arc<str>> {
        let all = self.list(kind, namespace, &LabelSelector::default(), reads);
        all.into_iter()
            .filter(|json| {
                serde_json::from_str(json)
                    .is_ok_and(|object| wasmctrl_core::controlled_by(&object, owner_uid))
            })
            .collect()
    }
}

/// A view over nothing: every read finds no object.
#[derive(Debug, Default, Clone, Copy)]
pub struct EmptyView;

impl View for EmptyView {
    fn get(&self, _: &Gvk, _: &str, _: &str, _: &Reads<'_>) -> Lookup {
        Lookup::Absent
    }

    fn list(&self, _: &Gvk, _: &str, _: &LabelSelector, _: &Reads<'_>) -> Vec<Arc<str>> {
        Vec::new()
    }
}

#[derive(Debug, Clone)]
struct Entry {
    labels: serde_json::Value,
    json: Arc<str>,
}

/// A fixed set of objects, keyed by kind, namespace and name.
#[derive(Debug, Default, Clone)]
pub struct StaticView {
    objects: BTreeMap<Gvk, BTreeMap<(String, String), Entry>>,
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
        let entry = Entry {
            labels: object["metadata"]["labels"].clone(),
            json: Arc::from(object.to_string()),
        };
        self.objects
            .entry(Gvk::from_api_version(&api_version, &kind))
            .or_default()
            .insert((namespace, name), entry);
        Ok(())
    }

    fn kind(&self, kind: &Gvk) -> impl Iterator<Item = (&(String, String), &Entry)> {
        self.objects.get(kind).into_iter().flatten()
    }
}

impl View for StaticView {
    fn get(&self, kind: &Gvk, namespace: &str, name: &str, reads: &Reads<'_>) -> Lookup {
        let cached = self
            .kind(kind)
            .find(|((ns, n), _)| ns == namespace && n == name)
            .map(|(_, e)| (&e.labels, &e.json));
        Lookup::of(namespace, cached, reads)
    }

    fn list(
        &self,
        kind: &Gvk,
        namespace: &str,
        selector: &LabelSelector,
        reads: &Reads<'_>,
    ) -> Vec<Arc<str>> {
        self.kind(kind)
            .filter(|((ns, _), _)| namespace.is_empty() || ns == namespace)
            .filter(|((ns, _), e)| selector.matches(&e.labels) && reads.admits(ns, &e.labels))
            .map(|(_, e)| e.json.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wasmctrl_core::{Namespaces, Scope, Verb};

    #[test]
    fn reads_by_key_and_selector_within_the_scope_without_managed_fields() {
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
        let pod = Gvk::new("", "v1", "Pod");
        let kind = Gvk::new("", "v1", "Pod");
        let all = Scope::new(kind.clone(), Namespaces::All, LabelSelector::default());
        let reads = all.check_read(Verb::List, &kind, "", "").unwrap();
        let Lookup::Found(got) = view.get(&pod, "a", "p1", &reads) else {
            panic!("p1 not found")
        };
        assert!(!got.contains("managedFields"));
        assert_eq!(view.get(&pod, "b", "p1", &reads), Lookup::Absent);
        let nginx = LabelSelector::parse("app=nginx").unwrap();
        assert_eq!(view.list(&pod, "", &nginx, &reads).len(), 2);
        assert_eq!(view.list(&pod, "a", &nginx, &reads).len(), 1);
        assert_eq!(
            view.list(&pod, "a", &LabelSelector::default(), &reads)
                .len(),
            2
        );
        let cm = Gvk::new("", "v1", "ConfigMap");
        assert!(
            view.list(&cm, "", &LabelSelector::default(), &reads)
                .is_empty()
        );
        assert!(view.insert(json!({"kind": "Pod"})).is_err());
        // A narrower scope sees less: one namespace, one label set.
        let narrow = Scope::new(kind.clone(), Namespaces::declared(&["a"]), nginx.clone());
        let reads = narrow.check_read(Verb::List, &kind, "", "").unwrap();
        assert_eq!(
            view.list(&pod, "", &LabelSelector::default(), &reads).len(),
            1
        );
        assert_eq!(view.get(&pod, "a", "p2", &reads), Lookup::OutOfScope);
    }
}
