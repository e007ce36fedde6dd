//! From informer notices to keys: which events on the watched kind queue their own key (the
//! manifest's selector and predicates), and how events on owned and related kinds map to keys of
//! the watched kind (owner references, same name, a label, an annotation, the namespace).

use std::sync::Arc;

use wasmctrl_core::Gvk;
use wasmctrl_core::Scope;

use crate::plugin::{Manifest, wit};
use crate::reconcile::informer::{Change, Entry, Informer, Notice, ObjectKey};

/// Keys queued from one notice: `(key, initial)`.
pub(super) type Keys = Vec<(ObjectKey, bool)>;

/// Which keys one notice of a subscribed kind queues.
pub(super) type Mapper = Box<dyn Fn(&Notice, &mut Keys) + Send + Sync>;

/// Which events on the watched kind queue their own key.
pub(super) struct Filter {
    pub(super) manifest: Manifest,
    pub(super) scope: Arc<Scope>,
}

impl Filter {
    fn selected(&self, e: &Entry) -> bool {
        self.scope.reconciles_in(e.key.namespace()) && self.manifest.selector.matches(&e.labels())
    }

    pub(super) fn primary(&self, notice: &Notice, out: &mut Keys) {
        let pass = match &notice.change {
            Change::Deleted(e) => self.selected(e),
            Change::Applied { old: None, new } => self.selected(new),
            Change::Applied {
                old: Some(old),
                new,
            } => (self.selected(new) || self.selected(old)) && self.predicates_pass(old, new),
        };
        if pass {
            let key = match &notice.change {
                Change::Deleted(e) | Change::Applied { new: e, .. } => e.key.clone(),
            };
            out.push((key, notice.initial));
        }
    }

    fn predicates_pass(&self, old: &Entry, new: &Entry) -> bool {
        let predicates = &self.manifest.predicates;
        predicates.is_empty()
            || predicates.iter().any(|p| match p {
                wit::Predicate::GenerationChanged => {
                    old.generation != new.generation || new.generation.is_none()
                }
                wit::Predicate::LabelsChanged => old.meta().labels != new.meta().labels,
                wit::Predicate::AnnotationsChanged => {
                    old.meta().annotations != new.meta().annotations
                }
                wit::Predicate::FinalizersChanged => {
                    old.deleting != new.deleting || old.meta().finalizers != new.meta().finalizers
                }
            })
    }
}

pub(super) fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

pub(super) fn entries_of(notice: &Notice) -> Vec<&Arc<Entry>> {
    match &notice.change {
        Change::Deleted(e) => vec![e],
        Change::Applied { old, new } => old.iter().chain(std::iter::once(new)).collect(),
    }
}

/// Owned children map to the owner named in their owner references (old and new versions, so a
/// child that changes owner notifies both).
pub(super) fn by_owner(owner_kind: &Gvk, notice: &Notice, out: &mut Keys) {
    for entry in entries_of(notice) {
        for owner in entry.owners() {
            if owner.kind == owner_kind.kind && group_of(&owner.api_version) == owner_kind.group {
                let key = ObjectKey::new(entry.key.namespace(), &owner.name);
                if !out.iter().any(|(k, _)| *k == key) {
                    out.push((key, notice.initial));
                }
            }
        }
    }
}

pub(super) fn by_mapping(
    mapping: &wit::Mapping,
    owner_kind: &Gvk,
    watched: &[Arc<Informer>],
    notice: &Notice,
    out: &mut Keys,
) {
    for entry in entries_of(notice) {
        let ns = entry.key.namespace();
        match mapping {
            wit::Mapping::Owner => return by_owner(owner_kind, notice, out),
            wit::Mapping::SameName => out.push((entry.key.clone(), notice.initial)),
            wit::Mapping::Label(l) => {
                if let Some(name) = entry.meta().labels.get(l) {
                    out.push((ObjectKey::new(ns, name), notice.initial));
                }
            }
            wit::Mapping::Annotation(a) => {
                if let Some(name) = entry.meta().annotations.get(a) {
                    out.push((ObjectKey::new(ns, name), notice.initial));
                }
            }
            wit::Mapping::Namespace => {
                for e in watched
                    .iter()
                    .filter(|w| w.covers(ns))
                    .flat_map(|w| w.entries())
                    .filter(|e| e.key.namespace() == ns)
                {
                    out.push((e.key.clone(), notice.initial));
                }
            }
        }
    }
    out.dedup();
}
