//! Scale-out: several replicas of the host share the reconciling, each owning a part of the keys
//! (`wasmctrl run --sharding`).
//!
//! - **Shard key** (`--shard-key`). A key's shard is the 64-bit FNV-1a hash KEP-5866's
//!   `shardSelector` uses, of the reconciled object's uid (the default: uids are random, so the
//!   keys spread evenly whatever the namespaces are called) or of its namespace (then an owner
//!   and its children, which share a namespace, share a shard, and the caches of owned kinds are
//!   sharded too; but FNV-1a barely moves its high bits for names that differ only at the end,
//!   `team-1` and `team-2`, so namespaces spread evenly only when there are many, differently
//!   named). The hash space is cut into [`SLOTS`] equal slots (by the top eight bits);
//!   replicas own slots. A child's events reach every replica (its cache is whole in uid mode),
//!   and the one that owns its owner reconciles the owner.
//! - **Membership** ([`crate::replicas::membership`]): each replica holds a Lease of its own in the
//!   group, renewed as leader election renews and fenced the same way: a replica that cannot
//!   renew stops taking keys, and its applier sends nothing, before its Lease can be judged
//!   expired. The Lease records the slots the replica claims.
//! - **Assignment** ([`assign`]): each member's share is `SLOTS / n`; from what the members
//!   hold now, those over their share give slots up and those short of it take free ones, so a
//!   join or leave moves exactly the share that must move.
//! - **Handover**: a replica gives a slot up by no longer taking its keys, waiting for its
//!   in-flight reconciles to end, then removing the claim from its Lease. A replica takes a slot
//!   up only once no live member's Lease claims it: it writes its claim, reads every Lease again
//!   and withdraws if another live member claims it too, lists the slot's objects into its
//!   caches (a watch of the slots taken up: what the caches hold already is not listed again),
//!   and only then takes its keys (all queued again). So no key is reconciled by two
//!   replicas at once, and none is dropped.
//! - **Server-side sharding**: the caches of the reconciled kind (and, sharding by namespace,
//!   of its owned kinds) list and watch with a `shardSelector` of the replica's slots, so each
//!   replica receives and keeps only its share. The API server says it applied the selector by
//!   echoing it in the list's `shardInfo`; when it does not (before Kubernetes 1.36, or without
//!   the alpha feature), the host says so in its log and `wasmctrl_shard_server_side` and
//!   filters on its side.
//! - **One name in order** ([`tombstones`]): sharding by uid, an object deleted and created
//!   again under its name may move to another replica; the new object's first reconcile waits
//!   until the replica running the old one's `Gone` is done with it.
//!
//! This module is the shard state the informers and workers read ([`Shards`]), below both; the
//! membership task that moves it is above the controller.

pub mod assign;
mod service;
pub mod tombstones;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, RwLock};

use tokio::sync::watch;
use wasmctrl_core::shard;
use wasmctrl_core::sync::{read, write};

pub use service::sharded_client;
pub use tombstones::Tombstones;

/// Slots the hash space is cut into (and the most replicas that can share the work).
pub const SLOTS: usize = 256;

/// The label every membership Lease of a group carries, with the group's name.
pub const GROUP_LABEL: &str = "sharding.wasmctrl.dev/group";

/// The annotation on a membership Lease listing the slots its holder claims (`0-84,170`).
pub const SLOTS_ANNOTATION: &str = "sharding.wasmctrl.dev/slots";

/// The slot of a shard hash.
pub fn slot_of(hash: u64) -> usize {
    (hash >> 56) as usize
}

/// The slot of a reconcile key `namespace/name` by namespace (`--shard-key namespace`): its
/// namespace's, or its name's when cluster-scoped.
pub fn key_slot(namespace: &str, name: &str) -> usize {
    let basis = match namespace {
        "" => name,
        namespace => namespace,
    };
    slot_of(shard::hash(basis))
}

/// A set of slots.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SlotSet([u64; SLOTS / 64]);

impl SlotSet {
    /// Every slot.
    pub fn all() -> Self {
        Self([u64::MAX; SLOTS / 64])
    }

    /// Adds `slot`.
    pub fn insert(&mut self, slot: usize) {
        self.0[slot / 64] |= 1 << (slot % 64);
    }

    /// Whether `slot` is in the set.
    pub fn contains(&self, slot: usize) -> bool {
        slot < SLOTS && self.0[slot / 64] & (1 << (slot % 64)) != 0
    }

    /// How many slots.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    fn zip(&self, other: &Self, f: impl Fn(u64, u64) -> u64) -> Self {
        Self(std::array::from_fn(|i| f(self.0[i], other.0[i])))
    }

    /// The slots in either.
    pub fn union(&self, other: &Self) -> Self {
        self.zip(other, |a, b| a | b)
    }

    /// The slots in both.
    pub fn intersection(&self, other: &Self) -> Self {
        self.zip(other, |a, b| a & b)
    }

    /// The slots in this set and not in `other`.
    pub fn difference(&self, other: &Self) -> Self {
        self.zip(other, |a, b| a & !b)
    }

    /// The slots, in order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..SLOTS).filter(|s| self.contains(*s))
    }

    /// Runs of consecutive slots, as `(first, last)`.
    fn runs(&self) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for s in self.iter() {
            match runs.last_mut() {
                Some((_, last)) if *last + 1 == s => *last = s,
                _ => runs.push((s, s)),
            }
        }
        runs
    }

    /// The hash ranges of the slots, merged where they touch.
    pub fn ranges(&self) -> Vec<shard::Range> {
        let width = shard::END / SLOTS as u128;
        (self.runs().into_iter())
            .map(|(first, last)| shard::Range {
                start: (first as u128 * width) as u64,
                end: (last as u128 + 1) * width,
            })
            .collect()
    }

    /// The `shardSelector` for these slots of `field`'s hash; `None` when there are none.
    pub fn selector(&self, field: shard::Field) -> Option<shard::ShardSelector> {
        shard::ShardSelector::new(field, self.ranges())
    }

    /// Parses what [`Display`](fmt::Display) writes (`0-84,170`); `None` if malformed.
    pub fn parse(text: &str) -> Option<Self> {
        let mut set = Self::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (first, last) = match part.split_once('-') {
                Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
                None => {
                    let s = part.parse().ok()?;
                    (s, s)
                }
            };
            if first > last || last >= SLOTS {
                return None;
            }
            (first..=last).for_each(|s| set.insert(s));
        }
        Some(set)
    }
}

impl fmt::Display for SlotSet {
    /// Runs of slots, `0-84,170`; empty for none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (first, last)) in self.runs().into_iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if first == last {
                write!(f, "{first}")?;
            } else {
                write!(f, "{first}-{last}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for SlotSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SlotSet({self})")
    }
}

/// What the sharded caches list and watch: the slots of a field's hash, and a version that grows
/// with each change (a cache reports the version it last listed at, see
/// [`Shards::cache_version`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSlots {
    /// Version of this set; 0 before membership starts.
    pub version: u64,
    /// The slots whose objects the caches hold.
    pub slots: SlotSet,
    /// The field whose hash places an object in a slot.
    pub field: shard::Field,
}

impl CacheSlots {
    /// Whether an object with this uid and namespace belongs in the caches.
    pub fn holds(&self, uid: &str, namespace: &str) -> bool {
        let value = match self.field {
            shard::Field::Uid => uid,
            shard::Field::Namespace => namespace,
        };
        self.slots.contains(slot_of(shard::hash(value)))
    }

    /// Whether the caches hold every object in `namespace` (so that one missing there does
    /// not exist): only when sharding by namespace, and that namespace's slot is held.
    pub fn holds_all_of(&self, namespace: &str) -> bool {
        self.field == shard::Field::Namespace && self.holds("", namespace)
    }
}

/// Whether the API server applies `shardSelector`, as its lists show.
const UNKNOWN: u8 = 0;
const SERVER_SIDE: u8 = 1;
const CLIENT_SIDE: u8 = 2;

/// The shard state the workers, caches and metrics read; the membership task moves it.
#[derive(Clone)]
pub struct Shards {
    inner: Arc<State>,
}

struct State {
    /// Slots whose keys the workers take now.
    active: RwLock<SlotSet>,
    caches: watch::Sender<CacheSlots>,
    server: AtomicU8,
    /// Joined the group and settled its first assignment (for `/readyz`).
    settled: AtomicBool,
    members: std::sync::atomic::AtomicUsize,
    tombstones: Tombstones,
}

impl Shards {
    /// No slots yet; keys are placed by the hash of `field`.
    pub fn new(field: shard::Field) -> Self {
        let caches = CacheSlots {
            version: 0,
            slots: SlotSet::default(),
            field,
        };
        Self {
            inner: Arc::new(State {
                active: RwLock::new(SlotSet::default()),
                caches: watch::Sender::new(caches),
                server: AtomicU8::new(UNKNOWN),
                settled: AtomicBool::new(false),
                members: std::sync::atomic::AtomicUsize::new(0),
                tombstones: Tombstones::default(),
            }),
        }
    }

    /// The field whose hash places a key in a slot.
    pub fn field(&self) -> shard::Field {
        self.inner.caches.borrow().field
    }

    /// The slot of an object of the reconciled kind: by its uid's hash, or its key's namespace.
    pub fn slot(&self, uid_hash: u64, namespace: &str, name: &str) -> usize {
        match self.field() {
            shard::Field::Uid => slot_of(uid_hash),
            shard::Field::Namespace => key_slot(namespace, name),
        }
    }

    /// The slots whose keys are taken now.
    pub fn active(&self) -> SlotSet {
        *read(&self.inner.active)
    }

    pub(crate) fn set_active(&self, slots: SlotSet) {
        *write(&self.inner.active) = slots;
    }

    /// What the sharded caches hold now, and its changes.
    pub fn cache_slots(&self) -> watch::Receiver<CacheSlots> {
        self.inner.caches.subscribe()
    }

    /// The current cache slots.
    pub fn cache_version(&self) -> CacheSlots {
        *self.inner.caches.borrow()
    }

    /// Makes the caches hold `slots`; the new version.
    pub(crate) fn set_cache_slots(&self, slots: SlotSet) -> u64 {
        let mut version = 0;
        self.inner.caches.send_modify(|c| {
            if c.slots != slots || c.version == 0 {
                c.version += 1;
                c.slots = slots;
            }
            version = c.version;
        });
        version
    }

    /// Records whether a list came back with `shardInfo`; says so the first time it did not.
    pub(crate) fn saw_list(&self, server_side: bool) {
        let now = if server_side {
            SERVER_SIDE
        } else {
            CLIENT_SIDE
        };
        let before = self.inner.server.swap(now, Ordering::Relaxed);
        if before != now && !server_side {
            tracing::warn!(
                "the API server does not shard lists and watches (no shardInfo in its list: KEP-5866 needs Kubernetes 1.36 or later with its alpha feature on); each replica receives every object and keeps its share"
            );
        }
    }

    /// `Some(true)` when the API server applies `shardSelector`, `Some(false)` when the host
    /// filters on its side, `None` before the first sharded list.
    pub fn server_side(&self) -> Option<bool> {
        match self.inner.server.load(Ordering::Relaxed) {
            SERVER_SIDE => Some(true),
            CLIENT_SIDE => Some(false),
            _ => None,
        }
    }

    /// Whether this replica has joined its group and taken up its first share.
    pub fn settled(&self) -> bool {
        self.inner.settled.load(Ordering::Acquire)
    }

    /// Live members of the group, as last seen.
    pub fn members(&self) -> usize {
        self.inner.members.load(Ordering::Relaxed)
    }

    pub(crate) fn set_members(&self, members: usize) {
        self.inner.members.store(members, Ordering::Relaxed);
    }

    /// Deletions whose `Gone` is to run here, and the other members' (sharding by uid).
    pub fn tombstones(&self) -> &Tombstones {
        &self.inner.tombstones
    }

    pub(crate) fn set_settled(&self, settled: bool) {
        self.inner.settled.store(settled, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_sets_print_parse_and_become_merged_hash_ranges() {
        let mut set = SlotSet::default();
        for s in [0, 1, 2, 7, 255] {
            set.insert(s);
        }
        assert_eq!(set.to_string(), "0-2,7,255");
        assert_eq!(SlotSet::parse("0-2,7,255"), Some(set));
        assert_eq!(SlotSet::parse(""), Some(SlotSet::default()));
        assert_eq!(SlotSet::parse("3-1"), None);
        assert_eq!(SlotSet::parse("256"), None);
        let ranges = set.ranges();
        assert_eq!(ranges.len(), 3);
        assert_eq!((ranges[0].start, ranges[0].end), (0, 3 << 56));
        assert_eq!(ranges[2].end, shard::END);
        let cache = CacheSlots {
            version: 1,
            slots: set,
            field: shard::Field::Namespace,
        };
        let selector = set.selector(cache.field).unwrap().to_string();
        assert_eq!(
            selector,
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x0300000000000000') || shardRange(object.metadata.namespace, '0x0700000000000000', '0x0800000000000000') || shardRange(object.metadata.namespace, '0xff00000000000000', '0x10000000000000000')"
        );
        // The selector and the slot of a key agree, whatever the namespace.
        let parsed = shard::ShardSelector::parse(&selector).unwrap();
        for i in 0..2000 {
            let ns = format!("ns-{i}");
            let slot = key_slot(&ns, "x");
            assert_eq!(parsed.selects(&ns), set.contains(slot), "{ns}");
            assert_eq!(cache.holds("", &ns), set.contains(slot));
            assert_eq!(cache.holds_all_of(&ns), set.contains(slot));
        }
        assert_eq!(SlotSet::all().len(), SLOTS);
        let by_uid = CacheSlots {
            field: shard::Field::Uid,
            ..cache
        };
        assert!(
            (by_uid.slots.selector(by_uid.field))
                .unwrap()
                .to_string()
                .contains("object.metadata.uid")
        );
        assert!(
            !by_uid.holds_all_of("ns-1"),
            "uid shards never hold a whole namespace"
        );
        let none = CacheSlots {
            slots: SlotSet::default(),
            ..cache
        };
        assert!(SlotSet::default().selector(none.field).is_none());
    }
}
