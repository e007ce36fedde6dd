//! The work queue between the informers and the reconcilers: the client-go `workqueue` contract
//! (plain + delaying + rate limiting, with controller-runtime's low priority for the initial list),
//! made async for tokio.
//!
//! Informer events [`add`](Queue::add) object keys; worker tasks loop on [`get`](Queue::get),
//! reconcile, then call [`done`](Queue::done). The queue guarantees:
//!
//! - **Dedup while queued**: a key that is already waiting is not queued twice.
//! - **One worker per key**: a key that has been handed out is not handed out again until `done`.
//! - **No lost events**: a key added while it is being processed is marked dirty and queued once
//!   more when `done` is called, however many times it was re-added.
//! - **Follow-ups first, once**: that re-queued key is handed out next, ahead of keys queued while
//!   it was processed, as kube-runtime's scheduler does (client-go puts it at the back). Usually
//!   the change is the reconcile's own write coming back; answering it at once lets the key leave
//!   the queue until the object truly changes again. At the back, it would be booked behind every
//!   other key after each of its own writes, so that under a stream of changes it is reconciled
//!   once per pass through the queue, writing every intermediate state (`cargo bench --bench
//!   convergence`: a third more writes in an update storm). A key changed again during its
//!   follow-up goes to the back, so one busy key cannot keep a worker to itself.
//! - **Delays, earliest wins**: [`add_after`](Queue::add_after) never postpones a key that is due
//!   sooner; an immediate add of a scheduled key makes it ready now.
//! - **Per-key exponential backoff**: [`add_rate_limited`](Queue::add_rate_limited) waits
//!   `base * 2^failures` (capped); [`forget`](Queue::forget) resets the count.
//! - **Priorities**: [`Priority::Low`] keys (an informer's initial list) are handed out only when no
//!   normal key is ready; adding a low key at normal priority promotes it.
//!
//! A worker loop; how many run at once is the caller's choice:
//!
//! ```
//! # use wasmctrl::reconcile::queue::{Config, Queue};
//! # struct Error { terminal: bool }
//! # async fn reconcile(_key: &str) -> Result<(), Error> { Ok(()) }
//! async fn worker(queue: Queue<String>) {
//!     while let Some(key) = queue.get().await {
//!         match reconcile(&key).await {
//!             Ok(()) => queue.forget(&key),
//!             // A terminal error (the object is invalid, the plugin refused it) will not heal by
//!             // retrying. The queue has nothing special for it: the worker does not requeue.
//!             Err(e) if e.terminal => queue.forget(&key),
//!             Err(_) => {
//!                 queue.add_rate_limited(key.clone());
//!             }
//!         }
//!         queue.done(&key);
//!     }
//! }
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let queue = Queue::new(Config::default());
//! let workers: Vec<_> = (0..4).map(|_| tokio::spawn(worker(queue.clone()))).collect();
//! queue.add("default/web".to_string());
//! # tokio::time::sleep(std::time::Duration::from_millis(10)).await;
//! // On the way out: stop handing out keys, let in-flight reconciles finish.
//! queue.shutdown_with_drain().await;
//! # for worker in workers { worker.await.unwrap(); }
//! # });
//! ```
//!
//! Delayed keys share one ordered map per queue and are moved to the ready set by whichever
//! worker is waiting in `get` (it sleeps until the earliest due time): there is no timer or task
//! per key, and every operation is `O(log n)` in the number of keys.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::observe::metrics::QueueObserver;
use wasmctrl_core::sync::lock;

/// Longer delays are clamped so that the deadline cannot overflow `Instant`; a decade is never.
const MAX_DELAY: Duration = Duration::from_secs(10 * 365 * 86_400);

/// Backoff settings for [`Queue::add_rate_limited`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Delay after the first failure; doubled for every further failure of the same key.
    pub base_backoff: Duration,
    /// Upper bound for the per-key delay.
    pub max_backoff: Duration,
}

impl Default for Config {
    /// client-go's `DefaultItemBasedRateLimiter`: 5 ms doubling up to 1000 s.
    fn default() -> Self {
        Self {
            base_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_secs(1000),
        }
    }
}

/// How urgently a key should be handed out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Priority {
    /// Events: handed out before any low-priority key.
    #[default]
    Normal,
    /// Bulk work such as an informer's initial list: handed out only when no normal key is ready.
    Low,
}

impl Priority {
    /// Sort rank in the ready map: lower is handed out first.
    fn rank(self) -> u8 {
        match self {
            Priority::Normal => 0,
            Priority::Low => 1,
        }
    }

    fn higher(self, other: Priority) -> Priority {
        if self == Priority::Normal || other == Priority::Normal {
            Priority::Normal
        } else {
            Priority::Low
        }
    }
}

/// A point-in-time snapshot of the queue's gauges and counters, for metrics export.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Keys ready to be handed out (`workqueue_depth`).
    pub depth: usize,
    /// Keys waiting for a delay or backoff to expire.
    pub scheduled: usize,
    /// Keys handed out and not yet `done`.
    pub in_flight: usize,
    /// Adds that gave a key new work (it became ready, or dirty while in flight), including
    /// delayed adds when they come due; deduplicated adds are not counted
    /// (`workqueue_adds_total`).
    pub adds_total: u64,
    /// Delayed and rate-limited adds (`workqueue_retries_total`).
    pub retries_total: u64,
    /// Keys handed out by [`Queue::get`].
    pub handed_out_total: u64,
    /// Sum over handed-out keys of the time from the add that queued them (or their due time,
    /// for delayed adds) to their hand-out, as client-go measures queue latency.
    pub queue_latency_total: Duration,
}

/// Per-item observations, for histograms that a [`Stats`] snapshot cannot provide.
///
/// Called outside the queue's lock, on the worker's task; keep it cheap (record into a histogram).
pub trait Observer: Send + Sync {
    /// A key was handed out `queue_latency` after the add that queued it, or after its due
    /// time (`workqueue_queue_duration_seconds`).
    fn handed_out(&self, queue_latency: Duration) {
        let _ = queue_latency;
    }

    /// A key was `done` after being processed for `work_duration`
    /// (`workqueue_work_duration_seconds`).
    fn finished(&self, work_duration: Duration) {
        let _ = work_duration;
    }
}

impl Observer for QueueObserver {
    fn handed_out(&self, queue_latency: Duration) {
        self.queue_duration.observe(queue_latency.as_secs_f64());
    }

    fn finished(&self, work_duration: Duration) {
        self.work_duration.observe(work_duration.as_secs_f64());
    }
}

/// A deduplicating, delaying, rate-limiting work queue of keys `K`; see the [module docs](self).
///
/// Cheap to clone: clones share the same queue.
pub struct Queue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for Queue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for Queue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.lock();
        f.debug_struct("Queue")
            .field("depth", &state.ready.len())
            .field("scheduled", &state.delayed.len())
            .field("in_flight", &state.in_flight)
            .field("shut_down", &state.shut_down)
            .finish_non_exhaustive()
    }
}

struct Inner<K> {
    config: Config,
    state: Mutex<State<K>>,
    /// Wakes one waiting `get` when a key becomes ready or the earliest due time may have moved;
    /// all of them on shutdown.
    wake: Notify,
    /// Wakes `shutdown_with_drain` when the last in-flight key is done.
    idle: Notify,
    observer: Option<Arc<dyn Observer>>,
}

impl<K> Inner<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // Only the key's own `Hash`/`Eq`/`Clone` can panic under this lock, leaving at worst one
        // key's bookkeeping stale; refusing all further work instead would stall the controller.
        lock(&self.state)
    }
}

/// What happens next to a key; at most one of these at a time, so a key is never both ready and
/// scheduled.
enum Pending {
    /// Nothing more to do once the current processing, if any, is done.
    Nothing,
    /// In the ready map under `(priority rank, seq)`; ready since `since`.
    Ready {
        priority: Priority,
        seq: u64,
        since: Instant,
    },
    /// Added while being processed; becomes ready when `done` is called.
    Dirty { priority: Priority, since: Instant },
    /// In the delayed map under `(at, seq)`.
    Scheduled { at: Instant, seq: u64 },
}

struct Slot {
    pending: Pending,
    /// When the key was handed out, if it is being processed.
    processing: Option<Instant>,
    /// It was handed out as a follow-up (from the front of the line): if it changes again while
    /// processed, it goes to the back.
    followup: bool,
}

/// Where sequence numbers start: keys join the back of the line counting up from here, and
/// follow-ups the front counting down, so both sort by `(rank, seq)` in one map. Neither runs out
/// (2^63 adds).
const BACK: u64 = 1 << 63;

struct State<K> {
    /// Only keys with something pending or in flight, so memory follows live work.
    slots: HashMap<K, Slot>,
    /// Ready keys in hand-out order: priority first, then follow-ups, then first-come
    /// first-served.
    ready: BTreeMap<(u8, u64), K>,
    /// Scheduled keys by due time; `seq` breaks ties.
    delayed: BTreeMap<(Instant, u64), K>,
    /// Failure counts for the backoff; independent of the key's place in the queue.
    failures: HashMap<K, u32>,
    /// Last sequence number given at the back of the line (and to delayed keys).
    seq: u64,
    /// Last sequence number given at the front of the line, to a follow-up.
    front: u64,
    in_flight: usize,
    shut_down: bool,
    adds_total: u64,
    retries_total: u64,
    handed_out_total: u64,
    queue_latency_total: Duration,
}

impl<K: Clone + Eq + Hash> State<K> {
    fn new() -> Self {
        Self {
            slots: HashMap::new(),
            ready: BTreeMap::new(),
            delayed: BTreeMap::new(),
            failures: HashMap::new(),
            seq: BACK,
            front: BACK,
            in_flight: 0,
            shut_down: false,
            adds_total: 0,
            retries_total: 0,
            handed_out_total: 0,
            queue_latency_total: Duration::ZERO,
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Makes `key` due now at `priority`, with `since` as the start of its queue latency.
    /// Returns whether a key became ready, so that a waiting worker should be woken.
    fn make_due(&mut self, key: K, priority: Priority, since: Instant) -> bool {
        let seq = self.next_seq();
        let Some(slot) = self.slots.get_mut(&key) else {
            self.adds_total += 1;
            self.ready.insert((priority.rank(), seq), key.clone());
            let pending = Pending::Ready {
                priority,
                seq,
                since,
            };
            self.slots.insert(
                key,
                Slot {
                    pending,
                    processing: None,
                    followup: false,
                },
            );
            return true;
        };
        match slot.pending {
            Pending::Nothing | Pending::Scheduled { .. } => {
                if let Pending::Scheduled { at, seq } = slot.pending {
                    self.delayed.remove(&(at, seq));
                }
                self.adds_total += 1;
                if slot.processing.is_some() {
                    slot.pending = Pending::Dirty { priority, since };
                    return false;
                }
                slot.pending = Pending::Ready {
                    priority,
                    seq,
                    since,
                };
                self.ready.insert((priority.rank(), seq), key);
                true
            }
            Pending::Ready {
                priority: current,
                seq: old_seq,
                since: first,
            } => {
                if priority.higher(current) != current {
                    // Promoted keys join the back of the normal line but keep their latency.
                    self.ready.remove(&(current.rank(), old_seq));
                    self.ready.insert((priority.rank(), seq), key);
                    slot.pending = Pending::Ready {
                        priority,
                        seq,
                        since: first,
                    };
                }
                false
            }
            Pending::Dirty {
                priority: current,
                since: first,
            } => {
                slot.pending = Pending::Dirty {
                    priority: priority.higher(current),
                    since: first,
                };
                false
            }
        }
    }

    /// Schedules `key` for `at` unless it is already due sooner.
    fn schedule(&mut self, key: K, at: Instant) {
        let seq = self.next_seq();
        let slot = self.slots.entry(key.clone()).or_insert(Slot {
            pending: Pending::Nothing,
            processing: None,
            followup: false,
        });
        match slot.pending {
            // Ready or dirty keys run as soon as a worker (or `done`) allows: sooner than `at`.
            Pending::Ready { .. } | Pending::Dirty { .. } => {}
            Pending::Scheduled { at: current, .. } if current <= at => {}
            Pending::Scheduled {
                at: current,
                seq: old_seq,
            } => {
                self.delayed.remove(&(current, old_seq));
                self.delayed.insert((at, seq), key);
                slot.pending = Pending::Scheduled { at, seq };
            }
            Pending::Nothing => {
                self.delayed.insert((at, seq), key);
                slot.pending = Pending::Scheduled { at, seq };
            }
        }
    }

    /// Moves every scheduled key due by `now` to the ready set; returns whether any moved.
    fn promote_due(&mut self, now: Instant) -> bool {
        let mut any = false;
        while let Some(entry) = self.delayed.first_entry() {
            let at = entry.key().0;
            if at > now {
                break;
            }
            let key = entry.remove();
            if let Some(slot) = self.slots.get_mut(&key) {
                // Cleared so that `make_due` does not look the key up in `delayed` again.
                slot.pending = Pending::Nothing;
            }
            // Latency counts from the due time: waiting for the delay itself is not queueing.
            any |= self.make_due(key, Priority::Normal, at);
        }
        any
    }

    /// Hands out the first ready key, marking it in flight; returns it with its queue latency.
    fn take_ready(&mut self, now: Instant) -> Option<(K, Duration)> {
        let ((_, seq), key) = self.ready.pop_first()?;
        let slot = self.slots.get_mut(&key)?;
        let Pending::Ready { since, .. } = slot.pending else {
            return None;
        };
        slot.pending = Pending::Nothing;
        slot.processing = Some(now);
        slot.followup = seq < BACK;
        let waited = now.saturating_duration_since(since);
        self.in_flight += 1;
        self.handed_out_total += 1;
        self.queue_latency_total += waited;
        Some((key, waited))
    }

    /// Ends processing of `key`; returns how long it was processed (`None` if it was not in
    /// flight) and whether it became ready again.
    fn finish(&mut self, key: &K, now: Instant) -> (Option<Duration>, bool) {
        let Some(slot) = self.slots.get_mut(key) else {
            return (None, false);
        };
        let Some(started) = slot.processing.take() else {
            return (None, false);
        };
        self.in_flight -= 1;
        let worked = now.saturating_duration_since(started);
        match slot.pending {
            Pending::Dirty { priority, since } => {
                // The front once; a follow-up that changed again joins the back.
                let seq = if std::mem::take(&mut slot.followup) {
                    self.seq += 1;
                    self.seq
                } else {
                    self.front -= 1;
                    self.front
                };
                slot.pending = Pending::Ready {
                    priority,
                    seq,
                    since,
                };
                self.ready.insert((priority.rank(), seq), key.clone());
                (Some(worked), true)
            }
            Pending::Nothing => {
                self.slots.remove(key);
                (Some(worked), false)
            }
            Pending::Ready { .. } | Pending::Scheduled { .. } => (Some(worked), false),
        }
    }

    fn shut_down(&mut self) {
        self.shut_down = true;
        self.ready.clear();
        self.delayed.clear();
        // Only in-flight keys stay, so that their `done` still balances `in_flight`.
        self.slots.retain(|_, slot| {
            slot.pending = Pending::Nothing;
            slot.processing.is_some()
        });
    }

    fn stats(&self) -> Stats {
        Stats {
            depth: self.ready.len(),
            scheduled: self.delayed.len(),
            in_flight: self.in_flight,
            adds_total: self.adds_total,
            retries_total: self.retries_total,
            handed_out_total: self.handed_out_total,
            queue_latency_total: self.queue_latency_total,
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Default for Queue<K> {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Queue<K> {
    /// Creates an empty queue.
    pub fn new(config: Config) -> Self {
        Self::build(config, None)
    }

    /// Creates an empty queue that reports every hand-out and `done` to `observer`.
    pub fn with_observer(config: Config, observer: Arc<dyn Observer>) -> Self {
        Self::build(config, Some(observer))
    }

    fn build(config: Config, observer: Option<Arc<dyn Observer>>) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                state: Mutex::new(State::new()),
                wake: Notify::new(),
                idle: Notify::new(),
                observer,
            }),
        }
    }

    /// Queues `key` at normal priority.
    ///
    /// No-op if it is already ready (except that a low-priority key is promoted); marks it dirty
    /// if it is being processed; cancels a pending delay. Ignored after shutdown.
    pub fn add(&self, key: K) {
        self.add_with(key, Priority::Normal);
    }

    /// Queues `key` at low priority: for an informer's initial list, so that events on other
    /// objects are not stuck behind a full resync.
    pub fn add_low(&self, key: K) {
        self.add_with(key, Priority::Low);
    }

    /// Queues `key` at `priority`; see [`add`](Self::add). A key keeps the highest priority it
    /// was added with until it is handed out.
    pub fn add_with(&self, key: K, priority: Priority) {
        let woke = {
            let mut state = self.inner.lock();
            if state.shut_down {
                return;
            }
            state.make_due(key, priority, Instant::now())
        };
        if woke {
            self.inner.wake.notify_one();
        }
    }

    /// Queues `key` at normal priority once `delay` has passed, unless it is due sooner already
    /// (the earliest time wins). A zero delay is an [`add`](Self::add). Ignored after shutdown.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            {
                let mut state = self.inner.lock();
                if state.shut_down {
                    return;
                }
                state.retries_total += 1;
            }
            self.add(key);
            return;
        }
        {
            let mut state = self.inner.lock();
            if state.shut_down {
                return;
            }
            state.retries_total += 1;
            let at = Instant::now() + delay.min(MAX_DELAY);
            state.schedule(key, at);
        }
        // The new key may be due before the deadline a waiting worker sleeps towards.
        self.inner.wake.notify_one();
    }

    /// Records a failure of `key` and queues it after its backoff, `base_backoff * 2^n` capped
    /// at `max_backoff`, where `n` is the number of failures before this one. Returns the delay.
    ///
    /// Call it when a reconcile fails with a transient error. Terminal errors are the caller's
    /// call: [`forget`](Self::forget) the key and do not call this.
    pub fn add_rate_limited(&self, key: K) -> Duration {
        let delay = {
            let mut state = self.inner.lock();
            let n = match state.failures.get_mut(&key) {
                Some(failures) => std::mem::replace(failures, failures.saturating_add(1)),
                None => {
                    state.failures.insert(key.clone(), 1);
                    0
                }
            };
            backoff(&self.inner.config, n)
        };
        self.add_after(key, delay);
        delay
    }

    /// Resets the failure count of `key`. Call it when `key` reconciled successfully (or failed
    /// for good), so that its next failure starts again at `base_backoff`.
    ///
    /// Does not cancel a pending rate-limited add.
    pub fn forget(&self, key: &K) {
        self.inner.lock().failures.remove(key);
    }

    /// How many times `key` has failed since it was last [forgotten](Self::forget).
    pub fn retries(&self, key: &K) -> u32 {
        self.inner.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Waits for a ready key and hands it out; the caller must call [`done`](Self::done) with it.
    ///
    /// Normal-priority keys come before low-priority ones, each in the order they became ready.
    /// Returns `None` once the queue is shut down. Cancel-safe: dropping the future loses no key.
    pub async fn get(&self) -> Option<K> {
        let inner = &*self.inner;
        // If this future is dropped after being picked by `notify_one`, another waiter must take
        // over the wake-up (a ready key or the earliest deadline would go unnoticed otherwise).
        let mut baton = Baton {
            wake: &inner.wake,
            armed: true,
        };
        loop {
            let mut notified = std::pin::pin!(inner.wake.notified());
            // Registered before looking at the state, so an add in between is not missed.
            notified.as_mut().enable();
            let now = Instant::now();
            let (taken, next_due, more) = {
                let mut state = inner.lock();
                if state.shut_down {
                    baton.armed = false;
                    return None;
                }
                state.promote_due(now);
                let taken = state.take_ready(now);
                let next_due = state.delayed.first_key_value().map(|((at, _), _)| *at);
                (taken, next_due, !state.ready.is_empty())
            };
            if let Some((key, waited)) = taken {
                baton.armed = false;
                // This worker may have consumed the only wake-up; pass it on while work remains.
                if more || next_due.is_some() {
                    inner.wake.notify_one();
                }
                if let Some(observer) = &inner.observer {
                    observer.handed_out(waited);
                }
                return Some(key);
            }
            match next_due {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Marks `key` as processed. If it was added meanwhile it becomes ready again. Allowed after
    /// shutdown; ignored for a key that is not in flight.
    pub fn done(&self, key: &K) {
        let (worked, woke, idle) = {
            let mut state = self.inner.lock();
            let now = Instant::now();
            let (worked, woke) = state.finish(key, now);
            (worked, woke, state.in_flight == 0)
        };
        if woke {
            self.inner.wake.notify_one();
        }
        if worked.is_some() && idle {
            self.inner.idle.notify_waiters();
        }
        if let (Some(worked), Some(observer)) = (worked, &self.inner.observer) {
            observer.finished(worked);
        }
    }

    /// Number of keys ready to be handed out (the depth); scheduled and in-flight keys are not
    /// counted.
    pub fn len(&self) -> usize {
        self.promote_due().depth
    }

    /// Whether no key is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of gauges and counters for metrics export.
    pub fn stats(&self) -> Stats {
        self.promote_due()
    }

    /// How long the keys in flight have been processed, summed, and the longest of them
    /// (`workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds`).
    /// Walks every tracked key: for scrapes, not hot paths.
    pub fn processing(&self) -> (Duration, Duration) {
        let now = Instant::now();
        let state = self.inner.lock();
        state
            .slots
            .values()
            .filter_map(|slot| slot.processing)
            .map(|started| now.saturating_duration_since(started))
            .fold((Duration::ZERO, Duration::ZERO), |(sum, longest), d| {
                (sum + d, longest.max(d))
            })
    }

    /// Due keys are otherwise only moved by waiting workers; with every worker busy they are
    /// ready all the same, and the depth must say so.
    fn promote_due(&self) -> Stats {
        let (stats, promoted) = {
            let mut state = self.inner.lock();
            let promoted = state.promote_due(Instant::now());
            (state.stats(), promoted)
        };
        if promoted {
            self.inner.wake.notify_one();
        }
        stats
    }

    /// Stops the queue: drops ready and scheduled keys, ignores further adds, and makes every
    /// current and future [`get`](Self::get) return `None`. In-flight keys may still be
    /// [`done`](Self::done) (a re-add while they were processed is dropped).
    pub fn shutdown(&self) {
        self.inner.lock().shut_down();
        self.inner.wake.notify_waiters();
    }

    /// [`shutdown`](Self::shutdown), then waits until every in-flight key is `done`, so that the
    /// caller can exit knowing no reconcile is half-way. Never returns while a worker holds a
    /// key without calling `done`; bound it with a timeout.
    pub async fn shutdown_with_drain(&self) {
        self.shutdown();
        loop {
            let mut notified = std::pin::pin!(self.inner.idle.notified());
            notified.as_mut().enable();
            if self.inner.lock().in_flight == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Whether [`shutdown`](Self::shutdown) has been called.
    pub fn is_shut_down(&self) -> bool {
        self.inner.lock().shut_down
    }
}

/// A key's wait after `failures` failures in a row, by [`exponential_backoff`].
fn backoff(config: &Config, failures: u32) -> Duration {
    exponential_backoff(config.base_backoff, failures, config.max_backoff)
}

/// `base * 2^exponent`, capped at `max`, without overflowing for any exponent: client-go's
/// `ItemExponentialFailureRateLimiter`, the one backoff of the host (keys here, plugin pulls
/// and preflights in `cluster_plugins`).
pub(crate) fn exponential_backoff(base: Duration, exponent: u32, max: Duration) -> Duration {
    1u32.checked_shl(exponent)
        .and_then(|factor| base.checked_mul(factor))
        .map_or(max, |delay| delay.min(max))
}

/// Forwards a wake-up if a waiting `get` is dropped, see [`Queue::get`].
struct Baton<'a> {
    wake: &'a Notify,
    armed: bool,
}

impl Drop for Baton<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    type Q = Queue<&'static str>;

    const MS: Duration = Duration::from_millis(1);
    const SEC: Duration = Duration::from_secs(1);

    /// A key that is ready now (or within 1 ms of virtual time), if any.
    async fn try_get<K: Clone + Eq + Hash + Send + 'static>(q: &Queue<K>) -> Option<K> {
        tokio::time::timeout(MS, q.get()).await.ok().flatten()
    }

    /// Hands out every ready key in order, calling `done` for each.
    async fn take_all(q: &Q) -> Vec<&'static str> {
        let mut keys = Vec::new();
        while let Some(key) = try_get(q).await {
            q.done(&key);
            keys.push(key);
        }
        keys
    }

    /// The output of a spawned task; fails instead of hanging if it never finishes.
    async fn join<T>(task: tokio::task::JoinHandle<T>) -> T {
        let joined = tokio::time::timeout(60 * SEC, task).await;
        joined.expect("task hung").expect("task panicked")
    }

    /// Lets spawned tasks run up to their next wait without advancing virtual time.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn queue_is_send_sync_and_cheap_to_clone() {
        fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
        assert_send_sync::<Queue<String>>();
    }

    // 1. Dedup while queued.

    #[tokio::test(start_paused = true)]
    async fn adding_a_queued_key_does_not_queue_it_twice() {
        let q = Q::default();
        q.add("a");
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        assert_eq!(take_all(&q).await, ["a", "b"]);
        assert_eq!(q.stats().adds_total, 2);
    }

    // 2. Never two workers on one key.

    #[tokio::test(start_paused = true)]
    async fn a_key_in_flight_is_not_handed_out_again_until_done() {
        let q = Q::default();
        q.add("a");
        assert_eq!(try_get(&q).await, Some("a"));
        q.add("a");
        q.add("b");
        assert_eq!(
            q.len(),
            1,
            "the re-added key must not be ready while in flight"
        );
        assert_eq!(try_get(&q).await, Some("b"));
        assert_eq!(try_get(&q).await, None, "a is still in flight");
        q.done(&"a");
        assert_eq!(try_get(&q).await, Some("a"));
    }

    // 3. Re-add while processing runs again after, exactly once.

    #[tokio::test(start_paused = true)]
    async fn re_adds_while_processing_run_exactly_once_more() {
        let q = Q::default();
        q.add("a");
        assert_eq!(try_get(&q).await, Some("a"));
        for _ in 0..5 {
            q.add("a");
        }
        q.done(&"a");
        assert_eq!(take_all(&q).await, ["a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_changed_while_processed_runs_next_ahead_of_keys_queued_meanwhile() {
        let q = Q::default();
        q.add("a");
        q.add_low("l");
        assert_eq!(try_get(&q).await, Some("a"));
        q.add("b");
        q.add("a");
        q.add("c");
        q.done(&"a");
        // Ahead of b and c, which came first; still behind nothing of a higher priority.
        assert_eq!(take_all(&q).await, ["a", "b", "c", "l"]);

        // A low-priority follow-up is first among low keys, after every normal one.
        q.add_low("l1");
        q.add_low("l2");
        assert_eq!(try_get(&q).await, Some("l1"));
        q.add_low("l3");
        q.add("n");
        q.add_low("l1");
        q.done(&"l1");
        assert_eq!(take_all(&q).await, ["n", "l1", "l2", "l3"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_follow_up_changed_again_while_processed_joins_the_back() {
        let q = Q::default();
        q.add("a");
        assert_eq!(try_get(&q).await, Some("a"));
        q.add("a");
        q.add("b");
        q.done(&"a");
        assert_eq!(try_get(&q).await, Some("a"), "the follow-up comes first");
        q.add("a");
        q.add("c");
        q.done(&"a");
        assert_eq!(take_all(&q).await, ["b", "c", "a"]);
        // Back in line, it earns one follow-up again.
        q.add("a");
        q.add("d");
        assert_eq!(try_get(&q).await, Some("a"));
        q.add("e");
        q.add("a");
        q.done(&"a");
        assert_eq!(take_all(&q).await, ["a", "d", "e"]);
    }

    #[tokio::test(start_paused = true)]
    async fn done_without_a_re_add_does_not_requeue() {
        let q = Q::default();
        q.add("a");
        assert_eq!(try_get(&q).await, Some("a"));
        q.done(&"a");
        q.done(&"a");
        assert_eq!(try_get(&q).await, None);
        assert_eq!(q.stats().in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_worker_is_woken_by_add_and_by_done() {
        let q = Q::default();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        settle().await;
        q.add("a");
        assert_eq!(join(waiter).await, Some("a"));
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        settle().await;
        q.add("a");
        settle().await;
        assert!(!waiter.is_finished(), "a is in flight, nothing is ready");
        q.done(&"a");
        assert_eq!(join(waiter).await, Some("a"));
    }

    // 4. Delayed adds, earliest wins.

    #[tokio::test(start_paused = true)]
    async fn add_after_hands_the_key_out_when_due() {
        let q = Q::default();
        let start = Instant::now();
        q.add_after("a", 3 * SEC);
        assert_eq!(q.len(), 0);
        assert_eq!(q.stats().scheduled, 1);
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(start.elapsed(), 3 * SEC);
    }

    #[tokio::test(start_paused = true)]
    async fn the_earliest_delay_wins() {
        let q = Q::default();
        let start = Instant::now();
        q.add_after("a", 10 * SEC);
        q.add_after("a", SEC);
        q.add_after("a", 5 * SEC);
        assert_eq!(q.stats().scheduled, 1);
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(start.elapsed(), SEC);
        q.done(&"a");
        tokio::time::sleep(20 * SEC).await;
        assert_eq!(
            try_get(&q).await,
            None,
            "the later schedules were replaced, not kept"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn add_of_a_scheduled_key_makes_it_ready_now() {
        let q = Q::default();
        q.add_after("a", 3600 * SEC);
        q.add("a");
        assert_eq!(q.len(), 1);
        assert_eq!(q.stats().scheduled, 0);
        assert_eq!(take_all(&q).await, ["a"]);
        tokio::time::sleep(7200 * SEC).await;
        assert_eq!(try_get(&q).await, None, "the delayed add was cancelled");
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_of_a_ready_key_does_not_delay_it() {
        let q = Q::default();
        q.add("a");
        q.add_after("a", 3600 * SEC);
        assert_eq!(q.len(), 1);
        assert_eq!(q.stats().scheduled, 0);
        assert_eq!(take_all(&q).await, ["a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_due_while_in_flight_runs_after_done() {
        let q = Q::default();
        q.add("a");
        assert_eq!(try_get(&q).await, Some("a"));
        q.add_after("a", SEC);
        tokio::time::sleep(2 * SEC).await;
        assert_eq!(try_get(&q).await, None, "a is still in flight");
        q.done(&"a");
        assert_eq!(take_all(&q).await, ["a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_worker_picks_up_an_earlier_deadline() {
        let q = Q::default();
        let start = Instant::now();
        q.add_after("late", 10 * SEC);
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        settle().await;
        q.add_after("early", SEC);
        assert_eq!(join(waiter).await, Some("early"));
        assert_eq!(
            start.elapsed(),
            SEC,
            "the waiter slept towards the old deadline"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_waiter_passes_its_wake_up_on() {
        let q = Q::default();
        let first = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        settle().await;
        let second = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        settle().await;
        // The wake-up goes to the first waiter, which now sleeps until the key is due; the second
        // still waits without a deadline. Dropping the first must not leave the key stranded.
        q.add_after("a", SEC);
        settle().await;
        first.abort();
        assert_eq!(join(second).await, Some("a"));
    }

    // 5. Per-key exponential backoff.

    #[tokio::test(start_paused = true)]
    async fn rate_limited_adds_back_off_exponentially_per_key_until_forgotten() {
        let q = Q::default();
        let delays: Vec<_> = (0..4).map(|_| q.add_rate_limited("a")).collect();
        assert_eq!(delays, [5 * MS, 10 * MS, 20 * MS, 40 * MS]);
        assert_eq!(q.retries(&"a"), 4);
        assert_eq!(q.add_rate_limited("b"), 5 * MS, "counts are per key");
        q.forget(&"a");
        assert_eq!(q.retries(&"a"), 0);
        assert_eq!(q.add_rate_limited("a"), 5 * MS);
        assert_eq!(q.retries(&"b"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_is_configurable_and_capped() {
        let q = Q::new(Config {
            base_backoff: SEC,
            max_backoff: 10 * SEC,
        });
        let delays: Vec<_> = (0..6).map(|_| q.add_rate_limited("a")).collect();
        assert_eq!(delays, [SEC, 2 * SEC, 4 * SEC, 8 * SEC, 10 * SEC, 10 * SEC]);

        let default = Config::default();
        assert_eq!(backoff(&default, 0), 5 * MS);
        assert_eq!(backoff(&default, 17), 655_360 * MS);
        assert_eq!(backoff(&default, 18), 1000 * SEC);
        for failures in [31, 32, 64, u32::MAX] {
            assert_eq!(
                backoff(&default, failures),
                1000 * SEC,
                "{failures} must not overflow"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_key_is_retried_after_its_backoff() {
        let q = Q::default();
        q.add("a");
        let mut last = Instant::now();
        let mut gaps = Vec::new();
        for _ in 0..4 {
            assert_eq!(q.get().await, Some("a"));
            gaps.push(last.elapsed());
            last = Instant::now();
            q.add_rate_limited("a");
            q.done(&"a");
        }
        assert_eq!(gaps, [Duration::ZERO, 5 * MS, 10 * MS, 20 * MS]);
    }

    // 6. Terminal errors: the caller forgets and does not requeue.

    #[tokio::test(start_paused = true)]
    async fn a_key_forgotten_without_requeue_is_not_retried() {
        let q = Q::default();
        q.add("a");
        assert_eq!(q.get().await, Some("a"));
        q.add_rate_limited("a");
        q.done(&"a");
        assert_eq!(q.get().await, Some("a"));
        // Terminal error: what the worker loop in the module docs does.
        q.forget(&"a");
        q.done(&"a");
        assert_eq!(q.retries(&"a"), 0);
        tokio::time::sleep(2000 * SEC).await;
        assert_eq!(try_get(&q).await, None);
        assert_eq!(q.stats().scheduled, 0);
    }

    // 7. Priorities.

    #[tokio::test(start_paused = true)]
    async fn normal_keys_are_handed_out_before_low_ones() {
        let q = Q::default();
        q.add_low("l1");
        q.add_low("l2");
        q.add("n1");
        q.add_with("n2", Priority::Normal);
        q.add_with("l3", Priority::Low);
        assert_eq!(take_all(&q).await, ["n1", "n2", "l1", "l2", "l3"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_low_key_added_at_normal_priority_is_promoted() {
        let q = Q::default();
        q.add_low("l1");
        q.add_low("l2");
        q.add("n1");
        q.add("l2");
        assert_eq!(q.len(), 3);
        assert_eq!(take_all(&q).await, ["n1", "l2", "l1"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_normal_key_is_not_demoted_by_a_low_add() {
        let q = Q::default();
        q.add("a");
        q.add("b");
        q.add_low("a");
        assert_eq!(take_all(&q).await, ["a", "b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_re_add_in_flight_keeps_the_highest_priority() {
        let q = Q::default();
        q.add("a");
        assert_eq!(try_get(&q).await, Some("a"));
        q.add_low("x");
        q.add_low("a");
        q.add("a");
        q.add_low("a");
        q.done(&"a");
        assert_eq!(take_all(&q).await, ["a", "x"]);
    }

    // 8. Shutdown.

    #[tokio::test(start_paused = true)]
    async fn shutdown_wakes_waiting_workers_with_none() {
        let q = Q::default();
        let start = Instant::now();
        q.add_after("later", 3600 * SEC);
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.get().await })
            })
            .collect();
        settle().await;
        q.shutdown();
        for waiter in waiters {
            assert_eq!(join(waiter).await, None);
        }
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "woken by the shutdown, not by a timer"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_handed_out_after_shutdown() {
        let q = Q::default();
        q.add("a");
        q.add_after("b", SEC);
        q.shutdown();
        assert!(q.is_shut_down());
        assert_eq!(q.get().await, None);
        q.add("c");
        q.add_low("d");
        q.add_after("e", SEC);
        assert_eq!(q.len(), 0);
        tokio::time::sleep(2 * SEC).await;
        assert_eq!(q.get().await, None);
        assert_eq!(q.stats().scheduled, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn in_flight_keys_finish_after_shutdown_and_drain_waits_for_them() {
        let q = Q::default();
        q.add("a");
        q.add("b");
        assert_eq!(try_get(&q).await, Some("a"));
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shutdown_with_drain().await }
        });
        settle().await;
        assert!(!drain.is_finished(), "a is still in flight");
        assert_eq!(q.get().await, None, "b must not be handed out any more");
        q.add("a");
        q.done(&"a");
        join(drain).await;
        assert_eq!(q.stats().in_flight, 0);
        assert_eq!(
            q.get().await,
            None,
            "the re-add during shutdown was dropped"
        );
        q.shutdown_with_drain().await;
    }

    // 9. Metrics.

    #[tokio::test(start_paused = true)]
    async fn len_counts_only_ready_keys() {
        let q = Q::default();
        assert!(q.is_empty());
        q.add("a");
        q.add("c");
        q.add_after("b", SEC);
        assert_eq!(try_get(&q).await, Some("a"));
        let stats = q.stats();
        assert_eq!((stats.depth, stats.scheduled, stats.in_flight), (1, 1, 1));
        assert_eq!(q.len(), 1);
        tokio::time::sleep(SEC).await;
        assert_eq!(q.len(), 2, "b became due");
    }

    #[derive(Default)]
    struct Recorder {
        waited: Mutex<Vec<Duration>>,
        worked: Mutex<Vec<Duration>>,
    }

    impl Observer for Recorder {
        fn handed_out(&self, queue_latency: Duration) {
            self.waited.lock().unwrap().push(queue_latency);
        }

        fn finished(&self, work_duration: Duration) {
            self.worked.lock().unwrap().push(work_duration);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn stats_and_observer_report_adds_retries_and_latencies() {
        let recorder = Arc::new(Recorder::default());
        let q = Q::with_observer(Config::default(), recorder.clone());
        q.add("a");
        q.add("a");
        q.add_after("b", SEC);
        q.add_rate_limited("c");
        tokio::time::sleep(3 * SEC).await;
        for _ in 0..3 {
            assert!(q.get().await.is_some());
        }
        tokio::time::sleep(SEC).await;
        q.done(&"a");
        q.done(&"z");

        let stats = q.stats();
        assert_eq!(
            stats.adds_total, 3,
            "a once (deduplicated), b and c when due"
        );
        assert_eq!(stats.retries_total, 2);
        assert_eq!(stats.handed_out_total, 3);
        let waited = [3 * SEC, 3 * SEC - 5 * MS, 2 * SEC];
        assert_eq!(*recorder.waited.lock().unwrap(), waited);
        assert_eq!(stats.queue_latency_total, waited.iter().sum::<Duration>());
        assert_eq!(*recorder.worked.lock().unwrap(), [SEC]);
    }

    // Concurrency and scale.

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_workers_never_overlap_on_a_key_and_see_the_last_add() {
        const KEYS: usize = 4;
        const ADDS: u64 = 10_000;
        let q = Queue::<usize>::default();
        let in_flight: Arc<[AtomicUsize; KEYS]> = Arc::default();
        let version: Arc<[AtomicU64; KEYS]> = Arc::default();
        let seen: Arc<[AtomicU64; KEYS]> = Arc::default();
        let overlaps = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));

        let workers: Vec<_> = (0..8)
            .map(|_| {
                let (q, in_flight, version, seen) =
                    (q.clone(), in_flight.clone(), version.clone(), seen.clone());
                let (overlaps, runs) = (overlaps.clone(), runs.clone());
                tokio::spawn(async move {
                    while let Some(key) = q.get().await {
                        if in_flight[key].fetch_add(1, Ordering::SeqCst) != 0 {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        runs.fetch_add(1, Ordering::SeqCst);
                        seen[key].fetch_max(version[key].load(Ordering::SeqCst), Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_micros(500)).await;
                        in_flight[key].fetch_sub(1, Ordering::SeqCst);
                        q.done(&key);
                    }
                })
            })
            .collect();

        for burst in 0..ADDS / 100 {
            for i in 0..100 {
                let key = usize::try_from(burst * 100 + i).unwrap() % KEYS;
                version[key].fetch_add(1, Ordering::SeqCst);
                q.add(key);
            }
            tokio::task::yield_now().await;
        }

        let settled = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let stats = q.stats();
                let all_seen = (0..KEYS).all(|k| seen[k].load(Ordering::SeqCst) == ADDS / 4);
                if all_seen && stats.depth == 0 && stats.in_flight == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(
            settled.is_ok(),
            "the last add of some key was never processed"
        );
        q.shutdown();
        for worker in workers {
            join(worker).await;
        }
        assert_eq!(
            overlaps.load(Ordering::SeqCst),
            0,
            "two workers held one key"
        );
        let runs = runs.load(Ordering::SeqCst);
        assert!(
            runs <= 1000,
            "{runs} runs for {ADDS} adds: adds were not coalesced"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_hammered_key_runs_about_once_per_processing_time() {
        let q = Q::default();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let overlaps = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (q, in_flight) = (q.clone(), in_flight.clone());
                let (overlaps, runs) = (overlaps.clone(), runs.clone());
                tokio::spawn(async move {
                    while let Some(key) = q.get().await {
                        if in_flight.fetch_add(1, Ordering::SeqCst) != 0 {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        runs.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(10 * MS).await;
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        q.done(&key);
                    }
                })
            })
            .collect();
        // 10,000 adds over 100 ms; each run takes 10 ms.
        for i in 0..10_000 {
            q.add("a");
            if i % 100 == 99 {
                tokio::time::sleep(MS).await;
            }
        }
        tokio::time::sleep(SEC).await;
        q.shutdown();
        for worker in workers {
            join(worker).await;
        }
        assert_eq!(overlaps.load(Ordering::SeqCst), 0);
        let runs = runs.load(Ordering::SeqCst);
        assert!((10..=12).contains(&runs), "{runs} runs");
    }

    #[tokio::test(start_paused = true)]
    async fn a_hundred_thousand_keys_go_through_in_order() {
        const N: u32 = 100_000;
        let q = Queue::<u32>::default();
        for key in 0..N {
            q.add_low(key);
        }
        for key in 0..N {
            q.add_after(N + key, Duration::from_millis(u64::from(key % 1000) + 1));
        }
        for key in (0..N).step_by(2) {
            q.add(key);
        }
        assert_eq!(q.len(), 100_000);
        let mut order = Vec::new();
        for _ in 0..2 * N {
            let key = q.get().await.unwrap();
            q.done(&key);
            order.push(key);
        }
        assert!(q.is_empty());
        assert_eq!(q.stats().scheduled, 0);
        // Promoted even keys first, then the odd (still low) ones, then delayed keys as they come
        // due, low keys never starving ready normal ones.
        assert!(order[..50_000].iter().all(|k| k % 2 == 0 && *k < N));
        assert!(order[50_000..100_000].iter().all(|k| k % 2 == 1 && *k < N));
        assert!(order[100_000..].iter().all(|k| *k >= N));
    }
}
