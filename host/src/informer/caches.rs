//! What one plugin reads: the informers it subscribed to, by kind, as a [`View`]. A kind may
//! have several (one per declared namespace, or the watched kind with its selector and the same
//! kind read without one); reads look in every one that covers the namespace asked about.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube::core::GroupVersionKind;
use wasmctrl_scope::Reads;

use super::{Entry, Informer, ObjectKey};
use crate::selector::Selector;
use crate::view::{Lookup, View};

/// A plugin's caches, by kind.
#[derive(Default)]
pub struct Caches {
    by_kind: HashMap<GroupVersionKind, Vec<Arc<Informer>>>,
}

impl Caches {
    /// The caches of these informers.
    pub fn new<'a>(informers: impl IntoIterator<Item = &'a Arc<Informer>>) -> Self {
        let mut by_kind: HashMap<GroupVersionKind, Vec<Arc<Informer>>> = HashMap::new();
        for informer in informers {
            let same = by_kind.entry(informer.gvk().clone()).or_default();
            if !same.iter().any(|i| Arc::ptr_eq(i, informer)) {
                same.push(informer.clone());
            }
        }
        Self { by_kind }
    }

    /// One object of `kind`, from whichever cache holds it.
    pub fn get(&self, kind: &GroupVersionKind, key: &ObjectKey) -> Option<Arc<Entry>> {
        self.by_kind
            .get(kind)?
            .iter()
            .filter(|i| i.covers(key.namespace()))
            .find_map(|i| i.get(key))
    }

    /// The objects of `kind` in `namespace` (empty: all), each once, in key order.
    pub fn entries(&self, kind: &GroupVersionKind, namespace: &str) -> Vec<Arc<Entry>> {
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
    fn get(
        &self,
        kind: &GroupVersionKind,
        namespace: &str,
        name: &str,
        reads: &Reads<'_>,
    ) -> Lookup {
        let entry = self.get(kind, &ObjectKey::new(namespace, name));
        match &entry {
            Some(e) => Lookup::of(namespace, Some((&e.labels(), &e.json)), reads),
            None => Lookup::Absent,
        }
    }

    fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: &str,
        selector: &Selector,
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
}
