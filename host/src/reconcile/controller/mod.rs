//! The core loop: for each plugin, informer events become keys on its workqueue, workers run the
//! plugin on each key in the sandbox, the applier carries out what it asked for, and the outcome
//! goes back to the queue (forget, requeue-after, rate-limited retry, or nothing for terminal
//! errors). A [`Manager`] (controller-runtime's name) runs one controller per plugin over shared informers.

mod echoes;
mod mapping;
mod outcomes;
mod worker;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wasmctrl_core::{Gvk, shard};

use crate::clock::Clock;
use crate::identity::Account;
use crate::observe::events::Note;
use crate::observe::metrics::{
    ControllerLabel, KindLabel, Metrics, PluginLabels, QueueLabel, ResultLabels, set_counter,
};
use crate::plugin::Manifest;
use crate::reconcile::applier::Applier;
use crate::reconcile::informer::{
    Caches, Change, Informer, Informers, Notice, ObjectKey, Version, Watch,
};
use crate::reconcile::queue::{self, Queue};
use crate::replicas::leader::Leadership;
use crate::replicas::sharding::{Shards, SlotSet};
use crate::runtime::Plugin;
use crate::selector::LabelSelector;
use wasmctrl_core::sync::{lock, read, write};

/// Keys being reconciled, with their shard slot (`None` outside a shard group).
type InFlight = HashMap<ObjectKey, Option<usize>>;

/// Slots of reconciled objects deleted from a uid-sharded cache, until their `Gone` runs.
type Gone = Arc<Mutex<HashMap<ObjectKey, usize>>>;
use mapping::{Filter, Keys, Mapper, by_mapping, by_owner};
use worker::{CallTime, Worker};

/// Per-plugin settings from the operator for its controller. (Narrower namespaces and a
/// deadline of its own are part of the loaded plugin: see `runtime::Overrides`.)
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tuning {
    /// Workers, i.e. keys reconciled at once (default 4).
    pub concurrency: Option<usize>,
    /// The account whose rights every request for the plugin uses (impersonated; a tenant's
    /// ServiceAccount); `None`: the host's own.
    pub account: Option<Account>,
}

/// Workers per plugin when nothing says otherwise.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// How long in-flight reconciles get when a plugin's controller restarts, unless told otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// How a reconcile ended, for logs and metrics (`controller_runtime_reconcile_total{result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Done; nothing to retry.
    Success,
    /// Done, and asked to run again after a delay.
    Requeue,
    /// Failed; retried with backoff.
    Error,
    /// Failed in a way retrying cannot fix; not retried until the object changes.
    Terminal,
}

/// Reconcile counts of one plugin's controller, the source of its metrics.
#[derive(Debug, Default)]
pub struct Stats {
    success: AtomicU64,
    requeue: AtomicU64,
    error: AtomicU64,
    terminal: AtomicU64,
    overlaps: AtomicU64,
    /// Keys taken from the queue and put back until the caches show their last writes.
    held: AtomicU64,
}

/// A snapshot of [`Stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Reconciles that succeeded.
    pub success: u64,
    /// Reconciles that succeeded and asked to run again (requeue-after). A write conflict is
    /// an error: the key is retried with backoff.
    pub requeue: u64,
    /// Reconciles that failed and were retried with backoff.
    pub error: u64,
    /// Reconciles that failed for good.
    pub terminal: u64,
    /// Times a key was found already being reconciled by another worker (must stay 0).
    pub overlaps: u64,
    /// Times a key was held back until the caches showed its last reconcile's writes (not
    /// reconciles: the plugin was not called).
    pub held: u64,
    /// Reconciles running now.
    pub in_flight: u64,
    /// Keys whose last reconcile's action statuses are kept for their next one.
    pub outcomes_kept: u64,
}

impl Counts {
    /// Reconciles of every outcome.
    pub fn total(&self) -> u64 {
        self.success + self.requeue + self.error + self.terminal
    }
}

impl Stats {
    fn record(&self, outcome: ReconcileResult) {
        let counter = match outcome {
            ReconcileResult::Success => &self.success,
            ReconcileResult::Requeue => &self.requeue,
            ReconcileResult::Error => &self.error,
            ReconcileResult::Terminal => &self.terminal,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        Counts {
            success: self.success.load(Ordering::Relaxed),
            requeue: self.requeue.load(Ordering::Relaxed),
            error: self.error.load(Ordering::Relaxed),
            terminal: self.terminal.load(Ordering::Relaxed),
            overlaps: self.overlaps.load(Ordering::Relaxed),
            held: self.held.load(Ordering::Relaxed),
            in_flight: 0,
            outcomes_kept: 0,
        }
    }
}

/// Runs every loaded plugin's controller.
pub struct Manager {
    /// For the permission preflight.
    client: kube::Client,
    informers: Arc<Informers>,
    applier: Arc<Applier>,
    controllers: Mutex<HashMap<String, Controller>>,
    /// Reconcile tallies by plugin name; kept across restarts, so counters never go back.
    stats: Mutex<HashMap<String, Arc<Stats>>>,
    metrics: Arc<Metrics>,
    /// The host's own Pod (an Event `regarding`), told about plugins loaded and refused.
    pod: Option<ObjectReference>,
    /// Workers take keys only while this replica leads; standbys keep their caches and queues
    /// warm and reconcile nothing.
    leadership: Leadership,
    /// With `--sharding`: workers take only the keys of this replica's slots, and the caches of
    /// reconciled and owned kinds hold only those slots' objects.
    shards: Option<Shards>,
    /// The time reconciles are told.
    clock: Clock,
}

struct Controller {
    plugin: Arc<RwLock<Arc<Plugin>>>,
    tuning: Tuning,
    /// The caches its reads go to.
    caches: Arc<Caches>,
    /// The caches of the reconciled kind (one per watched namespace).
    watched: Arc<Vec<Arc<Informer>>>,
    /// Cancelled when the controller stops, so workers still waiting for caches end at once.
    stop: CancellationToken,
    stats: Arc<Stats>,
    /// Keys being reconciled, with their shard slot in a shard group.
    in_flight: Arc<Mutex<InFlight>>,
    /// What each key's last reconcile did, for its next one.
    outcomes: Arc<outcomes::Outcomes>,
    queue: Queue<ObjectKey>,
    subscriptions: Vec<(Arc<Informer>, u64)>,
    tasks: Vec<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

fn current(plugin: &RwLock<Arc<Plugin>>) -> Arc<Plugin> {
    read(plugin).clone()
}

impl Manager {
    /// A host over `client`, with no plugins yet.
    pub fn new(client: kube::Client) -> Self {
        Self::with_metrics(client, Arc::new(Metrics::new()))
    }

    /// A host over `client` recording into `metrics` (shared with the client's own layer).
    pub fn with_metrics(client: kube::Client, metrics: Arc<Metrics>) -> Self {
        Self::led(client, metrics, Leadership::sole())
    }

    /// A host that reconciles only while `leadership` says this replica leads, and whose
    /// applier sends nothing for plugins once its fence has closed.
    pub fn led(client: kube::Client, metrics: Arc<Metrics>, leadership: Leadership) -> Self {
        let informers = Arc::new(Informers::new(client.clone()));
        let applier = Arc::new(
            Applier::new(client.clone(), informers.clone())
                .fenced(leadership.fence().clone())
                .counted(metrics.clone()),
        );
        Self {
            client,
            informers,
            applier,
            controllers: Mutex::new(HashMap::new()),
            stats: Mutex::new(HashMap::new()),
            metrics,
            pod: None,
            leadership,
            shards: None,
            clock: Clock::system(),
        }
    }

    /// A replica of a shard group: it reconciles while `leadership` (its membership) holds, only
    /// the keys of the slots `shards` gives it, and its caches of reconciled (and, by
    /// namespace, owned) kinds ask the API server for those slots' objects only.
    pub fn sharded(
        client: kube::Client,
        metrics: Arc<Metrics>,
        leadership: Leadership,
        shards: Shards,
    ) -> Self {
        let mut host = Self::led(client, metrics, leadership);
        host.informers.shard(shards.clone());
        host.shards = Some(shards);
        host
    }

    /// Reports plugin loads (Normal `PluginLoaded`) and load failures (Warning
    /// `PluginLoadFailed`) as Events on this object, the host's Pod, so `kubectl describe pod`
    /// shows them.
    pub fn report_to(mut self, pod: ObjectReference) -> Self {
        self.pod = Some(pod);
        self
    }

    /// Tells reconciles the time from `clock` (a test clock in `wasmctrl dev`) instead of the
    /// system's; every move of it queues every key again ([`follow`](Self::follow)).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Queues every key again each time the clock moves, until the clock is dropped: a plugin
    /// waiting for a time that has now come is called at once.
    pub async fn follow(self: Arc<Self>) {
        let mut moves = self.clock.moves();
        while moves.changed().await.is_ok() {
            tracing::info!(ahead = ?*moves.borrow_and_update(), "the clock moved; queueing every key");
            self.requeue_all();
        }
    }

    /// The host's metrics; [`refresh_metrics`](Self::refresh_metrics) before encoding them.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Reads the counters and gauges the controllers, queues, plugins and caches keep into the
    /// metrics (on each scrape).
    pub fn refresh_metrics(&self) {
        self.refresh_reconcile_counts();
        self.metrics.plugin_info.clear();
        for (name, c) in lock(&self.controllers).iter() {
            self.refresh_controller(name, c);
        }
        let m = &self.metrics;
        if let Some(shards) = &self.shards {
            m.shard_members.set(shards.members() as i64);
            if let Some(server) = shards.server_side() {
                m.shard_server_side.set(i64::from(server));
            }
        }
        m.cached.clear();
        for informer in self.informers.running() {
            let kind = KindLabel {
                kind: informer.gvk().to_string(),
            };
            m.cached
                .get_or_create(&kind)
                .inc_by(informer.sizes().0 as i64);
        }
    }

    /// controller-runtime's reconcile counters, from each controller's tallies.
    fn refresh_reconcile_counts(&self) {
        let m = &self.metrics;
        for (name, stats) in lock(&self.stats).iter() {
            let c = stats.counts();
            let controller = ControllerLabel {
                controller: name.clone(),
            };
            for (result, value) in [
                ("success", c.success),
                ("error", c.error + c.terminal),
                ("requeue", 0),
                ("requeue_after", c.requeue),
            ] {
                let labels = ResultLabels {
                    controller: name.clone(),
                    result: result.into(),
                };
                set_counter(&m.reconcile_total.get_or_create(&labels), value);
            }
            set_counter(
                &m.reconcile_errors.get_or_create(&controller),
                c.error + c.terminal,
            );
            set_counter(&m.terminal_errors.get_or_create(&controller), c.terminal);
            set_counter(&m.held.get_or_create(&controller), c.held);
        }
    }

    /// One controller's gauges: its workers, its queue, its plugin's version and memory, and
    /// the keys it reconciles in this replica's shard slots.
    fn refresh_controller(&self, name: &str, c: &Controller) {
        let m = &self.metrics;
        let controller = ControllerLabel {
            controller: name.to_owned(),
        };
        let queue = QueueLabel {
            name: name.to_owned(),
        };
        let plugin = current(&c.plugin);
        let workers = c.tuning.concurrency.unwrap_or(DEFAULT_CONCURRENCY).max(1);
        m.active_workers
            .get_or_create(&controller)
            .set(lock(&c.in_flight).len() as i64);
        m.max_concurrent
            .get_or_create(&controller)
            .set(workers as i64);
        m.guest_memory
            .get_or_create(&controller)
            .set(plugin.memory_peak() as i64);
        let q = c.queue.stats();
        m.depth.get_or_create(&queue).set(q.depth as i64);
        set_counter(&m.adds.get_or_create(&queue), q.adds_total);
        set_counter(&m.retries.get_or_create(&queue), q.retries_total);
        let (unfinished, longest) = c.queue.processing();
        m.unfinished
            .get_or_create(&queue)
            .set(unfinished.as_secs_f64());
        m.longest.get_or_create(&queue).set(longest.as_secs_f64());
        let manifest = plugin.manifest();
        let info = PluginLabels {
            name: name.to_owned(),
            version: manifest.version.clone(),
            digest: plugin.digest().to_string(),
        };
        m.plugin_info.get_or_create(&info).set(1);
        if let Some(shards) = &self.shards {
            let active = shards.active();
            let owned = (c.watched.iter().flat_map(|w| w.entries()))
                .filter(|e| active.contains(e.slot(shards)))
                .count();
            m.shard_owned_keys
                .get_or_create(&controller)
                .set(owned as i64);
        }
    }

    /// The shared informers (plugins read the cache through them).
    pub fn informers(&self) -> &Arc<Informers> {
        &self.informers
    }

    /// The applier every plugin's intents go through.
    pub fn applier(&self) -> &Arc<Applier> {
        &self.applier
    }

    /// Reconcile counts of a running plugin.
    pub fn counts(&self, plugin: &str) -> Option<Counts> {
        lock(&self.controllers).get(plugin).map(|c| Counts {
            in_flight: lock(&c.in_flight).len() as u64,
            outcomes_kept: c.outcomes.len() as u64,
            ..c.stats.counts()
        })
    }

    /// Queues every cached object of every plugin again (at low priority), as on a fresh start:
    /// a replica that has just become leader may have missed nothing, but must not trust that
    /// another leader did not leave work behind.
    pub fn requeue_all(&self) {
        for c in lock(&self.controllers).values() {
            for entry in c.watched.iter().flat_map(|w| w.entries()) {
                c.queue.add_low(entry.key.clone());
            }
        }
    }

    /// Queues again every cached key in `slots` (slots a shard replica has just taken up): at
    /// normal priority the keys whose objects changed after revision `changed_after(slot)`
    /// (when the slot's previous holder was last seen: changes it may not have reconciled),
    /// the others at low priority, as an initial list's. How many changed, how many in all.
    ///
    /// The revisions of a Lease and of an object compare as etcd's revisions where both are
    /// kept in one etcd (as in most clusters, and in the embedded server; Kubernetes 1.35 makes
    /// resourceVersions comparable within a resource, KEP-5504). Where the API server keeps
    /// them apart (`--etcd-servers-overrides`), the split is arbitrary: only the order of the
    /// requeue suffers, every key is queued. A resourceVersion that is not a number never counts
    /// as changed.
    pub fn requeue_slots(
        &self,
        slots: &SlotSet,
        changed_after: impl Fn(usize) -> Option<u64>,
    ) -> (usize, usize) {
        let Some(shards) = &self.shards else {
            return (0, 0);
        };
        let (mut changed, mut queued) = (0, 0);
        for c in lock(&self.controllers).values() {
            for entry in c.watched.iter().flat_map(|w| w.entries()) {
                let slot = entry.slot(shards);
                if !slots.contains(slot) {
                    continue;
                }
                queued += 1;
                match (&entry.resource_version, changed_after(slot)) {
                    (Version::Revision(at), Some(after)) if *at > after => {
                        c.queue.add(entry.key.clone());
                        changed += 1;
                    }
                    _ => c.queue.add_low(entry.key.clone()),
                }
            }
        }
        (changed, queued)
    }

    /// How many cached keys of the reconciled kinds each shard slot has (none outside a shard
    /// group).
    pub fn keys_per_slot(&self) -> [usize; crate::replicas::sharding::SLOTS] {
        let mut keys = [0; crate::replicas::sharding::SLOTS];
        if let Some(shards) = &self.shards {
            for c in lock(&self.controllers).values() {
                for entry in c.watched.iter().flat_map(|w| w.entries()) {
                    keys[entry.slot(shards)] += 1;
                }
            }
        }
        keys
    }

    /// Whether a key in `slots` is being reconciled now (slots a shard replica is giving up
    /// wait for none to be).
    pub fn busy(&self, slots: &SlotSet) -> bool {
        (lock(&self.controllers).values()).any(|c| {
            (lock(&c.in_flight).values()).any(|slot| slot.is_some_and(|s| slots.contains(s)))
        })
    }

    /// The caches of running plugins that have not finished their first list yet.
    pub fn unsynced(&self) -> Vec<String> {
        let controllers = lock(&self.controllers);
        let mut waiting: Vec<String> = controllers
            .iter()
            .flat_map(|(name, c)| {
                (c.subscriptions.iter())
                    .filter(|(informer, _)| !informer.is_synced())
                    .map(move |(informer, _)| format!("{name}: {}", informer.watch()))
            })
            .collect();
        waiting.sort();
        waiting.dedup();
        waiting
    }

    /// The plugins being run, each as it is now (a hot reload swaps it in place), with the
    /// caches its reads go to, and whether it runs for a tenant (`WasmPlugin`).
    pub fn serving(&self) -> Vec<(Arc<Plugin>, Arc<Caches>, bool)> {
        lock(&self.controllers)
            .values()
            .map(|c| {
                (
                    current(&c.plugin),
                    c.caches.clone(),
                    c.tuning.account.is_some(),
                )
            })
            .collect()
    }

    /// Names of the plugins being run.
    pub fn plugins(&self) -> Vec<String> {
        lock(&self.controllers).keys().cloned().collect()
    }

    /// Starts (or, for a known name, replaces) a plugin's controller; a restart gives in-flight
    /// reconciles [`DEFAULT_GRACE`].
    pub async fn upsert(&self, plugin: Arc<Plugin>, tuning: Tuning) {
        self.replace(plugin, tuning, DEFAULT_GRACE).await;
    }

    /// Starts (or, for a known name, replaces) a plugin's controller.
    ///
    /// A new version whose manifest declares the same kinds and scope, under the same tuning,
    /// swaps in place: the queue and informers stay, in-flight reconciles finish on the old
    /// version (they hold its `Arc`), and every key is queued again for the new version.
    /// Anything else restarts the controller: in-flight reconciles get `grace`, then they are
    /// cancelled, and the new version starts only once none of the old one's work is left.
    pub async fn replace(&self, plugin: Arc<Plugin>, tuning: Tuning, grace: Duration) {
        let name = plugin.manifest().name.clone();
        let same_shape = lock(&self.controllers).get(&name).is_some_and(|c| {
            let old = current(&c.plugin);
            c.tuning == tuning
                && old.scope() == plugin.scope()
                && same_declaration(old.manifest(), plugin.manifest())
        });
        if same_shape {
            let controllers = lock(&self.controllers);
            if let Some(c) = controllers.get(&name) {
                *write(&c.plugin) = plugin.clone();
                self.applier.forget_plugin(&name);
                c.outcomes.clear();
                for entry in c.watched.iter().flat_map(|w| w.entries()) {
                    c.queue.add_low(entry.key.clone());
                }
                tracing::info!(plugin.name = %name, plugin.digest = %plugin.digest(), "plugin replaced");
            }
            return;
        }
        self.remove(&name, grace).await;
        let owner_namespaced =
            self.shards.is_some() && self.namespaced(plugin.manifest().kind()).await;
        let controller = self.start(plugin.clone(), tuning, owner_namespaced);
        lock(&self.controllers).insert(name.clone(), controller);
        tracing::info!(plugin.name = %name, plugin.version = %plugin.manifest().version, plugin.digest = %plugin.digest(), plugin.contract = plugin.contract(), "plugin started");
    }

    /// Whether `kind` is namespaced, as discovery says; false when it cannot tell (a CRD not
    /// installed yet), which keeps a shard replica's caches of its children whole.
    async fn namespaced(&self, kind: &Gvk) -> bool {
        match kube::discovery::pinned_kind(&self.client, &kind.into()).await {
            Ok((_, caps)) => caps.scope == kube::discovery::Scope::Namespaced,
            Err(e) => {
                tracing::info!(kind = %kind.kind, error = %e, "cannot tell whether the kind is namespaced; its children's caches hold every shard");
                false
            }
        }
    }

    /// Stops a plugin's controller: no new keys are taken, in-flight reconciles get `grace` to
    /// finish (then they are cancelled), and its informer subscriptions end.
    pub async fn remove(&self, name: &str, grace: Duration) {
        let Some(controller) = lock(&self.controllers).remove(name) else {
            return;
        };
        controller.stop(&self.informers, grace).await;
        if let Some(shards) = &self.shards {
            // Their `Gone`s will not run: other replicas need not wait for them.
            shards.tombstones().forget_plugin(name);
        }
        self.applier.act_as(name, None);
        tracing::info!(plugin.name = %name, "plugin stopped");
    }

    /// Counts a plugin version loaded (`ok`) or refused (`wasmctrl_plugin_loads_total`).
    pub fn count_load(&self, ok: bool) {
        self.metrics.plugin_load(ok);
    }

    /// Records `note` on the host's own Pod, when it runs in one.
    pub async fn tell_pod(&self, note: &Note<'_>) {
        if let Some(pod) = &self.pod {
            self.applier.host_event(pod, note).await;
        }
    }

    /// Checks that the host's identity may make every request `plugin` implies (the
    /// permission preflight, [`crate::rbac::preflight`]), and says what is missing in the log, the
    /// `wasmctrl_plugin_missing_permissions` metric and an event on the host's Pod. A file
    /// plugin is served regardless (its directory is the operator's own); what it may not do
    /// fails as it is tried.
    pub async fn preflight(&self, plugin: &Plugin) {
        let name = &plugin.manifest().name;
        let resolver = crate::rbac::preflight::resolve(&self.client, plugin.scope()).await;
        let missing = match crate::rbac::preflight::missing(
            &self.client,
            plugin.scope(),
            &resolver,
            None,
        )
        .await
        {
            Ok(missing) => missing,
            Err(e) => {
                tracing::warn!(plugin.name = %name, error = %e, "cannot ask the API server what the host may do for this plugin");
                return;
            }
        };
        self.metrics.missing_permissions(name, missing.len());
        if missing.is_empty() {
            return;
        }
        let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
        let note = format!(
            "plugin {name}: the host may not make {} request(s) it needs (apply what `wasmctrl rbac` prints): {}",
            list.len(),
            list.join("; ")
        );
        tracing::warn!(plugin.name = %name, missing = ?list, "the host lacks permissions this plugin needs; apply what `wasmctrl rbac` prints");
        let note = Note {
            warning: true,
            reason: "MissingPermissions",
            note: &note,
            action: "Load",
        };
        self.tell_pod(&note).await;
    }

    /// Stops every controller (graceful shutdown), then the informers.
    pub async fn shutdown(&self, grace: Duration) {
        let controllers: Vec<Controller> =
            lock(&self.controllers).drain().map(|(_, c)| c).collect();
        futures::future::join_all(
            controllers
                .into_iter()
                .map(|c| c.stop(&self.informers, grace)),
        )
        .await;
        self.informers.shutdown();
    }

    fn start(&self, plugin: Arc<Plugin>, tuning: Tuning, owner_namespaced: bool) -> Controller {
        let manifest = plugin.manifest().clone();
        let scope = Arc::new(plugin.scope().clone());
        let name = manifest.name.clone();
        let observer = Arc::new(self.metrics.queue_observer(&name));
        let queue: Queue<ObjectKey> = Queue::with_observer(queue::Config::default(), observer);
        let gone = Arc::new(Mutex::new(HashMap::new()));
        let cleared = Arc::new(Mutex::new(HashMap::new()));
        let by_uid = (self.shards.as_ref()).is_some_and(|s| s.field() == shard::Field::Uid);
        let mut keys = KeySources {
            manager: self,
            queue: queue.clone(),
            scope: scope.clone(),
            subscriptions: Vec::new(),
            sharded: self.shards.is_some(),
            // Children share their owner's namespace, hence its slot when sharding by it.
            children_sharded: owner_namespaced && !by_uid,
            gone: (self.shards.clone())
                .filter(|_| by_uid)
                .map(|shards| (gone.clone(), shards)),
            account: tuning.account.clone(),
        };
        // Its writes and events as the same account as its caches.
        self.applier.act_as(&name, tuning.account.clone());
        let watched = keys.subscribe_declared(&manifest);
        let subscriptions = keys.subscriptions;

        let shared = Arc::new(RwLock::new(plugin));
        let stop = CancellationToken::new();
        let informers: Vec<Arc<Informer>> = subscriptions.iter().map(|(i, _)| i.clone()).collect();
        let tasks = vec![tokio::spawn(report_unsynced(
            manifest.name.clone(),
            informers.clone(),
        ))];
        let stats = lock(&self.stats).entry(name).or_default().clone();
        let in_flight = Arc::new(Mutex::new(InFlight::new()));
        let caches = Arc::new(Caches::new(&informers));
        let echoes = Arc::new(echoes::Echoes::default());
        let outcomes = Arc::new(outcomes::Outcomes::default());
        let worker = || Worker {
            plugin: shared.clone(),
            informers: informers.clone(),
            caches: caches.clone(),
            stop: stop.clone(),
            queue: queue.clone(),
            watched: watched.clone(),
            applier: self.applier.clone(),
            metrics: self.metrics.clone(),
            stats: stats.clone(),
            in_flight: in_flight.clone(),
            gone: gone.clone(),
            cleared: cleared.clone(),
            leadership: self.leadership.clone(),
            shards: self.shards.clone(),
            echoes: echoes.clone(),
            outcomes: outcomes.clone(),
            call_time: CallTime::default(),
            clock: self.clock.clone(),
        };
        let concurrency = tuning.concurrency.unwrap_or(DEFAULT_CONCURRENCY).max(1);
        let workers = (0..concurrency)
            .map(|_| tokio::spawn(worker().run()))
            .collect();
        Controller {
            plugin: shared,
            tuning,
            caches,
            watched,
            stop,
            stats,
            in_flight,
            outcomes,
            queue,
            subscriptions,
            tasks,
            workers,
        }
    }

    /// The caches of `kind` a plugin reads: one watch per namespace (or one for all), with the
    /// label selector, all sent to the API server so that each holds the least data.
    fn caches(
        &self,
        kind: &Gvk,
        namespaces: Option<Vec<String>>,
        labels: &LabelSelector,
        sharded: bool,
        account: Option<&Account>,
    ) -> Vec<Arc<Informer>> {
        let watch = |namespace| Watch {
            kind: kind.clone(),
            namespace,
            labels: labels.clone(),
            sharded,
            account: account.cloned(),
        };
        match namespaces {
            None => vec![self.informers.get(&watch(None))],
            Some(names) => (names.into_iter())
                .map(|ns| self.informers.get(&watch(Some(ns))))
                .collect(),
        }
    }
}

/// The informer subscriptions that queue one plugin's keys.
struct KeySources<'a> {
    manager: &'a Manager,
    queue: Queue<ObjectKey>,
    scope: Arc<wasmctrl_core::Scope>,
    subscriptions: Vec<(Arc<Informer>, u64)>,
    /// Whether the reconciled kind's cache is sharded (in a shard group).
    sharded: bool,
    /// Whether the owned kinds' caches are sharded with it (by namespace, the reconciled kind
    /// known to be namespaced).
    children_sharded: bool,
    /// Sharding by uid: where the slots of deleted reconciled objects are kept, and the shard
    /// state whose tombstones order their `Gone` before a new object of the name elsewhere.
    gone: Option<(Gone, Shards)>,
    /// Whose rights the caches are filled with (`None`: the host's).
    account: Option<Account>,
}

impl KeySources<'_> {
    /// Subscribes to the caches of every kind the manifest declares: the watched kind's own
    /// events, owned kinds' through their owner, `reads` kinds' through their trigger (or not
    /// at all, only keeping their caches warm). Returns the watched kind's caches.
    fn subscribe_declared(&mut self, manifest: &Manifest) -> Arc<Vec<Arc<Informer>>> {
        let own_namespaces: Option<Vec<String>> =
            (self.scope.namespaces().names()).map(|set| set.iter().cloned().collect());
        let watched = self.subscribe_watched(manifest, &own_namespaces);
        self.subscribe_owned(manifest, &own_namespaces);
        self.subscribe_reads(manifest, &own_namespaces, &watched);
        watched
    }

    /// The watched kind's caches, whose objects' changes queue their own keys (and, sharded
    /// by uid, remember which slot a deleted object was in).
    fn subscribe_watched(
        &mut self,
        manifest: &Manifest,
        own_namespaces: &Option<Vec<String>>,
    ) -> Arc<Vec<Arc<Informer>>> {
        let watched = Arc::new(self.manager.caches(
            manifest.kind(),
            own_namespaces.clone(),
            &manifest.selector,
            self.sharded,
            self.account.as_ref(),
        ));
        for informer in watched.iter() {
            let filter = Filter {
                manifest: manifest.clone(),
                scope: self.scope.clone(),
            };
            let gone = self.gone.clone();
            let plugin = manifest.name.clone();
            self.subscribe(
                informer.clone(),
                Box::new(move |notice, out| {
                    let before = out.len();
                    filter.primary(notice, out);
                    if let Some((gone, shards)) = &gone {
                        remember_gone(gone, shards, &plugin, notice, out.len() > before);
                    }
                }),
            );
        }
        watched
    }

    /// The owned kinds' caches, whose changes queue their owner's key.
    fn subscribe_owned(&mut self, manifest: &Manifest, own_namespaces: &Option<Vec<String>>) {
        for kind in manifest.owns() {
            let caches = self.manager.caches(
                kind,
                own_namespaces.clone(),
                &LabelSelector::default(),
                self.children_sharded,
                self.account.as_ref(),
            );
            for informer in caches {
                let owner_kind = manifest.kind().clone();
                self.subscribe(
                    informer,
                    Box::new(move |n, out| by_owner(&owner_kind, n, out)),
                );
            }
        }
    }

    /// The read kinds' caches (never sharded: they may be read anywhere), in the namespaces
    /// the scope lets the plugin read; their changes queue the keys the declaration's mapping
    /// names, if it has one.
    fn subscribe_reads(
        &mut self,
        manifest: &Manifest,
        own_namespaces: &Option<Vec<String>>,
        watched: &Arc<Vec<Arc<Informer>>>,
    ) {
        for read in &manifest.reads {
            let namespaces = if read.namespaces.is_empty() {
                own_namespaces.clone()
            } else {
                // Only where the scope lets it read: a tenant's plugin is confined to its own
                // namespace whatever its manifest names, and caches nothing beyond it.
                let readable: Vec<String> = (read.namespaces.iter())
                    .filter(|n| {
                        (self.scope)
                            .check_read(wasmctrl_core::Verb::List, &read.kind, n, "")
                            .is_ok()
                    })
                    .cloned()
                    .collect();
                if readable.is_empty() {
                    continue;
                }
                Some(readable)
            };
            let caches = self.manager.caches(
                &read.kind,
                namespaces,
                &read.selector,
                false,
                self.account.as_ref(),
            );
            for informer in caches {
                let Some(mapping) = read.trigger.clone() else {
                    // Subscribed only to keep the cache of a read-only kind warm.
                    self.subscribe(informer, Box::new(|_, _| {}));
                    continue;
                };
                let (owner_kind, watched) = (manifest.kind().clone(), watched.clone());
                self.subscribe(
                    informer,
                    Box::new(move |n, out| by_mapping(&mapping, &owner_kind, &watched, n, out)),
                );
            }
        }
    }

    /// Queues the keys `map` names for each of `informer`'s notices. Keys are only ever queued
    /// in the plugin's namespaces, whatever the event that named them (a child's owner, a
    /// label, an annotation). A deleted object leaves nothing behind in the applier's memory
    /// of what it wrote.
    fn subscribe(&mut self, informer: Arc<Informer>, map: Mapper) {
        let (queue, scope) = (self.queue.clone(), self.scope.clone());
        let applier = self.manager.applier.clone();
        let kind = informer.gvk().clone();
        let id = informer.subscribe(Box::new(move |notice: &Notice| {
            if let Change::Deleted(gone) = &notice.change {
                applier.forget_object(&kind, &gone.key);
            }
            let mut keys = Keys::new();
            map(notice, &mut keys);
            for (key, initial) in keys {
                if !scope.reconciles_in(key.namespace()) {
                    continue;
                }
                if initial {
                    queue.add_low(key)
                } else {
                    queue.add(key)
                }
            }
        }));
        self.subscriptions.push((informer, id));
    }
}

impl Controller {
    async fn stop(self, informers: &Informers, grace: Duration) {
        self.stop.cancel();
        for task in &self.tasks {
            task.abort();
        }
        self.queue.shutdown();
        let aborts: Vec<_> = self.workers.iter().map(|w| w.abort_handle()).collect();
        let mut workers = futures::future::join_all(self.workers);
        if tokio::time::timeout(grace, &mut workers).await.is_err() {
            tracing::warn!(
                ?grace,
                "reconciles still running after the grace period; cancelling them"
            );
            // Dropping a worker's future drops its pending API requests: nothing it had not
            // sent yet is sent after this. Waiting for the cancelled tasks means nothing of
            // this version is still running when its successor starts.
            for abort in aborts {
                abort.abort();
            }
            workers.await;
        }
        // Only now: a reconcile finishing in the grace period still reads a full cache.
        for (informer, id) in &self.subscriptions {
            informers.unsubscribe(informer, *id);
        }
    }
}

/// Keeps the slot of a reconciled object deleted from a uid-sharded cache until its key is
/// reconciled (its last reconcile has no object to read the uid from), with a tombstone that
/// keeps other replicas from reconciling a new object of the name meanwhile (see
/// [`crate::replicas::sharding::tombstones`]) if its key was `queued` (a worker drops the tombstone);
/// forgets both if the object comes back.
fn remember_gone(
    gone: &Mutex<HashMap<ObjectKey, usize>>,
    shards: &Shards,
    plugin: &str,
    notice: &Notice,
    queued: bool,
) {
    let tombstones = shards.tombstones();
    match &notice.change {
        Change::Deleted(entry) => {
            let slot = crate::replicas::sharding::slot_of(entry.uid_hash);
            lock(gone).insert(entry.key.clone(), slot);
            // The deletion's revision (a relist's finding has only the last cached one,
            // earlier: the worker then looks the name up before running the `Gone`).
            let deleted_at = match entry.resource_version {
                Version::Revision(revision) => Some(revision),
                Version::Opaque(_) => None,
            };
            let key = &entry.key;
            if queued {
                tombstones.record(plugin, key.namespace(), key.name(), deleted_at);
            }
        }
        Change::Applied { new, .. } => {
            if lock(gone).remove(&new.key).is_some() {
                tombstones.forget(plugin, new.key.namespace(), new.key.name());
            }
        }
    }
}

/// How long a plugin may wait for its caches before the operator is told why nothing happens.
const SYNC_PATIENCE: Duration = Duration::from_secs(30);

/// Workers take no keys until every cache the plugin reads has synced; a kind that is never
/// served (its CRD not installed) would leave the plugin idle without a word. Say which.
async fn report_unsynced(plugin: String, caches: Vec<Arc<Informer>>) {
    let synced = futures::future::join_all(caches.iter().map(|c| c.synced()));
    if tokio::time::timeout(SYNC_PATIENCE, synced).await.is_ok() {
        return;
    }
    let unsynced: Vec<&Arc<Informer>> = caches.iter().filter(|c| !c.is_synced()).collect();
    let waiting: Vec<String> = unsynced.iter().map(|c| c.watch().to_string()).collect();
    // A built-in kind has no CRD to install: the API server does not serve it, or the host may
    // not list it.
    let kinds = crate::kinds::Kinds::default();
    let builtin = (unsynced.iter()).all(|c| kinds.get(&c.gvk().group, &c.gvk().kind).is_some());
    let hint = if builtin {
        "does the API server serve them, and may the host list them?"
    } else {
        "is their CRD installed, and may the host list them?"
    };
    tracing::warn!(plugin.name = %plugin, kinds = ?waiting, patience = ?SYNC_PATIENCE,
        "plugin is waiting for these kinds to be listed ({hint}); it reconciles nothing until they are");
}

/// Whether two manifests watch, own and read the same things (so a new version can take over
/// the old one's queue and informers).
fn same_declaration(a: &Manifest, b: &Manifest) -> bool {
    a.kind() == b.kind()
        && a.namespaces() == b.namespaces()
        && a.selector == b.selector
        && a.predicates == b.predicates
        && a.owns() == b.owns()
        && a.reads == b.reads
}
impl crate::replicas::membership::SlotHost for Manager {
    fn keys_per_slot(&self) -> [usize; crate::replicas::sharding::SLOTS] {
        Manager::keys_per_slot(self)
    }

    fn busy(&self, slots: &SlotSet) -> bool {
        Manager::busy(self, slots)
    }

    fn sharded_at(&self, version: u64) -> bool {
        self.informers().sharded_at(version)
    }

    fn requeue_slots(
        &self,
        slots: &SlotSet,
        changed_after: &dyn Fn(usize) -> Option<u64>,
    ) -> (usize, usize) {
        Manager::requeue_slots(self, slots, changed_after)
    }
}
