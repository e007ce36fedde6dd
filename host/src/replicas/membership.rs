//! A replica's membership in its shard group (`--sharding`, see [`crate::replicas::sharding`]), and the
//! handover of slots between members. Above the controller (it asks the [`Manager`] what is in
//! flight and queues the keys of slots taken up); the shard state it moves is below it.
//!
//! Each member holds a Lease of its own, `<group>-<hash of its identity>`, labelled with the group
//! and annotated with the slots it claims. It renews the Lease every retry period; every
//! successful write pushes its [`Fence`](crate::replicas::leader::Fence) to the renew deadline, so a member
//! that cannot renew stops taking keys, and sends nothing for plugins, before another can judge
//! its Lease expired (judged, as leader election judges it, by how long its record has not
//! changed on the judge's own clock).
//!
//! One task runs the member: it watches the group's Leases, computes the assignment of the live
//! members, and moves slots in small steps, never waiting on anything but a bounded API call:
//!
//! 1. slots it holds but no longer should are deactivated (workers stop taking their keys);
//!    once none of their reconciles is in flight, the claim is removed from the Lease;
//! 2. slots it should hold, that no live member claims, are claimed in the Lease; every Lease
//!    is then read again, and slots another live member claims too are given back (two members
//!    that claim at once both see the other, or one sees the other: never neither);
//! 3. the caches are told to hold the claimed slots (listed ahead when they were another
//!    member's that stopped renewing: see [`Run::foresee`]); once they have listed them, the
//!    slots are activated and their cached keys queued: first those whose objects changed
//!    after the slot's last holder was last seen claiming it (a resourceVersion after its
//!    Lease's), which it may not have reconciled; the others, which it most likely did, at low
//!    priority.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::replicas::leader::{self, FenceKeeper, Leadership};
use crate::replicas::sharding::tombstones::{Buckets, TOMBSTONES_ANNOTATION};
use crate::replicas::sharding::{GROUP_LABEL, SLOTS, SLOTS_ANNOTATION, Shards, SlotSet, assign};

/// How often a member looks again while a handover step waits (drain, cache list).
const STEP: Duration = Duration::from_millis(25);

/// A member that has not started yet: its [`Leadership`] is what the host's workers and
/// applier follow (a member "leads" while its Lease is renewed).
pub struct Member {
    api: Api<Lease>,
    config: leader::Config,
    lease_name: String,
    fence: FenceKeeper,
    leading: watch::Sender<bool>,
    shards: Shards,
}

/// Joins the group `config.name` in `config.namespace` as `config.identity`, with
/// `config`'s timings; [`Member::start`] once the host exists.
pub fn join(client: kube::Client, config: leader::Config, shards: Shards) -> (Leadership, Member) {
    let (fence, fenced) = FenceKeeper::closed();
    let (leading, follows) = watch::channel(false);
    let lease_name = format!(
        "{}-{:016x}",
        config.name,
        wasmctrl_core::shard::hash(&config.identity)
    );
    let member = Member {
        api: Api::namespaced(client, &config.namespace),
        config,
        lease_name,
        fence,
        leading,
        shards,
    };
    (Leadership::from_parts(fenced, follows), member)
}

/// What a member asks of the controllers whose keys it takes and gives up (the host's
/// controller manager): their keys per slot, whether a slot is being reconciled, whether the
/// caches hold a shard version's objects, and to queue a slot's keys again.
pub trait SlotHost: Send + Sync {
    /// How many cached keys of the reconciled kinds each slot has.
    fn keys_per_slot(&self) -> [usize; SLOTS];

    /// Whether a key in `slots` is being reconciled now.
    fn busy(&self, slots: &SlotSet) -> bool;

    /// Whether every sharded cache holds the objects of shard version `version`.
    fn sharded_at(&self, version: u64) -> bool;

    /// Queues the keys of `slots` again, those changed after `changed_after(slot)` (a
    /// resourceVersion) first; returns how many changed and how many were queued.
    fn requeue_slots(
        &self,
        slots: &SlotSet,
        changed_after: &dyn Fn(usize) -> Option<u64>,
    ) -> (usize, usize);
}

/// A running member; [`leave`](Self::leave) once nothing is reconciled any more.
pub struct Membership {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Run>,
}

impl Member {
    /// Starts taking part: the host's keys are taken as slots are handed to this member.
    pub fn start(self, host: Arc<dyn SlotHost>) -> Membership {
        let run = Run {
            member: self,
            host,
            peers: BTreeMap::new(),
            lease: None,
            held: SlotSet::default(),
            releasing: None,
            acquiring: None,
            foreseen: SlotSet::default(),
            tried: None,
            joined: false,
            listed: false,
            last_claimed: [None; SLOTS],
        };
        let stop = CancellationToken::new();
        let task = tokio::spawn(run.run(stop.clone()));
        Membership { stop, task }
    }
}

impl Membership {
    /// Leaves the group: takes no more keys and deletes the Lease, so the others take its
    /// slots at once. Call it after the host has stopped reconciling.
    pub async fn leave(self) {
        self.stop.cancel();
        if let Ok(run) = self.task.await {
            run.leave().await;
        }
    }
}

/// Another member as last seen.
struct Peer {
    identity: String,
    claims: SlotSet,
    /// The Lease's record: any change means its holder is alive.
    record: (Option<MicroTime>, Option<i32>, String),
    /// When the record last changed, on this replica's clock.
    seen: Instant,
    duration: Duration,
    /// The Lease's resourceVersion as last seen: an expired Lease is deleted only if unchanged.
    resource_version: Option<String>,
    /// The deletions whose `Gone` it has yet to run (see [`crate::replicas::sharding::tombstones`]).
    tombstones: Buckets,
}

impl Peer {
    fn live(&self, now: Instant) -> bool {
        !self.identity.is_empty() && now < self.seen + self.duration
    }
}

struct Run {
    member: Member,
    host: Arc<dyn SlotHost>,
    /// The other members' Leases, by name.
    peers: BTreeMap<String, Peer>,
    /// This member's Lease as last written (its resourceVersion makes the next write safe).
    lease: Option<Lease>,
    /// Slots the Lease claims.
    held: SlotSet,
    /// Slots deactivated and waiting for their reconciles to end before the claim goes.
    releasing: Option<SlotSet>,
    /// Slots claimed and waiting for the caches to list them at a version.
    acquiring: Option<(SlotSet, u64)>,
    /// Slots of overdue members (see [`Run::foresee`]) this member would take up once their
    /// Leases run out: the caches list them ahead, so taking them up waits for no list.
    foreseen: SlotSet,
    /// When the last renewal was tried.
    tried: Option<Instant>,
    /// Whether the Lease is held (renewed within the renew deadline).
    joined: bool,
    /// Whether the group's Leases have been listed once: before, this member cannot know whom
    /// it shares the slots with, and claims none.
    listed: bool,
    /// For each slot, the resourceVersion of the last Lease seen claiming it (another
    /// member's): objects changed after it are changes its holder may not have reconciled.
    last_claimed: [Option<u64>; SLOTS],
}

impl Run {
    fn group(&self) -> &str {
        &self.member.config.name
    }

    async fn run(mut self, stop: CancellationToken) -> Self {
        let selector = format!("{GROUP_LABEL}={}", self.group());
        let config = watcher::Config::default().labels(&selector);
        let mut leases = watcher::watcher(self.member.api.clone(), config)
            .default_backoff()
            .boxed();
        let mut listing = Vec::new();
        tracing::info!(group = %self.group(), lease = %self.member.lease_name, identity = %self.member.config.identity, "joining the shard group");
        let shards = self.member.shards.clone();
        loop {
            self.step().await;
            let wake = self.next_wake();
            tokio::select! {
                () = stop.cancelled() => return self,
                () = tokio::time::sleep(wake) => {}
                // A tombstone added or dropped: written at once (see `step`).
                () = shards.tombstones().changed() => {}
                event = leases.next() => match event {
                    Some(Ok(Event::Init)) => listing.clear(),
                    Some(Ok(Event::InitApply(lease))) => listing.push(lease),
                    Some(Ok(Event::InitDone)) => {
                        self.replace_peers(std::mem::take(&mut listing));
                        self.listed = true;
                    }
                    Some(Ok(Event::Apply(lease))) => self.observe(&lease),
                    Some(Ok(Event::Delete(lease))) => {
                        self.peers.remove(&lease.name_any());
                    }
                    Some(Err(e)) => {
                        tracing::warn!(group = %self.group(), error = %e, "cannot watch the shard group's Leases; retrying")
                    }
                    None => {}
                },
            }
        }
    }

    /// How long until something may need doing.
    fn next_wake(&self) -> Duration {
        if self.releasing.is_some() || self.acquiring.is_some() {
            return STEP;
        }
        let now = Instant::now();
        let renewal = (self.tried).map_or(Duration::ZERO, |t| {
            (t + self.member.config.retry_period).saturating_duration_since(now)
        });
        let expiry = (self.peers.values())
            .filter(|p| p.live(now))
            .flat_map(|p| [p.seen + self.overdue_after(p), p.seen + p.duration])
            .filter(|at| *at > now)
            .map(|at| at.saturating_duration_since(now) + Duration::from_millis(10))
            .min()
            .unwrap_or(Duration::MAX);
        renewal.min(expiry)
    }

    async fn step(&mut self) {
        // First: a member whose fence has closed (its renewals failed, or it was paused past
        // its renew deadline) must not write its old claims again; it starts over with none.
        if self.joined && !self.member.fence.holds() {
            self.lapse();
        }
        let now = Instant::now();
        self.share_peers(now);
        let retry = self.member.config.retry_period;
        // Tombstones are written at once: a new object of the name on another member waits
        // for a write after its creation, and for the tombstone's removal.
        let tombstones = self.joined && self.member.shards.tombstones().unwritten();
        if tombstones || self.tried.is_none_or(|t| now >= t + retry) {
            self.renew().await;
        }
        if !self.member.fence.holds() {
            if self.joined {
                self.lapse();
            }
            return;
        }
        if !self.listed {
            return;
        }
        let now = Instant::now();
        let me = self.member.config.identity.clone();
        let holdings = self.holdings(now);
        let targets = assign::targets(holdings.iter().map(|(m, _)| m.as_str()));
        self.member.shards.set_members(targets.len());
        let target = targets.get(me.as_str()).copied().unwrap_or(0);
        self.delete_expired(now).await;
        if !self.release(target).await || !self.activate() {
            return;
        }
        let short: Vec<&str> = (holdings.iter())
            .filter(|(m, held)| held.len() < targets.get(m.as_str()).copied().unwrap_or(0))
            .map(|(m, _)| m.as_str())
            .collect();
        let need = target.saturating_sub(self.held.len());
        let wanted = assign::claimable(&me, &short, &self.free(now), need);
        self.claim(wanted).await;
        self.foresee(Instant::now());
        let settled =
            self.releasing.is_none() && self.acquiring.is_none() && self.held.len() == target;
        if settled && !self.member.shards.settled() {
            tracing::info!(group = %self.group(), members = targets.len(), slots = self.held.len(), "shard assignment settled");
        }
        if settled {
            self.member.shards.set_settled(true);
        }
    }

    /// Tells the workers the live peers' Lease revisions and tombstones.
    fn share_peers(&self, now: Instant) {
        let peers = (self.peers.values())
            .filter(|p| p.live(now))
            .map(|p| {
                let revision = (p.resource_version.as_deref()).and_then(|v| v.parse().ok());
                (revision, p.tombstones.clone())
            })
            .collect();
        self.member.shards.tombstones().set_peers(peers);
    }

    /// Deletes the Leases of members judged gone (crashed, killed), unless they changed since:
    /// members that start later need not wait a Lease duration to learn they are gone, and
    /// the Leases do not pile up.
    async fn delete_expired(&mut self, now: Instant) {
        let expired: Vec<(String, String, Option<String>)> = (self.peers.iter())
            .filter(|(_, p)| !p.identity.is_empty() && !p.live(now))
            .map(|(name, p)| (name.clone(), p.identity.clone(), p.resource_version.clone()))
            .collect();
        for (name, identity, resource_version) in expired {
            let params = DeleteParams {
                preconditions: Some(kube::api::Preconditions {
                    resource_version,
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match self.member.api.delete(&name, &params).await {
                Ok(_) => {
                    tracing::info!(group = %self.group(), lease = %name, member = %identity, "deleted the Lease of a member gone without leaving");
                    self.peers.remove(&name);
                }
                // Renewed after all, or deleted by another member: the watch tells.
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                Err(e) => {
                    tracing::info!(group = %self.group(), lease = %name, error = %e, "cannot delete the Lease of a member gone without leaving")
                }
            }
        }
    }

    /// Gives up held slots beyond `target`: deactivates them, then drops the claim once their
    /// reconciles have ended. True when nothing is left waiting.
    async fn release(&mut self, target: usize) -> bool {
        let releasing = match self.releasing {
            Some(releasing) => releasing,
            // Counting the cached keys by slot walks the caches: only when something must go.
            None if self.held.len() > target => {
                let keys = self.host.keys_per_slot();
                assign::surplus(&self.member.config.identity, &self.held, target, &keys)
            }
            None => SlotSet::default(),
        };
        if releasing.is_empty() {
            return true;
        }
        if let Some((slots, _)) = &mut self.acquiring {
            // Not active yet: nothing to drain.
            *slots = slots.difference(&releasing);
        }
        let shards = self.member.shards.clone();
        if !shards.active().intersection(&releasing).is_empty() {
            shards.set_active(shards.active().difference(&releasing));
            tracing::info!(group = %self.group(), slots = %releasing, "giving slots up: taking no more of their keys, waiting for their reconciles to end");
        }
        self.releasing = Some(releasing);
        if self.host.busy(&releasing) {
            return false;
        }
        let held = self.held.difference(&releasing);
        if let Err(e) = self.write(held).await {
            tracing::warn!(group = %self.group(), error = %e, "cannot drop the claim on given-up slots; retrying");
            return false;
        }
        self.held = held;
        self.releasing = None;
        shards.set_cache_slots(self.caching());
        tracing::info!(group = %self.group(), slots = %releasing, held = held.len(), "gave slots up");
        true
    }

    /// Activates claimed slots once the caches hold their objects. True when nothing is left
    /// waiting.
    fn activate(&mut self) -> bool {
        let Some((slots, version)) = self.acquiring else {
            return true;
        };
        if !self.host.sharded_at(version) {
            return false;
        }
        let shards = &self.member.shards;
        shards.set_active(shards.active().union(&slots));
        self.acquiring = None;
        let last_claimed = self.last_claimed;
        let (changed, keys) = self.host.requeue_slots(&slots, &|slot| last_claimed[slot]);
        tracing::info!(group = %self.group(), slots = %slots, keys, changed, active = shards.active().len(), "took slots up: reconciling their keys, those changed since their last holder was seen first");
        true
    }

    /// Claims `wanted` (free slots), withdrawing from any another live member claimed at the
    /// same time, and has the caches list them.
    async fn claim(&mut self, wanted: SlotSet) {
        if wanted.is_empty() {
            return;
        }
        let claim = self.held.union(&wanted);
        if let Err(e) = self.write(claim).await {
            tracing::warn!(group = %self.group(), error = %e, "cannot claim slots; retrying");
            return;
        }
        self.held = claim;
        // A consistent read of every Lease: whoever claimed any of these since the last watch
        // event is seen now.
        let contested = match self.reread().await {
            Ok(()) => wanted.intersection(&self.claimed_by_others(Instant::now())),
            Err(e) => {
                tracing::warn!(group = %self.group(), error = %e, "cannot read the shard group's Leases back; withdrawing the claim");
                wanted
            }
        };
        if !contested.is_empty() {
            let kept = self.held.difference(&contested);
            match self.write(kept).await {
                Ok(()) => self.held = kept,
                // Still claimed here, not active: no one takes them, and the next write
                // withdraws them.
                Err(e) => {
                    tracing::warn!(group = %self.group(), error = %e, "cannot withdraw a contested claim; retrying")
                }
            }
            tracing::info!(group = %self.group(), slots = %contested, "slots claimed by another member at the same time; withdrawn");
        }
        let taken = wanted.difference(&contested);
        if !taken.is_empty() {
            let version = self.member.shards.set_cache_slots(self.caching());
            self.acquiring = Some((taken, version));
            tracing::info!(group = %self.group(), slots = %taken, "claimed slots; listing their objects");
        }
    }

    /// The slots whose objects the caches hold: those held (claimed, and being taken up) and
    /// those foreseen.
    fn caching(&self) -> SlotSet {
        let acquiring = self.acquiring.map(|(s, _)| s).unwrap_or_default();
        self.held.union(&acquiring).union(&self.foreseen)
    }

    /// How long a peer's Lease may go unrenewed before it is overdue: this member's renew
    /// deadline (within the peer's Lease duration). A member that has not renewed for its renew
    /// deadline has stopped reconciling (its fence closed); its Lease runs out later.
    fn overdue_after(&self, peer: &Peer) -> Duration {
        self.member.config.renew_deadline.min(peer.duration)
    }

    /// Has the caches list ahead the slots this member would take up if the overdue members'
    /// Leases ran out (the assignment without them), and drop them again if those renew.
    fn foresee(&mut self, now: Instant) {
        let overdue: Vec<&Peer> = (self.peers.values())
            .filter(|p| p.live(now) && now >= p.seen + self.overdue_after(p))
            .collect();
        let mut foreseen = SlotSet::default();
        if !overdue.is_empty() {
            let orphaned = overdue
                .iter()
                .fold(SlotSet::default(), |all, p| all.union(&p.claims));
            let gone: Vec<&str> = overdue.iter().map(|p| p.identity.as_str()).collect();
            let mut holdings = self.holdings(now);
            holdings.retain(|(m, _)| !gone.contains(&m.as_str()));
            let targets = assign::targets(holdings.iter().map(|(m, _)| m.as_str()));
            let me = self.member.config.identity.as_str();
            let target = targets.get(me).copied().unwrap_or(0);
            let short: Vec<&str> = (holdings.iter())
                .filter(|(m, held)| held.len() < targets.get(m.as_str()).copied().unwrap_or(0))
                .map(|(m, _)| m.as_str())
                .collect();
            let need = target.saturating_sub(self.held.len());
            let free = self.free(now).union(&orphaned);
            foreseen = assign::claimable(me, &short, &free, need).intersection(&orphaned);
        }
        if foreseen != self.foreseen {
            if !foreseen.is_empty() {
                tracing::info!(group = %self.group(), slots = %foreseen, "members overdue: listing the slots this one would take up if their Leases run out");
            }
            self.foreseen = foreseen;
            self.member.shards.set_cache_slots(self.caching());
        }
    }

    fn claimed_by_others(&self, now: Instant) -> SlotSet {
        (self.peers.values())
            .filter(|p| p.live(now))
            .fold(SlotSet::default(), |all, p| all.union(&p.claims))
    }

    /// Slots no live member claims.
    fn free(&self, now: Instant) -> SlotSet {
        SlotSet::all()
            .difference(&self.held)
            .difference(&self.claimed_by_others(now))
    }

    /// Every live member's identity and claimed slots, this one's included.
    fn holdings(&self, now: Instant) -> Vec<(String, SlotSet)> {
        let mut holdings: Vec<(String, SlotSet)> = (self.peers.values())
            .filter(|p| p.live(now))
            .map(|p| (p.identity.clone(), p.claims))
            .collect();
        holdings.push((self.member.config.identity.clone(), self.held));
        holdings
    }

    /// Renews the Lease (creating it at first): the member holds its slots while it can.
    async fn renew(&mut self) {
        let attempt = Instant::now();
        self.tried = Some(attempt);
        // Never longer than the fence still has: a renewal that lands after it is no renewal.
        let left = match self.member.fence.deadline() {
            Some(deadline) if self.joined => deadline.saturating_duration_since(attempt),
            _ => self.member.config.renew_deadline,
        };
        let claims = self.held;
        match tokio::time::timeout(left, self.write(claims)).await {
            Ok(Ok(())) => {
                if !self.joined {
                    self.joined = true;
                    let _ = self.member.leading.send(true);
                    tracing::info!(group = %self.group(), lease = %self.member.lease_name, "joined the shard group");
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(group = %self.group(), error = %e, "cannot renew the shard membership Lease; retrying until the renew deadline")
            }
            Err(_) => {
                tracing::warn!(group = %self.group(), "renewing the shard membership Lease timed out")
            }
        }
    }

    /// The renew deadline passed without a renewal: stop everything at once. Others may take
    /// the slots once the Lease has run out; the next renewal claims nothing.
    fn lapse(&mut self) {
        let shards = &self.member.shards;
        shards.set_active(SlotSet::default());
        shards.set_settled(false);
        shards.set_cache_slots(SlotSet::default());
        self.held = SlotSet::default();
        self.releasing = None;
        self.acquiring = None;
        self.foreseen = SlotSet::default();
        self.joined = false;
        self.member.fence.close();
        let _ = self.member.leading.send(false);
        tracing::warn!(group = %self.group(), renew_deadline = ?self.member.config.renew_deadline, "shard membership lost: could not renew the Lease in time; stopped reconciling");
    }

    /// Writes the Lease with `claims` (a renewal too). Success pushes the fence forward.
    async fn write(&mut self, claims: SlotSet) -> Result<(), kube::Error> {
        let attempt = Instant::now();
        let config = &self.member.config;
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        // Abandoned (an error, a timeout) unless it lands: see `Writing`.
        let tombstones = self.member.shards.tombstones().writing();
        for _ in 0..3 {
            let current = match self.lease.take() {
                Some(lease) => Some(lease),
                None => self.member.api.get_opt(&self.member.lease_name).await?,
            };
            let mut lease = current.unwrap_or_else(|| Lease {
                metadata: ObjectMeta {
                    name: Some(self.member.lease_name.clone()),
                    namespace: Some(config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: None,
            });
            let acquired = (lease.spec.as_ref())
                .filter(|s| s.holder_identity.as_deref() == Some(config.identity.as_str()))
                .and_then(|s| s.acquire_time.clone());
            lease.spec = Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(config.lease_duration.as_secs() as i32),
                acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
                renew_time: Some(now.clone()),
                ..LeaseSpec::default()
            });
            lease
                .labels_mut()
                .insert(GROUP_LABEL.into(), config.name.clone());
            lease
                .annotations_mut()
                .insert(SLOTS_ANNOTATION.into(), claims.to_string());
            lease
                .annotations_mut()
                .insert(TOMBSTONES_ANNOTATION.into(), tombstones.buckets.clone());
            let written = if lease.metadata.resource_version.is_some() {
                let api = &self.member.api;
                api.replace(&self.member.lease_name, &PostParams::default(), &lease)
                    .await
            } else {
                self.member.api.create(&PostParams::default(), &lease).await
            };
            match written {
                Ok(lease) => {
                    let revision =
                        (lease.metadata.resource_version.as_deref()).and_then(|v| v.parse().ok());
                    tombstones.wrote(revision);
                    self.lease = Some(lease);
                    self.member.fence.extend_to(attempt + config.renew_deadline);
                    return Ok(());
                }
                // Written since it was read (a stale copy, or deleted by hand): read it again.
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => continue,
                Err(e) => return Err(e),
            }
        }
        Err(kube::Error::Api(
            kube::core::Status::failure("the membership Lease kept changing", "Conflict")
                .with_code(409)
                .boxed(),
        ))
    }

    /// Reads every Lease of the group from the API server (not the watch).
    async fn reread(&mut self) -> Result<(), kube::Error> {
        let selector = format!("{GROUP_LABEL}={}", self.group());
        let list = self
            .member
            .api
            .list(&ListParams::default().labels(&selector))
            .await?;
        self.replace_peers(list.items);
        Ok(())
    }

    fn replace_peers(&mut self, leases: Vec<Lease>) {
        let names: std::collections::BTreeSet<String> =
            leases.iter().map(|l| l.name_any()).collect();
        self.peers.retain(|name, _| names.contains(name));
        for lease in &leases {
            self.observe(lease);
        }
    }

    fn observe(&mut self, lease: &Lease) {
        let name = lease.name_any();
        if name == self.member.lease_name {
            return;
        }
        let revision = (lease.metadata.resource_version.as_deref()).and_then(|v| v.parse().ok());
        let spec = lease.spec.clone().unwrap_or_default();
        let slots = (lease.annotations().get(SLOTS_ANNOTATION).cloned()).unwrap_or_default();
        let record = (
            spec.renew_time.clone(),
            spec.lease_duration_seconds,
            slots.clone(),
        );
        let tombstones =
            Buckets::parse((lease.annotations().get(TOMBSTONES_ANNOTATION)).map_or("", |t| t));
        if let Some(peer) = self.peers.get_mut(&name)
            && peer.record == record
        {
            peer.resource_version = lease.metadata.resource_version.clone();
            peer.tombstones = tombstones;
            let claims = peer.claims;
            self.claimed_at(&claims, revision);
            return;
        }
        let claims = SlotSet::parse(&slots).unwrap_or_else(|| {
            // Not written by a member: assume the worst, so nothing is taken from under it.
            tracing::warn!(group = %self.group(), lease = %name, slots, "a membership Lease claims slots in an unknown form; treating it as claiming them all");
            SlotSet::all()
        });
        let seconds = spec.lease_duration_seconds.unwrap_or(0).max(0) as u64;
        let peer = Peer {
            identity: spec.holder_identity.unwrap_or_default(),
            claims,
            record,
            seen: Instant::now(),
            duration: Duration::from_secs(seconds),
            resource_version: lease.metadata.resource_version.clone(),
            tombstones,
        };
        self.claimed_at(&claims, revision);
        self.peers.insert(name, peer);
    }

    /// Records that a Lease at `revision` claimed `slots`.
    fn claimed_at(&mut self, slots: &SlotSet, revision: Option<u64>) {
        if let Some(revision) = revision {
            slots
                .iter()
                .for_each(|s| self.last_claimed[s] = Some(revision));
        }
    }

    /// Takes no more keys and deletes the Lease.
    async fn leave(mut self) {
        let shards = &self.member.shards;
        shards.set_active(SlotSet::default());
        shards.set_settled(false);
        self.member.fence.close();
        let _ = self.member.leading.send(false);
        let lease = self.member.lease_name.clone();
        match self
            .member
            .api
            .delete(&lease, &DeleteParams::default())
            .await
        {
            Ok(_) => {
                tracing::info!(group = %self.group(), %lease, slots = %self.held, "left the shard group")
            }
            Err(e) => {
                tracing::warn!(group = %self.group(), %lease, error = %e, "could not delete the membership Lease; the others take its slots when it expires")
            }
        }
        self.held = SlotSet::default();
    }
}
