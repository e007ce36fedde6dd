//! Poison-tolerant locking of the host's `std` mutexes.
//!
//! Every mutex the host locks through [`lock`] guards state that a panicking holder cannot leave
//! half-written: caches (a stale entry costs one write), maps only inserted into and removed
//! from (controllers, Event series), single assignments. So a poisoned lock is taken as it is:
//! one panic must not take every later reconcile down with it.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, taking it even if a holder panicked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
