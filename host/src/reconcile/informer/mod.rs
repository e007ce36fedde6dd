//! Shared informers: one list+watch per [`Watch`] (kind, namespace, label selector) for all
//! plugins that declare the same, on kube-runtime's `watcher` (paged or streaming lists,
//! bookmarks, 410 recovery, backoff). Namespaces and label selectors go to the API server, so
//! the host never lists, watches or holds objects no plugin declared ([`Informers`]); each
//! plugin reads through its own [`Caches`]. The cache keeps each
//! object's JSON with `managedFields` stripped, serialized once, ready to hand to a plugin, plus
//! an index from owner UID to children. Subscribers get every change, in order, with nothing
//! dropped; a new subscriber first receives the current contents marked as initial.
//!
//! A subscriber is a callback run on the informer's task (it maps the change to keys and queues
//! them), not a channel: a slow consumer cannot make memory grow, since the workqueue it feeds
//! holds each key once. Callbacks run after the store's lock is released, so one may read this or
//! any other informer's cache. An informer nobody subscribes to any more is stopped and its cache
//! freed ([`Informers::unsubscribe`]).

use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::discovery::Scope;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::watch;
use wasmctrl_core::Gvk;

mod caches;
mod registry;
mod sharded;

pub use caches::Caches;
pub use registry::Informers;

use crate::identity::Account;
use crate::replicas::sharding::{CacheSlots, Shards};
use crate::selector::{LabelSelector, Labels};
use wasmctrl_core::sync::{lock, read, write};

/// What one informer lists and watches: a kind, in one namespace or all, the objects matching a
/// label selector. The namespace and selector are sent to the API server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Watch {
    /// The kind.
    pub kind: Gvk,
    /// One namespace, or `None` for all (and for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// Only objects with these labels.
    pub labels: LabelSelector,
    /// In a shard group, only the objects of this replica's slots (the reconciled kind's caches,
    /// and its owned kinds' when keys are placed by namespace); the API server is asked for them
    /// with a `shardSelector` where it can be.
    pub sharded: bool,
    /// Whose rights it lists and watches with: a tenant plugin's account (impersonated), or
    /// the host's own (`None`). Tenants never share a cache with the host or each other.
    pub account: Option<Account>,
}

impl fmt::Display for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = &self.kind;
        if k.group.is_empty() {
            write!(f, "{}/{}", k.version, k.kind)?;
        } else {
            write!(f, "{}/{}/{}", k.group, k.version, k.kind)?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in {ns}")?,
            None => f.write_str(" in all namespaces")?,
        }
        if !self.labels.is_empty() {
            write!(f, " where {}", self.labels)?;
        }
        if self.sharded {
            f.write_str(" (this replica's shards)")?;
        }
        if let Some(account) = &self.account {
            write!(f, " as {account}")?;
        }
        Ok(())
    }
}

/// `namespace/name` of an object (namespace empty for cluster-scoped kinds).
///
/// Held as its text (`ns/name`, or `name` alone) in one shared allocation: a key is cloned into
/// the workqueue, the in-flight set and the owner index on every change, and kept with every
/// cached object, so a clone is a reference count and a cached key one small allocation.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    text: Arc<str>,
    /// Length of the namespace in `text` (0: cluster-scoped, `text` is the name).
    split: usize,
}

impl ObjectKey {
    /// A key from its parts.
    pub fn new(namespace: &str, name: &str) -> Self {
        let text = if namespace.is_empty() {
            Arc::from(name)
        } else {
            let mut text = String::with_capacity(namespace.len() + 1 + name.len());
            text.push_str(namespace);
            text.push('/');
            text.push_str(name);
            Arc::from(text)
        };
        Self {
            text,
            split: namespace.len(),
        }
    }

    /// Namespace, empty for cluster-scoped objects.
    pub fn namespace(&self) -> &str {
        &self.text[..self.split]
    }

    /// Name.
    pub fn name(&self) -> &str {
        match self.split {
            0 => &self.text,
            n => &self.text[n + 1..],
        }
    }
}

impl Ord for ObjectKey {
    /// By namespace, then name.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.namespace(), self.name()).cmp(&(other.namespace(), other.name()))
    }
}

impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectKey")
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .finish()
    }
}

impl fmt::Display for ObjectKey {
    /// `namespace/name`, or the name alone for cluster-scoped objects.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// An owner reference, as much as the host needs to map a child to its owner.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    /// Owner's `apiVersion`.
    pub api_version: String,
    /// Owner's kind.
    pub kind: String,
    /// Owner's name (same namespace as the child).
    pub name: String,
    /// Owner's UID.
    pub uid: String,
    /// Whether this owner is the controller.
    #[serde(default)]
    pub controller: bool,
}

/// One cached object: its JSON, and the few metadata fields read on every change inline.
///
/// The rest of the metadata (labels, annotations, finalizers, owners, UID) is parsed from the
/// JSON when asked for ([`meta`](Self::meta), [`labels`](Self::labels)) rather than kept beside
/// it: a cache of many objects is then little more than their JSON (`cargo bench --bench
/// memory`), and those fields are read far more rarely than objects are cached.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its key.
    pub key: ObjectKey,
    /// `metadata.resourceVersion`.
    pub resource_version: Version,
    /// `metadata.generation`, when the kind has one.
    pub generation: Option<i64>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The 64-bit FNV-1a hash of `metadata.uid`: its shard, in a shard group.
    pub uid_hash: u64,
    /// `metadata.ownerReferences` is not empty (so the owner index needs [`meta`](Self::meta)).
    owned: bool,
    /// The object as JSON without `managedFields`.
    pub json: Arc<str>,
}

/// A `metadata.resourceVersion`, opaque to clients, held compactly: the decimal revisions etcd
/// and the embedded API server hand out as a number (no allocation), anything else as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    /// A canonical decimal number (`"0"`, `"4711"`; not `"007"`).
    Revision(u64),
    /// Any other string.
    Opaque(Box<str>),
}

impl Version {
    /// Holds `text`, as a number when it is one written canonically (so it prints back the
    /// same).
    pub fn new(text: String) -> Self {
        match text.parse::<u64>() {
            Ok(n) if n.to_string() == text => Self::Revision(n),
            _ => Self::Opaque(text.into_boxed_str()),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Revision(n) => write!(f, "{n}"),
            Self::Opaque(s) => f.write_str(s),
        }
    }
}

/// The metadata of an [`Entry`] that is parsed from its JSON on demand.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Meta {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
    /// `metadata.ownerReferences`.
    #[serde(rename = "ownerReferences")]
    pub owners: Vec<Owner>,
}

impl Entry {
    /// Builds an entry from a watched object, serializing it once.
    pub fn from_object(mut obj: DynamicObject) -> Self {
        obj.metadata.managed_fields = None;
        let json = to_json(&obj);
        let meta = obj.metadata;
        Self {
            key: ObjectKey::new(
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default(),
            ),
            resource_version: Version::new(meta.resource_version.unwrap_or_default()),
            generation: meta.generation,
            deleting: meta.deletion_timestamp.is_some(),
            uid_hash: wasmctrl_core::shard::hash(meta.uid.as_deref().unwrap_or_default()),
            owned: meta.owner_references.is_some_and(|o| !o.is_empty()),
            json,
        }
    }

    /// The metadata not kept inline, parsed from the JSON. The JSON is the host's own
    /// serialization of an `ObjectMeta`, so it parses; were it not to, this is empty.
    pub fn meta(&self) -> Meta {
        #[derive(Deserialize)]
        struct Object {
            #[serde(default)]
            metadata: Meta,
        }
        serde_json::from_str::<Object>(&self.json)
            .map(|o| o.metadata)
            .unwrap_or_default()
    }

    /// `metadata.uid`, parsed from the JSON without building the rest of the metadata (an event
    /// about the object, an owner reference to it); empty if it has none.
    pub fn uid(&self) -> String {
        #[derive(Deserialize)]
        struct Object<'a> {
            #[serde(default, borrow)]
            metadata: Uid<'a>,
        }
        #[derive(Default, Deserialize)]
        struct Uid<'a> {
            #[serde(default, borrow)]
            uid: std::borrow::Cow<'a, str>,
        }
        serde_json::from_str::<Object<'_>>(&self.json)
            .map(|o| o.metadata.uid.into_owned())
            .unwrap_or_default()
    }

    /// Its shard slot, as an object of a reconciled kind in a shard group: by its uid's hash or
    /// its key's namespace, as `shards` places keys.
    pub fn slot(&self, shards: &Shards) -> usize {
        shards.slot(self.uid_hash, self.key.namespace(), self.key.name())
    }

    /// The owner references (none without parsing when there are none).
    pub fn owners(&self) -> Vec<Owner> {
        if self.owned {
            self.meta().owners
        } else {
            Vec::new()
        }
    }

    /// The labels, for a selector: parsed at the first lookup, so a selector with no
    /// requirements costs nothing.
    pub fn labels(&self) -> LazyLabels<'_> {
        LazyLabels {
            entry: self,
            parsed: OnceLock::new(),
        }
    }

    /// The object parsed back into JSON (for the rare reader that needs fields).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or(Value::Null)
    }
}

/// `obj` as JSON in one allocation of its exact size. Serialized into a reused buffer first: a
/// fresh string would grow by doubling, and the buffers it outgrew would be left as holes
/// between the long-lived entries of a large list (measured: ~10% of the cache's size).
fn to_json(obj: &DynamicObject) -> Arc<str> {
    thread_local! {
        static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    /// A buffer grown past this by one huge object is not kept.
    const KEEP: usize = 1 << 20;
    SCRATCH.with_borrow_mut(|buf| {
        buf.clear();
        let json = match serde_json::to_writer(&mut *buf, obj) {
            Ok(()) => std::str::from_utf8(buf).map_or_else(|_| Arc::from("{}"), Arc::from),
            Err(_) => Arc::from("{}"),
        };
        if buf.capacity() > KEEP {
            *buf = Vec::new();
        }
        json
    })
}

/// An entry's labels, parsed when first looked up ([`Entry::labels`]).
pub struct LazyLabels<'a> {
    entry: &'a Entry,
    parsed: OnceLock<BTreeMap<String, String>>,
}

impl Labels for LazyLabels<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        self.parsed
            .get_or_init(|| self.entry.meta().labels)
            .get(key)
            .map(String::as_str)
    }
}

/// A change to a cached object.
#[derive(Debug, Clone)]
pub enum Change {
    /// Added or modified; `old` is the previous version when there was one.
    Applied {
        /// Before.
        old: Option<Arc<Entry>>,
        /// After.
        new: Arc<Entry>,
    },
    /// Gone from the API server.
    Deleted(Arc<Entry>),
}

/// A change as delivered to a subscriber.
#[derive(Debug, Clone)]
pub struct Notice {
    /// What changed.
    pub change: Change,
    /// Part of the initial contents rather than a live event (queued at low priority).
    pub initial: bool,
}

/// A cached entry in the store's set, hashed and compared by its key (so the key is not held
/// twice, as a map's key and in the entry).
#[derive(Debug, Clone)]
struct Slot(Arc<Entry>);

impl Borrow<ObjectKey> for Slot {
    fn borrow(&self) -> &ObjectKey {
        &self.0.key
    }
}

impl Hash for Slot {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.key.hash(state);
    }
}

impl PartialEq for Slot {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}

impl Eq for Slot {}

#[derive(Default)]
struct Store {
    objects: HashSet<Slot>,
    children: HashMap<String, HashSet<ObjectKey>>,
}

impl Store {
    fn get(&self, key: &ObjectKey) -> Option<&Arc<Entry>> {
        self.objects.get(key).map(|s| &s.0)
    }

    fn insert(&mut self, entry: Arc<Entry>) -> Option<Arc<Entry>> {
        let old = self.objects.replace(Slot(entry.clone())).map(|s| s.0);
        if let Some(old) = &old {
            self.unindex(old);
        }
        for owner in entry.owners() {
            self.children
                .entry(owner.uid)
                .or_default()
                .insert(entry.key.clone());
        }
        old
    }

    fn remove(&mut self, key: &ObjectKey) -> Option<Arc<Entry>> {
        let old = self.objects.take(key)?.0;
        self.unindex(&old);
        Some(old)
    }

    fn unindex(&mut self, entry: &Entry) {
        for owner in entry.owners() {
            if let Some(set) = self.children.get_mut(&owner.uid) {
                set.remove(&entry.key);
                if set.is_empty() {
                    self.children.remove(&owner.uid);
                }
            }
        }
    }

    fn entries(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.objects.iter().map(|s| &s.0)
    }
}

/// Receives an informer's changes, on the informer's task; it must not block.
pub type Subscriber = Box<dyn Fn(&Notice) + Send + Sync>;

type Subscribers = Vec<(u64, Arc<dyn Fn(&Notice) + Send + Sync>)>;

/// The cache and watch of one [`Watch`].
pub struct Informer {
    watch: Watch,
    store: RwLock<Store>,
    /// Held while a change is made and delivered, and while a subscriber takes its snapshot, so
    /// every subscriber sees every change exactly once and in order.
    delivering: Mutex<()>,
    subscribers: Mutex<Subscribers>,
    next_id: Mutex<u64>,
    synced: watch::Sender<bool>,
    resource: Mutex<Option<(ApiResource, bool)>>,
    /// For a cache sharded in fact (a [`Watch::sharded`] one whose kind has the field keys are
    /// placed by: any kind by uid, a namespaced one by namespace): the slots it holds every
    /// object of (each of its watches has listed), `None` until it does.
    shard: Mutex<Option<Option<CacheSlots>>>,
}

impl Informer {
    fn new(watch: Watch) -> Self {
        Self {
            watch,
            store: RwLock::new(Store::default()),
            delivering: Mutex::new(()),
            subscribers: Mutex::new(Vec::new()),
            next_id: Mutex::new(0),
            synced: watch::channel(false).0,
            resource: Mutex::new(None),
            shard: Mutex::new(None),
        }
    }

    /// A cache with no watch behind it, filled by hand: for unit tests of what reads caches.
    #[cfg(test)]
    pub(crate) fn detached(kind: Gvk) -> Arc<Self> {
        Arc::new(Self::new(Watch {
            kind,
            namespace: None,
            labels: LabelSelector::default(),
            sharded: false,
            account: None,
        }))
    }

    /// Caches `object` as a watch event would (see [`detached`](Self::detached)).
    #[cfg(test)]
    pub(crate) fn put(&self, object: serde_json::Value) {
        self.upsert(serde_json::from_value(object).unwrap_or_else(|e| panic!("an object: {e}")));
    }

    /// Removes an object as a watch's DELETED event would.
    #[cfg(test)]
    pub(crate) fn remove(&self, object: serde_json::Value) {
        self.delete(&serde_json::from_value(object).unwrap_or_else(|e| panic!("an object: {e}")));
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Store> {
        read(&self.store)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Store> {
        write(&self.store)
    }

    /// The kind.
    pub fn gvk(&self) -> &Gvk {
        &self.watch.kind
    }

    /// What it watches.
    pub fn watch(&self) -> &Watch {
        &self.watch
    }

    /// Whether it would hold an object of its kind in `namespace` (given its labels match): it
    /// watches that namespace, all of them, or a cluster-scoped kind.
    pub fn covers(&self, namespace: &str) -> bool {
        match &self.watch.namespace {
            None => true,
            Some(ns) => {
                ns == namespace || self.resource().is_some_and(|(_, namespaced)| !namespaced)
            }
        }
    }

    /// Whether it holds every object of its kind in `namespace` (given its labels match), so
    /// that one it lacks does not exist: it [`covers`](Self::covers) the namespace and, when
    /// sharded, holds the whole namespace's slot.
    pub fn complete_in(&self, namespace: &str) -> bool {
        self.covers(namespace)
            && lock(&self.shard)
                .as_ref()
                .is_none_or(|listed| listed.is_some_and(|at| at.holds_all_of(namespace)))
    }

    /// For a sharded cache, the version of the slots it holds every object of (`Some(None)`
    /// while it has listed none yet); `None` for a cache that is not sharded (yet).
    pub fn shard_version(&self) -> Option<Option<u64>> {
        lock(&self.shard).map(|listed| listed.map(|at| at.version))
    }

    /// The API resource and whether it is namespaced, once discovery has resolved it.
    pub fn resource(&self) -> Option<(ApiResource, bool)> {
        lock(&self.resource).clone()
    }

    /// One cached object.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Entry>> {
        self.read().get(key).cloned()
    }

    /// Keys of the cached objects owned by `uid`.
    pub fn children_of(&self, uid: &str) -> Vec<ObjectKey> {
        self.read()
            .children
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many objects are cached, and how many owners the owner index holds children of.
    pub fn sizes(&self) -> (usize, usize) {
        let store = self.read();
        (store.objects.len(), store.children.len())
    }

    /// Every cached object.
    pub fn entries(&self) -> Vec<Arc<Entry>> {
        self.read().entries().cloned().collect()
    }

    /// Whether the first full list has been cached.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until the first full list has been cached.
    pub async fn synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Calls `subscriber` with the current contents (as initial notices), then with every
    /// change from now on, until [`unsubscribe`](Self::unsubscribe).
    pub fn subscribe(&self, subscriber: Subscriber) -> u64 {
        let subscriber: Arc<dyn Fn(&Notice) + Send + Sync> = Arc::from(subscriber);
        // No change can slip between the snapshot and the live stream: changes are delivered
        // under the same lock.
        let _delivering = lock(&self.delivering);
        let snapshot = self.entries();
        for entry in snapshot {
            let change = Change::Applied {
                old: None,
                new: entry,
            };
            subscriber(&Notice {
                change,
                initial: true,
            });
        }
        let id = {
            let mut next = lock(&self.next_id);
            *next += 1;
            *next
        };
        lock(&self.subscribers).push((id, subscriber));
        id
    }

    /// Stops delivering to a subscriber; returns how many remain.
    fn unsubscribe(&self, id: u64) -> usize {
        let mut subscribers = lock(&self.subscribers);
        subscribers.retain(|(i, _)| *i != id);
        subscribers.len()
    }

    /// Delivers changes to every subscriber. Called with `delivering` held and the store's
    /// lock released.
    fn publish(&self, changes: Vec<Change>, initial: bool) {
        if changes.is_empty() {
            return;
        }
        // Cloned out so a subscriber may (un)subscribe without deadlocking.
        let subscribers: Vec<_> = lock(&self.subscribers)
            .iter()
            .map(|(_, s)| s.clone())
            .collect();
        for change in changes {
            let initial = initial && matches!(change, Change::Applied { .. });
            let notice = Notice { change, initial };
            for subscriber in &subscribers {
                subscriber(&notice);
            }
        }
    }

    fn upsert(&self, obj: DynamicObject) {
        let entry = Arc::new(Entry::from_object(obj));
        let _delivering = lock(&self.delivering);
        let old = self.write().insert(entry.clone());
        // Relists re-deliver unchanged objects; they are not changes.
        if old
            .as_ref()
            .is_some_and(|o| o.resource_version == entry.resource_version)
        {
            return;
        }
        self.publish(vec![Change::Applied { old, new: entry }], false);
    }

    fn delete(&self, obj: &DynamicObject) {
        let key = ObjectKey::new(
            obj.metadata.namespace.as_deref().unwrap_or_default(),
            obj.metadata.name.as_deref().unwrap_or_default(),
        );
        let _delivering = lock(&self.delivering);
        let old = self.write().remove(&key);
        if let Some(old) = old {
            // At the deletion's revision, which orders it against other changes (see
            // `sharding::tombstones`); the rest as last cached.
            let deleted = match &obj.metadata.resource_version {
                Some(version) => Arc::new(Entry {
                    resource_version: Version::new(version.clone()),
                    ..(*old).clone()
                }),
                None => old,
            };
            self.publish(vec![Change::Deleted(deleted)], false);
        }
    }

    /// Installs a complete (re)list of the objects `within` selects in one step, as
    /// kube-runtime's reflector does: readers see the old contents or the new, never a
    /// half-loaded cache (a plugin pruning what it cannot see would otherwise forget objects not
    /// loaded yet). Objects cached, selected and not listed were deleted while we were not
    /// watching (or, in a sharded cache, are no longer this replica's). How many went.
    fn replace_within(
        &self,
        entries: Vec<Arc<Entry>>,
        initial: bool,
        within: impl Fn(&Entry) -> bool,
    ) -> usize {
        let keys: HashSet<ObjectKey> = entries.iter().map(|e| e.key.clone()).collect();
        let _delivering = lock(&self.delivering);
        let mut store = self.write();
        let gone: Vec<ObjectKey> = (store.entries())
            .filter(|e| within(e) && !keys.contains(&e.key))
            .map(|e| e.key.clone())
            .collect();
        let mut changes = Vec::with_capacity(entries.len() + gone.len());
        for entry in entries {
            let old = store.insert(entry.clone());
            // Relists re-deliver unchanged objects; they are not changes.
            if old
                .as_ref()
                .is_none_or(|o| o.resource_version != entry.resource_version)
            {
                changes.push(Change::Applied { old, new: entry });
            }
        }
        let removed = gone.len();
        for key in gone {
            if let Some(old) = store.remove(&key) {
                changes.push(Change::Deleted(old));
            }
        }
        drop(store);
        self.publish(changes, initial);
        removed
    }

    async fn run(self: Arc<Self>, client: kube::Client, sharding: Option<(Shards, Duration)>) {
        let (resource, namespaced) = self.resolve(&client).await;
        // By namespace, only a namespaced kind is sharded (a cluster-scoped object has none).
        let sharding = sharding.filter(|(shards, _)| {
            self.watch.sharded && (namespaced || shards.field() == wasmctrl_core::shard::Field::Uid)
        });
        if sharding.is_some() {
            // Known to be sharded, and holding no slots yet, before the kind is known.
            *lock(&self.shard) = Some(None);
        }
        *lock(&self.resource) = Some((resource.clone(), namespaced));
        let namespace = self.watch.namespace.clone().filter(|_| namespaced);
        let mut config = watcher::Config::default().any_semantic();
        if !self.watch.labels.is_empty() {
            config = config.labels(&self.watch.labels.to_string());
        }
        match sharding {
            Some((shards, merge_after)) => {
                let slots = shards.cache_slots();
                let source = sharded::Source {
                    client,
                    resource,
                    namespace,
                    config,
                };
                let watches = sharded::Sharded::new(&self, source, shards, merge_after);
                watches.run(slots).await;
            }
            None => {
                self.watch_all(api(client, &resource, namespace.as_deref()), config)
                    .await
            }
        }
    }

    /// Keeps the cache holding every object `api` and `config` select.
    async fn watch_all(&self, api: Api<DynamicObject>, config: watcher::Config) {
        let mut stream = watcher::watcher(api, config).default_backoff().boxed();
        let mut listed = Vec::new();
        let mut first = true;
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Init) => listed.clear(),
                // Turned into an entry at once: the decoded object is freed page by page rather
                // than all held until the list is complete.
                Ok(Event::InitApply(obj)) => listed.push(Arc::new(Entry::from_object(obj))),
                Ok(Event::InitDone) => {
                    self.replace_within(std::mem::take(&mut listed), first, |_| true);
                    first = false;
                    self.synced.send_replace(true);
                }
                Ok(Event::Apply(obj)) => self.upsert(obj),
                Ok(Event::Delete(obj)) => self.delete(&obj),
                Err(e) => {
                    tracing::warn!(kind = %self.watch.kind.kind, error = %e, "watch failed; retrying with backoff")
                }
            }
        }
    }

    /// Finds the kind's resource through discovery, retrying while it is not served yet (a CRD
    /// installed after start is picked up when it appears).
    async fn resolve(&self, client: &kube::Client) -> (ApiResource, bool) {
        let mut delay = Duration::from_millis(200);
        loop {
            match kube::discovery::pinned_kind(client, &(&self.watch.kind).into()).await {
                Ok((resource, caps)) => return (resource, caps.scope == Scope::Namespaced),
                Err(e) => {
                    tracing::info!(kind = %self.watch.kind.kind, group = %self.watch.kind.group, error = %e, "kind not served yet; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(10));
                }
            }
        }
    }
}

/// The API of `resource` in `namespace` (`None`: all namespaces, or a cluster-scoped kind).
fn api(
    client: kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client, ns, resource),
        None => Api::all_with(client, resource),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(name: &str, owner_uid: Option<&str>) -> Arc<Entry> {
        let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": "1",
                         "managedFields": [{"manager": "someone"}]}});
        if let Some(uid) = owner_uid {
            obj["metadata"]["ownerReferences"] = json!([{"apiVersion": "example.com/v1", "kind": "Thing", "name": "t", "uid": uid, "controller": true}]);
        }
        Arc::new(Entry::from_object(serde_json::from_value(obj).unwrap()))
    }

    #[test]
    fn metadata_not_kept_inline_is_read_back_from_the_json() {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                "generation": 3, "deletionTimestamp": "2026-11-24T00:00:00Z",
                "labels": {"app": "web", "tier": "a \"quoted\" value"},
                "annotations": {"note": "x"}, "finalizers": ["example.com/f"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                    "uid": "o-1", "controller": true, "blockOwnerDeletion": true},
                    {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "o-2"}]},
            "data": {"metadata": "not this one"}});
        let entry = Entry::from_object(serde_json::from_value(obj).unwrap());
        assert_eq!(entry.key, ObjectKey::new("ns", "m"));
        assert_eq!(
            (&entry.resource_version, entry.generation, entry.deleting),
            (&Version::Revision(7), Some(3), true)
        );
        let meta = entry.meta();
        assert_eq!(meta.uid, "u-1");
        assert_eq!(entry.uid(), "u-1");
        assert_eq!(meta.labels["tier"], "a \"quoted\" value");
        assert_eq!(meta.annotations["note"], "x");
        assert_eq!(meta.finalizers, ["example.com/f"]);
        assert_eq!(entry.owners(), meta.owners);
        assert_eq!(
            meta.owners
                .iter()
                .map(|o| (o.kind.as_str(), o.uid.as_str(), o.controller))
                .collect::<Vec<_>>(),
            [("ReplicaSet", "o-1", true), ("Pod", "o-2", false)]
        );
        let labels = entry.labels();
        assert_eq!(labels.label("app"), Some("web"));
        assert_eq!(labels.label("missing"), None);
        let bare = Entry::from_object(
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "b"}}))
            .unwrap(),
        );
        assert_eq!(bare.meta(), Meta::default());
        assert_eq!(bare.uid(), "");
        assert!(bare.owners().is_empty());
    }

    #[test]
    fn keys_give_back_their_parts_and_order_by_namespace_then_name() {
        let namespaced = ObjectKey::new("ns", "web");
        assert_eq!((namespaced.namespace(), namespaced.name()), ("ns", "web"));
        assert_eq!(namespaced.to_string(), "ns/web");
        let cluster = ObjectKey::new("", "node-1");
        assert_eq!((cluster.namespace(), cluster.name()), ("", "node-1"));
        assert_eq!(cluster.to_string(), "node-1");
        // Same text, different parts: not the same key.
        assert_ne!(ObjectKey::new("a", "b"), ObjectKey::new("", "a/b"));
        // By namespace first: "a-x" sorts before "a/..." as text but after "a" as a namespace.
        let mut keys = [
            ObjectKey::new("a-x", "c"),
            ObjectKey::new("a", "z"),
            ObjectKey::new("", "n"),
            ObjectKey::new("a", "b"),
        ];
        keys.sort();
        let parts: Vec<_> = keys.iter().map(|k| (k.namespace(), k.name())).collect();
        assert_eq!(parts, [("", "n"), ("a", "b"), ("a", "z"), ("a-x", "c")]);
        let lookup: HashSet<ObjectKey> = keys.iter().cloned().collect();
        assert!(lookup.contains(&ObjectKey::new("a", "z")));
        assert!(!lookup.contains(&ObjectKey::new("a", "y")));
    }

    #[test]
    fn resource_versions_print_back_as_given() {
        for text in [
            "0",
            "4711",
            "18446744073709551615",
            "007",
            "+1",
            "",
            "abc",
            "18446744073709551616",
        ] {
            let version = Version::new(text.into());
            assert_eq!(version.to_string(), text);
            let numeric = matches!(version, Version::Revision(_));
            assert_eq!(
                numeric,
                ["0", "4711", "18446744073709551615"].contains(&text),
                "{text}"
            );
        }
        assert_ne!(Version::new("7".into()), Version::new("07".into()));
    }

    #[test]
    fn entries_drop_managed_fields_and_index_children_by_owner_uid() {
        let mut store = Store::default();
        let child = entry("a", Some("owner-1"));
        assert!(!child.json.contains("managedFields"));
        assert_eq!(child.owners()[0].name, "t");
        store.insert(child);
        store.insert(entry("b", Some("owner-1")));
        store.insert(entry("c", None));
        assert_eq!(store.children["owner-1"].len(), 2);
        // A new version without the owner leaves the index.
        store.insert(entry("b", None));
        assert_eq!(store.children["owner-1"].len(), 1);
        store.remove(&ObjectKey::new("ns", "a"));
        assert!(!store.children.contains_key("owner-1"));
    }
}
