//! The queue's bookkeeping under its lock: which keys wait (ready, by priority, or due later),
//! which are being processed and which must run again, and the retry counts behind backoff.

use super::*;

/// What happens next to a key; at most one of these at a time, so a key is never both ready and
/// scheduled.
pub(super) enum Pending {
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

pub(super) struct Slot {
    pub(super) pending: Pending,
    /// When the key was handed out, if it is being processed.
    pub(super) processing: Option<Instant>,
    /// It was handed out as a follow-up (from the front of the line): if it changes again while
    /// processed, it goes to the back.
    pub(super) followup: bool,
}

/// Where sequence numbers start: keys join the back of the line counting up from here, and
/// follow-ups the front counting down, so both sort by `(rank, seq)` in one map. Neither runs out
/// (2^63 adds).
pub(super) const BACK: u64 = 1 << 63;

pub(super) struct State<K> {
    /// Only keys with something pending or in flight, so memory follows live work.
    pub(super) slots: HashMap<K, Slot>,
    /// Ready keys in hand-out order: priority first, then follow-ups, then first-come
    /// first-served.
    pub(super) ready: BTreeMap<(u8, u64), K>,
    /// Scheduled keys by due time; `seq` breaks ties.
    pub(super) delayed: BTreeMap<(Instant, u64), K>,
    /// Failure counts for the backoff; independent of the key's place in the queue.
    pub(super) failures: HashMap<K, u32>,
    /// Last sequence number given at the back of the line (and to delayed keys).
    pub(super) seq: u64,
    /// Last sequence number given at the front of the line, to a follow-up.
    pub(super) front: u64,
    pub(super) in_flight: usize,
    pub(super) shut_down: bool,
    pub(super) adds_total: u64,
    pub(super) retries_total: u64,
    pub(super) handed_out_total: u64,
    pub(super) queue_latency_total: Duration,
}

impl<K: Clone + Eq + Hash> State<K> {
    pub(super) fn new() -> Self {
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

    pub(super) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Makes `key` due now at `priority`, with `since` as the start of its queue latency.
    /// Returns whether a key became ready, so that a waiting worker should be woken.
    pub(super) fn make_due(&mut self, key: K, priority: Priority, since: Instant) -> bool {
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
    pub(super) fn schedule(&mut self, key: K, at: Instant) {
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
    pub(super) fn promote_due(&mut self, now: Instant) -> bool {
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
    pub(super) fn take_ready(&mut self, now: Instant) -> Option<(K, Duration)> {
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
    pub(super) fn finish(&mut self, key: &K, now: Instant) -> (Option<Duration>, bool) {
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

    pub(super) fn shut_down(&mut self) {
        self.shut_down = true;
        self.ready.clear();
        self.delayed.clear();
        // Only in-flight keys stay, so that their `done` still balances `in_flight`.
        self.slots.retain(|_, slot| {
            slot.pending = Pending::Nothing;
            slot.processing.is_some()
        });
    }

    pub(super) fn stats(&self) -> Stats {
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
