//! etcd's compaction of old revisions as kube-apiserver drives it (`etcd3.compactor`): every
//! interval (`--etcd-compaction-interval`, 5 minutes by default; 0: never) it compacts to the
//! revision it saw at the previous tick, so a revision stays readable for one to two intervals
//! after it was superseded. `resourceVersionMatch=Exact` lists read revisions back only until
//! then (and only as far back as each resource's event history reaches, `store`).
//!
//! The clock is the system's plus a test offset ([`Compaction::advance_clock`]), so tests cross
//! a tick without waiting for it.

use std::time::{Duration, Instant};

/// kube-apiserver's default `--etcd-compaction-interval`.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// The compaction state: when the last tick was, what it saw, what is compacted.
#[derive(Debug)]
pub struct Compaction {
    interval: Duration,
    /// The test clock's advance over the system's.
    offset: Duration,
    last_tick: Instant,
    /// The revision current at the last tick (none before the first: kube does not compact
    /// on bootstrap), compacted to at the next.
    seen: Option<u64>,
    /// Revisions below this are gone.
    compacted: u64,
}

impl Compaction {
    /// Compaction every `interval` (zero: never), starting now.
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            offset: Duration::ZERO,
            last_tick: Instant::now(),
            seen: None,
            compacted: 0,
        }
    }

    /// Runs the ticks that fell due before now, `current` being the latest revision. Called
    /// before every write and read of old revisions, so a tick sees the revision that was
    /// current at its time.
    pub fn tick(&mut self, current: u64) {
        if self.interval.is_zero() {
            return;
        }
        let now = Instant::now() + self.offset;
        let due = now.saturating_duration_since(self.last_tick).as_nanos()
            / self.interval.as_nanos().max(1);
        if due == 0 {
            return;
        }
        if due >= 2 {
            // The last of several ticks compacted to what the one before it saw: `current`.
            self.compacted = current;
        } else if let Some(seen) = self.seen {
            self.compacted = seen;
        }
        self.seen = Some(current);
        let steps = u32::try_from(due).unwrap_or(u32::MAX);
        self.last_tick += self.interval.saturating_mul(steps);
    }

    /// Changes the interval (kept by the next tick).
    pub fn set_interval(&mut self, interval: Duration) {
        self.interval = interval;
    }

    /// The oldest revision still readable.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Forgets every revision before `rv` (history lost at a restart).
    pub fn compact_to(&mut self, rv: u64) {
        self.compacted = self.compacted.max(rv);
    }

    /// Moves the compaction clock `by` ahead (a test clock).
    pub fn advance_clock(&mut self, by: Duration) {
        self.offset += by;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn a_revision_is_compacted_at_the_second_tick_after_it_was_superseded() {
        let mut c = Compaction::new(5 * MINUTE);
        c.tick(10);
        assert_eq!(c.compacted(), 0);
        c.advance_clock(5 * MINUTE);
        c.tick(12); // first tick: remembers 12, compacts nothing (bootstrap)
        assert_eq!(c.compacted(), 0);
        c.advance_clock(4 * MINUTE);
        c.tick(20);
        assert_eq!(c.compacted(), 0);
        c.advance_clock(MINUTE);
        c.tick(20); // second tick: compacts to what the first saw
        assert_eq!(c.compacted(), 12);
        c.advance_clock(30 * MINUTE);
        c.tick(25); // ticks missed while nothing was written: all but the last saw 25 too
        assert_eq!(c.compacted(), 25);
    }

    #[test]
    fn a_zero_interval_never_compacts() {
        let mut c = Compaction::new(Duration::ZERO);
        c.advance_clock(1000 * MINUTE);
        c.tick(7);
        assert_eq!(c.compacted(), 0);
    }
}
