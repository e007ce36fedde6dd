//! A blocking counting semaphore bounding how many instances are alive at once, so the instance
//! pool is never asked for more slots than it has.

use std::sync::{Condvar, Mutex};

pub(crate) struct Permits {
    free: Mutex<usize>,
    freed: Condvar,
    total: usize,
    /// The most ever held at once.
    peak: std::sync::atomic::AtomicUsize,
}

/// Returns its permit when dropped.
pub(crate) struct Permit<'a>(&'a Permits);

impl Permits {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            free: Mutex::new(n.max(1)),
            freed: Condvar::new(),
            total: n.max(1),
            peak: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Permits held now.
    pub(crate) fn in_use(&self) -> usize {
        self.total - *self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most permits ever held at once.
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn acquire(&self) -> Permit<'_> {
        // A counter cannot be left inconsistent by a panic; recover from poisoning.
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        let held = self.total - *free;
        self.peak
            .fetch_max(held, std::sync::atomic::Ordering::Relaxed);
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}
