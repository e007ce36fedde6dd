//! `run --plugin-resources`: plugins served from `WasmPlugin` and `ClusterWasmPlugin` resources
//! ([`crate::plugins::resources`]), pulled from OCI registries ([`crate::plugins::oci`]) by digest.
//!
//! Two watches (one per kind) feed one task per resource (a slot, [`slot`]), which brings
//! what serves in line with the resource: resolve the tag, pull (or take the cache's copy),
//! load, check approvals and the host's permissions (the [`crate::rbac::preflight`]), then hand the
//! version to the controller [`Manager`] exactly as the plugin directory hands it a file's
//! (`loader::Change`), with the same swap guarantees. Every step's outcome is written to the
//! resource's status ([`status`]); a step that fails leaves the version already serving in
//! place and is retried with a backoff.
//!
//! A slot acts on a change of the resource's spec (or generation), never on its status, which
//! it writes itself: its own writes would otherwise wake it forever.

mod cache;
mod policy;
mod slot;
mod status;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::runtime::watcher;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::plugins::oci::Registry;
use crate::plugins::resources::{ClusterWasmPlugin, PluginResource, WasmPlugin};
use crate::reconcile::controller::Manager;
use crate::replicas::leader::Leadership;
use crate::runtime::Runtime;

pub use cache::Cache;
pub use policy::{MAX_CONCURRENCY, MAX_DEADLINE, MAX_MEMORY_MIB, Policy};

/// How plugin resources are served.
pub struct Options {
    /// The registry client (insecure registries, extra authorities, docker config); each
    /// resource's `imagePullSecrets` are added to a client of its own.
    pub registry: Registry,
    /// Where pulled artifacts are kept by digest (`--cache-dir`).
    pub cache_dir: Option<PathBuf>,
    /// The host's namespace, where a `ClusterWasmPlugin`'s `imagePullSecrets` live.
    pub host_namespace: String,
    /// Workers per plugin unless its resource says otherwise.
    pub concurrency: usize,
    /// How long a replaced or removed version's in-flight reconciles get.
    pub grace: Duration,
    /// Status is written only while this replica leads.
    pub leadership: Leadership,
    /// What resources may ask for.
    pub policy: Policy,
}

/// A watch event, as the slots need it.
enum Event {
    /// A resource was seen (created, changed, or listed).
    Seen(Box<PluginResource>),
    /// A resource is gone.
    Gone(String),
    /// A relist of one kind begins: what it does not list again is gone.
    Relisting(&'static str),
    /// The relist of one kind is complete.
    Relisted(&'static str),
}

/// Serves plugin resources until shut down.
pub struct ClusterPlugins {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl ClusterPlugins {
    /// Starts watching both kinds with `client` and serving what they name through `host`.
    pub fn start(
        client: kube::Client,
        host: Arc<Manager>,
        runtime: Runtime,
        options: Options,
    ) -> Self {
        let stop = CancellationToken::new();
        let (tx, rx) = mpsc::channel(256);
        let namespaced = kube::Api::<WasmPlugin>::all(client.clone());
        let cluster = kube::Api::<ClusterWasmPlugin>::all(client.clone());
        let watches = vec![
            tokio::spawn(follow(
                namespaced,
                "WasmPlugin",
                PluginResource::Namespaced,
                tx.clone(),
            )),
            tokio::spawn(follow(
                cluster,
                "ClusterWasmPlugin",
                PluginResource::Cluster,
                tx,
            )),
        ];
        let shared = Arc::new(slot::Shared {
            client,
            host,
            runtime,
            cache: Cache::new(options.cache_dir.as_deref()),
            options,
        });
        let task = tokio::spawn(dispatch(rx, shared, watches, stop.clone()));
        Self { stop, task }
    }

    /// Stops watching; the plugins served stay with the [`Manager`], whose own shutdown stops
    /// them.
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Which kind a slot key is of (`WasmPlugin/ns/name`, `ClusterWasmPlugin/name`).
fn key(resource: &PluginResource) -> String {
    resource.describe().replacen(' ', "/", 1)
}

/// Follows one kind's watch (relisting as kube-runtime's watcher does after a lost watch),
/// turning its events into [`Event`]s.
async fn follow<K>(
    api: kube::Api<K>,
    kind: &'static str,
    wrap: fn(K) -> PluginResource,
    tx: mpsc::Sender<Event>,
) where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    use kube::runtime::WatchStreamExt as _;
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                Event::Seen(Box::new(wrap(o)))
            }
            Ok(watcher::Event::Delete(o)) => Event::Gone(key(&wrap(o))),
            Ok(watcher::Event::Init) => Event::Relisting(kind),
            Ok(watcher::Event::InitDone) => Event::Relisted(kind),
            Err(e) => {
                // Not installed yet, or no rights: the watcher backs off and tries again.
                tracing::warn!(kind, error = %e, "cannot watch plugin resources (is `wasmctrl crds` applied, and may the host list them?)");
                continue;
            }
        };
        if tx.send(event).await.is_err() {
            return;
        }
    }
}

/// Routes each resource's changes to its slot: a slot is started when a resource is first
/// seen and told to stop when it is gone.
async fn dispatch(
    mut events: mpsc::Receiver<Event>,
    shared: Arc<slot::Shared>,
    watches: Vec<JoinHandle<()>>,
    stop: CancellationToken,
) {
    let mut slots: BTreeMap<String, (watch::Sender<PluginResource>, JoinHandle<()>)> =
        BTreeMap::new();
    // Keys seen since each kind's relist began.
    let mut relisted: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => break,
            event = events.recv() => match event {
                Some(event) => event,
                None => break,
            },
        };
        match event {
            Event::Seen(resource) => {
                let resource = *resource;
                let key = key(&resource);
                let kind = if resource.tenant().is_some() {
                    "WasmPlugin"
                } else {
                    "ClusterWasmPlugin"
                };
                if let Some(seen) = relisted.get_mut(kind) {
                    seen.push(key.clone());
                }
                match slots.get(&key) {
                    Some((tx, _)) => {
                        tx.send_if_modified(|current| {
                            let changed = slot::spec_changed(current, &resource);
                            *current = resource;
                            changed
                        });
                    }
                    None => {
                        let (tx, rx) = watch::channel(resource);
                        let task = tokio::spawn(slot::run(shared.clone(), rx, stop.clone()));
                        slots.insert(key, (tx, task));
                    }
                }
            }
            Event::Gone(key) => {
                // Dropping the sender tells the slot to stop serving.
                slots.remove(&key);
            }
            Event::Relisting(kind) => {
                relisted.insert(kind, Vec::new());
            }
            Event::Relisted(kind) => {
                let seen = relisted.remove(kind).unwrap_or_default();
                let prefix = format!("{kind}/");
                slots.retain(|key, _| !key.starts_with(&prefix) || seen.contains(key));
            }
        }
    }
    for watch in watches {
        watch.abort();
    }
    // Slots see `stop` and return; the Manager's shutdown stops their plugins.
    for (_, (_, task)) in slots {
        let _ = task.await;
    }
}
