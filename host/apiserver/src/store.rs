//! Object storage: every object by resource, one global resourceVersion counter, a bounded
//! per-resource event history for watch resume, and list snapshots for `limit`/`continue`.
//!
//! The whole state sits behind one mutex: writes are short (a map insert and an event push),
//! and one lock makes "assign the next resourceVersion and publish the event" atomic, which is
//! what gives watchers a total order.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::watch;

use super::catalog::{self, Catalog, ResKey};
use super::compaction::{self, Compaction};
use super::events;
use super::json::str_at;
use super::metrics::{self, Metrics};
use super::persist::{Log, Record};
use super::schema;
use super::status::ApiError;
use wasmctrl_core::sync::lock;

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl WatchEventType {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change of one object.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// What happened.
    pub kind: WatchEventType,
    /// Object after the change (for deletions: its last state, with the deletion's RV).
    pub object: Arc<Value>,
    /// Object before the change, for MODIFIED (lets selector watches synthesise ADDED/DELETED)
    /// and DELETED (with its own resourceVersion: lists at older revisions restore it).
    pub old: Option<Arc<Value>>,
    /// resourceVersion of the change.
    pub rv: u64,
}

/// Objects of one resource and their recent history.
#[derive(Debug, Default)]
pub struct Table {
    /// Objects by `(namespace, name)` (`""` namespace for cluster-scoped).
    pub objects: BTreeMap<(String, String), Arc<Value>>,
    /// Recent events, oldest first.
    pub history: VecDeque<Arc<WatchEvent>>,
    /// Events at or below this RV may have been dropped from `history`.
    pub compacted: u64,
}

/// A frozen list result that `continue` tokens page through.
#[derive(Debug)]
pub struct Snapshot {
    /// Matching objects in key order.
    pub items: Vec<Arc<Value>>,
    /// resourceVersion the snapshot was taken at.
    pub rv: u64,
}

/// The simulated cluster's settings and wake-ups, kept under the store lock because the write
/// path reads them (a Pod's admission, its graceful deletion) as it writes.
#[derive(Debug, Default)]
pub struct ClusterSettings {
    /// Whether Pods are admitted as kube's `ServiceAccount` admission plugin admits them (their
    /// account must exist: on only where a controller keeps namespaces' accounts).
    pub service_accounts: bool,
    /// Whether a kubelet (the stand-in of `cluster::kubelet`) finishes deleting Pods bound to
    /// Nodes: such a Pod is then deleted gracefully, as kube does it (`deletionTimestamp` set
    /// `terminationGracePeriodSeconds` ahead; removed when the kubelet has stopped it).
    pub kubelet: bool,
    /// The earliest time a background controller asked to run again (a Pod's next lifecycle
    /// stage, a Deployment's progress deadline, a CronJob's next schedule).
    pub wake_at: Option<std::time::Instant>,
    /// How far the CronJob controller's clock is ahead of the system's (a test clock).
    pub cronjob_clock: chrono::TimeDelta,
}

/// Everything under the store lock.
#[derive(Debug)]
pub struct State {
    /// Last assigned resourceVersion.
    rv: u64,
    /// Served resources.
    catalog: Catalog,
    /// Objects per resource.
    tables: HashMap<ResKey, Table>,
    history_cap: usize,
    snapshots: VecDeque<(u64, Arc<Snapshot>)>,
    next_snapshot: u64,
    log: Option<Log>,
    /// Whether a write since the garbage collector's last pass could have given it work: an
    /// object removed, or one written with owner references or a deletion timestamp. Writes of
    /// anything else (status updates, Events) cannot orphan or unblock an object, so the
    /// collector skips its whole-store scan after them.
    pub gc_pending: bool,
    /// What the simulated cluster does beyond storing objects (dev mode's controllers), read
    /// and set under the same lock as the objects they act on.
    pub cluster: ClusterSettings,
    /// How far back revisions stay readable (etcd's compaction as kube-apiserver drives it).
    pub compaction: Compaction,
    /// Where writes are timed (`etcd_request_duration_seconds`).
    metrics: Arc<Metrics>,
}

const SNAPSHOTS_KEPT: usize = 256;

impl State {
    /// The last resourceVersion assigned.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// The served resources.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The served resources, to add or drop a CRD's.
    pub fn catalog_mut(&mut self) -> &mut Catalog {
        &mut self.catalog
    }

    /// A resource's table, if anything of it was ever stored.
    pub fn table_of(&self, key: &ResKey) -> Option<&Table> {
        self.tables.get(key)
    }

    /// Every resource's table.
    pub fn tables(&self) -> impl Iterator<Item = (&ResKey, &Table)> {
        self.tables.iter()
    }

    /// Asks the background controllers to run again within `after` at the latest.
    pub fn wake_within(&mut self, after: std::time::Duration) {
        let at = std::time::Instant::now() + after;
        let wake_at = &mut self.cluster.wake_at;
        *wake_at = Some(wake_at.map_or(at, |w| w.min(at)));
    }

    /// The table of a resource (created on first use).
    pub fn table(&mut self, key: &ResKey) -> &mut Table {
        self.tables.entry(key.clone()).or_default()
    }

    /// Sets the `default`s of their CRD's schema in the stored custom resources (of the CRD
    /// `crd`, or of every CRD), as kube defaults what it reads from storage: an object stored
    /// before a default was added reads back with it. Their resourceVersions stay, as kube's
    /// do (nothing is written).
    pub fn default_custom_objects(&mut self, crd: Option<&Value>) {
        let only = crd
            .and_then(catalog::crd_resource)
            .map(|r| (r.group, r.plural));
        let resources: Vec<Arc<catalog::Resource>> = (self.catalog.all())
            .filter(|r| {
                r.custom
                    && only
                        .as_ref()
                        .is_none_or(|(g, p)| *g == r.group && *p == r.plural)
            })
            .cloned()
            .collect();
        for r in resources {
            let Some(table) = self.tables.get_mut(&catalog::storage_key(&r)) else {
                continue;
            };
            for obj in table.objects.values_mut() {
                let api_version = str_at(obj, "/apiVersion");
                let version = api_version.rsplit('/').next().unwrap_or_default();
                let Some(schema) = r.schemas.get(version) else {
                    continue;
                };
                let mut defaulted = (**obj).clone();
                schema::fill_defaults(schema, &mut defaulted);
                if defaulted != **obj {
                    *obj = Arc::new(defaulted);
                }
            }
        }
    }

    /// Current object, if any.
    pub fn get(&self, key: &ResKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.tables
            .get(key)?
            .objects
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Stores `obj` under the next resourceVersion and publishes ADDED or MODIFIED. Events
    /// written through `events.k8s.io` are stored in their core form.
    pub fn put(&mut self, key: &ResKey, mut obj: Value) -> Result<Arc<Value>, ApiError> {
        let started = std::time::Instant::now();
        if events::is_core_events(&key.0, &key.1) {
            obj = events::to_core(obj);
        }
        self.compaction.tick(self.rv);
        let rv = self.rv + 1;
        obj["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let ns = str_at(&obj, "/metadata/namespace").to_string();
        let name = str_at(&obj, "/metadata/name").to_string();
        if let Some(log) = &mut self.log {
            log.append(&Record::Put {
                key: key.clone(),
                obj: obj.clone(),
            })
            .map_err(|e| ApiError::internal(format!("persisting: {e}")))?;
        }
        self.rv = rv;
        let owned = obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| !refs.is_empty());
        self.gc_pending |= owned || obj.pointer("/metadata/deletionTimestamp").is_some();
        let obj = Arc::new(obj);
        let cap = self.history_cap;
        let t = self.table(key);
        let old = t.objects.insert((ns, name), obj.clone());
        let (kind, operation) = if old.is_some() {
            (WatchEventType::Modified, "update")
        } else {
            (WatchEventType::Added, "create")
        };
        push(
            t,
            cap,
            WatchEvent {
                kind,
                object: obj.clone(),
                old,
                rv,
            },
        );
        (self.metrics).stored(operation, &key.0, &key.1, started.elapsed());
        Ok(obj)
    }

    /// Removes an object and publishes DELETED with the deletion's resourceVersion.
    pub fn remove(
        &mut self,
        key: &ResKey,
        ns: &str,
        name: &str,
    ) -> Result<Option<Arc<Value>>, ApiError> {
        let started = std::time::Instant::now();
        let Some(cur) = self.get(key, ns, name) else {
            return Ok(None);
        };
        self.compaction.tick(self.rv);
        let rv = self.rv + 1;
        if let Some(log) = &mut self.log {
            log.append(&Record::Delete {
                key: key.clone(),
                namespace: ns.into(),
                name: name.into(),
                rv,
            })
            .map_err(|e| ApiError::internal(format!("persisting: {e}")))?;
        }
        self.rv = rv;
        self.gc_pending = true;
        let mut last = (*cur).clone();
        last["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let last = Arc::new(last);
        let cap = self.history_cap;
        let t = self.table(key);
        t.objects.remove(&(ns.to_string(), name.to_string()));
        push(
            t,
            cap,
            WatchEvent {
                kind: WatchEventType::Deleted,
                object: last.clone(),
                old: Some(cur),
                rv,
            },
        );
        (self.metrics).stored("delete", &key.0, &key.1, started.elapsed());
        Ok(Some(last))
    }

    /// Saves a list result for `continue` and returns its id.
    pub fn save_snapshot(&mut self, snap: Arc<Snapshot>) -> u64 {
        self.next_snapshot += 1;
        let id = self.next_snapshot;
        self.snapshots.push_back((id, snap));
        while self.snapshots.len() > SNAPSHOTS_KEPT {
            self.snapshots.pop_front();
        }
        id
    }

    /// A saved list result, if not yet evicted.
    pub fn snapshot(&self, id: u64) -> Option<Arc<Snapshot>> {
        self.snapshots
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, s)| s.clone())
    }

    /// Events of a resource after `rv`, or `Err` if some may be lost (410).
    pub fn events_since(&self, key: &ResKey, rv: u64) -> Result<Vec<Arc<WatchEvent>>, ()> {
        let Some(t) = self.tables.get(key) else {
            return Ok(vec![]);
        };
        if rv < t.compacted {
            return Err(());
        }
        let start = t.history.partition_point(|e| e.rv <= rv);
        Ok(t.history.range(start..).cloned().collect())
    }

    /// The objects of a resource as they were at revision `rv` (at most the current one), by
    /// key, rebuilt from the current ones by undoing the newer events of its history, newest
    /// first (bounded by the history cap); `None` when `rv` is compacted (etcd's compaction,
    /// [`Compaction`]) or older than the resource's history reaches.
    pub fn objects_at(&mut self, key: &ResKey, rv: u64) -> Option<BTreeMap<ObjectKey, Arc<Value>>> {
        self.compaction.tick(self.rv);
        if rv < self.compaction.compacted() {
            return None;
        }
        let Some(t) = self.tables.get(key) else {
            return Some(BTreeMap::new());
        };
        if rv < t.compacted {
            return None;
        }
        let mut objects = t.objects.clone();
        for ev in t.history.iter().rev().take_while(|e| e.rv > rv) {
            let k = object_key(&ev.object);
            match (ev.kind, &ev.old) {
                (WatchEventType::Added, _) => objects.remove(&k),
                (WatchEventType::Modified | WatchEventType::Deleted, Some(old)) => {
                    objects.insert(k, old.clone())
                }
                // Every MODIFIED and DELETED event is published with its `old`.
                (WatchEventType::Modified | WatchEventType::Deleted, None) => return None,
            };
        }
        Some(objects)
    }

    /// The objects stored per served resource, named as kube names them in
    /// `apiserver_storage_objects` (`configmaps`, `deployments.apps`); both Event APIs count
    /// their one storage, as kube's two stores count one prefix.
    pub fn object_counts(&self) -> Vec<(String, i64)> {
        let mut seen = std::collections::BTreeSet::new();
        (self.catalog.all())
            .filter(|r| !r.create_only && seen.insert((r.group.as_str(), r.plural.as_str())))
            .map(|r| {
                let table = self.tables.get(&catalog::storage_key(r));
                let n = table.map_or(0, |t| t.objects.len());
                let n = i64::try_from(n).unwrap_or(i64::MAX);
                (metrics::group_resource(&r.group, &r.plural), n)
            })
            .collect()
    }

    /// Oldest resourceVersion a watch of this resource can still resume from.
    pub fn compacted(&self, key: &ResKey) -> u64 {
        self.tables.get(key).map(|t| t.compacted).unwrap_or(0)
    }
}

fn push(t: &mut Table, cap: usize, ev: WatchEvent) {
    t.history.push_back(Arc::new(ev));
    while t.history.len() > cap.max(1) {
        if let Some(e) = t.history.pop_front() {
            t.compacted = e.rv;
        }
    }
}

/// Data directories written before both groups' Events were one resource kept
/// `events.k8s.io` Events under their own key; they now live with the core ones.
fn older_events_key(key: ResKey) -> ResKey {
    if is_older_events_key(&key) {
        (String::new(), key.1)
    } else {
        key
    }
}

fn is_older_events_key(key: &ResKey) -> bool {
    key.0 == "events.k8s.io" && key.1 == "events"
}

/// An object's `(namespace, name)`, as [`Table::objects`] keys it.
pub type ObjectKey = (String, String);

fn object_key(obj: &Value) -> ObjectKey {
    (
        str_at(obj, "/metadata/namespace").to_string(),
        str_at(obj, "/metadata/name").to_string(),
    )
}

/// The shared store: state plus a wake-up channel carrying the latest resourceVersion.
#[derive(Debug)]
pub struct Store {
    state: Mutex<State>,
    notify: watch::Sender<u64>,
    metrics: Arc<Metrics>,
}

impl Store {
    /// An empty store (or one loaded from `log`'s records).
    pub fn new(history_cap: usize, log: Option<(Log, Vec<Record>)>) -> Self {
        let mut st = State {
            rv: 0,
            catalog: Catalog::default(),
            tables: HashMap::new(),
            history_cap,
            snapshots: VecDeque::new(),
            next_snapshot: 0,
            log: None,
            gc_pending: true,
            cluster: ClusterSettings::default(),
            compaction: Compaction::new(compaction::DEFAULT_INTERVAL),
            metrics: Arc::new(Metrics::default()),
        };
        let mut log_handle = None;
        if let Some((log, records)) = log {
            for rec in records {
                match rec {
                    Record::Put { key, obj } => {
                        let obj = if is_older_events_key(&key) {
                            events::to_core(obj)
                        } else {
                            obj
                        };
                        let key = older_events_key(key);
                        let rv = str_at(&obj, "/metadata/resourceVersion")
                            .parse()
                            .unwrap_or(0);
                        st.rv = st.rv.max(rv);
                        if key.0 == "apiextensions.k8s.io" {
                            st.catalog.register_crd(&obj);
                        }
                        let k = (
                            str_at(&obj, "/metadata/namespace").to_string(),
                            str_at(&obj, "/metadata/name").to_string(),
                        );
                        st.table(&key).objects.insert(k, Arc::new(obj));
                    }
                    Record::Mark { rv } => st.rv = st.rv.max(rv),
                    Record::Delete {
                        key,
                        namespace,
                        name,
                        rv,
                    } => {
                        st.rv = st.rv.max(rv);
                        let key = older_events_key(key);
                        if let Some(old) = st.table(&key).objects.remove(&(namespace, name))
                            && key.0 == "apiextensions.k8s.io"
                        {
                            st.catalog.unregister_crd(&old);
                        }
                    }
                }
            }
            st.default_custom_objects(None);
            // History before a restart is gone: resuming from an older RV must get 410.
            let rv = st.rv;
            for t in st.tables.values_mut() {
                t.compacted = rv;
            }
            st.compaction.compact_to(rv);
            log_handle = Some(log);
        }
        st.log = log_handle;
        let (notify, _) = watch::channel(st.rv);
        Self {
            metrics: st.metrics.clone(),
            state: Mutex::new(st),
            notify,
        }
    }

    /// Locks the state. A poisoned lock (a panic mid-write) is recovered: writes are applied
    /// in one step after every check, so the state is consistent.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The server's metrics (the store times its own operations into them).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Wakes watchers after writes (call after releasing the lock).
    pub fn notify(&self, rv: u64) {
        self.notify.send_replace(rv);
    }

    /// A receiver that changes after every write.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// Writes every current object into a fresh log (compaction at start-up).
    pub fn compact_log(&self) -> std::io::Result<()> {
        let mut st = self.lock();
        let records: Vec<Record> = st
            .tables
            .iter()
            .flat_map(|(k, t)| {
                t.objects.values().map(move |o| Record::Put {
                    key: k.clone(),
                    obj: (**o).clone(),
                })
            })
            .collect();
        // CRDs first so a reload registers their resources before their objects appear.
        let (mut crds, rest): (Vec<_>, Vec<_>) = records
            .into_iter()
            .partition(|r| matches!(r, Record::Put { key, .. } if key.0 == "apiextensions.k8s.io"));
        crds.extend(rest);
        crds.insert(0, Record::Mark { rv: st.rv });
        if let Some(log) = &mut st.log {
            log.rewrite(&crds)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_k8s_io_events_of_an_older_data_dir_load_as_core_events() {
        let dir = tempfile::tempdir().unwrap();
        let v1_key = || ("events.k8s.io".to_string(), "events".to_string());
        {
            let (mut log, _) = Log::open(dir.path()).unwrap();
            for name in ["kept", "deleted"] {
                log.append(&Record::Put {
                    key: v1_key(),
                    obj: json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1"},
                        "note": "n", "regarding": {"name": "x"}}),
                })
                .unwrap();
            }
            log.append(&Record::Delete {
                key: v1_key(),
                namespace: "default".into(),
                name: "deleted".into(),
                rv: 2,
            })
            .unwrap();
        }
        let store = Store::new(100, Some(Log::open(dir.path()).unwrap()));
        let st = store.lock();
        let core = (String::new(), "events".to_string());
        let kept = st
            .get(&core, "default", "kept")
            .expect("loaded as a core Event");
        assert_eq!(kept["message"], "n");
        assert_eq!(kept["involvedObject"]["name"], "x");
        assert!(st.get(&core, "default", "deleted").is_none());
        assert!(st.get(&v1_key(), "default", "kept").is_none());
        assert_eq!(st.rv, 2);
    }
}
