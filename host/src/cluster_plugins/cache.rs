//! Pulled plugins kept on disk by manifest digest (`<--cache-dir>/oci/sha256-<hex>.wasm`), so a
//! host restarted while its registry is down serves the digests it last ran. Entries are
//! written whole (a temporary file renamed into place) and never change: a digest names one
//! content.

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

    /// Keeps `component` for `digest`. Best effort: a cache that cannot be written costs a
    /// pull at the next start, nothing else.
    pub fn put(&self, digest: &str, component: &[u8]) {
        let Some(path) = self.path(digest) else {
            return;
        };
        let written = (|| {
            let dir = path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir)?;
            let mut file = tempfile::NamedTempFile::new_in(dir)?;
            std::io::Write::write_all(&mut file, component)?;
            file.persist(&path).map_err(|e| e.error)?;
            Ok::<_, std::io::Error>(())
        })();
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), error = %e, "cannot keep a pulled plugin in the cache");
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
        cache.put(&digest, b"component");
        assert_eq!(cache.get(&digest).as_deref(), Some(&b"component"[..]));
        assert!(cache.path("sha256:../../etc/passwd").is_none());
        assert!(Cache::new(None).get(&digest).is_none());
    }
}
