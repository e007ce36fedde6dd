//! Compile each plugin once per content hash: an in-memory map for this process and an optional
//! on-disk cache of serialized components so restarts skip Cranelift.
//!
//! Compiling happens in an engine of its own, made for that one compilation and dropped after
//! it: Cranelift keeps its per-thread compilation contexts in the engine that compiled, arenas
//! included, and one large function (k8s-openapi's deserializers have some) grows regalloc2's
//! arena to hundreds of MiB that the engine would hold for the life of the process. Measured
//! with the four seed plugins: a host that compiled them held 290 MiB resident afterwards, one
//! that loaded them from the disk cache 33 MiB. The compiled code is then deserialized into the
//! runtime's engine, which needs an identical configuration (checked by wasmtime).

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmctrl_core::sync::lock;
use wasmtime::Engine;
use wasmtime::component::Component;

/// Compiled components by content hash.
pub(crate) struct Artifacts {
    /// The runtime engine's configuration, less its instance allocator: what compiling needs.
    compile_config: wasmtime::Config,
    dir: Option<PathBuf>,
    engine_tag: String,
    compiled: Mutex<HashMap<String, Component>>,
    stats: Stats,
}

/// Where compiled components came from, since the runtime started.
#[derive(Debug, Default)]
struct Stats {
    compiled: AtomicU64,
    from_disk: AtomicU64,
}

/// How often loading a plugin compiled it, and how often the disk cache spared that.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArtifactStats {
    /// Components compiled with Cranelift.
    pub compiled: u64,
    /// Components deserialized from the on-disk cache instead.
    pub from_disk: u64,
}

/// The sha256 of a plugin's bytes, hex-encoded: its identity for caching and for logs.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Artifacts {
    /// `compile_config` must be the configuration `engine` was made with (its instance allocator
    /// aside, which compiling does not use).
    pub(crate) fn new(
        engine: &Engine,
        compile_config: wasmtime::Config,
        dir: Option<PathBuf>,
    ) -> Self {
        // Serialized code is only valid for an identical engine configuration and wasmtime build.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_tag = format!("{:016x}", hasher.finish());
        Self {
            compile_config,
            dir,
            engine_tag,
            compiled: Mutex::new(HashMap::new()),
            stats: Stats::default(),
        }
    }

    pub(crate) fn stats(&self) -> ArtifactStats {
        ArtifactStats {
            compiled: self.stats.compiled.load(Ordering::Relaxed),
            from_disk: self.stats.from_disk.load(Ordering::Relaxed),
        }
    }

    /// The component for `bytes`, compiling only when neither cache has it.
    pub(crate) fn get(
        &self,
        engine: &Engine,
        digest: &str,
        bytes: &[u8],
    ) -> wasmtime::Result<Component> {
        if let Some(c) = self.lock().get(digest) {
            return Ok(c.clone());
        }
        let component = match self.load_from_disk(engine, digest) {
            Some(c) => {
                self.stats.from_disk.fetch_add(1, Ordering::Relaxed);
                c
            }
            None => {
                let compiled = Engine::new(&self.compile_config)?.precompile_component(bytes)?;
                // SAFETY: `compiled` is what `precompile_component` just produced, in memory, with
                // this engine's configuration; wasmtime checks the header and the configuration.
                let c = unsafe { Component::deserialize(engine, &compiled)? };
                self.stats.compiled.fetch_add(1, Ordering::Relaxed);
                self.store_on_disk(digest, &compiled);
                c
            }
        };
        self.lock().insert(digest.to_string(), component.clone());
        Ok(component)
    }

    /// Forgets in-memory entries not in `keep` (plugins that were replaced or removed).
    pub(crate) fn retain(&self, keep: &[&str]) {
        self.lock().retain(|k, _| keep.contains(&k.as_str()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Component>> {
        // The map holds no invariants a panic could break; recover from poisoning.
        lock(&self.compiled)
    }

    fn path(&self, digest: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{digest}-{}.cwasm", self.engine_tag)))
    }

    fn load_from_disk(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let path = self.path(digest)?;
        if !path.exists() {
            return None;
        }
        // SAFETY: the file was written by `store_on_disk` from `Component::serialize` of this
        // engine configuration (the engine tag is in the name) into our own cache directory;
        // wasmtime still checks its header and version before using it. A file we cannot load
        // is ignored and recompiled.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "ignoring unusable compiled artifact");
                None
            }
        }
    }

    fn store_on_disk(&self, digest: &str, compiled: &[u8]) {
        let Some(path) = self.path(digest) else {
            return;
        };
        let write = || -> std::io::Result<()> {
            // `path` is `<cache dir>/<digest>`: it has a parent.
            let dir = path.parent().unwrap_or(&path);
            std::fs::create_dir_all(dir)?;
            let tmp = dir.join(format!(".{digest}.{}.tmp", std::process::id()));
            std::fs::write(&tmp, compiled)?;
            std::fs::rename(&tmp, &path)?;
            Ok(())
        };
        // The cache is an optimisation: failing to write it must not fail the load.
        if let Err(e) = write() {
            tracing::warn!(path = %path.display(), error = %e, "could not cache compiled plugin");
        }
    }
}
