//! The plugin directory and its hot reload: every `*.wasm` (or gzip-compressed `*.wasm.gz`,
//! see [`files`]) in `--plugins <dir>` (with its
//! operator config, see [`PluginConfig`]) is loaded, the directory is watched, and each change
//! reaches the controller as one [`Change`] on a channel.
//!
//! - **Identity is the manifest name**, not the file name. A second file declaring a name that is
//!   already served fails (naming both files) and waits; the first keeps serving, and the second
//!   takes over if the first goes away.
//! - **Rescan, not event paths.** Any event in the directory (after a debounce) triggers a full
//!   rescan that compares each file's content digest and config bytes with the previous scan's.
//!   Kubernetes ConfigMap/Secret volumes update by atomically swapping a `..data` symlink, so the
//!   events name `..data`, never `vm.wasm`; dotfiles are skipped and symlinks followed.
//! - **A broken file never replaces a working version**: a load that fails (truncated mid-write,
//!   not a component, bad manifest, bad config) leaves the previous version serving and is
//!   reported once as [`Change::Failed`]; the next change to the file retries it.
//! - **Compiling happens on a blocking thread**, never on the async executor.
//! - **Swaps are atomic for the controller and safe for in-flight work**: it receives one
//!   [`Change::Replaced`] with both versions; a reconcile already running holds its own
//!   `Arc<Plugin>` of the old version and finishes on it, the old version being freed when the
//!   last such `Arc` is dropped.

mod config;
mod directory;
pub mod files;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::Watcher as _;
use notify::event::{AccessKind, AccessMode, EventKind};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use config::{
    ConfigError, EXTENSIONS as CONFIG_EXTENSIONS, PluginConfig, beside as config_beside,
};

use crate::observe::events::Note;
use crate::reconcile::controller::{Manager, Tuning};
use crate::runtime::{Plugin, Runtime};
use directory::Directory;
pub use directory::widened;
use wasmctrl_core::sync::lock;

/// The served plugins as `current()` returns them, refreshed after every rescan.
type Snapshot = Arc<Mutex<Vec<(Arc<Plugin>, PluginConfig)>>>;

/// One change to the set of served plugins, in the order the controller should apply them.
#[derive(Debug, Clone)]
pub enum Change {
    /// A plugin name is served for the first time (at start, or a new file).
    Added(Arc<Plugin>, PluginConfig),
    /// A new version (new bytes or new config) of a served name: switch atomically. `old` is
    /// handed over so the controller can tell what changed; in-flight reconciles keep theirs.
    Replaced {
        /// The version served until now.
        old: Arc<Plugin>,
        /// The version to serve from now on.
        new: Arc<Plugin>,
        /// The config the new version was loaded with.
        config: PluginConfig,
    },
    /// The name is no longer served (its file was removed, or now declares another name).
    Removed(Arc<Plugin>),
    /// A file could not be loaded; whatever it served before keeps serving.
    Failed {
        /// The `.wasm` file.
        path: PathBuf,
        /// Why, naming the file (and the config file when that is the problem).
        error: String,
    },
}

impl Change {
    /// Hands the change to the controllers: starts, swaps or stops one (`concurrency` is the
    /// worker count of plugins whose config sets none; a restart gives in-flight reconciles
    /// `grace`), and tells the host's Pod about a version loaded or refused.
    pub async fn deliver(self, host: &Manager, concurrency: usize, grace: Duration) {
        let tuning = |config: &PluginConfig| Tuning {
            concurrency: config.concurrency.or(Some(concurrency)),
            account: config.account.clone(),
        };
        if !matches!(self, Change::Removed(_)) {
            host.count_load(!matches!(self, Change::Failed { .. }));
        }
        self.report(host).await;
        match self {
            Change::Added(plugin, config) => host.replace(plugin, tuning(&config), grace).await,
            Change::Replaced { new, config, .. } => host.replace(new, tuning(&config), grace).await,
            Change::Removed(plugin) => host.remove(&plugin.manifest().name, grace).await,
            Change::Failed { path, error } => {
                tracing::warn!(file = %path.display(), %error, "plugin not loaded; any previous version keeps serving");
            }
        }
    }

    /// Tells the host's Pod, if it has one, about a plugin loaded or refused.
    async fn report(&self, host: &Manager) {
        let (warning, reason, note) = match self {
            Change::Added(plugin, _) | Change::Replaced { new: plugin, .. } => {
                let m = plugin.manifest();
                let digest = plugin.digest().get(..12).unwrap_or_default();
                let note = format!("plugin {} {} (sha256:{digest}) serving", m.name, m.version);
                (false, "PluginLoaded", note)
            }
            Change::Failed { path, error } => {
                let file = path.file_name().unwrap_or_default().to_string_lossy();
                // The error names the file by its full path; lead with the file name.
                (true, "PluginLoadFailed", format!("{file}: {error}"))
            }
            Change::Removed(_) => return,
        };
        let note = Note {
            warning,
            reason,
            note: &note,
            action: "Load",
        };
        host.tell_pod(&note).await;
    }
}

/// How the loader watches.
#[derive(Debug, Clone)]
pub struct Options {
    /// Quiet time after the last event before rescanning, so a file written in several chunks is
    /// read once complete. Continuous events delay a rescan by at most ten times this.
    pub debounce: Duration,
    /// Rescan this often even without events, in case some were lost (inotify queue overflow,
    /// a symlink target outside the directory edited in place). `None` disables it.
    pub resync: Option<Duration>,
    /// Changes buffered for the controller before the loader waits for it.
    pub channel_capacity: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(200),
            resync: Some(Duration::from_secs(60)),
            channel_capacity: 64,
        }
    }
}

/// Owns the plugin directory: loads it, watches it, and publishes [`Change`]s. Watching stops
/// when the loader is dropped (or [`shutdown`](Loader::shutdown)); plugins already handed out
/// stay usable.
pub struct Loader {
    dir: PathBuf,
    snapshot: Snapshot,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
    // Held for its side effect: dropping it ends the OS watch. `None` when only polling.
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Loader {
    /// Loads every plugin in `dir` and starts watching it.
    ///
    /// The initial set is reported on the returned channel like any later change (an `Added` per
    /// plugin, a `Failed` per broken file) before this returns, so the controller has one code
    /// path: apply changes in order, starting from nothing. A broken file does not fail the start;
    /// an unreadable directory does, and so does a watch that cannot be set up unless
    /// [`Options::resync`] is set (the loader then polls at that interval).
    pub async fn start(
        dir: PathBuf,
        runtime: Runtime,
        options: Options,
    ) -> Result<(Loader, mpsc::Receiver<Change>), LoaderError> {
        let wake = Arc::new(Notify::new());
        // Watch before the first scan so that nothing written during it goes unnoticed.
        let watcher = match (watch_dir(&dir, &wake), options.resync) {
            (Ok(watcher), _) => Some(watcher),
            (Err(e), None) => return Err(e),
            // Nodes often run out of inotify instances; periodic rescans still pick changes up.
            (Err(e), Some(every)) => {
                tracing::warn!(error = %e, resync = ?every,
                    "cannot watch the plugin directory; falling back to periodic rescans");
                None
            }
        };

        let directory = Arc::new(Mutex::new(Directory::new(dir.clone(), runtime)));
        let snapshot = Arc::new(Mutex::new(Vec::new()));
        let initial = rescan(&directory, &snapshot).await?;

        // Sized so the initial changes never wait for a reader that is not running yet.
        let (tx, rx) = mpsc::channel(options.channel_capacity.max(initial.len()).max(1));
        for change in initial {
            // Cannot fail: capacity covers them and `rx` is alive.
            let _ = tx.try_send(change);
        }
        let stop = CancellationToken::new();
        let task = tokio::spawn(watch(
            directory,
            snapshot.clone(),
            wake,
            tx,
            options,
            stop.clone(),
        ));
        let loader = Loader {
            dir,
            snapshot,
            stop,
            task: Some(task),
            _watcher: watcher,
        };
        Ok((loader, rx))
    }

    /// The plugins served right now, ordered by name.
    pub fn current(&self) -> Vec<(Arc<Plugin>, PluginConfig)> {
        lock(&self.snapshot).clone()
    }

    /// The watched directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops watching and waits for a rescan in progress to finish. The change channel closes.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Why the loader could not start, or a rescan could not read the directory.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    /// The OS watch on the directory could not be set up (and no resync interval was given to
    /// poll instead).
    #[error("watching the plugin directory {}: {error}", dir.display())]
    Watch {
        /// The directory.
        dir: PathBuf,
        /// The watcher's error.
        error: notify::Error,
    },
    /// The directory could not be read.
    #[error("reading the plugin directory {}: {error}", dir.display())]
    Read {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The thread loading plugins panicked.
    #[error("the plugin loader thread panicked: {0}")]
    Panicked(String),
}

fn watch_dir(dir: &Path, wake: &Arc<Notify>) -> Result<notify::RecommendedWatcher, LoaderError> {
    let failed = |error| LoaderError::Watch {
        dir: dir.to_path_buf(),
        error,
    };
    let mut watcher = notify::recommended_watcher({
        let wake = wake.clone();
        move |event| on_event(event, &wake)
    })
    .map_err(failed)?;
    watcher
        .watch(dir, notify::RecursiveMode::NonRecursive)
        .map_err(failed)?;
    Ok(watcher)
}

/// Called on the watcher's thread. Our own reads of the plugins show up as open/close-read
/// events, which must not trigger another rescan (that would loop forever).
fn on_event(event: notify::Result<notify::Event>, wake: &Notify) {
    match event {
        Ok(event) => match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => wake.notify_one(),
            EventKind::Access(_) => {}
            _ => wake.notify_one(),
        },
        Err(e) => {
            // Lost events (queue overflow) are recovered by rescanning everything.
            tracing::warn!(error = %e, "plugin directory watch error; rescanning");
            wake.notify_one();
        }
    }
}

/// The loader's task: wait for events, debounce them, rescan, publish.
async fn watch(
    directory: Arc<Mutex<Directory>>,
    snapshot: Snapshot,
    wake: Arc<Notify>,
    tx: mpsc::Sender<Change>,
    options: Options,
    stop: CancellationToken,
) {
    loop {
        let resync = async {
            match options.resync {
                Some(every) => tokio::time::sleep(every).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = wake.notified() => {}
            () = resync => {}
        }
        // Trailing-edge debounce with a cap, so a steady trickle of events cannot starve reloads.
        let cap = Instant::now() + options.debounce.saturating_mul(10);
        loop {
            let quiet = (Instant::now() + options.debounce).min(cap);
            tokio::select! {
                () = stop.cancelled() => return,
                () = wake.notified() => if Instant::now() >= cap { break },
                () = tokio::time::sleep_until(quiet) => break,
            }
        }
        match rescan(&directory, &snapshot).await {
            Ok(changes) => {
                for change in changes {
                    // A closed channel means the controller stopped listening; keep `current()`
                    // up to date regardless.
                    let _ = tx.send(change).await;
                }
            }
            Err(e) => tracing::warn!(error = %e,
                "could not rescan the plugin directory; the loaded plugins keep serving"),
        }
    }
}

/// Rescans on a blocking thread and refreshes the snapshot under the same lock, so `current()`
/// never shows a state between two rescans' halves.
async fn rescan(
    directory: &Arc<Mutex<Directory>>,
    snapshot: &Snapshot,
) -> Result<Vec<Change>, LoaderError> {
    let directory = directory.clone();
    let snapshot = snapshot.clone();
    tokio::task::spawn_blocking(move || {
        // A panic while loading poisons the lock. Plugins are loaded before a scan mutates
        // anything, so the state is still the previous scan's: carry on with it.
        let mut directory = lock(&directory);
        let changes = directory.rescan().map_err(|error| LoaderError::Read {
            dir: directory.dir().to_path_buf(),
            error,
        })?;
        *lock(&snapshot) = directory.snapshot();
        Ok(changes)
    })
    .await
    .map_err(|e| LoaderError::Panicked(e.to_string()))?
}
