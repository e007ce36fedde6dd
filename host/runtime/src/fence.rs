//! Whether this replica may send requests on behalf of plugins now: a deadline that leader
//! election's renewals push forward (`wasmctrl::leader`), checked by the applier before every
//! write and by the `sql` import before every statement. Reading it is [`Fence`]; moving it is
//! [`FenceKeeper`], which only the elector holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether requests may be sent now. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Fence {
    inner: Arc<Deadline>,
}

/// Moves a [`Fence`]: extends it after a renewal, closes it when leadership is lost.
#[derive(Debug)]
pub struct FenceKeeper {
    inner: Arc<Deadline>,
}

#[derive(Debug)]
struct Deadline {
    base: Instant,
    /// Milliseconds after `base` until which requests may be sent: `u64::MAX` for a host
    /// without election, `0` for a replica that does not lead.
    until_ms: AtomicU64,
}

impl Deadline {
    fn new(until_ms: u64) -> Arc<Self> {
        Arc::new(Self {
            base: Instant::now(),
            until_ms: AtomicU64::new(until_ms),
        })
    }

    fn holds(&self) -> bool {
        let now = self.base.elapsed().as_millis() as u64;
        now < self.until_ms.load(Ordering::Acquire)
    }
}

impl Default for Fence {
    fn default() -> Self {
        Self::open()
    }
}

impl Fence {
    /// A fence that always holds: the host runs without leader election.
    pub fn open() -> Self {
        Self {
            inner: Deadline::new(u64::MAX),
        }
    }

    /// How long requests may still be sent: `None` without election, zero when they may not.
    pub fn remaining(&self) -> Option<Duration> {
        match self.inner.until_ms.load(Ordering::Acquire) {
            u64::MAX => None,
            ms => Some(Duration::from_millis(ms).saturating_sub(self.inner.base.elapsed())),
        }
    }

    /// Whether requests may be sent now.
    pub fn holds(&self) -> bool {
        self.inner.holds()
    }
}

impl FenceKeeper {
    /// A closed fence (no requests until [`extend_to`](Self::extend_to)) and its keeper.
    pub fn closed() -> (Self, Fence) {
        let inner = Deadline::new(0);
        let fence = Fence {
            inner: inner.clone(),
        };
        (Self { inner }, fence)
    }

    /// Lets requests be sent until `until`.
    pub fn extend_to(&self, until: Instant) {
        let ms = until.saturating_duration_since(self.inner.base).as_millis() as u64;
        self.inner.until_ms.store(ms, Ordering::Release);
    }

    /// Stops requests now.
    pub fn close(&self) {
        self.inner.until_ms.store(0, Ordering::Release);
    }

    /// Whether requests may be sent now.
    pub fn holds(&self) -> bool {
        self.inner.holds()
    }

    /// When requests stop being allowed, if they ever do and have not yet.
    pub fn deadline(&self) -> Option<Instant> {
        match self.inner.until_ms.load(Ordering::Acquire) {
            u64::MAX => None,
            ms => Some(self.inner.base + Duration::from_millis(ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_holds_until_its_deadline_and_not_after_closing() {
        let (keeper, fence) = FenceKeeper::closed();
        assert!(!fence.holds());
        keeper.extend_to(Instant::now() + Duration::from_secs(60));
        assert!(fence.holds() && keeper.holds());
        keeper.extend_to(Instant::now());
        assert!(!fence.holds(), "a deadline that has come closes the fence");
        keeper.extend_to(Instant::now() + Duration::from_secs(60));
        keeper.close();
        assert!(!fence.holds());
        assert!(Fence::open().holds());
        assert_eq!(Fence::open().remaining(), None);
    }
}
