//! A blocking counting semaphore bounding how many instances are alive at once, so the instance
//! pool is never asked for more slots than it has.
//!
//! Hand-written: std has no blocking semaphore, and tokio's is async while calls run on blocking
//! threads.

use std::sync::{Condvar, Mutex, MutexGuard};

pub(crate) struct Permits {
    counts: Mutex<Counts>,
    freed: Condvar,
    total: usize,
    /// The most ever held at once.
    peak: std::sync::atomic::AtomicUsize,
}

struct Counts {
    free: usize,
    /// Threads blocked in `acquire`. Returning a permit wakes one only when there is one: a
    /// condvar's notify is a system call even with nobody waiting, paid on every plugin call.
    waiting: usize,
}

/// Returns its permit when dropped.
pub(crate) struct Permit<'a>(&'a Permits);

impl Permits {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            counts: Mutex::new(Counts {
                free: n.max(1),
                waiting: 0,
            }),
            freed: Condvar::new(),
            total: n.max(1),
            peak: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Counters cannot be left inconsistent by a panic; recover from poisoning.
    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Permits held now.
    pub(crate) fn in_use(&self) -> usize {
        self.total - self.counts().free
    }

    /// The most permits ever held at once.
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn acquire(&self) -> Permit<'_> {
        let mut counts = self.counts();
        while counts.free == 0 {
            counts.waiting += 1;
            counts = self.freed.wait(counts).unwrap_or_else(|p| p.into_inner());
            counts.waiting -= 1;
        }
        counts.free -= 1;
        let held = self.total - counts.free;
        self.peak
            .fetch_max(held, std::sync::atomic::Ordering::Relaxed);
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut counts = self.0.counts();
        counts.free += 1;
        let wake = counts.waiting > 0;
        drop(counts);
        if wake {
            self.0.freed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_returned_permit_wakes_a_blocked_acquire() {
        let permits = Permits::new(1);
        let held = permits.acquire();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let _permit = permits.acquire();
                permits.in_use()
            });
            // Return the permit only once the other thread is blocked on it, so the wake-up and
            // not a free permit is what lets it through.
            while permits.counts().waiting == 0 {
                std::thread::yield_now();
            }
            drop(held);
            assert_eq!(waiter.join().expect("waiter"), 1);
        });
        assert_eq!(permits.in_use(), 0);
        assert_eq!(permits.peak(), 1);
    }
}
