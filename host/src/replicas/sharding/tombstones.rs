//! One name's reconciles in order across replicas when sharding by uid.
//!
//! An object deleted and created again under the same name has a new uid, hence most likely
//! another slot and another replica: the old object's last reconcile (`Gone`) runs on the
//! replica whose cache saw the deletion, the new object's first (`Apply`) on the one whose cache
//! sees the creation. A single host (and controller-runtime, kube-runtime) runs them one after
//! the other on one key; two replicas would run them at once, and a `Gone` that cleans up
//! what it finds under the name could undo the new object's first reconcile. Neither replica
//! sees the other's object (the caches are sharded on the server), so they meet in the only
//! place both read: the membership Leases.
//!
//! - **Tombstones.** A replica records every deletion its uid-sharded caches see whose `Gone`
//!   it has yet to run, and publishes them in its Lease (`sharding.wasmctrl.dev/gone`, hashed
//!   into [`BUCKETS`] buckets of plugin and key, so a mass deletion still fits in an annotation),
//!   written at once when one is added or dropped. Every write from the recording on carries
//!   the tombstone until the `Gone` has ended; the `Gone` itself need not wait for one.
//! - **Clearance.** Before a replica first reconciles an object (a uid it has not reconciled
//!   before), every other live member's Lease must have been written after that object's
//!   revision as first seen, and carry no tombstone of its name. A deletion that freed the name
//!   came before the creation, so a peer that had seen it by then shows its tombstone until its
//!   `Gone` has ended; peers renew every retry period, so the first reconcile of an object waits
//!   at most about that long (2 s by default), and a peer that stops renewing is waited for
//!   only until its Lease runs out (it stopped reconciling before: its fence).
//! - **A lagging watch.** A replica whose cache saw the deletion only after a write of its
//!   Lease landed past the deletion's revision may have let a peer clear the new object: it
//!   knows (the write without the tombstone came after the deletion; one under way is waited
//!   for; one that failed may have landed anywhere), and reads the name from the API server
//!   before running the `Gone`: if the name exists again, the deletion is folded into the new
//!   object's reconciles, as on a single host that sees both events before a worker takes the
//!   key.
//!
//! Revisions of Leases and objects compare as etcd's revisions where both live in one etcd (as
//! [`crate::reconcile::controller::Manager::requeue_slots`] assumes too); a resourceVersion that is not a
//! number leaves only the tombstone check.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use tokio::sync::{Notify, watch};
use wasmctrl_core::sync::lock;

/// Buckets tombstones are hashed into: a bucket set of one member is at most ~20 KB as text.
pub const BUCKETS: u64 = 4096;

/// The annotation on a membership Lease listing its holder's tombstones' buckets (`17,2033`).
pub const TOMBSTONES_ANNOTATION: &str = "sharding.wasmctrl.dev/gone";

/// The bucket of `plugin`'s key `namespace/name`.
pub fn bucket(plugin: &str, namespace: &str, name: &str) -> u16 {
    let text = format!("{plugin}\0{namespace}/{name}");
    (wasmctrl_core::shard::hash(&text) % BUCKETS) as u16
}

/// A set of buckets, as a Lease carries it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Buckets(BTreeSet<u16>);

impl Buckets {
    /// Parses `17,2033`; a malformed annotation (not written by a member) counts as every
    /// bucket, so nothing overtakes what it may hide.
    pub fn parse(text: &str) -> Self {
        let parsed: Option<BTreeSet<u16>> = (text.split(',').map(str::trim))
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().ok().filter(|b| u64::from(*b) < BUCKETS))
            .collect();
        Self(parsed.unwrap_or_else(|| (0..BUCKETS as u16).collect()))
    }

    fn contains(&self, bucket: u16) -> bool {
        self.0.contains(&bucket)
    }
}

impl std::fmt::Display for Buckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{b}")?;
        }
        Ok(())
    }
}

/// Whether a `Gone` may run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publication {
    /// A Lease write without its tombstone is under way: its revision decides.
    Pending,
    /// Every later write of the Lease carries it (until it goes): no peer can clear a new
    /// object of the name, created after the deletion, without seeing it.
    Published,
    /// A write without it landed after the deletion (or may have): a new object of the name
    /// may have been cleared meanwhile; look for one first.
    Lagging,
}

/// One of this member's tombstones.
struct Own {
    bucket: u16,
    /// The deletion's revision, when known (a relist that finds an object gone does not say).
    deleted_at: Option<u64>,
    /// The [`State::version`] that added it: writes of an earlier version lack it.
    added: u64,
    /// The latest revision of a Lease write without it (`u64::MAX`: a write that failed or
    /// was abandoned, which may have landed at any revision).
    written_without: Option<u64>,
}

#[derive(Default)]
struct State {
    /// This member's tombstones, by plugin and key text.
    own: HashMap<(String, String), Own>,
    /// Grows with each change of `own`.
    version: u64,
    /// The version last written to the Lease, and the Lease's revision then.
    written: (u64, Option<u64>),
    /// The version a Lease write under way carries.
    writing: Option<u64>,
    /// Every other live member's Lease revision and tombstones, as last seen.
    peers: Vec<(Option<u64>, Buckets)>,
}

/// The tombstones of this member and of its peers (see the module's documentation).
pub struct Tombstones {
    state: Mutex<State>,
    changed: Notify,
    /// Grows with each Lease write ended: a `Gone` waiting on one looks again.
    writes: watch::Sender<u64>,
}

impl Default for Tombstones {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            changed: Notify::new(),
            writes: watch::Sender::new(0),
        }
    }
}

/// A Lease write under way, carrying the tombstones of one version: ended by
/// [`wrote`](Self::wrote), or, dropped without, taken as landed at an unknown revision.
pub struct Writing<'a> {
    tombstones: &'a Tombstones,
    version: u64,
    /// The annotation to write.
    pub buckets: String,
}

impl Writing<'_> {
    /// The write succeeded at `revision`.
    pub fn wrote(self, revision: Option<u64>) {
        self.ended(Some(revision));
    }

    fn ended(&self, landed: Option<Option<u64>>) {
        let mut state = self.tombstones.lock();
        state.writing = None;
        let without = match landed {
            Some(revision) => {
                state.written = (self.version.max(state.written.0), revision);
                revision
            }
            None => Some(u64::MAX),
        };
        for own in state.own.values_mut() {
            if own.added > self.version && without.is_some() {
                own.written_without = own.written_without.max(without);
            }
        }
        drop(state);
        self.tombstones.writes.send_modify(|n| *n += 1);
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        if self.tombstones.lock().writing == Some(self.version) {
            self.ended(None);
        }
    }
}

impl Tombstones {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Records that `plugin`'s object `namespace/name` was deleted (at revision `deleted_at`)
    /// and its `Gone` is to run here.
    pub fn record(&self, plugin: &str, namespace: &str, name: &str, deleted_at: Option<u64>) {
        let mut state = self.lock();
        state.version += 1;
        let own = Own {
            bucket: bucket(plugin, namespace, name),
            deleted_at,
            added: state.version,
            written_without: state.written.1,
        };
        state
            .own
            .insert((plugin.to_owned(), format!("{namespace}/{name}")), own);
        drop(state);
        self.changed.notify_one();
    }

    /// Drops a tombstone: its `Gone` has ended, will not run here, or the object is back.
    pub fn forget(&self, plugin: &str, namespace: &str, name: &str) {
        let mut state = self.lock();
        let key = (plugin.to_owned(), format!("{namespace}/{name}"));
        if state.own.remove(&key).is_some() {
            state.version += 1;
            drop(state);
            self.changed.notify_one();
        }
    }

    /// Drops every tombstone of `plugin`, whose controller has stopped.
    pub fn forget_plugin(&self, plugin: &str) {
        let mut state = self.lock();
        let before = state.own.len();
        state.own.retain(|(p, _), _| p != plugin);
        if state.own.len() != before {
            state.version += 1;
            drop(state);
            self.changed.notify_one();
        }
    }

    /// Whether the `Gone` of `plugin`'s `namespace/name` may run; `Published` when it has no
    /// tombstone (nothing to order it after). It need not wait for a write of its own: peers
    /// clear a new object of the name only on a write after its creation, hence after the
    /// deletion, and every write from now on carries the tombstone.
    pub fn publication(&self, plugin: &str, namespace: &str, name: &str) -> Publication {
        let state = self.lock();
        let key = (plugin.to_owned(), format!("{namespace}/{name}"));
        let Some(own) = state.own.get(&key) else {
            return Publication::Published;
        };
        if state.writing.is_some_and(|version| version < own.added) {
            return Publication::Pending;
        }
        match (own.written_without, own.deleted_at) {
            (None, _) => Publication::Published,
            (Some(without), Some(deleted)) if without < deleted => Publication::Published,
            _ => Publication::Lagging,
        }
    }

    /// Waits (for `patience` at most) while a write decides whether the `Gone` of `plugin`'s
    /// `namespace/name` may run; `Pending` if it still is under way.
    pub async fn published(
        &self,
        plugin: &str,
        namespace: &str,
        name: &str,
        patience: std::time::Duration,
    ) -> Publication {
        let mut writes = self.writes.subscribe();
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let publication = self.publication(plugin, namespace, name);
            if publication != Publication::Pending {
                return publication;
            }
            if tokio::time::timeout_at(deadline, writes.changed())
                .await
                .is_err()
            {
                return Publication::Pending;
            }
        }
    }

    /// Whether a tombstone was added or dropped since the last write.
    pub fn unwritten(&self) -> bool {
        let state = self.lock();
        state.version != state.written.0
    }

    /// Resolves when a tombstone is added or dropped (the Lease should be written).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Starts a Lease write carrying the tombstones as they are now.
    pub fn writing(&self) -> Writing<'_> {
        let mut state = self.lock();
        let buckets = Buckets(state.own.values().map(|o| o.bucket).collect());
        state.writing = Some(state.version);
        Writing {
            tombstones: self,
            version: state.version,
            buckets: buckets.to_string(),
        }
    }

    /// The other live members' Lease revisions and tombstones, as last seen.
    pub fn set_peers(&self, peers: Vec<(Option<u64>, Buckets)>) {
        self.lock().peers = peers;
    }

    /// Whether `plugin`'s object `namespace/name`, first seen at revision `since`, may be
    /// reconciled: every live peer wrote its Lease after `since` without its tombstone.
    pub fn clear(&self, plugin: &str, namespace: &str, name: &str, since: Option<u64>) -> bool {
        let bucket = bucket(plugin, namespace, name);
        let after = |revision: &Option<u64>| match (revision, since) {
            (Some(revision), Some(since)) => *revision > since,
            // Not comparable: only the tombstones tell.
            _ => true,
        };
        (self.lock().peers.iter())
            .all(|(revision, buckets)| after(revision) && !buckets.contains(bucket))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gone_runs_unless_a_write_without_its_tombstone_came_after_the_deletion() {
        let here = Tombstones::default();
        here.writing().wrote(Some(10));
        here.record("p", "ns", "a", Some(12));
        assert!(here.unwritten());
        assert_eq!(here.publication("p", "ns", "a"), Publication::Published);
        let write = here.writing();
        assert_eq!(write.buckets, bucket("p", "ns", "a").to_string());
        write.wrote(Some(14));
        assert!(!here.unwritten());
        assert_eq!(here.publication("p", "ns", "b"), Publication::Published);

        // Seen while a write without it was under way: that write decides.
        let write = here.writing();
        here.record("p", "ns", "late", Some(15));
        assert_eq!(here.publication("p", "ns", "late"), Publication::Pending);
        write.wrote(Some(16));
        assert_eq!(here.publication("p", "ns", "late"), Publication::Lagging);
        let write = here.writing();
        here.record("p", "ns", "early", Some(18));
        write.wrote(Some(17));
        assert_eq!(here.publication("p", "ns", "early"), Publication::Published);
        // A write abandoned may have landed at any revision.
        let write = here.writing();
        here.record("p", "ns", "unsure", Some(30));
        drop(write);
        assert_eq!(here.publication("p", "ns", "unsure"), Publication::Lagging);
        for name in ["a", "late", "early", "unsure"] {
            here.forget("p", "ns", name);
        }
        assert_eq!(here.writing().buckets, "");

        // A peer's view: a new object of name `a` first seen at revision 20.
        let there = Tombstones::default();
        let tombstone = Buckets::parse(&bucket("p", "ns", "a").to_string());
        there.set_peers(vec![(Some(18), Buckets::default())]);
        assert!(!there.clear("p", "ns", "a", Some(20)), "not written since");
        there.set_peers(vec![(Some(21), tombstone.clone())]);
        assert!(
            !there.clear("p", "ns", "a", Some(20)),
            "its Gone is pending"
        );
        assert!(there.clear("q", "ns", "a", Some(20)), "another plugin's");
        there.set_peers(vec![(Some(22), Buckets::default())]);
        assert!(there.clear("p", "ns", "a", Some(20)));
        there.set_peers(Vec::new());
        assert!(there.clear("p", "ns", "a", Some(20)), "no live peer");
        assert!(Buckets::parse("x").contains(7), "malformed: every bucket");
    }
}
