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

mod state;

use state::*;
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
mod tests;
