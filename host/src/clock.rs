//! The time reconciles are told (`Request.now`, a plugin's `ctx.now()`): the system's, moved
//! ahead by a test clock in `wasmctrl dev`.
//!
//! A CronJob-like plugin decides from `now` what its schedule has missed, so a test of one must
//! move time without waiting for it. `wasmctrl dev` ties this clock to the embedded API server's
//! test clock (`POST /_admin/advance-cronjob-clock`), which its own CronJob controller reads: the
//! cluster and the plugins see one time. Moving it queues every key again (what a resync does),
//! so that a plugin waiting for a time that has now come is called, not left to its `requeue_after`
//! in real time. `wasmctrl run` never moves it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::plugin::wit;

/// The system clock plus an offset that only grows.
#[derive(Debug, Clone)]
pub struct Clock {
    ahead: Arc<watch::Sender<Duration>>,
}

impl Default for Clock {
    fn default() -> Self {
        Self {
            ahead: Arc::new(watch::Sender::new(Duration::ZERO)),
        }
    }
}

impl Clock {
    /// The system's time, not moved.
    pub fn system() -> Self {
        Self::default()
    }

    /// The time now, as reconciles are told it.
    pub fn now(&self) -> wit::Timestamp {
        let ahead = *self.ahead.borrow();
        let now = wit::Timestamp::now();
        let nanoseconds = now.nanoseconds + ahead.subsec_nanos();
        wit::Timestamp {
            seconds: now.seconds
                + i64::try_from(ahead.as_secs()).unwrap_or(i64::MAX / 2)
                + i64::from(nanoseconds / 1_000_000_000),
            nanoseconds: nanoseconds % 1_000_000_000,
        }
    }

    /// How far ahead of the system's time it is.
    pub fn ahead(&self) -> Duration {
        *self.ahead.borrow()
    }

    /// Sets how far ahead of the system's time it is. Time does not go back: a smaller offset
    /// than the current one is ignored. Returns whether it moved.
    pub fn set_ahead(&self, ahead: Duration) -> bool {
        self.ahead.send_if_modified(|current| {
            let moved = ahead > *current;
            if moved {
                *current = ahead;
            }
            moved
        })
    }

    /// Completes each time the clock moves (lagging behind several moves yields once).
    pub fn moves(&self) -> watch::Receiver<Duration> {
        self.ahead.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_forward_only_and_tells_who_listens() {
        let clock = Clock::system();
        let mut moves = clock.moves();
        let before = clock.now().seconds;
        assert!(clock.set_ahead(Duration::from_secs(3600)));
        assert!(moves.has_changed().unwrap());
        moves.mark_unchanged();
        assert!(clock.now().seconds >= before + 3600);
        assert!(
            !clock.set_ahead(Duration::from_secs(60)),
            "time does not go back"
        );
        assert!(!moves.has_changed().unwrap());
        assert_eq!(clock.ahead(), Duration::from_secs(3600));
    }
}
