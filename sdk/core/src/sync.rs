//! Poison-tolerant locking, for the `std` locks of the host, its runtime and its API server.
//!
//! Every lock taken through these guards state that a panicking holder cannot leave
//! half-written in a way that matters: caches (a stale entry costs one write), maps only
//! inserted into and removed from, counters, single assignments. So a poisoned lock is taken as
//! it is: one panic must not take every later request down with it.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`, taking it even if a holder panicked.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks `rwlock`, taking it even if a writer panicked.
pub fn read<T: ?Sized>(rwlock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    rwlock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `rwlock`, taking it even if a holder panicked.
pub fn write<T: ?Sized>(rwlock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    rwlock.write().unwrap_or_else(PoisonError::into_inner)
}
