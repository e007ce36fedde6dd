//! A blocking counting semaphore bounding how many instances are alive at once, so the instance
//! pool is never asked for more slots than it has, shared fairly among the plugins loaded: each
//! has an equal share (all permits over the plugins loaded), takes free permits up to its share
//! at once, and takes more only while as many stay free as there are other plugins under their
//! share. A plugin alone may use every permit; many slow calls of one plugin (each bounded by its
//! deadline) never leave another without an instance.
//!
//! Hand-written: std has no blocking semaphore, and tokio's is async while calls run on blocking
//! threads; neither shares by owner.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use wasmctrl_core::sync::lock;

pub(crate) struct Permits {
    counts: Mutex<Counts>,
    freed: Condvar,
    total: usize,
    /// The most ever held at once.
    peak: std::sync::atomic::AtomicUsize,
}

struct Counts {
    free: usize,
    /// Threads blocked in `acquire`. Returning a permit wakes them only when there are some: a
    /// condvar's notify is a system call even with nobody waiting, paid on every plugin call.
    waiting: usize,
    /// By plugin: versions loaded and permits held. A plugin with neither has no entry.
    plugins: HashMap<Arc<str>, Plugin>,
}

#[derive(Default)]
struct Plugin {
    loaded: usize,
    held: usize,
}

impl Counts {
    /// Whether `plugin` may take a permit now.
    fn may_take(&self, plugin: &str, total: usize) -> bool {
        if self.free == 0 {
            return false;
        }
        let sharing = self.plugins.len() + usize::from(!self.plugins.contains_key(plugin));
        let share = (total / sharing.max(1)).max(1);
        let held = self.plugins.get(plugin).map_or(0, |p| p.held);
        if held < share {
            return true;
        }
        let others_under_share = (self.plugins.iter())
            .filter(|(name, p)| &***name != plugin && p.held < share)
            .count();
        self.free > others_under_share
    }
}

/// Returns its permit when dropped.
pub(crate) struct Permit<'a> {
    permits: &'a Permits,
    plugin: Arc<str>,
}

/// A loaded plugin version's part in the sharing; it ends when dropped.
pub(crate) struct Loaded {
    permits: Arc<Permits>,
    plugin: Arc<str>,
}

impl Permits {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            counts: Mutex::new(Counts {
                free: n.max(1),
                waiting: 0,
                plugins: HashMap::new(),
            }),
            freed: Condvar::new(),
            total: n.max(1),
            peak: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Counters cannot be left inconsistent by a panic; recover from poisoning.
    fn counts(&self) -> MutexGuard<'_, Counts> {
        lock(&self.counts)
    }

    /// Permits held now.
    pub(crate) fn in_use(&self) -> usize {
        self.total - self.counts().free
    }

    /// The most permits ever held at once.
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `plugin` is loaded (one more version of it): it shares the permits until the returned
    /// guard is dropped.
    pub(crate) fn load(self: &Arc<Self>, plugin: &Arc<str>) -> Loaded {
        self.counts()
            .plugins
            .entry(plugin.clone())
            .or_default()
            .loaded += 1;
        Loaded {
            permits: self.clone(),
            plugin: plugin.clone(),
        }
    }

    /// A permit for a call of `plugin`, once it may take one.
    pub(crate) fn acquire(&self, plugin: &Arc<str>) -> Permit<'_> {
        let mut counts = self.counts();
        if !counts.may_take(plugin, self.total) {
            counts = crate::blocking::wait(move || {
                while !counts.may_take(plugin, self.total) {
                    counts.waiting += 1;
                    counts = self.freed.wait(counts).unwrap_or_else(|p| p.into_inner());
                    counts.waiting -= 1;
                }
                counts
            });
        }
        counts.free -= 1;
        counts.plugins.entry(plugin.clone()).or_default().held += 1;
        let held = self.total - counts.free;
        self.peak
            .fetch_max(held, std::sync::atomic::Ordering::Relaxed);
        Permit {
            permits: self,
            plugin: plugin.clone(),
        }
    }

    /// Wakes every waiter (each checks its own share) if there are any.
    fn wake(&self, counts: MutexGuard<'_, Counts>) {
        let wake = counts.waiting > 0;
        drop(counts);
        if wake {
            self.freed.notify_all();
        }
    }

    fn settle(counts: &mut Counts, plugin: &str, change: impl FnOnce(&mut Plugin)) {
        if let Some(entry) = counts.plugins.get_mut(plugin) {
            change(entry);
            if entry.loaded == 0 && entry.held == 0 {
                counts.plugins.remove(plugin);
            }
        }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut counts = self.permits.counts();
        counts.free += 1;
        Permits::settle(&mut counts, &self.plugin, |p| p.held -= 1);
        self.permits.wake(counts);
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        let mut counts = self.permits.counts();
        Permits::settle(&mut counts, &self.plugin, |p| p.loaded -= 1);
        // One plugin fewer: the others' shares grew.
        self.permits.wake(counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_returned_permit_wakes_a_blocked_acquire() {
        let permits = Permits::new(1);
        let plugin: Arc<str> = "a".into();
        let held = permits.acquire(&plugin);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let _permit = permits.acquire(&plugin);
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

    #[test]
    fn a_plugin_holding_every_permit_leaves_the_next_ones_to_another() {
        let permits = Arc::new(Permits::new(4));
        let (slow, quick): (Arc<str>, Arc<str>) = ("slow".into(), "quick".into());
        let _slow_loaded = permits.load(&slow);
        // Alone, the slow plugin may take all four.
        let mut slow_held: Vec<_> = (0..4).map(|_| permits.acquire(&slow)).collect();
        let quick_loaded = permits.load(&quick);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| permits.acquire(&quick));
            while permits.counts().waiting == 0 {
                std::thread::yield_now();
            }
            // The slow plugin wants more while the quick one waits: it is over its share of two.
            let more = s.spawn(|| drop(permits.acquire(&slow)));
            while permits.counts().waiting < 2 {
                std::thread::yield_now();
            }
            // One slow call ends: whoever takes the freed permit, it is the quick plugin.
            drop(slow_held.pop());
            while permits.counts().free > 0 {
                std::thread::yield_now();
            }
            assert_eq!(permits.counts().plugins["quick"].held, 1);
            assert_eq!(permits.counts().plugins["slow"].held, 3);
            let quick_permit = waiter.join().expect("waiter");
            drop(quick_permit);
            // Quick under its share again: the slow plugin, at three, still leaves it one.
            assert!(!permits.counts().may_take("slow", 4));
            drop(quick_loaded);
            // Unloaded, its share goes back to the slow plugin.
            more.join().expect("slow");
            drop(slow_held);
        });
        assert_eq!(permits.in_use(), 0);
        assert_eq!(
            permits.counts().plugins.len(),
            1,
            "the slow plugin is loaded"
        );
    }
}
