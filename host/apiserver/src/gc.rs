//! Optional background controllers: owner-reference garbage collection (background
//! propagation: an object whose owners are all gone is deleted), namespace cleanup (a
//! terminating namespace has its objects deleted, then disappears), each namespace's
//! ServiceAccount and root CA (`accounts`) and ReplicaSets' Pods (`replicasets`).
//!
//! They run as one task that wakes on every write (debounced) and on a slow timer, and act
//! through the same delete path as API requests, so finalizers are respected.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::Value;

use super::Inner;
use super::catalog::ResKey;
use super::cluster::{self, accounts};
use super::delete;
use super::handlers::Target;
use super::json::str_at;
use super::store::State;

fn target_for(st: &State, key: &ResKey) -> Option<Target> {
    let res = st.catalog().by_key(key)?;
    Some(Target {
        version: res.versions[0].clone(),
        res,
        namespace: None,
        name: None,
        sub: None,
    })
}

/// Which controllers run.
#[derive(Clone)]
pub(crate) struct Controllers {
    pub gc: bool,
    pub namespaces: bool,
    pub accounts: bool,
    /// The kube-controller-manager workload controllers that run (`cluster`), in order.
    pub workloads: Vec<cluster::Pass>,
    /// The kubelet stand-in, with its settings.
    pub kubelet: Option<cluster::kubelet::Kubelet>,
}

/// The longest the loop sleeps without a write or a deadline.
const IDLE: Duration = Duration::from_secs(1);

/// The controller loop; ends when the server is dropped.
pub(crate) async fn run(inner: Weak<Inner>, on: Controllers) {
    let mut rx = match inner.upgrade() {
        Some(i) => i.store.subscribe(),
        None => return,
    };
    let mut first = true;
    loop {
        // The first pass at once: the namespaces there at start-up get their accounts.
        if !std::mem::take(&mut first) {
            let wake_at = inner
                .upgrade()
                .and_then(|i| i.store.lock().cluster.wake_at.take());
            let idle = wake_at.map_or(IDLE, |at| {
                at.saturating_duration_since(std::time::Instant::now())
                    .min(IDLE)
            });
            let _ = tokio::time::timeout(idle, rx.changed()).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let Some(inner) = inner.upgrade() else { return };
        if on.gc {
            pass(&inner, collect_garbage);
        }
        if on.namespaces {
            pass(&inner, clean_namespaces);
        }
        if on.accounts {
            let ca = inner.tls.ca_pem.clone();
            pass(&inner, |st| accounts::ensure(st, &ca));
        }
        if let Some(kubelet) = &on.kubelet {
            pass(&inner, |st| cluster::kubelet::nodes(st, kubelet));
            pass(&inner, cluster::scheduler::schedule);
        }
        for controller in &on.workloads {
            pass(&inner, controller);
        }
        if let Some(kubelet) = &on.kubelet {
            pass(&inner, |st| cluster::kubelet::pods(st, kubelet));
        }
    }
}

fn pass(inner: &Arc<Inner>, f: impl FnOnce(&mut State) -> bool) {
    let mut st = inner.store.lock();
    let changed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut st)));
    if changed.unwrap_or_else(|_| {
        tracing::error!("apiserver background controller panicked");
        true
    }) {
        let rv = st.rv();
        drop(st);
        inner.store.notify(rv);
    }
}

fn collect_garbage(st: &mut State) -> bool {
    // Nothing written since the last quiet pass can have orphaned or unblocked an object: a
    // pass would scan every object for nothing, under the store's lock.
    if !std::mem::take(&mut st.gc_pending) {
        return false;
    }
    let changed = collect(st);
    // What this pass changed (an owner's finalizer released, references dropped) may give the
    // next one work: run again until a pass changes nothing.
    st.gc_pending |= changed;
    changed
}

fn collect(st: &mut State) -> bool {
    let uids: HashSet<String> = st
        .tables()
        .map(|(_, t)| t)
        .flat_map(|t| {
            t.objects
                .values()
                .map(|o| str_at(o, "/metadata/uid").to_string())
        })
        .collect();
    let mut orphans = Vec::new();
    for (key, t) in st.tables() {
        for o in t.objects.values() {
            let Some(refs) = o
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
            else {
                continue;
            };
            if refs.is_empty() || o.pointer("/metadata/deletionTimestamp").is_some() {
                continue;
            }
            if refs
                .iter()
                .all(|r| !uids.contains(r.get("uid").and_then(Value::as_str).unwrap_or("")))
            {
                orphans.push((key.clone(), o.clone()));
            }
        }
    }
    let mut changed = propagate(st, &uids);
    changed |= !orphans.is_empty();
    for (key, o) in orphans {
        if let Some(t) = target_for(st, &key)
            && let Err(e) = delete::delete_locked(st, &t, &o, false)
        {
            tracing::warn!(error = %e, "garbage collection");
        }
    }
    changed
}

fn has_finalizer(o: &Value, f: &str) -> bool {
    o.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x == f))
}

fn owned_by(o: &Value, uid: &str) -> bool {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
        })
}

/// Foreground deletion (delete dependents, then drop the owner's `foregroundDeletion`
/// finalizer) and orphaning (strip owner references, then drop `orphan`).
fn propagate(st: &mut State, _uids: &HashSet<String>) -> bool {
    let mut owners = Vec::new();
    for (key, t) in st.tables() {
        for o in t.objects.values() {
            if o.pointer("/metadata/deletionTimestamp").is_some()
                && (has_finalizer(o, delete::FOREGROUND) || has_finalizer(o, delete::ORPHAN))
            {
                owners.push((key.clone(), o.clone()));
            }
        }
    }
    let mut changed = false;
    for (okey, owner) in owners {
        let uid = str_at(&owner, "/metadata/uid").to_string();
        let deps: Vec<(ResKey, Arc<Value>)> = st
            .tables()
            .flat_map(|(k, t)| {
                t.objects
                    .values()
                    .filter(|o| owned_by(o, &uid))
                    .map(move |o| (k.clone(), o.clone()))
            })
            .collect();
        let orphan = has_finalizer(&owner, delete::ORPHAN);
        for (dkey, dep) in &deps {
            let Some(t) = target_for(st, dkey) else {
                continue;
            };
            let r = if orphan {
                let mut d = (**dep).clone();
                if let Some(a) = d["metadata"]["ownerReferences"].as_array_mut() {
                    a.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid.as_str()));
                }
                st.put(dkey, d).map(|_| ())
            } else if dep.pointer("/metadata/deletionTimestamp").is_none() {
                delete::delete_locked(st, &t, dep, false).map(|_| ())
            } else {
                continue;
            };
            changed = true;
            if let Err(e) = r {
                tracing::warn!(error = %e, "garbage collection");
            }
        }
        let Some(t) = target_for(st, &okey) else {
            continue;
        };
        let fin = if orphan {
            delete::ORPHAN
        } else {
            delete::FOREGROUND
        };
        if orphan || deps.is_empty() {
            // Re-read: orphaning may not change the owner, but be exact about what we drop from.
            let ns = str_at(&owner, "/metadata/namespace").to_string();
            let name = str_at(&owner, "/metadata/name").to_string();
            if let Some(cur) = st.get(&okey, &ns, &name) {
                changed = true;
                if let Err(e) = delete::drop_finalizer(st, &t, &cur, fin) {
                    tracing::warn!(error = %e, "garbage collection");
                }
            }
        }
    }
    changed
}

fn clean_namespaces(st: &mut State) -> bool {
    let ns_key: ResKey = (String::new(), "namespaces".into());
    let terminating: Vec<Arc<Value>> = st
        .table_of(&ns_key)
        .map(|t| {
            t.objects
                .values()
                .filter(|o| o.pointer("/metadata/deletionTimestamp").is_some())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let mut changed = false;
    for ns in terminating {
        let name = str_at(&ns, "/metadata/name").to_string();
        let mut left = 0usize;
        let keys: Vec<ResKey> = st
            .tables()
            .map(|(k, _)| k)
            .filter(|k| **k != ns_key)
            .cloned()
            .collect();
        for key in keys {
            let Some(t) = target_for(st, &key) else {
                continue;
            };
            if !t.res.namespaced {
                continue;
            }
            let objs: Vec<Arc<Value>> = st
                .table_of(&key)
                .map(|tab| {
                    tab.objects
                        .range((name.clone(), String::new())..)
                        .take_while(|((n, _), _)| *n == name)
                        .map(|(_, o)| o.clone())
                        .collect()
                })
                .unwrap_or_default();
            for o in objs {
                left += 1;
                if o.pointer("/metadata/deletionTimestamp").is_none() {
                    changed = true;
                    if let Err(e) = delete::delete_locked(st, &t, &o, false) {
                        tracing::warn!(error = %e, "namespace cleanup");
                    }
                }
            }
        }
        let still: usize = st
            .tables()
            .filter(|(k, _)| **k != ns_key)
            .map(|(_, t)| t.objects.keys().filter(|(n, _)| *n == name).count())
            .sum();
        if (left == 0 || still == 0)
            && let Some(t) = target_for(st, &ns_key)
        {
            changed = true;
            if let Err(e) = delete::finish_namespace(st, &t, &ns) {
                tracing::warn!(error = %e, "namespace cleanup");
            }
        }
    }
    changed
}
