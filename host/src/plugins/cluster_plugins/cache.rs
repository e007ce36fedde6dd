//! Pulled plugins kept on disk by manifest digest (`<--cache-dir>/oci/sha256-<hex>.wasm`), so a
//! host restarted while its registry is down serves the digests it last ran. Entries are
//! written whole (the pull's temporary file, verified, renamed into place) and never change: a
//! digest names one content.

use std::path::{Path, PathBuf};

/// The on-disk cache; `None` keeps nothing (every start pulls).
#[derive(Debug, Clone)]
pub struct Cache {
    dir: Option<PathBuf>,
}

impl Cache {
    /// A cache under `dir/oci`, or none.
    pub fn new(dir: Option<&Path>) -> Self {
        Self {
            dir: dir.map(|d| d.join("oci")),
        }
    }

    fn path(&self, digest: &str) -> Option<PathBuf> {
        let (algorithm, hex) = digest.split_once(':')?;
        let safe = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
        (safe(algorithm) && safe(hex))
            .then(|| {
                self.dir
                    .as_ref()
                    .map(|d| d.join(format!("{algorithm}-{hex}.wasm")))
            })
            .flatten()
    }

    /// The component pulled for manifest `digest`, if kept.
    pub fn get(&self, digest: &str) -> Option<Vec<u8>> {
        std::fs::read(self.path(digest)?).ok()
    }

    /// Where a pull writes its temporary file: the cache's own directory, so that keeping
    /// the file is a rename; without a cache, the system's temporary directory.
    pub fn staging(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(std::env::temp_dir)
    }

    /// Keeps the pulled component in `file` for `digest` (renamed into place). Best effort: a
    /// cache that cannot be written costs a pull at the next start, nothing else.
    pub fn keep(&self, digest: &str, file: tempfile::NamedTempFile) {
        let Some(path) = self.path(digest) else {
            return;
        };
        if let Err(e) = file.persist(&path) {
            tracing::warn!(path = %path.display(), error = %e.error, "cannot keep a pulled plugin in the cache");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_kept_by_digest_and_odd_digests_are_not_paths() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(Some(dir.path()));
        let digest = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(cache.get(&digest), None);
        std::fs::create_dir_all(cache.staging()).unwrap();
        let mut file = tempfile::NamedTempFile::new_in(cache.staging()).unwrap();
        std::io::Write::write_all(&mut file, b"component").unwrap();
        cache.keep(&digest, file);
        assert_eq!(cache.get(&digest).as_deref(), Some(&b"component"[..]));
        assert!(cache.path("sha256:../../etc/passwd").is_none());
        assert!(Cache::new(None).get(&digest).is_none());
    }
}
