//! Read-your-writes between reconciles: a key whose last reconcile changed objects is not
//! reconciled again until the caches show those changes (their echoes), or until
//! [`MAX_WAIT`] has passed.
//!
//! Without it, the first echo to arrive (say, the owned child's) queues the key while the
//! other (the status write on the object itself) is still on its way: the plugin runs on a
//! cache that lacks its own write, finds nothing to do that the applier would send, and runs
//! again when the second echo comes. kube-runtime and controller-runtime reconcile on that stale
//! cache (a native controller there writes its status a second time); kube-controller-manager's
//! ReplicaSet and Job controllers hold a key back with "expectations" until the informer has
//! seen what the controller created. This is that idea for every write a plugin makes.
//!
//! A held-back key is not lost: the echo it waits for queues it (a child's event maps to its
//! owner, the object's own event to its key), and it is looked at again after a short delay
//! in case that echo is filtered out (a `generation-changed` predicate drops a status echo).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::lock;
use crate::reconcile::applier::Echo;
use crate::reconcile::informer::ObjectKey;

/// The longest a key is held back for its echoes: a watch that lags this much (or an echo lost
/// to a relist that saw something else) must not keep the plugin from running.
pub(super) const MAX_WAIT: Duration = Duration::from_secs(5);

/// The first look again at a held-back key whose echo did not queue it; later looks back off.
const FIRST_LOOK: Duration = Duration::from_millis(10);

/// Each key's outstanding echoes, from a reconcile that wrote until the first look at the key
/// that finds them all seen (at most one entry per key; the object's deletion queues its key,
/// and that look finds the echoes seen).
#[derive(Default)]
pub(super) struct Echoes {
    pending: Mutex<HashMap<ObjectKey, Pending>>,
}

struct Pending {
    echoes: Vec<Echo>,
    /// When the reconcile's writes were done.
    since: Instant,
}

impl Echoes {
    /// Records the echoes of `key`'s reconcile that just finished (replacing any earlier ones:
    /// the newer writes are what the next reconcile must see).
    pub(super) fn expect(&self, key: &ObjectKey, echoes: Vec<Echo>) {
        let mut pending = lock(&self.pending);
        if echoes.is_empty() {
            pending.remove(key);
        } else {
            let since = Instant::now();
            pending.insert(key.clone(), Pending { echoes, since });
        }
    }

    /// Whether `key` may be reconciled now; otherwise, how long until it should be looked at
    /// again (its echoes usually queue it sooner). A key whose echoes are all seen, or that has
    /// waited [`MAX_WAIT`], is forgotten and may go.
    pub(super) fn hold(&self, key: &ObjectKey) -> Option<Duration> {
        let mut pending = lock(&self.pending);
        let waiting = pending.get_mut(key)?;
        waiting.echoes.retain(|e| !e.seen());
        let waited = waiting.since.elapsed();
        if waiting.echoes.is_empty() || waited >= MAX_WAIT {
            pending.remove(key);
            return None;
        }
        Some(waited.max(FIRST_LOOK).min(MAX_WAIT - waited))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use wasmctrl_core::Gvk;

    use super::*;
    use crate::reconcile::informer::{Informer, Version};

    fn config_map(name: &str, rv: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}})
    }

    fn cache() -> Arc<Informer> {
        let informer = Informer::detached(Gvk::new("", "v1", "ConfigMap"));
        informer.put(config_map("changed", "1"));
        informer.put(config_map("deleted", "2"));
        informer
    }

    fn echo(informer: &Arc<Informer>, name: &str, before: Option<u64>) -> Echo {
        let key = ObjectKey::new("ns", name);
        Echo::new(informer.clone(), key, before.map(Version::Revision))
    }

    /// A key whose last reconcile changed `changed` (cached at version 1).
    fn held_for_a_change() -> (Arc<Informer>, Echoes, ObjectKey) {
        let (informer, echoes) = (cache(), Echoes::default());
        let key = ObjectKey::new("ns", "owner");
        echoes.expect(&key, vec![echo(&informer, "changed", Some(1))]);
        (informer, echoes, key)
    }

    #[test]
    fn a_key_is_held_until_every_echo_of_its_writes_is_cached() {
        let informer = cache();
        let echoes = Echoes::default();
        let key = ObjectKey::new("ns", "owner");
        assert_eq!(echoes.hold(&key), None, "a key that wrote nothing goes");
        echoes.expect(
            &key,
            vec![
                echo(&informer, "changed", Some(1)),
                echo(&informer, "created", None),
                echo(&informer, "deleted", Some(2)),
            ],
        );
        assert_eq!(echoes.hold(&key), Some(FIRST_LOOK));
        informer.put(config_map("changed", "3"));
        informer.put(config_map("created", "4"));
        assert!(
            echoes.hold(&key).is_some(),
            "the deletion is not cached yet"
        );
        informer.remove(config_map("deleted", "5"));
        assert_eq!(echoes.hold(&key), None);
        // Forgotten once seen: the key is not held for those writes again.
        informer.put(config_map("changed", "1"));
        assert_eq!(echoes.hold(&key), None);
    }

    #[test]
    fn a_later_change_by_someone_else_counts_as_seen() {
        let (informer, echoes, key) = held_for_a_change();
        informer.put(config_map("changed", "9"));
        assert_eq!(echoes.hold(&key), None);
    }

    #[test]
    fn a_reconcile_that_writes_nothing_clears_what_the_one_before_wrote() {
        let (_informer, echoes, key) = held_for_a_change();
        echoes.expect(&key, Vec::new());
        assert_eq!(echoes.hold(&key), None);
    }

    #[test]
    fn looks_back_off_and_a_key_is_held_no_longer_than_the_cap() {
        let (_informer, echoes, key) = held_for_a_change();
        let backdate = |by: Duration| {
            let mut pending = lock(&echoes.pending);
            let waiting = pending.get_mut(&key).expect("held");
            waiting.since = Instant::now() - by;
        };
        backdate(Duration::from_millis(400));
        let look = echoes.hold(&key).expect("still held");
        assert!(
            look >= Duration::from_millis(400) && look < MAX_WAIT,
            "{look:?}"
        );
        backdate(MAX_WAIT - Duration::from_millis(1));
        let look = echoes.hold(&key).expect("still held");
        assert!(
            look <= Duration::from_millis(1),
            "never past the cap: {look:?}"
        );
        backdate(MAX_WAIT);
        assert_eq!(echoes.hold(&key), None, "held long enough: the plugin runs");
        assert!(lock(&echoes.pending).is_empty());
    }
}
