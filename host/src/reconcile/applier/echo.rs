//! Echoes: the versions a reconcile's writes leave behind, which the controller waits for in
//! its caches before reconciling the key again.

use super::*;

/// The writes of one reconcile that changed an object some cache holds: the events they cause
/// (their echo) are on their way to that cache. The controller waits for the echoes of a key's
/// last reconcile before reconciling that key again (`controller::echoes`).
///
/// One echo per object, however many times the reconcile wrote it: it waits until the cache has
/// moved past every version those writes replaced, so a reconcile that writes an object's
/// status and then removes its finalizer is not satisfied by the status write's event alone
/// (as kube-controller-manager's expectations count each write, not the first).
#[derive(Clone)]
pub struct Echo {
    pub(super) informer: Arc<Informer>,
    pub(super) key: ObjectKey,
    /// The versions the writes replaced: the cached one before the first (`None`: not there,
    /// a create), then what each write but the last returned.
    pub(super) passed: Vec<Option<Version>>,
    /// What the last write returned, when known (a delete's is not).
    pub(super) after: Option<Version>,
}

impl std::fmt::Debug for Echo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Echo")
            .field("cache", &self.informer.watch().to_string())
            .field("key", &self.key)
            .field("passed", &self.passed)
            .field("after", &self.after)
            .finish()
    }
}

impl Echo {
    /// The echo of a write to `key` in `informer`'s cache, made over `before`.
    #[cfg(test)]
    pub(crate) fn new(informer: Arc<Informer>, key: ObjectKey, before: Option<Version>) -> Self {
        Self {
            informer,
            key,
            passed: vec![before],
            after: None,
        }
    }

    /// Whether the cache has moved past every version the writes replaced, so it shows the
    /// last write (or something later). resourceVersions are opaque: no order between them is
    /// assumed, only that a write changes the object's.
    pub fn seen(&self) -> bool {
        let now = self.informer.get(&self.key);
        let now = now.as_ref().map(|e| e.resource_version.clone());
        !self.passed.contains(&now)
    }

    /// Whether `other` is an echo of the same object in the same cache.
    pub(super) fn same_object(&self, other: &Echo) -> bool {
        Arc::ptr_eq(&self.informer, &other.informer) && self.key == other.key
    }
}

/// Adds `echo` (one write, `after` being what it returned) to a reconcile's `echoes`: a later
/// write to an object written before extends that object's echo with the version the earlier
/// write left, which the cache must move past too.
pub(super) fn add_echo(echoes: &mut Vec<Echo>, mut echo: Echo, after: Option<&str>) {
    echo.after = after
        .filter(|v| !v.is_empty())
        .map(|v| Version::new(v.to_owned()));
    match echoes.iter_mut().find(|e| e.same_object(&echo)) {
        Some(earlier) => {
            if let Some(left) = earlier.after.take() {
                let left = Some(left);
                if !earlier.passed.contains(&left) {
                    earlier.passed.push(left);
                }
            }
            earlier.after = echo.after;
        }
        None => echoes.push(echo),
    }
}

/// A write's target as the cache covering it holds it.
pub(super) struct Cached {
    pub(super) informer: Arc<Informer>,
    pub(super) key: ObjectKey,
    pub(super) entry: Option<Arc<Entry>>,
}

impl Cached {
    /// The cached resourceVersion; empty when the object is not cached.
    pub(super) fn version(&self) -> String {
        self.entry
            .as_ref()
            .map(|e| e.resource_version.to_string())
            .unwrap_or_default()
    }

    pub(super) fn into_echo(self) -> Echo {
        Echo {
            informer: self.informer,
            key: self.key,
            passed: vec![self.entry.map(|e| e.resource_version.clone())],
            after: None,
        }
    }
}

/// The object being reconciled, as the applier needs it.
pub struct Subject<'a> {
    /// The plugin's manifest (field manager, reconciled kind).
    pub manifest: &'a Manifest,
    /// Key of the reconciled object.
    pub key: &'a ObjectKey,
    /// The cached object, when it exists.
    pub object: Option<&'a Entry>,
    /// The cache the object was read from (where the echo of a status write shows).
    pub cache: Option<&'a Arc<Informer>>,
}

impl Subject<'_> {
    /// The echo of a write to the reconciled object; `None` when it was not read from a cache.
    pub(super) fn echo(&self) -> Option<Echo> {
        let (informer, object) = (self.cache?, self.object?);
        Some(Echo {
            informer: informer.clone(),
            key: object.key.clone(),
            passed: vec![Some(object.resource_version.clone())],
            after: None,
        })
    }
}
