//! The wasmctrl plugin sandbox: the plugin contract as the host reads it ([`plugin`]), one
//! wasmtime [`Engine`] for the process, each plugin compiled once per content hash and
//! pre-linked, and a **fresh store and instance for every call**, with a deadline (epoch ticks
//! checked against the wall clock), a memory cap and a cap on the result size. The imports it
//! serves read objects through a [`view`] and run SQL through [`sql`], whose statements wait
//! for the replica's [`fence`]. Nothing here knows about informers, queues or the API server.
//!
//! A trap, timeout or runaway allocation ends that one call with a typed [`Error`]; the engine,
//! the plugin and every other call carry on.

mod artifacts;
mod blocking;
mod error;
pub mod fence;
mod imports;
mod permits;
pub mod plugin;
mod webhooks;
pub use wasmctrl_core::selector;
pub mod sql;
pub mod view;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{
    Component, ComponentExportIndex, Instance, InstancePre, Linker, TypedFunc,
};
use wasmtime::{
    Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, UpdateDeadline,
};

pub use artifacts::{ArtifactStats, digest};
pub use error::{Error, ErrorKind, LoadError, SetupError};
use wasmctrl_core::Scope;

use crate::plugin::bindings::{current, hooks, previous};
use crate::plugin::{Intent, Manifest, best_effort, check_actions, wit};
use crate::sql::Databases;
use crate::view::{EmptyView, View};
use imports::{Limits, State, Throttle};
use permits::Permits;

/// How often the engine's epoch advances: the granularity of deadline checks.
const TICK: Duration = Duration::from_millis(10);

/// Set (to anything) to have the engine write a `perf` map of the plugins' compiled code.
pub const PERF_MAP_ENV: &str = "WASMCTRL_PERF_MAP";

/// Linear memory per pooled slot kept resident (and reset in place) between calls.
///
/// A slot keeps every page any call in it wrote, up to this much, and resets all of them after
/// each later call: one call that grew to a few MiB makes every later call in that slot pay
/// for resetting this much. `cargo bench --bench dispatch`, empty call on the slot after an
/// 11 MiB call: 99 µs at 4 MiB, 33 µs at 1 MiB, 12.6 µs at 256 KiB, against 8.6-9.2 µs on a
/// slot that never grew. Pages written past it are given back and faulted in again by the next
/// call that writes them, several times dearer per page than resetting one, so it stays large
/// enough for a reconcile's working set (a trivial plugin's fixed cost is the same from 64 KiB
/// to 4 MiB).
pub const KEEP_RESIDENT: usize = 1 << 20;

/// Linear memory per pooled slot kept resident for plugins whose memory starts from a language
/// runtime's snapshot ([`SNAPSHOT_IMAGE`]): CPython's reference counts and SpiderMonkey's GC
/// write a few MiB of scattered pages in every call, and a page given back is faulted in again
/// by the next instance. `cargo bench --bench convergence` (`languages`, kept 1/2/4/8 MiB): the
/// Python seed writes about 2.2 MiB a call (324 / 49 / 0 / 0 faults, p50 2.29 / 1.42 / 1.18 /
/// 1.17 ms), the TypeScript one under 1 MiB. Resetting costs what the slot's calls wrote, not
/// this budget, so it leaves room for larger plugins.
pub const KEEP_RESIDENT_SNAPSHOT: usize = 8 << 20;

/// A plugin whose core modules initialise at least this much memory starts from a language
/// runtime's snapshot (componentize-py's CPython, 12.7 MiB; componentize-js's SpiderMonkey,
/// 9.1 MiB) and runs in the pool that keeps [`KEEP_RESIDENT_SNAPSHOT`]; a Rust plugin's static
/// data is tens of KiB.
pub const SNAPSHOT_IMAGE: usize = 2 << 20;

/// Core instances one plugin's component may create: a componentize-py (CPython) plugin has
/// 14, a Rust one 2 to 4.
const MAX_CORE_INSTANCES: u32 = 32;

/// Limits and resources of the runtime; the defaults suit a controller host.
#[derive(Debug, Clone)]
pub struct Config {
    /// Wall-clock budget of one call (`manifest` or `reconcile`).
    pub deadline: Duration,
    /// Largest linear memory one instance may grow to.
    pub memory_limit: usize,
    /// Linear memory per pooled slot kept resident and reset in place between calls (see
    /// [`KEEP_RESIDENT`], the default); pages written past it are given back after each call.
    pub keep_resident: usize,
    /// The same for plugins that start from a language runtime's snapshot (see
    /// [`KEEP_RESIDENT_SNAPSHOT`], the default, and [`SNAPSHOT_IMAGE`]).
    pub keep_resident_snapshot: usize,
    /// Largest result (sum of the actions' JSON) accepted from one reconcile.
    pub max_result_bytes: usize,
    /// Instances alive at once across all plugins; further calls wait for a slot.
    pub max_instances: u32,
    /// Directory for compiled artifacts; `None` compiles on every start.
    pub cache_dir: Option<PathBuf>,
    /// Databases plugins may reach through the `sql` import (each also needs `sql:<name>` in its
    /// manifest).
    pub databases: Databases,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(2),
            memory_limit: 64 << 20,
            keep_resident: KEEP_RESIDENT,
            keep_resident_snapshot: KEEP_RESIDENT_SNAPSHOT,
            max_result_bytes: 4 << 20,
            max_instances: 64,
            cache_dir: None,
            databases: Databases::default(),
        }
    }
}

/// What the operator sets for one plugin (its config file): settings, narrower namespaces, a
/// deadline of its own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// Settings (JSON) handed to `manifest()` and every reconcile; empty for none.
    pub settings: String,
    /// Only these of the manifest's namespaces.
    pub namespaces: Option<Vec<String>>,
    /// This plugin's per-call deadline instead of [`Config::deadline`].
    pub deadline: Option<Duration>,
    /// Serve it under this name instead of its manifest's (one plugin loaded twice, each with
    /// its own settings, queue, field manager and RBAC).
    pub name: Option<String>,
    /// A tenant's plugin: it reconciles, reads and writes in this namespace only, whatever its
    /// manifest declares (see [`wasmctrl_core::Scope::confine`]).
    pub confine: Option<String>,
    /// This plugin's memory cap instead of [`Config::memory_limit`]; it can only lower it.
    pub memory_limit: Option<usize>,
}

/// The engine, linker and limits shared by every plugin. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    /// Where plugins with small memory images run.
    native: Pool,
    /// Where plugins that start from a language runtime's snapshot run: a pool that keeps more
    /// of each slot resident ([`Config::keep_resident_snapshot`]) and catches out-of-bounds
    /// accesses with guard pages ([`Bounds`]). `None` without pooling, where nothing is kept
    /// and one engine serves all.
    snapshot: Option<Pool>,
    config: Config,
    permits: Arc<Permits>,
    pooling: bool,
}

impl Runtime {
    /// Builds the engine: epoch interruption, and the pooling allocator when the machine lets us
    /// reserve its address space (falling back to on-demand allocation when it does not).
    pub fn new(config: Config) -> Result<Self, SetupError> {
        let native_slots = Slots {
            keep_resident: config.keep_resident,
            bounds: Bounds::Checked,
        };
        let (native, pooling) = match Pool::new(&config, Some(native_slots)) {
            Ok(pool) => (pool, true),
            Err(e) => {
                tracing::warn!(error = %e.0, "instance pool unavailable; allocating on demand");
                (Pool::new(&config, None)?, false)
            }
        };
        let snapshot = if pooling {
            let slots = Slots {
                keep_resident: config.keep_resident_snapshot,
                bounds: Bounds::Guarded,
            };
            match Pool::new(&config, Some(slots)) {
                Ok(pool) => Some(pool),
                Err(e) => {
                    tracing::warn!(error = %e.0, "no second instance pool for plugins that start from a language runtime's snapshot; they share the first");
                    None
                }
            }
        } else {
            None
        };
        let permits = Arc::new(Permits::new(config.max_instances as usize));
        Ok(Self {
            inner: Arc::new(Inner {
                native,
                snapshot,
                config,
                permits,
                pooling,
            }),
        })
    }

    /// Whether instances come from the pre-reserved pool.
    pub fn pooling(&self) -> bool {
        self.inner.pooling
    }

    /// The engine plugins with small memory images run in (Rust ones; see [`SNAPSHOT_IMAGE`]):
    /// measurements compare the host's path with wasmtime's own on the same configuration
    /// (`benches/dispatch.rs`).
    pub fn engine(&self) -> &Engine {
        &self.inner.native.engine
    }

    /// The pool a plugin of these bytes runs in: by the size of the memory image it starts
    /// from.
    fn pool_for(&self, bytes: &[u8]) -> &Pool {
        match &self.inner.snapshot {
            Some(pool) if memory_image_bytes(bytes) >= SNAPSHOT_IMAGE => pool,
            _ => &self.inner.native,
        }
    }

    /// The limits in force.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// How plugins were compiled (or not) since the runtime started.
    pub fn artifact_stats(&self) -> ArtifactStats {
        self.pools().map(|pool| pool.artifacts.stats()).fold(
            ArtifactStats::default(),
            |all, one| ArtifactStats {
                compiled: all.compiled + one.compiled,
                from_disk: all.from_disk + one.from_disk,
            },
        )
    }

    fn pools(&self) -> impl Iterator<Item = &Pool> {
        std::iter::once(&self.inner.native).chain(&self.inner.snapshot)
    }

    /// Instances alive now (calls running).
    pub fn instances(&self) -> usize {
        self.inner.permits.in_use()
    }

    /// The most instances that were ever alive at once (never above
    /// [`Config::max_instances`]).
    pub fn peak_instances(&self) -> usize {
        self.inner.permits.peak()
    }

    /// Compiles (or fetches from cache), links and validates a plugin, then asks it for its
    /// manifest under `settings` (JSON). `source` names it in errors (usually the file path).
    pub fn load(&self, source: &str, bytes: &[u8], settings: &str) -> Result<Plugin, LoadError> {
        let overrides = Overrides {
            settings: settings.to_string(),
            ..Overrides::default()
        };
        self.load_with(source, bytes, &overrides)
    }

    /// [`load`](Self::load) with the operator's overrides for this plugin.
    pub fn load_with(
        &self,
        source: &str,
        bytes: &[u8],
        overrides: &Overrides,
    ) -> Result<Plugin, LoadError> {
        let source_name = source.to_string();
        let digest = digest(bytes);
        let pool = self.pool_for(bytes);
        let component = pool
            .artifacts
            .get(&pool.engine, &digest, bytes)
            .map_err(|e| LoadError::Compile {
                source_name: source_name.clone(),
                reason: format!("{e:#}"),
            })?;
        let pre = pre_link(&pool.linker, &component).map_err(|e| LoadError::Contract {
            source_name: source_name.clone(),
            reason: format!("{e:#}"),
        })?;
        let waits_in_wasi = imports_waiting_wasi(&component, &pool.engine);
        let mut plugin = Plugin {
            runtime: self.clone(),
            pre,
            waits_in_wasi,
            manifest: Arc::new(Manifest::placeholder()),
            scope: None,
            name: Arc::from(source),
            digest,
            settings: overrides.settings.clone(),
            deadline: overrides.deadline.unwrap_or(self.inner.config.deadline),
            memory_limit: (overrides.memory_limit).map_or(self.inner.config.memory_limit, |m| {
                m.min(self.inner.config.memory_limit)
            }),
            log_throttle: Arc::default(),
            memory_peak: Default::default(),
            webhooks: None,
            keep_resident: pool.keep_resident,
            _share: None,
        };
        let wit_manifest = plugin
            .call_manifest()
            .map_err(|reason| LoadError::Manifest {
                source_name: source_name.clone(),
                reason,
            })?;
        let manifest = Manifest::from_wit(&wit_manifest)
            .and_then(|m| match &overrides.name {
                Some(name) => m.renamed(name),
                None => Ok(m),
            })
            .map_err(|reason| LoadError::InvalidManifest {
                source_name: source_name.clone(),
                reason,
            })?;
        let mut scope = manifest
            .scope(overrides.namespaces.as_deref())
            .map_err(|e| LoadError::InvalidManifest {
                source_name: source_name.clone(),
                reason: e.into(),
            })?;
        if let Some(namespace) = &overrides.confine {
            scope = scope.confine(namespace);
        }
        plugin.webhooks = plugin
            .call_declare()
            .map_err(|reason| LoadError::Manifest {
                source_name: source_name.clone(),
                reason,
            })?;
        plugin.name = Arc::from(manifest.name.as_str());
        plugin._share = Some(self.inner.permits.load(&plugin.name));
        plugin.scope = Some(Arc::new(scope));
        plugin.manifest = Arc::new(manifest);
        Ok(plugin)
    }

    /// The `sql:<database>` capabilities `plugin` declares that this runtime was not granted.
    /// Not fatal: the plugin may do useful work without them, and the operator may be about
    /// to grant them; every call that uses one fails, naming the missing grant. Whoever serves
    /// the plugin says so.
    pub fn ungranted_databases(&self, plugin: &Plugin) -> Vec<String> {
        plugin
            .manifest()
            .capabilities()
            .iter()
            .filter_map(|c| c.strip_prefix("sql:"))
            .filter(|db| !self.inner.config.databases.contains(db))
            .map(str::to_string)
            .collect()
    }

    /// Drops compiled code that no loaded plugin uses any more.
    pub fn retain_artifacts(&self, digests: &[&str]) {
        for pool in self.pools() {
            pool.artifacts.retain(digests);
        }
    }
}

/// Links a component against the contract it implements: the current one, else the
/// previous one.
fn pre_link(linker: &Linker<State>, component: &Component) -> wasmtime::Result<Pre> {
    let pre = linker.instantiate_pre(component)?;
    match Pre::current(pre.clone()) {
        Ok(pre) => Ok(pre),
        Err(current) => match previous::PluginPre::new(pre) {
            Ok(pre) => Ok(Pre::Previous(pre)),
            Err(_) => Err(current.context(format!(
                "it implements neither contract this host serves \
                 (exports wasmctrl:plugin/reconciler@{CONTRACT} or \
                 wasmctrl:plugin/reconciler@{PREVIOUS_CONTRACT})"
            ))),
        },
    }
}

/// The plugin contract (`wit/plugin.wit`) this host implements, and the one before it, which
/// it still serves.
pub const CONTRACT: &str = "0.3.1";
/// See [`CONTRACT`].
pub const PREVIOUS_CONTRACT: &str = "0.2.0";

/// A component pre-linked against the contract it implements.
enum Pre {
    /// The current contract, its two functions found (and type-checked) once, at load: the
    /// generated `PluginPre::instantiate` looks up and type-checks every export again on each
    /// instantiation, about a tenth of a trivial reconcile's fixed cost.
    Current {
        pre: InstancePre<State>,
        manifest: ComponentExportIndex,
        reconcile: ComponentExportIndex,
        /// The `webhooks` export, type-checked, when the plugin has one.
        webhooks: Option<hooks::GuestIndices>,
        /// The contract version the component was built against (`0.3.0`, `0.3.1`).
        version: String,
    },
    Previous(previous::PluginPre<State>),
}

/// One instance's exports, whichever contract it implements, in the current contract's types.
enum Exports {
    Current {
        instance: Instance,
        manifest: ComponentExportIndex,
        reconcile: ComponentExportIndex,
    },
    Previous(previous::Plugin),
}

impl Pre {
    /// Links `pre` against the current contract: fails unless the component exports its
    /// interface with functions of the contract's types.
    fn current(pre: InstancePre<State>) -> wasmtime::Result<Self> {
        // Type-checks every export of the contract (kept as the proof `Exports` relies on).
        current::exports::wasmctrl::plugin::reconciler::GuestIndices::new(&pre)?;
        let webhooks = hooks::GuestIndices::new(&pre).ok();
        let component = pre.component();
        let interface = format!("wasmctrl:plugin/reconciler@{CONTRACT}");
        let iface = component
            .get_export_index(None, &interface)
            .ok_or_else(|| wasmtime::format_err!("no export `{interface}`"))?;
        let find = |name: &str| {
            component
                .get_export_index(Some(&iface), name)
                .ok_or_else(|| wasmtime::format_err!("no export `{name}` in `{interface}`"))
        };
        let engine = pre.component().engine().clone();
        let version = (component.component_type().exports(&engine))
            .find_map(|(name, _)| {
                name.strip_prefix("wasmctrl:plugin/reconciler@")
                    .map(str::to_string)
            })
            .unwrap_or_else(|| CONTRACT.to_string());
        Ok(Pre::Current {
            manifest: find("manifest")?,
            reconcile: find("reconcile")?,
            webhooks,
            version,
            pre,
        })
    }

    fn instantiate(&self, store: &mut Store<State>) -> wasmtime::Result<Exports> {
        Ok(match self {
            Pre::Current {
                pre,
                manifest,
                reconcile,
                ..
            } => Exports::Current {
                instance: pre.instantiate(store)?,
                manifest: *manifest,
                reconcile: *reconcile,
            },
            Pre::Previous(pre) => Exports::Previous(pre.instantiate(store)?),
        })
    }

    /// The engine it was compiled for, whose instance pool its instances come from.
    fn engine(&self) -> &Engine {
        match self {
            Pre::Current { pre, .. } => pre.engine(),
            Pre::Previous(pre) => pre.instance_pre().engine(),
        }
    }

    fn contract(&self) -> &str {
        match self {
            Pre::Current { version, .. } => version,
            Pre::Previous(_) => PREVIOUS_CONTRACT,
        }
    }
}

/// The current contract's `reconcile`, as the host calls it.
type ReconcileFunc<'a> = TypedFunc<(&'a wit::Request,), (Result<wit::Outcome, wit::Error>,)>;

impl Exports {
    fn manifest(
        &self,
        store: &mut Store<State>,
        settings: &str,
    ) -> wasmtime::Result<Result<wit::Manifest, String>> {
        match self {
            // Called once per load: the checked lookup is fine here.
            Exports::Current {
                instance, manifest, ..
            } => {
                let f = instance.get_typed_func::<(&str,), (Result<wit::Manifest, String>,)>(
                    &mut *store,
                    *manifest,
                )?;
                Ok(f.call(store, (settings,))?.0)
            }
            Exports::Previous(plugin) => match plugin
                .wasmctrl_plugin_reconciler()
                .call_manifest(store, settings)?
            {
                Ok(manifest) => Ok(Ok(previous::convert(&manifest)?)),
                Err(message) => Ok(Err(message)),
            },
        }
    }

    fn reconcile(
        &self,
        store: &mut Store<State>,
        request: &wit::Request,
    ) -> wasmtime::Result<Result<wit::Outcome, wit::Error>> {
        match self {
            Exports::Current {
                instance,
                reconcile,
                ..
            } => {
                let func = instance
                    .get_func(&mut *store, *reconcile)
                    .ok_or_else(|| wasmtime::format_err!("no `reconcile` export"))?;
                // SAFETY: `Pre::current` type-checked this export of this component against
                // the contract's `reconcile` signature (the generated `PluginPre::new`), and a
                // compiled component's types never change; the generated bindings make the same
                // assumption when they call it.
                #[allow(unsafe_code)]
                let typed: ReconcileFunc<'_> = unsafe { TypedFunc::new_unchecked(func) };
                Ok(typed.call(store, (request,))?.0)
            }
            Exports::Previous(plugin) => {
                let request = previous::request(request);
                match plugin
                    .wasmctrl_plugin_reconciler()
                    .call_reconcile(store, &request)?
                {
                    Ok(outcome) => Ok(Ok(previous::outcome(outcome)?)),
                    Err(error) => Ok(Err(previous::convert(&error)?)),
                }
            }
        }
    }
}

/// What one successful reconcile asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconciled {
    /// Checked actions, in the plugin's order.
    pub intents: Vec<Intent>,
    /// The positions in `intents` of those whose failure does not stop the rest, sorted.
    pub best_effort: Vec<usize>,
    /// When to reconcile again regardless of changes.
    pub requeue_after: Option<Duration>,
}

/// A loaded plugin version: pre-linked, its manifest validated. Cheap to share behind an `Arc`;
/// every call gets its own instance.
pub struct Plugin {
    runtime: Runtime,
    pre: Pre,
    /// Whether it imports WASI interfaces whose calls may wait ([`WAITING_WASI`]).
    waits_in_wasi: bool,
    manifest: Arc<Manifest>,
    /// What it may touch; `None` only while `manifest()` runs during [`Runtime::load_with`].
    scope: Option<Arc<Scope>>,
    name: Arc<str>,
    digest: String,
    settings: String,
    deadline: Duration,
    log_throttle: Arc<Throttle>,
    /// The largest linear memory any of its instances grew to.
    memory_peak: std::sync::atomic::AtomicUsize,
    /// The most linear memory one instance may grow to.
    memory_limit: usize,
    /// What it serves as webhooks, as its `declare` said at load (none without the export).
    webhooks: Option<hooks::Declaration>,
    /// Bytes of each instance's memory its pool keeps resident between instances.
    keep_resident: usize,
    /// Its part in the sharing of instances among the plugins loaded (from when it is
    /// loaded).
    _share: Option<permits::Loaded>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("digest", &self.digest)
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

impl Plugin {
    /// The validated manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// How much of an instance's memory the pool it runs in keeps resident between instances
    /// ([`KEEP_RESIDENT`], or [`KEEP_RESIDENT_SNAPSHOT`] for a plugin that starts from a
    /// language runtime's snapshot; 0 without pooling).
    pub fn keep_resident(&self) -> usize {
        self.keep_resident
    }

    /// The plugin contract it was built against: [`CONTRACT`] (or an earlier patch version of
    /// it) or [`PREVIOUS_CONTRACT`].
    pub fn contract(&self) -> &str {
        self.pre.contract()
    }

    /// The sha256 of the component's bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The operator settings (JSON) this version was loaded with.
    pub fn settings(&self) -> &str {
        &self.settings
    }

    /// What this version may touch: its manifest narrowed by the operator's config.
    pub fn scope(&self) -> &Scope {
        // Set by `load_with` before the plugin is handed out.
        self.scope
            .as_deref()
            .unwrap_or_else(|| unreachable!("a loaded plugin has a scope"))
    }

    /// The largest linear memory (bytes) any instance of this version has grown to.
    pub fn memory_peak(&self) -> usize {
        self.memory_peak.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether its calls may wait in WASI ([`WAITING_WASI`]), so that each call moves off an
    /// async runtime's worker thread first: a caller deciding where to run a call need not
    /// count it among the calls run in place.
    pub fn waits_in_wasi(&self) -> bool {
        self.waits_in_wasi
    }

    /// The per-call deadline this version runs under.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Runs one reconcile in a fresh sandbox and checks its actions against the manifest.
    ///
    /// `request.settings` is filled in from the plugin's settings. Blocking: call it from a
    /// blocking thread in async code.
    pub fn reconcile(
        &self,
        mut request: wit::Request,
        view: Arc<dyn View>,
    ) -> Result<Reconciled, Error> {
        request.settings.clone_from(&self.settings);
        let key = key(&request.namespace, &request.name);
        let fail = |kind| self.error(&key, kind);
        let mut refused = None;
        let result = self.call(&key, self.scope.clone(), view, |exports, store| {
            let result = exports.reconcile(store, &request);
            refused = store.data_mut().refused.take();
            result
        });
        let result = result.map_err(&fail)?;
        // A refused read fails the reconcile even when the plugin carried on without it: the
        // plugin asked for something it did not declare.
        if let Some(refusal) = refused {
            return Err(fail(ErrorKind::Read(refusal)));
        }
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(e) => {
                return Err(fail(ErrorKind::Plugin {
                    message: e.message,
                    retryable: e.retryable,
                }));
            }
        };
        let size: usize = outcome.actions.iter().map(action_size).sum();
        let limit = self.runtime.inner.config.max_result_bytes;
        if size > limit {
            return Err(fail(ErrorKind::ResultTooLarge { size, limit }));
        }
        let intents = check_actions(self.scope(), &request, &outcome.actions)
            .map_err(|e| fail(ErrorKind::Action(e)))?;
        let best_effort = best_effort(&outcome.best_effort, intents.len())
            .map_err(|e| fail(ErrorKind::Action(e)))?;
        Ok(Reconciled {
            intents,
            best_effort,
            requeue_after: outcome.requeue_after_ms.map(Duration::from_millis),
        })
    }

    /// A failure of this plugin's call for `key`.
    fn error(&self, key: &str, kind: ErrorKind) -> Error {
        Error {
            plugin: self.manifest.name.clone(),
            key: key.to_string(),
            kind,
        }
    }

    fn call_manifest(&self) -> Result<wit::Manifest, String> {
        let settings = self.settings.clone();
        let view: Arc<dyn View> = Arc::new(EmptyView);
        match self.call("manifest", None, view, |e, s| e.manifest(s, &settings)) {
            Ok(Ok(m)) => Ok(m),
            Ok(Err(message)) => Err(format!("rejected the settings: {message}")),
            Err(kind) => Err(kind.to_string()),
        }
    }

    /// One call in a fresh store: instantiate from the pre-linked component, run `f` under the
    /// deadline and memory cap, and classify any failure.
    ///
    /// wasmtime-wasi serves a WASI call that may wait (a write to stdout, dropping a stream, a
    /// poll, creating a socket) by blocking on the async runtime, which tokio refuses with a
    /// panic on a thread that is driving tasks, as the host's workers do when they run a short
    /// call in place. A plugin that imports such interfaces has its calls moved off the
    /// runtime's worker first ([`blocking::wait`]; nothing to do on any other thread).
    fn call<R>(
        &self,
        key: &str,
        scope: Option<Arc<Scope>>,
        view: Arc<dyn View>,
        f: impl FnOnce(&Exports, &mut Store<State>) -> wasmtime::Result<R>,
    ) -> Result<R, ErrorKind> {
        if self.waits_in_wasi {
            blocking::wait(|| self.call_here(key, scope, view, f))
        } else {
            self.call_here(key, scope, view, f)
        }
    }

    /// [`call`](Self::call) on this thread.
    fn call_here<R>(
        &self,
        key: &str,
        scope: Option<Arc<Scope>>,
        view: Arc<dyn View>,
        f: impl FnOnce(&Exports, &mut Store<State>) -> wasmtime::Result<R>,
    ) -> Result<R, ErrorKind> {
        let inner = &self.runtime.inner;
        let _permit = inner.permits.acquire(&self.name);
        let state = State {
            plugin: self.name.clone(),
            key: key.to_string(),
            scope,
            refused: None,
            view,
            databases: inner.config.databases.clone(),
            limits: Limits {
                memory: self.memory_limit,
                exceeded: false,
                peak: 0,
            },
            started: Instant::now(),
            deadline: self.deadline,
            log_budget: imports::LOG_LINES_PER_CALL,
            log_throttle: self.log_throttle.clone(),
            panic: None,
            wasi: None,
        };
        let mut store = Store::new(self.pre.engine(), state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| {
            let s = ctx.data();
            if s.started.elapsed() >= s.deadline {
                Err(wasmtime::Error::new(DeadlineExceeded))
            } else {
                Ok(UpdateDeadline::Continue(1))
            }
        });
        let exports = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| classify(&store, e, true))?;
        let mut result = f(&exports, &mut store).map_err(|e| classify(&store, e, false));
        // A Rust guest aborts when its memory cannot grow; CPython and SpiderMonkey raise an
        // out-of-memory error the plugin's code may catch and answer past. A call that hit the
        // cap is a memory error whatever it then returned, so every language is stopped alike.
        let limits = &store.data().limits;
        if limits.exceeded && result.is_ok() {
            result = Err(ErrorKind::Memory {
                limit: limits.memory,
            });
        }
        self.memory_peak.fetch_max(
            store.data().limits.peak,
            std::sync::atomic::Ordering::Relaxed,
        );
        result
    }
}

/// The WASI interfaces with functions that may wait, which wasmtime-wasi serves by blocking on
/// the async runtime: streams and polls (stdout and stderr are streams), sockets, files. Clocks,
/// random and the environment answer at once.
const WAITING_WASI: [&str; 3] = ["wasi:io/", "wasi:sockets/", "wasi:filesystem/"];

/// Whether `component` imports any of [`WAITING_WASI`] (a Rust plugin built for
/// `wasm32-unknown-unknown` imports none; CPython's and SpiderMonkey's components do).
fn imports_waiting_wasi(component: &Component, engine: &Engine) -> bool {
    component
        .component_type()
        .imports(engine)
        .any(|(name, _)| WAITING_WASI.iter().any(|prefix| name.starts_with(prefix)))
}

/// An object's key: `namespace/name`, or `name` for a cluster-scoped one.
fn key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// Raised by the epoch callback when a call has used up its wall-clock budget, and by a host
/// call that waited until then.
#[derive(Debug, thiserror::Error)]
#[error("deadline exceeded")]
pub(crate) struct DeadlineExceeded;

fn classify(store: &Store<State>, e: wasmtime::Error, instantiating: bool) -> ErrorKind {
    let state = store.data();
    if e.downcast_ref::<DeadlineExceeded>().is_some() {
        return ErrorKind::Timeout(state.deadline);
    }
    if state.limits.exceeded {
        return ErrorKind::Memory {
            limit: state.limits.memory,
        };
    }
    if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
        return match &state.panic {
            Some(message) => ErrorKind::Trap(format!("plugin panicked: {message}")),
            None => ErrorKind::Trap(trap.to_string()),
        };
    }
    if instantiating {
        return ErrorKind::Sandbox(format!("{e:#}"));
    }
    // Lifting a result the guest wrote badly (invalid UTF-8, bad discriminant, out of bounds).
    ErrorKind::Trap(format!("{e:#}"))
}

fn action_size(action: &wit::Action) -> usize {
    match action {
        wit::Action::Apply(s) | wit::Action::UpdateStatus(s) => s.len(),
        wit::Action::AddFinalizer(s) | wit::Action::RemoveFinalizer(s) => s.len(),
        wit::Action::Patch(p) => match &p.body {
            wit::PatchBody::Merge(s) | wit::PatchBody::Json(s) => s.len() + p.target.name.len(),
        },
        wit::Action::Delete(d) => d.target.name.len() + d.target.kind.len(),
        wit::Action::EmitEvent(e) => e.note.len() + e.reason.len() + e.action.len(),
        wit::Action::Children(c) => c.objects.iter().map(String::len).sum(),
    }
}

/// An engine with its instance pool (or none), its epoch ticker, the linker for it and the
/// code compiled for it.
struct Pool {
    engine: Engine,
    linker: Linker<State>,
    /// Bytes of each slot's memory kept resident between instances (0 without a pool).
    keep_resident: usize,
    /// Plugins compiled for this engine's settings (code compiled for one pool's bounds
    /// checking does not load into the other's engine).
    artifacts: artifacts::Artifacts,
}

/// The slots of an instance pool: how much of each one's memory stays resident between
/// instances, and how accesses past a memory's end are caught.
#[derive(Debug, Clone, Copy)]
struct Slots {
    keep_resident: usize,
    bounds: Bounds,
}

/// How the code of a pool's plugins catches a memory access out of bounds.
///
/// Bounds checks in code (`Checked`) let a slot reserve no more address space than its memory
/// cap and need no guard pages: a memory that grew (every Rust guest's allocator grows it on each
/// call) is not `mprotect`-ed back on each reuse and again on each grow; `mprotect` takes the
/// process-wide mm write lock, and with it two cores reconciled no faster than one (a trivial
/// plugin: 8.7k -> 85k reconciles/s on 2 cores). Guard pages (`Guarded`: a 4 GiB reservation
/// per memory and signal handlers, wasmtime's defaults) spare the check on every load and store,
/// which an interpreter does all the time: `cargo bench --bench convergence` (`languages`, 2,000
/// calls, alternated runs) put the TypeScript seed's call at 0.74 -> 0.53 ms and the Python
/// seed's at 0.65 -> 0.63 ms, and the Rust seed's at 0.037 -> 0.044 ms (its memory grows each
/// call). So plugins that start from a language runtime's snapshot, whose memory is the
/// snapshot's and seldom grows, run guarded, and Rust ones checked.
#[derive(Debug, Clone, Copy)]
enum Bounds {
    Checked,
    Guarded,
}

impl Pool {
    /// With `slots`, an engine whose instances come from a pool of such slots; without, one
    /// allocating on demand.
    fn new(config: &Config, slots: Option<Slots>) -> Result<Self, SetupError> {
        let engine_config = engine_config(config, slots);
        let engine = Engine::new(&engine_config).map_err(SetupError)?;
        // The same code generation and memory settings, without reserving an instance pool.
        let mut compile_config = engine_config;
        compile_config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
        let artifacts =
            artifacts::Artifacts::new(&engine, compile_config, config.cache_dir.clone());
        let mut linker = Linker::new(&engine);
        type Data = wasmtime::component::HasSelf<State>;
        current::PluginWithWebhooks::add_to_linker::<State, Data>(&mut linker, |s| s)
            .map_err(SetupError)?;
        previous::Plugin::add_to_linker::<State, Data>(&mut linker, |s| s).map_err(SetupError)?;
        // wasm32-wasip1 (adapted) and wasm32-wasip2 plugins import wasi:*@0.2; a deny-all
        // context (host/wasi.rs) serves them. Others never touch it.
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(SetupError)?;
        // ... with waits on pollables (sleeps) ended at the call's deadline.
        imports::wasi_poll::add_to_linker(&mut linker).map_err(SetupError)?;
        start_ticker(&engine);
        Ok(Self {
            engine,
            linker,
            keep_resident: slots.map_or(0, |s| s.keep_resident),
            artifacts,
        })
    }
}

/// Bytes of memory the component's core modules initialise: the image every instance starts
/// from. Bytes that do not parse count nothing (compiling them reports why).
fn memory_image_bytes(bytes: &[u8]) -> usize {
    let mut total = 0;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let Ok(wasmparser::Payload::DataSection(section)) = payload else {
            continue;
        };
        for data in section.into_iter().flatten() {
            if let wasmparser::DataKind::Active { .. } = data.kind {
                total += data.data.len();
            }
        }
    }
    total
}

/// The engine's configuration; `slots` asks for the pooling allocator.
fn engine_config(config: &Config, slots: Option<Slots>) -> wasmtime::Config {
    let mut c = wasmtime::Config::new();
    c.wasm_component_model(true);
    c.epoch_interruption(true);
    c.cranelift_opt_level(wasmtime::OptLevel::Speed);
    // For profiling plugins with `perf`: name each compiled wasm function in
    // /tmp/perf-<pid>.map, as `wasmtime run --profile=perfmap` does; else `perf report` shows
    // the guest's time as anonymous JIT addresses.
    if std::env::var_os(PERF_MAP_ENV).is_some() {
        c.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    if let Some(Slots {
        keep_resident,
        bounds,
    }) = slots
    {
        let n = config.max_instances;
        let mut pool = PoolingAllocationConfig::default();
        // A Rust (wit-bindgen) component is a handful of core instances (module, shims,
        // fixups) with one memory and a few tables. A language runtime's is more: a
        // componentize-py plugin links CPython, libc and its bindings as 14 core instances
        // sharing one memory and two tables. A slot for a core instance costs only address
        // space until it is used, so the pool has room for every instance to be such a one.
        pool.total_component_instances(n)
            .total_core_instances(n * MAX_CORE_INSTANCES)
            .total_memories(n * 2)
            .total_tables(n * 4)
            .max_core_instances_per_component(MAX_CORE_INSTANCES)
            .max_memories_per_component(2)
            .max_tables_per_component(4)
            .max_memory_size(config.memory_limit)
            // Reusing a slot should cost one system call, no page faults: reset only the pages
            // the last call dirtied (found with one PAGEMAP_SCAN where the kernel has it, Linux
            // 6.7+) with memset and keep them resident, instead of madvise-ing the memory away
            // and faulting it back in on the next call. Measured: sandbox overhead 32 -> 17 us
            // per call.
            .linear_memory_keep_resident(keep_resident)
            .table_keep_resident(64 << 10)
            .pagemap_scan(Enabled::Auto);
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        match bounds {
            // Without guard pages a slot needs no more address space than its memory cap.
            Bounds::Checked => {
                c.signals_based_traps(false)
                    .memory_guard_size(0)
                    .memory_reservation(config.memory_limit as u64);
            }
            // wasmtime's defaults: 4 GiB and guard pages per memory slot, signal handlers.
            Bounds::Guarded => {
                c.signals_based_traps(true);
            }
        }
    }
    c
}

/// Advances the engine's epoch every [`TICK`] on a thread that ends when the engine is dropped.
fn start_ticker(engine: &Engine) {
    let weak = engine.weak();
    let spawned = std::thread::Builder::new()
        .name("wasmctrl-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        });
    if let Err(e) = spawned {
        // Without ticks deadlines cannot fire; that is a broken invariant, not a user error.
        tracing::error!(error = %e, "could not start the epoch thread; deadlines will not fire");
    }
}

#[cfg(test)]
mod tests {
    use super::{SNAPSHOT_IMAGE, memory_image_bytes};

    #[test]
    fn a_memory_image_counts_active_data_and_bytes_that_do_not_parse_count_nothing() {
        let active = format!(r#"(data (i32.const 0) "{}")"#, "a".repeat(SNAPSHOT_IMAGE));
        let module = format!(r#"(module (memory 64) {active} (data "passive, not in the image"))"#);
        assert_eq!(
            memory_image_bytes(&wat::parse_str(&module).unwrap()),
            SNAPSHOT_IMAGE
        );
        // A registry's bytes may be anything: they choose the small pool, and loading them
        // reports why they do not compile.
        assert_eq!(
            memory_image_bytes(b"\0asm\x01\0\0\0\x0b\xff\xff\xff\xff"),
            0
        );
        assert_eq!(memory_image_bytes(b"not wasm at all"), 0);
    }
}
