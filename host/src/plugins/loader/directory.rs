//! What the loader knows about its directory, and the diff that brings the served plugins in
//! line with what is on disk. Blocking: it reads files and compiles plugins.
//!
//! Each rescan reads every `*.wasm` and its config, and compares a fingerprint (content digest,
//! config bytes) with the previous scan's, so only changed files are loaded. Event paths are never
//! trusted: a ConfigMap update arrives as events on `..data` and a timestamped directory, not on
//! the plugin's own name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Change;
use super::config::{self, PluginConfig};
use super::files;
use crate::runtime::{Plugin, Runtime, digest};

/// A file's content as of the last scan. Read failures are part of it so that the same failure is
/// reported once, not on every rescan.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    wasm: Result<String, String>,
    config: Result<Option<(PathBuf, Vec<u8>)>, String>,
}

/// A loaded version and the config it was loaded with.
#[derive(Debug, Clone)]
struct Loaded {
    plugin: Arc<Plugin>,
    config: PluginConfig,
}

/// One `*.wasm` in the directory.
#[derive(Debug)]
struct File {
    fingerprint: Fingerprint,
    /// The plugin name this file serves (its last good version).
    serves: Option<String>,
    /// A good version whose name another file already serves; it takes over when that one goes.
    parked: Option<Loaded>,
}

/// A served plugin and the file it came from.
#[derive(Debug)]
struct Served {
    path: PathBuf,
    loaded: Loaded,
}

/// The outcome of looking at one changed file.
enum Attempt {
    /// Same digest and config as the version this file already serves.
    Unchanged,
    Loaded(Loaded),
    Failed(String),
}

/// A version waiting for its name: where it comes from, the version, and whether its wait was
/// reported already.
type Candidate = (PathBuf, Loaded, bool);

/// What one rescan has found so far.
#[derive(Default)]
struct Scan {
    changes: Vec<Change>,
    /// Served names whose file is gone or now serves another name; whoever claims one replaces
    /// it, and those nobody claims are removed.
    vacated: BTreeMap<String, Loaded>,
}

/// The directory's files and the plugins served from them, keyed by manifest name.
///
/// Invariant: `files[p].serves == Some(n)` exactly when `served[n].path == p`.
pub(super) struct Directory {
    dir: PathBuf,
    runtime: Runtime,
    files: BTreeMap<PathBuf, File>,
    served: BTreeMap<String, Served>,
}

impl Directory {
    pub(super) fn new(dir: PathBuf, runtime: Runtime) -> Self {
        Self {
            dir,
            runtime,
            files: BTreeMap::new(),
            served: BTreeMap::new(),
        }
    }

    /// The directory it reads.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The served plugins, ordered by name.
    pub(super) fn snapshot(&self) -> Vec<(Arc<Plugin>, PluginConfig)> {
        self.served
            .values()
            .map(|s| (s.loaded.plugin.clone(), s.loaded.config.clone()))
            .collect()
    }

    /// Reads the directory and brings the served set in line with it, in the six steps below.
    /// An unreadable directory changes nothing: every plugin keeps serving.
    pub(super) fn rescan(&mut self) -> std::io::Result<Vec<Change>> {
        let paths = list(&self.dir)?;
        let mut scan = Scan::default();
        // 1. Load what changed since the last scan (the only expensive step).
        let (present, attempts) = self.load_changed(paths);
        // 2. Files that are gone free their names; whoever claims one below replaces it.
        self.free_names_of_gone_files(&present, &mut scan);
        // 3. Record the attempts. A failure leaves the file's previous version serving; a new
        //    version under the file's current name replaces it in place.
        let candidates = self.record_attempts(attempts, &mut scan);
        // 4. Place versions under new names. Repeat while something moves: a file leaving one
        //    name frees it for another file's version.
        let waiting = self.place_under_new_names(candidates, &mut scan);
        // 5. Versions whose name another file serves wait, reported once.
        self.park(waiting, &mut scan);
        // 6. Names nobody took over are removed.
        let Scan {
            mut changes,
            vacated,
        } = scan;
        for (name, old) in vacated {
            tracing::info!(plugin.name = %name, plugin.digest = %old.plugin.digest(), "plugin removed");
            changes.push(Change::Removed(old.plugin));
        }
        if !changes.is_empty() {
            self.retain_artifacts();
        }
        Ok(changes)
    }

    /// Reads every path, loading those whose content or config changed since the last scan;
    /// returns the paths still present and the attempts.
    fn load_changed(
        &self,
        paths: Vec<PathBuf>,
    ) -> (BTreeSet<PathBuf>, Vec<(PathBuf, Fingerprint, Attempt)>) {
        let mut present = BTreeSet::new();
        let mut attempts = Vec::new();
        for path in paths {
            let (fingerprint, bytes) = match read(&path) {
                Some(read) => read,
                None => continue, // vanished (or a dangling symlink): treated as removed
            };
            present.insert(path.clone());
            if self.files.get(&path).map(|f| &f.fingerprint) == Some(&fingerprint) {
                continue;
            }
            let attempt = self.attempt(&path, &fingerprint, &bytes);
            attempts.push((path, fingerprint, attempt));
        }
        (present, attempts)
    }

    /// Forgets the files no longer present; the names they served become vacant.
    fn free_names_of_gone_files(&mut self, present: &BTreeSet<PathBuf>, scan: &mut Scan) {
        let gone: Vec<PathBuf> = (self.files.keys())
            .filter(|p| !present.contains(*p))
            .cloned()
            .collect();
        for path in gone {
            if let Some(name) = self.files.remove(&path).and_then(|f| f.serves)
                && let Some(served) = self.served.remove(&name)
            {
                scan.vacated.insert(name, served.loaded);
            }
        }
    }

    /// Records each attempt on its file; returns the versions that need a name placed.
    fn record_attempts(
        &mut self,
        attempts: Vec<(PathBuf, Fingerprint, Attempt)>,
        scan: &mut Scan,
    ) -> Vec<Candidate> {
        let mut candidates: Vec<Candidate> = Vec::new();
        for (path, fingerprint, attempt) in attempts {
            let file = self.files.entry(path.clone()).or_insert_with(|| File {
                fingerprint: fingerprint.clone(),
                serves: None,
                parked: None,
            });
            file.fingerprint = fingerprint;
            file.parked = None;
            match attempt {
                Attempt::Unchanged => {}
                Attempt::Failed(error) => {
                    tracing::warn!(file = %path.display(), %error,
                        "plugin not loaded; any previous version keeps serving");
                    scan.changes.push(Change::Failed { path, error });
                }
                Attempt::Loaded(new) => {
                    let name = &new.plugin.manifest().name;
                    match self.served.get_mut(name) {
                        Some(served) if file.serves.as_ref() == Some(name) => {
                            let old = std::mem::replace(&mut served.loaded, new.clone());
                            log_swap("replaced", &path, &new);
                            scan.changes.push(Change::Replaced {
                                old: old.plugin,
                                new: new.plugin,
                                config: new.config,
                            });
                        }
                        _ => candidates.push((path, new, false)),
                    }
                }
            }
        }
        for (path, file) in &mut self.files {
            if let Some(parked) = file.parked.take() {
                candidates.push((path.clone(), parked, true));
            }
        }
        candidates.sort_by(|a, b| a.0.cmp(&b.0));
        candidates
    }

    /// Serves each candidate under its name where that name is free; returns those still
    /// blocked by another file serving the name.
    fn place_under_new_names(
        &mut self,
        mut candidates: Vec<Candidate>,
        scan: &mut Scan,
    ) -> Vec<Candidate> {
        loop {
            let before = candidates.len();
            let mut blocked = Vec::new();
            for (path, new, reported) in candidates {
                let name = new.plugin.manifest().name.clone();
                if self.served.contains_key(&name) {
                    blocked.push((path, new, reported));
                    continue;
                }
                let previous = (self.files.get_mut(&path))
                    .and_then(|f| f.serves.replace(name.clone()))
                    .filter(|p| *p != name);
                let loaded = match scan.vacated.remove(&name) {
                    // A renamed file with the same content: nothing for the controller to do.
                    Some(old) if same_version(&old, &new) => old,
                    Some(old) => {
                        log_swap("replaced", &path, &new);
                        scan.changes.push(Change::Replaced {
                            old: old.plugin,
                            new: new.plugin.clone(),
                            config: new.config.clone(),
                        });
                        new
                    }
                    None => {
                        log_swap("added", &path, &new);
                        scan.changes
                            .push(Change::Added(new.plugin.clone(), new.config.clone()));
                        new
                    }
                };
                self.served.insert(name, Served { path, loaded });
                if let Some(previous) = previous
                    && let Some(served) = self.served.remove(&previous)
                {
                    scan.vacated.insert(previous, served.loaded);
                }
            }
            candidates = blocked;
            if candidates.len() == before {
                break;
            }
        }
        candidates
    }

    /// Parks each blocked version on its file, reporting it the first time.
    fn park(&mut self, waiting: Vec<Candidate>, scan: &mut Scan) {
        for (path, new, reported) in waiting {
            let name = &new.plugin.manifest().name;
            if !reported {
                let holder = self.served.get(name).map(|s| s.path.display().to_string());
                let error = format!(
                    "{}: declares plugin {name:?}, which {} already serves; the first keeps \
                     serving until it is removed",
                    path.display(),
                    holder.unwrap_or_default()
                );
                tracing::warn!(file = %path.display(), %error, "duplicate plugin name");
                scan.changes.push(Change::Failed {
                    path: path.clone(),
                    error,
                });
            }
            if let Some(file) = self.files.get_mut(&path) {
                file.parked = Some(new);
            }
        }
    }

    /// Keeps the compiled artifacts of what is served or parked, and drops the rest.
    fn retain_artifacts(&self) {
        let digests: Vec<&str> = (self.served.values().map(|s| &s.loaded))
            .chain(self.files.values().filter_map(|f| f.parked.as_ref()))
            .map(|l| l.plugin.digest())
            .collect();
        self.runtime.retain_artifacts(&digests);
    }

    /// Parses the config and loads the plugin, unless this file already serves exactly this
    /// digest and config (a file re-written with the same content, or reformatted config).
    fn attempt(&self, path: &Path, fingerprint: &Fingerprint, bytes: &[u8]) -> Attempt {
        let digest = match &fingerprint.wasm {
            Ok(digest) => digest,
            Err(e) => return Attempt::Failed(e.clone()),
        };
        let config = match &fingerprint.config {
            Err(e) => return Attempt::Failed(e.clone()),
            Ok(None) => PluginConfig::default(),
            Ok(Some((config_path, raw))) => {
                let text = String::from_utf8_lossy(raw);
                match PluginConfig::parse(config_path, &text) {
                    Ok(config) => config,
                    Err(e) => return Attempt::Failed(e.to_string()),
                }
            }
        };
        let serving = (self.files.get(path))
            .and_then(|f| f.serves.as_ref())
            .and_then(|name| self.served.get(name));
        if let Some(served) = serving
            && served.loaded.plugin.digest() == digest
            && served.loaded.config == config
        {
            return Attempt::Unchanged;
        }
        let source = path.display().to_string();
        let plugin = match self.runtime.load_with(&source, bytes, &config.overrides()) {
            Ok(plugin) => plugin,
            Err(e) => return Attempt::Failed(e.to_string()),
        };
        if let Err(e) = config.check_narrows(plugin.manifest()) {
            return Attempt::Failed(format!("{source}: {e}"));
        }
        for database in self.runtime.ungranted_databases(&plugin) {
            tracing::warn!(plugin.name = %plugin.manifest().name, capability = %format!("sql:{database}"),
                "plugin declares a database that is not configured (--sql {database}=<connection>); its sql calls will fail");
        }
        // New bytes may not widen what the version they replace may do, unless the operator
        // approved each addition. A config change alone is the operator's own doing, and a file
        // that now holds another plugin (another name) replaces nothing.
        if let Some(served) = serving
            && served.loaded.plugin.digest() != digest
            && served.loaded.plugin.manifest().name == plugin.manifest().name
        {
            let unapproved = widened(&served.loaded.plugin, &plugin, &config.approve);
            if !unapproved.is_empty() {
                let config_file = match &fingerprint.config {
                    Ok(Some((path, _))) => path.display().to_string(),
                    _ => path.with_extension("toml").display().to_string(),
                };
                return Attempt::Failed(format!(
                    "{source}: this version of plugin {} asks for more than the version it \
                     replaces, which keeps serving; to allow it, approve each new permission in \
                     {config_file}: approve = {unapproved:?}",
                    plugin.manifest().name
                ));
            }
        }
        Attempt::Loaded(Loaded {
            plugin: Arc::new(plugin),
            config,
        })
    }
}

/// The permissions `new` has that `old` had not, less those approved.
pub fn widened(old: &Plugin, new: &Plugin, approved: &[String]) -> Vec<String> {
    let had = old.scope().permissions();
    new.scope()
        .permissions()
        .difference(&had)
        .map(ToString::to_string)
        .filter(|p| !approved.contains(p))
        .collect()
}

fn same_version(a: &Loaded, b: &Loaded) -> bool {
    a.plugin.digest() == b.plugin.digest() && a.config == b.config
}

fn log_swap(what: &str, path: &Path, new: &Loaded) {
    tracing::info!(
        plugin.name = %new.plugin.manifest().name,
        plugin.digest = %new.plugin.digest(),
        file = %path.display(),
        "plugin {what}"
    );
}

/// The plugin files (`*.wasm`, `*.wasm.gz`) directly in `dir`, sorted. Dotfiles are skipped, which also skips the
/// `..data` link and the timestamped directories of a ConfigMap volume; the plugin's own
/// entries are symlinks into them, followed when read.
fn list(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.starts_with('.') || !files::is_plugin_file(&path) {
            continue;
        }
        paths.push(path);
    }
    paths.sort();
    Ok(paths)
}

/// Reads a plugin and its config. `None` when the file is gone (including a symlink whose
/// target is gone); other read failures become part of the fingerprint.
fn read(path: &Path) -> Option<(Fingerprint, Vec<u8>)> {
    // `metadata` and `read` follow symlinks: a ConfigMap key is a link into `..data`.
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Ok(m) if m.is_dir() => return None,
        _ => {}
    }
    let (wasm, bytes) = match files::read(path) {
        Ok(bytes) => (Ok(digest(&bytes)), bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => (Err(format!("{}: {e}", path.display())), Vec::new()),
    };
    let config = config::beside(path).and_then(|found| match found {
        None => Ok(None),
        Some(config_path) => match std::fs::read(&config_path) {
            Ok(raw) => Ok(Some((config_path, raw))),
            Err(e) => Err(format!("{}: {e}", config_path.display())),
        },
    });
    Some((Fingerprint { wasm, config }, bytes))
}
