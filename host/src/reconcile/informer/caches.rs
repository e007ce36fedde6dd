//! What one plugin reads: the informers it subscribed to, by kind, as a [`View`]. A kind may
//! have several (one per declared namespace, or the watched kind with its selector and the same
//! kind read without one); reads look in every one that covers the namespace asked about.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use wasmctrl_core::{Gvk, Reads};

use super::{Entry, Informer, ObjectKey};
use crate::selector::LabelSelector;
use crate::view::{Lookup, View};

/// A plugin's caches, by kind.
#[derive(Default)]
pub struct Caches {
    by_kind: HashMap<Gvk, Vec<Arc<Informer>>>,
}

impl Caches {
    /// The caches of these informers.
    pub fn new<'a>(informers: impl IntoIterator<Item = &'a Arc<Informer>>) -> Self {
        let mut by_kind: HashMap<Gvk, Vec<Arc<Informer>>> = HashMap::new();
        for informer in informers {
            let same = by_kind.entry(informer.gvk().clone()).or_default();
            if !same.iter().any(|i| Arc::ptr_eq(i, informer)) {
                same.push(informer.clone());
            }
        }
        Self { by_kind }
    }

    /// One object of `kind`, from whichever cache holds it.
    pub fn get(&self, kind: &Gvk, key: &ObjectKey) -> Option<Arc<Entry>> {
        self.by_kind
            .get(kind)?
            .iter()
            .filter(|i| i.covers(key.namespace()))
            .find_map(|i| i.get(key))
    }

    /// The objects of `kind` in `namespace` (empty: all), each once, in key order.
    pub fn entries(&self, kind: &Gvk, namespace: &str) -> Vec<Arc<Entry>> {
        let mut out: BTreeMap<ObjectKey, Arc<Entry>> = BTreeMap::new();
        for informer in self.by_kind.get(kind).into_iter().flatten() {
            if !namespace.is_empty() && !informer.covers(namespace) {
                continue;
            }
            for entry in informer.entries() {
                if namespace.is_empty() || entry.key.namespace() == namespace {
                    out.entry(entry.key.clone()).or_insert(entry);
                }
            }
        }
        out.into_values().collect()
    }
}

impl View for Caches {
    fn get(&self, kind: &Gvk, namespace: &str, name: &str, reads: &Reads<'_>) -> Lookup {
        let entry = self.get(kind, &ObjectKey::new(namespace, name));
        match &entry {
            Some(e) => Lookup::of(namespace, Some((&e.labels(), &e.json)), reads),
            None => Lookup::Absent,
        }
    }

    fn list(
        &self,
        kind: &Gvk,
        namespace: &str,
        selector: &LabelSelector,
        reads: &Reads<'_>,
    ) -> Vec<Arc<str>> {
        self.entries(kind, namespace)
            .into_iter()
            .filter(|e| {
                let labels = e.labels();
                selector.matches(&labels) && reads.admits(e.key.namespace(), &labels)
            })
            .map(|e| e.json.clone())
            .collect()
    }

    /// From each cache's owner index: no object but the children is looked at.
    fn children(
        &self,
        kind: &Gvk,
        namespace: &str,
        owner_uid: &str,
        reads: &Reads<'_>,
    ) -> Vec<Arc<str>> {
        let mut out: BTreeMap<ObjectKey, Arc<str>> = BTreeMap::new();
        for informer in self.by_kind.get(kind).into_iter().flatten() {
            if !namespace.is_empty() && !informer.covers(namespace) {
                continue;
            }
            for key in informer.children_of(owner_uid) {
                if !namespace.is_empty() && key.namespace() != namespace {
                    continue;
                }
                let Some(entry) = informer.get(&key) else {
                    continue;
                };
                let controlled =
                    (entry.owners().iter()).any(|o| o.controller && o.uid == owner_uid);
                if controlled && reads.admits(key.namespace(), &entry.labels()) {
                    out.entry(key).or_insert_with(|| entry.json.clone());
                }
            }
        }
        out.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wasmctrl_core::{Gvk, LabelSelector, Namespaces, Scope, Verb};

    use super::*;

    #[test]
    fn children_come_from_the_owner_index_and_only_the_controlled_ones() {
        let gvk = Gvk::new("", "v1", "ConfigMap");
        let informer = Informer::detached(gvk.clone());
        let cm = |name: &str, namespace: &str, uid: &str, controller: bool| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace, "uid": format!("u-{name}"),
                    "resourceVersion": "1", "ownerReferences": [{"apiVersion": "example.com/v1",
                    "kind": "Thing", "name": "t", "uid": uid, "controller": controller}]}})
        };
        informer.put(cm("b", "ns", "owner", true));
        informer.put(cm("a", "ns", "owner", true));
        informer.put(cm("merely-owned", "ns", "owner", false));
        informer.put(cm("elsewhere", "other", "owner", true));
        informer.put(cm("someone-elses", "ns", "another", true));
        let caches = Caches::new([&informer]);
        let scope = Scope::new(
            Gvk::new("", "v1", "ConfigMap"),
            Namespaces::All,
            LabelSelector::default(),
        );
        let kind = Gvk::new("", "v1", "ConfigMap");
        let reads = scope.check_read(Verb::List, &kind, "ns", "").unwrap();
        let names = |found: Vec<Arc<str>>| {
            (found.iter())
                .map(|j| serde_json::from_str::<serde_json::Value>(j).unwrap())
                .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(caches.children(&gvk, "ns", "owner", &reads)),
            ["a", "b"]
        );
        let everywhere = scope.check_read(Verb::List, &kind, "", "").unwrap();
        assert_eq!(
            names(caches.children(&gvk, "", "owner", &everywhere)),
            ["a", "b", "elsewhere"]
        );
        // The trait's default (a list, then a filter) answers the same.
        struct Listing<'a>(&'a Caches);
        impl View for Listing<'_> {
            fn get(&self, k: &Gvk, ns: &str, n: &str, r: &Reads<'_>) -> Lookup {
                View::get(self.0, k, ns, n, r)
            }
            fn list(&self, k: &Gvk, ns: &str, s: &LabelSelector, r: &Reads<'_>) -> Vec<Arc<str>> {
                View::list(self.0, k, ns, s, r)
            }
        }
        assert_eq!(
            names(Listing(&caches).children(&gvk, "", "owner", &everywhere)),
            ["a", "b", "elsewhere"]
        );
    }
}
