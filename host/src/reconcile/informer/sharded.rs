//! The watches of a sharded cache (see [`crate::replicas::sharding`]): it holds the objects of this
//! replica's slots, listed and watched with a `shardSelector` of them.
//!
//! A change of the slots relists nothing the cache holds already. Slots given up are dropped
//! from the cache at once, and the watches covering them narrow (their events for those slots
//! are ignored from then on). Slots taken up get a watch of their own, whose list is all the
//! replica waits for before it reconciles their keys: a replica taking over a killed member's
//! slots lists that member's objects, not its own again (at 100,000 objects over two replicas,
//! 50,000 objects rather than 100,000). The watches cover disjoint slots, so the events of an
//! object come from one watch, in order.
//!
//! Once every watch has listed and the slots have stayed unchanged for [`MERGE_AFTER`], one
//! watch of all the slots is started (also after a quarter or more of the cache was dropped,
//! so that the objects kept are gathered again into fresh memory and the allocator can hand
//! back what the dropped ones held), and when its list is complete it replaces the others
//! (which also repairs the one disorder disjoint watches allow: an object deleted and created
//! again under the same name with a uid of another watch's slots, whose events the two watches
//! may deliver out of order). So a replica whose slots changed many times keeps one watch, and
//! the extra list it costs comes after the handover, not in its way.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::Either;
use futures::stream::{AbortHandle, BoxStream, SelectAll};
use futures::{StreamExt as _, future};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Entry, Informer, api, lock};
use crate::replicas::sharding::{self, CacheSlots, Shards, SlotSet};

/// How long a sharded cache's slots stay unchanged before its watches are merged into one.
pub(super) const MERGE_AFTER: Duration = Duration::from_secs(30);

type Events = BoxStream<'static, (u64, Result<Event<DynamicObject>, watcher::Error>)>;

/// One watch of a sharded cache.
struct Part {
    /// The slots whose objects it lists and keeps (narrowed as slots are given up).
    slots: SlotSet,
    /// Its list so far.
    listed: Vec<Arc<Entry>>,
    /// Its list is in the cache.
    synced: bool,
    /// Lists every slot of the cache, to replace all other watches once it has.
    merging: bool,
    stop: AbortHandle,
}

/// What the watches of a sharded cache ask for, but their slots.
pub(super) struct Source {
    /// The client underneath: each watch asks through its own, which adds its selector.
    pub client: kube::Client,
    pub resource: ApiResource,
    /// The namespace watched (`None`: all, or a cluster-scoped kind).
    pub namespace: Option<String>,
    pub config: watcher::Config,
}

/// The watches of one sharded cache.
pub(super) struct Sharded<'a> {
    informer: &'a Informer,
    source: Source,
    shards: Shards,
    /// The slots the cache is to hold.
    want: CacheSlots,
    parts: BTreeMap<u64, Part>,
    events: SelectAll<Events>,
    next: u64,
    /// Whether the cache has been complete once (its first contents are initial notices).
    complete_once: bool,
    /// When the watches are to be merged.
    merge_at: Option<Instant>,
    /// A large share of the cache was dropped since it was last listed whole: the memory freed
    /// lies scattered among the kept objects' pages, where the allocator cannot hand it back.
    /// A fresh list of all the slots (a merge, even of one watch) gathers the objects again.
    scattered: bool,
    merge_after: Duration,
}

impl<'a> Sharded<'a> {
    pub(super) fn new(
        informer: &'a Informer,
        source: Source,
        shards: Shards,
        merge_after: Duration,
    ) -> Self {
        let want = shards.cache_version();
        Self {
            informer,
            source,
            shards,
            want,
            parts: BTreeMap::new(),
            events: SelectAll::new(),
            next: 0,
            complete_once: false,
            merge_at: None,
            scattered: false,
            merge_after,
        }
    }

    /// Keeps the cache holding the slots `slots` names, as they change.
    pub(super) async fn run(mut self, mut slots: watch::Receiver<CacheSlots>) {
        self.retarget(*slots.borrow_and_update());
        loop {
            let changed = async {
                if slots.changed().await.is_err() {
                    // The shard state is gone (the host is stopping): no change comes.
                    future::pending::<()>().await;
                }
            };
            let event = match self.events.is_empty() {
                // An empty `SelectAll` ends at once rather than waiting.
                true => Either::Left(future::pending()),
                false => Either::Right(self.events.next()),
            };
            let merge = async {
                match self.merge_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => future::pending().await,
                }
            };
            tokio::select! {
                () = changed => self.retarget(*slots.borrow_and_update()),
                Some((id, event)) = event => self.on(id, event),
                () = merge => self.merge(),
            }
        }
    }

    /// The slot of an object of the cache's kind.
    fn slot(&self, obj: &DynamicObject) -> usize {
        let meta = &obj.metadata;
        let uid = wasmctrl_core::shard::hash(meta.uid.as_deref().unwrap_or(""));
        (self.shards).slot(
            uid,
            meta.namespace.as_deref().unwrap_or(""),
            meta.name.as_deref().unwrap_or(""),
        )
    }

    /// Makes the cache hold `want`'s slots: drops the objects of slots given up and starts a
    /// watch of the slots taken up.
    fn retarget(&mut self, want: CacheSlots) {
        self.want = want;
        self.merge_at = None;
        let mut covered = SlotSet::default();
        self.parts.retain(|_, part| {
            part.slots = part.slots.intersection(&want.slots);
            // An unfinished merge lists slots that have changed: merged again later.
            let keep = !part.slots.is_empty() && !part.merging;
            if keep {
                covered = covered.union(&part.slots);
            } else {
                part.stop.abort();
            }
            keep
        });
        let shards = &self.shards;
        let given_up = |e: &Entry| !want.slots.contains(e.slot(shards));
        let cached = self.informer.sizes().0;
        let dropped = self.informer.replace_within(Vec::new(), false, given_up);
        self.scattered |= dropped > 0 && dropped * 4 >= cached;
        let added = want.slots.difference(&covered);
        if !added.is_empty() {
            tracing::debug!(kind = %self.informer.watch.kind.kind, slots = %added, "listing the slots taken up");
            self.start(added, false);
        }
        self.check_complete();
    }

    /// Starts a watch of `slots`.
    fn start(&mut self, slots: SlotSet, merging: bool) {
        let id = self.next;
        self.next += 1;
        let source = &self.source;
        let client = sharding::sharded_client(source.client.clone(), self.shards.clone(), slots);
        let api = api(client, &source.resource, source.namespace.as_deref());
        let (stream, stop) = futures::stream::abortable(
            watcher::watcher(api, source.config.clone()).default_backoff(),
        );
        self.events
            .push(stream.map(move |event| (id, event)).boxed());
        let part = Part {
            slots,
            listed: Vec::new(),
            synced: false,
            merging,
            stop,
        };
        self.parts.insert(id, part);
    }

    fn on(&mut self, id: u64, event: Result<Event<DynamicObject>, watcher::Error>) {
        let slot = match &event {
            Ok(Event::InitApply(obj) | Event::Apply(obj) | Event::Delete(obj)) => {
                Some(self.slot(obj))
            }
            _ => None,
        };
        // A stopped watch's last event, or one for slots it no longer keeps.
        let Some(part) = self.parts.get_mut(&id) else {
            return;
        };
        if slot.is_some_and(|s| !part.slots.contains(s)) {
            return;
        }
        match event {
            Ok(Event::Init) => part.listed.clear(),
            Ok(Event::InitApply(obj)) => part.listed.push(Arc::new(Entry::from_object(obj))),
            Ok(Event::InitDone) => {
                let listed = std::mem::take(&mut part.listed);
                part.synced = true;
                let initial = !self.complete_once;
                if std::mem::take(&mut part.merging) {
                    self.scattered = false;
                    // It holds every slot: the others go, and its list replaces the cache.
                    self.parts.retain(|other, part| {
                        if *other != id {
                            part.stop.abort();
                        }
                        *other == id
                    });
                    self.informer.replace_within(listed, initial, |_| true);
                } else {
                    let (slots, shards) = (part.slots, &self.shards);
                    let within = |e: &Entry| slots.contains(e.slot(shards));
                    self.informer.replace_within(listed, initial, within);
                }
                self.check_complete();
            }
            Ok(Event::Apply(obj)) => self.informer.upsert(obj),
            Ok(Event::Delete(obj)) => self.informer.delete(&obj),
            Err(e) => {
                tracing::warn!(kind = %self.informer.watch.kind.kind, error = %e, "watch failed; retrying with backoff")
            }
        }
    }

    /// Once every watch (but a merge under way) has listed: the cache holds the slots it is to
    /// hold, and the watches are merged later if there are several.
    fn check_complete(&mut self) {
        let listing = self.parts.values().filter(|p| !p.merging);
        if !listing.clone().all(|p| p.synced) {
            return;
        }
        *lock(&self.informer.shard) = Some(Some(self.want));
        self.informer.synced.send_replace(true);
        self.complete_once = true;
        let merging = self.parts.values().any(|p| p.merging);
        let merge = listing.count() > 1 || self.scattered;
        self.merge_at = (merge && !merging).then(|| Instant::now() + self.merge_after);
    }

    /// Starts the watch of all the slots that replaces the others once it has listed.
    fn merge(&mut self) {
        self.merge_at = None;
        if self.parts.is_empty() {
            // Nothing cached, nothing scattered.
            self.scattered = false;
        } else if self.parts.len() > 1 || self.scattered {
            tracing::debug!(kind = %self.informer.watch.kind.kind, watches = self.parts.len(), "merging the watches of the cache's slots into one");
            self.start(self.want.slots, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::{Duration, Instant};

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, DeleteParams, ListParams, PostParams};
    use wasmctrl_apiserver::ApiServer;
    use wasmctrl_core::Gvk;
    use wasmctrl_core::shard::Field;

    use crate::reconcile::informer::{Informer, Informers, Watch};
    use crate::replicas::sharding::{Shards, SlotSet, slot_of};
    use crate::selector::LabelSelector;

    struct Fixture {
        server: ApiServer,
        api: Api<ConfigMap>,
        informers: Informers,
        informer: std::sync::Arc<Informer>,
        shards: Shards,
    }

    impl Fixture {
        async fn new(server_side: bool, merge_after: Duration) -> Self {
            let builder = ApiServer::builder().shard_selectors(server_side);
            let server = builder.build().unwrap();
            let client = server.client();
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
            for i in 0..400 {
                create(&api, &format!("cm-{i}")).await;
            }
            let shards = Shards::new(Field::Uid);
            let informers = Informers::new(client).merge_after(merge_after);
            informers.shard(shards.clone());
            let informer = informers.get(&Watch {
                kind: Gvk::new("", "v1", "ConfigMap"),
                namespace: None,
                labels: LabelSelector::default(),
                sharded: true,
                account: None,
            });
            while informer.resource().is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Self {
                server,
                api,
                informers,
                informer,
                shards,
            }
        }

        /// The names of the ConfigMaps in `slots`, as the API server has them.
        async fn expected(&self, slots: SlotSet) -> BTreeSet<String> {
            let all = self.api.list(&ListParams::default()).await.unwrap();
            (all.items.iter())
                .filter(|cm| {
                    let uid = cm.metadata.uid.as_deref().unwrap();
                    slots.contains(slot_of(wasmctrl_core::shard::hash(uid)))
                })
                .map(|cm| cm.metadata.name.clone().unwrap())
                .collect()
        }

        fn cached(&self) -> BTreeSet<String> {
            let entries = self.informer.entries();
            entries.iter().map(|e| e.key.name().to_string()).collect()
        }

        /// Has the cache hold `slots`; once it says it does, it holds exactly their objects.
        /// The shard selectors of the lists it sent meanwhile.
        async fn hold(&self, slots: SlotSet) -> Vec<String> {
            let before = self.server.requests().len();
            let version = self.shards.set_cache_slots(slots);
            let started = Instant::now();
            while !self.informers.sharded_at(version) {
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "{slots} not listed"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Read before this test's own (unsharded) list below.
            let lists = self.lists_since(before);
            assert_eq!(self.cached(), self.expected(slots).await, "holding {slots}");
            lists
        }

        fn lists_since(&self, before: usize) -> Vec<String> {
            (self.server.requests().into_iter().skip(before))
                .filter(|r| r.verb == "list" && r.resource == "configmaps")
                .map(|r| r.shard_selector)
                .collect()
        }

        /// Creates and deletes objects; waits until the cache holds those of `slots` only.
        async fn churn(&self, slots: SlotSet, round: usize) {
            for i in 0..40 {
                create(&self.api, &format!("new-{round}-{i}")).await;
            }
            for i in (round * 10)..(round * 10 + 10) {
                let name = format!("cm-{i}");
                self.api
                    .delete(&name, &DeleteParams::default())
                    .await
                    .unwrap();
            }
            let expected = self.expected(slots).await;
            let started = Instant::now();
            while self.cached() != expected {
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "cached {:?}, expected {expected:?}",
                    self.cached()
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    async fn create(api: &Api<ConfigMap>, name: &str) {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        api.create(&PostParams::default(), &cm).await.unwrap();
    }

    fn slots(text: &str) -> SlotSet {
        SlotSet::parse(text).unwrap()
    }

    fn selector(slots: SlotSet) -> String {
        slots.selector(Field::Uid).unwrap().to_string()
    }

    #[tokio::test]
    async fn slots_taken_up_are_listed_alone_and_slots_given_up_relist_nothing() {
        let hour = Duration::from_secs(3600);
        let f = Fixture::new(true, hour).await;
        let (a, b) = (slots("0-127"), slots("128-191"));
        assert_eq!(f.hold(a).await, [selector(a)]);
        f.churn(a, 0).await;
        // Taking B up lists B, not A again.
        assert_eq!(f.hold(a.union(&b)).await, [selector(b)]);
        f.churn(a.union(&b), 1).await;
        // Giving A up lists nothing; B's watch goes on.
        assert_eq!(f.hold(b).await, Vec::<String>::new());
        f.churn(b, 2).await;
        // None, then some again.
        assert_eq!(f.hold(SlotSet::default()).await, Vec::<String>::new());
        assert!(f.cached().is_empty());
        assert_eq!(f.hold(a).await, [selector(a)]);
        f.churn(a, 3).await;
    }

    #[tokio::test]
    async fn the_watches_of_a_cache_are_merged_once_its_slots_stay_unchanged() {
        let f = Fixture::new(true, Duration::from_millis(200)).await;
        let (a, b) = (slots("0-127"), slots("128-191"));
        f.hold(a).await;
        let before = f.server.requests().len();
        let both = a.union(&b);
        assert_eq!(f.hold(both).await, [selector(b)]);
        // A list of both, once the slots have not changed for the merge delay.
        let started = Instant::now();
        while !f.lists_since(before).contains(&selector(both)) {
            assert!(started.elapsed() < Duration::from_secs(30), "never merged");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        f.churn(both, 0).await;
        // The merged watch narrows like any other, without a list; then, as half the cache
        // went, B is listed afresh.
        let before = f.server.requests().len();
        assert_eq!(f.hold(b).await, Vec::<String>::new());
        f.churn(b, 1).await;
        let started = Instant::now();
        while !f.lists_since(before).contains(&selector(b)) {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "never listed afresh"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        f.churn(b, 2).await;
    }

    #[tokio::test]
    async fn without_server_side_sharding_each_watch_keeps_its_slots() {
        let hour = Duration::from_secs(3600);
        let f = Fixture::new(false, hour).await;
        let (a, b) = (slots("0-127"), slots("128-191"));
        f.hold(a).await;
        f.churn(a, 0).await;
        f.hold(a.union(&b)).await;
        f.churn(a.union(&b), 1).await;
        f.hold(b).await;
        f.churn(b, 2).await;
        assert_eq!(f.shards.server_side(), Some(false));
    }
}
