//! A controller's workers: each takes a key from the queue, runs the plugin on it in the sandbox
//! (on the worker's own thread while its calls are short, else under `block_in_place`: see
//! [`CallTime`]), has the applier carry out the checked intents, and hands the outcome
//! back to the queue (forget, requeue-after, rate-limited retry, or nothing for terminal
//! errors), recording it in the controller's tallies, the metrics and one log record.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::echoes::Echoes;
use super::outcomes::Outcomes;
use super::{ReconcileResult, Stats, current, lock};
use crate::clock::Clock;
use crate::observe::metrics::Metrics;
use crate::plugin::wit;
use crate::reconcile::applier::{self, Applier, Subject};
use crate::reconcile::informer::{Caches, Entry, Informer, ObjectKey, Version};
use crate::reconcile::queue::Queue;
use crate::replicas::leader::Leadership;
use crate::replicas::sharding::Shards;
use crate::replicas::sharding::tombstones::Publication;
use crate::runtime::{Error, ErrorKind, Plugin, Reconciled};
use crate::view::View;

/// Numbers each reconcile of the process, for telling one reconcile's log lines from another's.
static NEXT_RECONCILE: AtomicU64 = AtomicU64::new(1);

/// Conflicts in a row on one key before it gets a Warning event.
const CONFLICTS_BEFORE_WARNING: u32 = 5;

/// How soon a key held back for another replica's reconcile of its name is looked at again
/// (a look at what the membership Leases last said, not a request).
const ORDER_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// How long a `Gone` waits in its worker for a Lease write under way to land (a few
/// milliseconds) before it is queued again: waiting in place, it starts before a new object of
/// the name on this replica would fold it away.
const PUBLISH_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// Sharding by uid: the object of a key this replica has looked at, and whether no other
/// replica may still run a `Gone` of its name (see [`crate::replicas::sharding::tombstones`]).
pub(super) struct Clearance {
    uid_hash: u64,
    /// The object's revision when first seen here: a deletion of the name came before it.
    since: Option<u64>,
    clear: bool,
}

/// Whether a key's reconcile may start now, as far as another replica's reconcile of the same
/// name goes.
enum Ordered {
    Now,
    /// Another replica may still run a `Gone` of the name, or a Lease write under way decides
    /// whether this one's `Gone` may run: look again shortly.
    Later,
    /// The name exists again: this `Gone` folds into the new object's reconciles.
    Folded,
}

pub(super) struct Worker {
    pub(super) plugin: Arc<RwLock<Arc<Plugin>>>,
    /// Every informer the plugin subscribed to: watched, owned and `reads` kinds.
    pub(super) informers: Vec<Arc<Informer>>,
    /// The same, as the plugin reads them.
    pub(super) caches: Arc<Caches>,
    pub(super) stop: CancellationToken,
    pub(super) queue: Queue<ObjectKey>,
    /// The reconciled kind's informers: the object handed to the plugin comes from the cache
    /// whose event queued the key, never from another that may lag behind it.
    pub(super) watched: Arc<Vec<Arc<Informer>>>,
    pub(super) applier: Arc<Applier>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) stats: Arc<Stats>,
    /// Keys being reconciled, with their shard slot; the queue guarantees a key is never in
    /// here twice.
    pub(super) in_flight: Arc<Mutex<super::InFlight>>,
    /// Slots of reconciled objects deleted from a uid-sharded cache.
    pub(super) gone: Arc<Mutex<std::collections::HashMap<ObjectKey, usize>>>,
    /// Sharding by uid: the objects looked at, and whether their first reconcile may run.
    pub(super) cleared: Arc<Mutex<std::collections::HashMap<ObjectKey, Clearance>>>,
    /// Keys are taken only while this replica leads.
    pub(super) leadership: Leadership,
    /// In a shard group, only the keys of this replica's slots.
    pub(super) shards: Option<Shards>,
    /// What each key's last reconcile wrote that the caches have not shown yet.
    pub(super) echoes: Arc<Echoes>,
    /// What each key's last reconcile did, for its next request.
    pub(super) outcomes: Arc<Outcomes>,
    /// How long this worker's sandboxed calls have lately taken.
    pub(super) call_time: CallTime,
    /// The time reconciles are told.
    pub(super) clock: Clock,
}

/// Calls expected to hold the thread for less CPU time than this run on the worker's own
/// thread; longer ones are handed to another ([`sandboxed_call`]), which costs two thread
/// wake-ups per call: on two busy cores, converging 5,000 VirtualMachines took 1.2-1.4x the CPU
/// of the same calls run in place (`benches/convergence`, `docs/performance.md`). A reconcile
/// call takes 20 to 80 µs alone and 100 to 300 µs on a loaded machine, where its pages are cold;
/// tokio's guidance for time between awaits is 10 to 100 µs, and a call in place holds only its
/// own worker (the others steal its tasks). CPU time, not the clock: preemption on a busy
/// machine stretches any call's wall time and would hand off every call after it, and a call
/// that waits (a query, a WASI write, an instance of the pool) moves off the worker itself while
/// it waits (`wasmctrl_runtime`'s `blocking`).
const INLINE_UNDER: std::time::Duration = std::time::Duration::from_micros(500);

/// How much CPU time a worker's sandboxed calls have lately taken, as a decaying maximum
/// (nanoseconds): one slow call counts at once, and its weight fades by an eighth with each call
/// after it, so a plugin that turned slow is handed off from its next call on and is run in
/// place again only after a run of short calls. It starts at the threshold: a plugin's first
/// call is handed off.
pub(super) struct CallTime(AtomicU64);

impl Default for CallTime {
    fn default() -> Self {
        Self(AtomicU64::new(INLINE_UNDER.as_nanos() as u64))
    }
}

impl CallTime {
    fn short(&self) -> bool {
        self.0.load(Ordering::Relaxed) < INLINE_UNDER.as_nanos() as u64
    }

    fn record(&self, took: std::time::Duration) {
        let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let last = self.0.load(Ordering::Relaxed);
        self.0.store(took.max(last - last / 8), Ordering::Relaxed);
    }
}

impl Worker {
    pub(super) async fn run(mut self) {
        // As client-go's WaitForCacheSync: a plugin that reads a half-loaded cache would act on
        // a world that does not exist (a missing Deployment, children it thinks are gone).
        let synced = futures::future::join_all(self.informers.iter().map(|c| c.synced()));
        tokio::select! {
            _ = synced => {}
            () = self.stop.cancelled() => return,
        }
        loop {
            tokio::select! {
                () = self.leadership.leading() => {}
                () = self.stop.cancelled() => return,
            }
            let Some(key) = self.queue.get().await else {
                return;
            };
            if !self.held_back(&key) {
                self.work(key).await;
            }
        }
    }

    /// Whether `key`, just taken from the queue, must wait (handed back to the queue): this
    /// replica stopped leading meanwhile, or the caches do not show the key's last writes yet.
    fn held_back(&self, key: &ObjectKey) -> bool {
        if !self.leadership.is_leading() {
            // Leadership ended while this worker waited for a key: hand it back for
            // whichever replica reconciles next (here again, if this one leads again).
            self.queue.add(key.clone());
            self.queue.done(key);
            return true;
        }
        if let Some(look_again) = self.echoes.hold(key) {
            // The caches do not show this key's last writes yet: reconciling now would run
            // the plugin on a world without them. Their echo queues the key.
            self.queue.add_after(key.clone(), look_again);
            self.queue.done(key);
            self.stats.held.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Reconciles `key` if it is this replica's to reconcile (its shard slot active here, and
    /// in order with another replica's reconciles of its name), then hands it back as done.
    async fn work(&self, key: ObjectKey) {
        let plugin = current(&self.plugin);
        let manifest = plugin.manifest();
        let id = NEXT_RECONCILE.fetch_add(1, Ordering::Relaxed);
        let span = tracing::info_span!("reconcile", plugin.name = %manifest.name, plugin.version = %manifest.version, object.key = %key, reconcile.id = id, outcome = tracing::field::Empty);
        let slot = self
            .shards
            .as_ref()
            .and_then(|shards| self.slot(shards, &key));
        if lock(&self.in_flight).insert(key.clone(), slot).is_some() {
            self.stats.overlaps.fetch_add(1, Ordering::Relaxed);
            tracing::error!(object.key = %key, "broken invariant: key handed to two workers at once");
        }
        // Checked once the key is in flight: a replica giving the key's slot up first stops
        // taking its keys, then waits until none is in flight, so either this sees the slot
        // gone or the handover waits for this reconcile.
        if let Some(shards) = &self.shards
            && slot.is_none_or(|s| !shards.active().contains(s))
        {
            // Another replica's key (or soon to be): it queues the key itself.
            lock(&self.in_flight).remove(&key);
            self.settled(&manifest.name, &key);
            self.queue.forget(&key);
            self.queue.done(&key);
            return;
        }
        let gone = self.cached(&key).is_none();
        if !self.in_order(&manifest.name, &key, slot, gone, &span).await {
            return;
        }
        let started = std::time::Instant::now();
        // The start of a reconcile, as its end below: operators (and tests) can tell which
        // replica worked on a key when, and whether it was of an object gone.
        span.in_scope(|| tracing::debug!(gone, "reconciling"));
        let outcome = self.reconcile(&plugin, &key).instrument(span.clone()).await;
        lock(&self.in_flight).remove(&key);
        span.record("outcome", tracing::field::debug(outcome));
        self.stats.record(outcome);
        self.metrics.reconciled(&manifest.name, started.elapsed());
        // One record per reconcile, after its outcome counts: tests and operators see that the
        // host has moved past a change.
        span.in_scope(|| {
            let duration_ms = started.elapsed().as_millis() as u64;
            tracing::debug!(duration_ms, "reconciled")
        });
        // Only now may another replica start on a new object of the name (sharding by uid):
        // its first reconcile waits for this tombstone to go, and so starts after this one has
        // ended, as its log shows.
        if gone {
            self.settled(&manifest.name, &key);
        }
        self.queue.done(&key);
    }

    /// The shard slot of `key`: its namespace's, or its object's uid's (the cached object's, or
    /// a deleted one's, remembered); `None` when this replica knows no object of the key.
    fn slot(&self, shards: &Shards, key: &ObjectKey) -> Option<usize> {
        if shards.field() == wasmctrl_core::shard::Field::Namespace {
            return Some(crate::replicas::sharding::key_slot(
                key.namespace(),
                key.name(),
            ));
        }
        let gone = lock(&self.gone).remove(key);
        let cached = (self.watched.iter())
            .filter(|w| w.covers(key.namespace()))
            .find_map(|w| w.get(key));
        cached.map(|e| e.slot(shards)).or(gone)
    }

    /// Whether `key`'s reconcile (of an object `gone`, in `slot`) may start now, as far as
    /// another replica's reconcile of the same name goes ([`ordered`](Self::ordered)); if not,
    /// the key is handed back to the queue: for a look again shortly, or for good when the
    /// deletion folds into a new object's reconciles.
    async fn in_order(
        &self,
        plugin: &str,
        key: &ObjectKey,
        slot: Option<usize>,
        gone: bool,
        span: &tracing::Span,
    ) -> bool {
        match self.ordered(plugin, key).instrument(span.clone()).await {
            Ordered::Now => return true,
            Ordered::Later => {
                if let (true, Some(slot)) = (gone, slot) {
                    lock(&self.gone).insert(key.clone(), slot);
                }
                lock(&self.in_flight).remove(key);
                self.queue.add_after(key.clone(), ORDER_POLL);
            }
            Ordered::Folded => {
                span.in_scope(|| tracing::info!("not reconciling the deleted object: its name exists again, and its new object's reconciles follow"));
                lock(&self.in_flight).remove(key);
                self.settled(plugin, key);
                self.queue.forget(key);
            }
        }
        self.queue.done(key);
        false
    }

    /// The cached object of `key`, and the cache it is in.
    fn cached(&self, key: &ObjectKey) -> Option<(&Arc<Informer>, Arc<Entry>)> {
        (self.watched.iter())
            .filter(|w| w.covers(key.namespace()))
            .find_map(|w| Some((w, w.get(key)?)))
    }

    /// Sharding by uid: whether `key`'s reconcile may start without overtaking another
    /// replica's reconcile of the same name, or running beside it (see
    /// [`crate::replicas::sharding::tombstones`]). A `Gone` runs once no write of this replica's Lease
    /// without its tombstone can land after the deletion; an object's first reconcile here once
    /// no live member shows a tombstone of its name in a Lease written after the object was
    /// first seen.
    async fn ordered(&self, plugin: &str, key: &ObjectKey) -> Ordered {
        let Some(shards) =
            (self.shards.as_ref()).filter(|s| s.field() == wasmctrl_core::shard::Field::Uid)
        else {
            return Ordered::Now;
        };
        let (namespace, name) = (key.namespace(), key.name());
        let tombstones = shards.tombstones();
        let Some((_, entry)) = self.cached(key) else {
            lock(&self.cleared).remove(key);
            let publication =
                (tombstones.published(plugin, namespace, name, PUBLISH_PATIENCE)).await;
            return match publication {
                Publication::Published => Ordered::Now,
                Publication::Pending => Ordered::Later,
                Publication::Lagging => self.still_gone(plugin, key).await,
            };
        };
        let since = match entry.resource_version {
            Version::Revision(revision) => Some(revision),
            Version::Opaque(_) => None,
        };
        let mut cleared = lock(&self.cleared);
        let clearance = cleared.entry(key.clone()).or_insert(Clearance {
            uid_hash: entry.uid_hash,
            since,
            clear: false,
        });
        if clearance.uid_hash != entry.uid_hash {
            *clearance = Clearance {
                uid_hash: entry.uid_hash,
                since,
                clear: false,
            };
        }
        clearance.clear =
            clearance.clear || tombstones.clear(plugin, namespace, name, clearance.since);
        if clearance.clear {
            Ordered::Now
        } else {
            Ordered::Later
        }
    }

    /// A `Gone` whose tombstone was recorded only after a write of this replica's Lease landed
    /// after the deletion: another replica may have cleared a new object of the name
    /// meanwhile. Runs only if the name does not exist now; if it does, the deletion
    /// folds into the new object's reconciles, as on one host that sees both before a worker
    /// takes the key.
    async fn still_gone(&self, plugin: &str, key: &ObjectKey) -> Ordered {
        let Some(cache) = self.watched.iter().find(|w| w.covers(key.namespace())) else {
            return Ordered::Now;
        };
        match self.applier.exists(plugin, cache, key).await {
            Ok(false) => Ordered::Now,
            Ok(true) => Ordered::Folded,
            Err(e) => {
                tracing::info!(error = %e, "cannot tell whether the deleted object's name exists again; looking again shortly");
                Ordered::Later
            }
        }
    }

    /// Sharding by uid: `key`'s `Gone` has ended here or will not run here; its tombstone goes.
    fn settled(&self, plugin: &str, key: &ObjectKey) {
        if let Some(shards) = &self.shards {
            shards
                .tombstones()
                .forget(plugin, key.namespace(), key.name());
        }
        lock(&self.cleared).remove(key);
    }

    async fn reconcile(&self, plugin: &Arc<Plugin>, key: &ObjectKey) -> ReconcileResult {
        let (cache, entry) = self.cached(key).unzip();
        let Some(result) = self.call(plugin, key, entry.as_deref()).await else {
            self.queue.add_rate_limited(key.clone());
            return ReconcileResult::Error;
        };
        let subject = Subject {
            manifest: plugin.manifest(),
            key,
            object: entry.as_deref(),
            cache,
        };
        let reconciled = match result {
            Ok(r) => r,
            Err(e) => return self.sandbox_failed(&subject, e).await,
        };
        let applied = (self.applier)
            .apply(&subject, &reconciled.intents, &reconciled.best_effort)
            .await;
        // Kept whether or not something failed: a retry must see the writes that succeeded.
        self.echoes.expect(key, applied.echoes);
        self.outcomes
            .record(key, applied.statuses, subject.object.is_none());
        let Some(error) = applied.error else {
            self.queue.forget(key);
            tracing::debug!(
                writes = applied.writes,
                skipped = applied.skipped,
                "applied"
            );
            return match reconciled.requeue_after {
                Some(after) => {
                    self.queue.add_after(key.clone(), after);
                    ReconcileResult::Requeue
                }
                None => ReconcileResult::Success,
            };
        };
        self.apply_failed(&subject, error).await
    }

    /// Calls the plugin's reconcile of `key` (its cached object `entry`, if any) in the
    /// sandbox, on a thread of its own; `None` if that thread failed.
    async fn call(
        &self,
        plugin: &Arc<Plugin>,
        key: &ObjectKey,
        entry: Option<&Entry>,
    ) -> Option<Result<Reconciled, Error>> {
        let request = wit::Request {
            namespace: key.namespace().to_owned(),
            name: key.name().to_owned(),
            object: entry.map(|e| e.json.to_string()),
            deleting: entry.is_some_and(|e| e.deleting),
            settings: String::new(),
            now: self.clock.now(),
            previous: self.outcomes.previous(key),
        };
        let view: Arc<dyn View> = self.caches.clone();
        let sandboxed = plugin.clone();
        let called = move || {
            let (started, cpu) = (std::time::Instant::now(), thread_cpu_time());
            let result = sandboxed.reconcile(request, view);
            (
                result,
                started.elapsed(),
                thread_cpu_time().saturating_sub(cpu),
            )
        };
        // A call that moves itself off the worker (it may wait in WASI) is not run in place:
        // counted among the calls in place, it would keep another plugin's short call from
        // running so while it runs elsewhere.
        let short = self.call_time.short() && !plugin.waits_in_wasi();
        match sandboxed_call(called, short).await {
            Ok((result, took, cpu)) => {
                self.call_time.record(cpu);
                self.metrics.sandbox_call(&plugin.manifest().name, took);
                Some(result)
            }
            Err(e) => {
                tracing::error!(error = %e, "reconcile thread failed");
                None
            }
        }
    }

    /// The plugin's reconcile failed: counted, told on the object when retrying cannot help
    /// (the plugin asked for something it may not do, or failed for good; retryable failures
    /// are logged and retried, an Event per attempt would be noise), and retried as its kind
    /// says.
    async fn sandbox_failed(&self, subject: &Subject<'_>, e: Error) -> ReconcileResult {
        let plugin = &subject.manifest.name;
        self.outcomes.forget(subject.key);
        self.metrics.sandbox_failure(plugin, e.kind.metric_kind());
        let reason = match &e.kind {
            ErrorKind::Action(_) => Some("ActionRejected"),
            ErrorKind::Read(_) => Some("ReadRefused"),
            kind if !kind.retryable() => Some("ReconcileFailed"),
            _ => None,
        };
        if let Some(reason) = reason {
            self.warn(subject, reason, &e.to_string()).await;
        }
        self.failed(
            subject.key,
            &e.to_string(),
            e.kind.retryable(),
            e.kind.label(),
        )
    }

    /// Carrying out the plugin's actions failed with `error`: retried with backoff, and told
    /// on the object when a conflict keeps coming back or a permission is missing.
    async fn apply_failed(&self, subject: &Subject<'_>, error: applier::Error) -> ReconcileResult {
        let key = subject.key;
        if let applier::Error::Conflict {
            target, message, ..
        } = &error
        {
            // Through the rate limiter like any failure: a precondition that keeps failing
            // must back off, not hot-loop against the API server. The object changing queues
            // the key again at once anyway.
            let retry_in = self.queue.add_rate_limited(key.clone());
            let conflicts = self.queue.retries(key);
            tracing::info!(%target, %message, conflicts, ?retry_in, "conflict; retrying with backoff");
            if conflicts >= CONFLICTS_BEFORE_WARNING {
                // Worded without the count so the applier records it once, not per retry.
                let note = format!(
                    "repeated conflicts writing {target}; retrying with backoff: {message}"
                );
                self.warn(subject, "ConflictRetrying", &note).await;
            }
            return ReconcileResult::Error;
        }
        if error.forbidden() {
            // A missing RBAC rule: say which on the object (kubectl describe); retries go on
            // with backoff and succeed once the rule is granted.
            self.warn(subject, "Forbidden", &error.to_string()).await;
        }
        self.failed(key, &error.to_string(), error.retryable(), error.label())
    }

    /// A Warning event on the reconciled object, best effort.
    async fn warn(&self, subject: &Subject<'_>, reason: &str, note: &str) {
        if let Err(e) = self.applier.warn(subject, reason, note).await {
            tracing::warn!(error = %e, "could not record the warning event");
        }
    }

    fn failed(
        &self,
        key: &ObjectKey,
        message: &str,
        retryable: bool,
        reason: &str,
    ) -> ReconcileResult {
        if retryable {
            let delay = self.queue.add_rate_limited(key.clone());
            tracing::warn!(error = %message, reason, retry_in = ?delay, "reconcile failed");
            ReconcileResult::Error
        } else {
            self.queue.forget(key);
            tracing::warn!(error = %message, reason, "reconcile failed permanently; not retrying until the object changes");
            ReconcileResult::Terminal
        }
    }
}

/// The CPU time this thread has used (zero where the clock cannot be read, which makes every
/// call count as short: the same as before calls were judged).
fn thread_cpu_time() -> std::time::Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    std::time::Duration::new(
        u64::try_from(t.tv_sec).unwrap_or_default(),
        u32::try_from(t.tv_nsec).unwrap_or_default(),
    )
}

/// Runs one sandboxed call (CPU-bound, bounded by the plugin's deadline) off the async code's
/// way, unless it is expected to be `short`: then on the worker's own thread, as any short
/// piece of async code runs.
///
/// On the multi-threaded runtime a longer call stays on this worker's thread (`block_in_place`
/// hands the worker's other tasks to another thread meanwhile) rather than hopping to the
/// blocking pool and back: extra pool threads let the controller take CPU from everything else
/// in the process (the embedded API server in `wasmctrl dev`, the benchmark's driver), so it
/// answered each change on its own more often. `cargo bench --bench convergence`, 10,000
/// Things, 5 rounds: update storm reconciles 1.51x -> 1.13x the native controller's, requests
/// 1.00x -> 0.87x. But the hand-off itself (waking a thread to take the worker's queue, and
/// taking it back) cost about 20 µs of CPU per call, a third of a typical call: the VM workload
/// (`convergence(vm)`, 5,000 VMs, two runs of 3 rounds, all calls handed off against short
/// calls in place) went from 1.28x and 1.31x native's controller CPU to 1.07x and 1.14x.
/// A current-thread runtime (some tests) cannot block in place and uses the pool.
///
/// At most all of the runtime's worker threads but one run a call in place at once
/// ([`InPlace`]): the other is left to the rest of the process's tasks (its informers, other
/// plugins' workers, the API server in `wasmctrl dev`). With every worker thread in a call, those
/// tasks waited: the controller was served first, kept up with every change and answered each
/// apart. `convergence` (10,000 Things, the API server and the driver in the benchmark's
/// runtime, 3 rounds): update storm 1.70x native's time with 1.87x its reconciles when any
/// short call ran in place, 1.03x with 0.81x with one thread left; converging 5,000 VMs (the
/// API server in its own process) stayed within the day's range of controller CPU (1.34x the
/// linear baseline's, against 1.27-1.39x).
async fn sandboxed_call<R: Send + 'static>(
    call: impl FnOnce() -> R + Send + 'static,
    short: bool,
) -> Result<R, tokio::task::JoinError> {
    let handle = tokio::runtime::Handle::current();
    match handle.runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => {
            let workers = handle.metrics().num_workers();
            let in_place = short.then(|| InPlace::take(&IN_PLACE, workers)).flatten();
            match in_place {
                Some(_held) => Ok(call()),
                None => Ok(tokio::task::block_in_place(call)),
            }
        }
        _ => tokio::task::spawn_blocking(call).await,
    }
}

/// Calls running in place on the runtime's worker threads now, all plugins together.
static IN_PLACE: AtomicU64 = AtomicU64::new(0);

/// One call counted in `running` ([`IN_PLACE`]) until dropped.
struct InPlace {
    running: &'static AtomicU64,
}

impl InPlace {
    /// Counts a call in place in `running`, unless `workers - 1` already run (on a runtime of
    /// one worker thread, none may).
    fn take(running: &'static AtomicU64, workers: usize) -> Option<Self> {
        let most = u64::try_from(workers.saturating_sub(1)).unwrap_or(u64::MAX);
        running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now < most).then_some(now + 1)
            })
            .ok()
            .map(|_| InPlace { running })
    }
}

impl Drop for InPlace {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use std::sync::atomic::AtomicU64;

    use super::{CallTime, INLINE_UNDER, InPlace};

    #[test]
    fn one_runtime_worker_is_always_left_to_the_other_tasks() {
        static RUNNING: AtomicU64 = AtomicU64::new(0);
        let first = InPlace::take(&RUNNING, 3).expect("none runs yet");
        let second = InPlace::take(&RUNNING, 3).expect("one of three runs");
        assert!(InPlace::take(&RUNNING, 3).is_none(), "two of three run");
        drop(first);
        let third = InPlace::take(&RUNNING, 3).expect("a call ended");
        drop((second, third));
        assert!(
            InPlace::take(&RUNNING, 1).is_none(),
            "a runtime of one worker runs nothing in place"
        );
        assert_eq!(RUNNING.load(std::sync::atomic::Ordering::Acquire), 0);
    }

    #[test]
    fn a_plugin_runs_in_place_only_while_its_calls_are_short() {
        let calls = CallTime::default();
        assert!(!calls.short(), "a plugin's first call is handed off");
        calls.record(Duration::from_micros(40));
        assert!(calls.short(), "short calls run in place");
        calls.record(Duration::from_millis(200));
        assert!(!calls.short(), "one slow call: the next is handed off");
        // Its weight fades by an eighth per call: 200 ms to under 500 µs takes 45 short calls.
        let mut short_calls = 0;
        while !calls.short() {
            calls.record(Duration::from_micros(40));
            short_calls += 1;
        }
        assert_eq!(short_calls, 45);
        calls.record(INLINE_UNDER);
        assert!(
            !calls.short(),
            "a call as long as the threshold is not short"
        );
    }
}
