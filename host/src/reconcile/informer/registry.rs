//! Every informer of the process, one per [`Watch`], started on first use and stopped when its
//! last subscriber leaves. Plugins that declare the same kind, namespace and selector share one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use wasmctrl_core::Gvk;

use super::{Informer, Watch, lock};
use crate::identity::Account;
use crate::replicas::sharding::Shards;

/// All informers of the process.
pub struct Informers {
    client: kube::Client,
    informers: Mutex<HashMap<Watch, (Arc<Informer>, tokio::task::AbortHandle)>>,
    /// In a shard group: the slots.
    sharding: OnceLock<Shards>,
    /// How long a sharded cache's slots stay unchanged before its watches are merged.
    merge_after: Duration,
}

impl Informers {
    /// No informers yet; each starts when first asked for.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            informers: Mutex::new(HashMap::new()),
            sharding: OnceLock::new(),
            merge_after: super::sharded::MERGE_AFTER,
        }
    }

    /// Merges a sharded cache's watches once its slots have stayed unchanged for `after`.
    #[cfg(test)]
    pub(crate) fn merge_after(mut self, after: Duration) -> Self {
        self.merge_after = after;
        self
    }

    /// Makes the caches of [`Watch::sharded`] watches hold only `shards`' slots, asking the
    /// API server for those only (`shardSelector`). Before any cache starts.
    pub fn shard(&self, shards: Shards) {
        if self.sharding.set(shards).is_err() {
            tracing::warn!("the caches were sharded already");
        }
    }

    /// Whether every sharded cache whose kind is known has listed the slots of `version` (or a
    /// later one), so that the keys of those slots can be reconciled on a full view.
    pub fn sharded_at(&self, version: u64) -> bool {
        lock(&self.informers)
            .values()
            .all(|(informer, _)| match informer.shard_version() {
                None => true,
                Some(listed) => listed.is_some_and(|v| v >= version),
            })
    }

    /// The informer for `watch`, starting it if this is the first use.
    pub fn get(&self, watch: &Watch) -> Arc<Informer> {
        let mut map = lock(&self.informers);
        if let Some((informer, _)) = map.get(watch) {
            return informer.clone();
        }
        let informer = Arc::new(Informer::new(watch.clone()));
        let sharding = (self.sharding.get()).map(|shards| (shards.clone(), self.merge_after));
        let client = match &watch.account {
            Some(account) => account.client(&self.client),
            None => self.client.clone(),
        };
        let task = tokio::spawn(informer.clone().run(client, sharding));
        map.insert(watch.clone(), (informer.clone(), task.abort_handle()));
        informer
    }

    /// A running informer filled with `account`'s rights that holds every object of `kind` in
    /// `namespace` (no label selector), once it knows the kind's scope: the only kind of cache
    /// that can show an object is absent.
    pub fn covering(
        &self,
        kind: &Gvk,
        namespace: &str,
        account: Option<&Account>,
    ) -> Option<Arc<Informer>> {
        lock(&self.informers)
            .values()
            .map(|(informer, _)| informer)
            .find(|i| {
                i.gvk() == kind
                    && i.watch().account.as_ref() == account
                    && i.watch().labels.is_empty()
                    && i.resource().is_some()
                    && i.complete_in(namespace)
            })
            .cloned()
    }

    /// The informers running now.
    pub fn running(&self) -> Vec<Arc<Informer>> {
        lock(&self.informers)
            .values()
            .map(|(informer, _)| informer.clone())
            .collect()
    }

    /// Ends subscription `id` to `informer`; an informer left with no subscriber stops watching
    /// and its cache is freed.
    pub fn unsubscribe(&self, informer: &Informer, id: u64) {
        let mut map = lock(&self.informers);
        let current = map
            .get(informer.watch())
            .is_some_and(|(running, _)| std::ptr::eq(running.as_ref(), informer));
        // Under the map's lock, so no `get` can hand the informer out between the count and
        // the removal.
        if informer.unsubscribe(id) == 0
            && current
            && let Some((_, task)) = map.remove(informer.watch())
        {
            task.abort();
            tracing::debug!(watch = %informer.watch(), "informer stopped: no subscribers left");
        }
    }

    /// Stops every watch.
    pub fn shutdown(&self) {
        for (_, (_, task)) in lock(&self.informers).drain() {
            task.abort();
        }
    }
}

impl Drop for Informers {
    fn drop(&mut self) {
        self.shutdown();
    }
}
