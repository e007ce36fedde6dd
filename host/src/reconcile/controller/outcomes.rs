//! What each action of a key's last reconcile did, handed to the plugin in the key's next
//! request (`request.previous` of the contract): so a failed create can become a condition on
//! the object, which controller-runtime's reconcilers get from the error their own client call
//! returns.
//!
//! Kept per key from one reconcile to the next; forgotten when the reconcile returned an error
//! (it carried nothing out), when the object is gone and everything asked for it succeeded (so
//! deleted objects leave nothing behind), and when a new version of the plugin swaps in (its
//! actions need not line up with the old one's).

use std::collections::HashMap;
use std::sync::Mutex;

use super::lock;
use crate::plugin::{Target, wit};
use crate::reconcile::applier::{ActionStatus, Failure};
use crate::reconcile::informer::ObjectKey;

#[derive(Default)]
pub(super) struct Outcomes {
    last: Mutex<HashMap<ObjectKey, Box<[ActionStatus]>>>,
}

impl Outcomes {
    /// What `key`'s last reconcile did, as the contract says it.
    pub(super) fn previous(&self, key: &ObjectKey) -> Vec<wit::ActionResult> {
        let last = lock(&self.last);
        let Some(statuses) = last.get(key) else {
            return Vec::new();
        };
        (statuses.iter().enumerate())
            .map(|(index, status)| wit::ActionResult {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                status: match status {
                    ActionStatus::Applied => wit::ActionStatus::Applied,
                    ActionStatus::Unchanged => wit::ActionStatus::Unchanged,
                    ActionStatus::Skipped => wit::ActionStatus::Skipped,
                    ActionStatus::Failed(failure) => wit::ActionStatus::Failed(to_wit(failure)),
                },
            })
            .collect()
    }

    /// Records what `key`'s reconcile just did; `gone`: its object no longer exists.
    pub(super) fn record(&self, key: &ObjectKey, statuses: Vec<ActionStatus>, gone: bool) {
        let failed =
            |s: &ActionStatus| matches!(s, ActionStatus::Failed(_) | ActionStatus::Skipped);
        if statuses.is_empty() || (gone && !statuses.iter().any(failed)) {
            self.forget(key);
        } else {
            lock(&self.last).insert(key.clone(), statuses.into_boxed_slice());
        }
    }

    /// Forgets `key`'s last reconcile: it returned an error, so carried nothing out.
    pub(super) fn forget(&self, key: &ObjectKey) {
        lock(&self.last).remove(key);
    }

    /// How many keys' statuses are kept.
    pub(super) fn len(&self) -> usize {
        lock(&self.last).len()
    }

    /// Forgets every key's: a new version of the plugin serves them.
    pub(super) fn clear(&self) {
        lock(&self.last).clear();
    }
}

fn to_wit(failure: &Failure) -> wit::ActionFailure {
    let Target {
        api_version,
        kind,
        namespace,
        name,
    } = &failure.target;
    wit::ActionFailure {
        target: wit::ObjectRef {
            api_version: api_version.clone(),
            kind: kind.clone(),
            namespace: namespace.clone(),
            name: name.clone(),
        },
        code: failure.code,
        reason: failure.reason.clone(),
        message: failure.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure() -> ActionStatus {
        ActionStatus::Failed(Box::new(Failure {
            target: Target {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: "ns".into(),
                name: "c".into(),
            },
            code: 422,
            reason: "Invalid".into(),
            message: "bad".into(),
        }))
    }

    #[test]
    fn a_keys_last_statuses_come_back_in_order_until_forgotten() {
        let outcomes = Outcomes::default();
        let key = ObjectKey::new("ns", "t");
        assert!(
            outcomes.previous(&key).is_empty(),
            "nothing before a first reconcile"
        );
        outcomes.record(
            &key,
            vec![failure(), ActionStatus::Unchanged, ActionStatus::Skipped],
            false,
        );
        let previous = outcomes.previous(&key);
        assert_eq!(previous.len(), 3);
        assert_eq!(previous[1].index, 1);
        let wit::ActionStatus::Failed(failed) = &previous[0].status else {
            panic!("{previous:?}")
        };
        assert_eq!((failed.code, failed.target.name.as_str()), (422, "c"));
        assert_eq!(previous[2].status, wit::ActionStatus::Skipped);
        outcomes.forget(&key);
        assert!(outcomes.previous(&key).is_empty());
    }

    #[test]
    fn a_gone_objects_statuses_are_kept_only_while_something_failed() {
        let outcomes = Outcomes::default();
        let key = ObjectKey::new("ns", "t");
        outcomes.record(&key, vec![failure()], true);
        assert_eq!(outcomes.previous(&key).len(), 1, "a failed cleanup is kept");
        outcomes.record(&key, vec![ActionStatus::Applied], true);
        assert!(outcomes.previous(&key).is_empty(), "a finished one is not");
        outcomes.record(&key, vec![ActionStatus::Applied], false);
        outcomes.clear();
        assert!(outcomes.previous(&key).is_empty());
    }
}
