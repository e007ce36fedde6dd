//! Plugin files: `<name>.wasm`, or gzip-compressed `<name>.wasm.gz`. Kubernetes refuses a
//! ConfigMap of more than 1 MiB, and a component of a plugin with a few dependencies is often
//! larger; compressed, most fit one (`make deploy-manifests` writes `examples/deploy/plugins`
//! this way).

use std::io::Read as _;
use std::path::Path;

/// The most bytes a compressed plugin may inflate to: more is a malformed (or hostile) file.
pub const MAX_INFLATED: u64 = 256 << 20;

/// The suffixes of plugin files, longest first.
const SUFFIXES: [&str; 2] = [".wasm.gz", ".wasm"];

/// Whether `path` names a plugin file (`*.wasm`, `*.wasm.gz`).
pub fn is_plugin_file(path: &Path) -> bool {
    stem(path).is_some()
}

/// The name of the plugin file `path` without its suffix (what a config beside it is named
/// after); `None` when it is no plugin file.
pub fn stem(path: &Path) -> Option<&str> {
    let name = path.file_name()?.to_str()?;
    SUFFIXES
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .filter(|s| !s.is_empty())
}

/// Reads the plugin file at `path`: a gzip stream (known by its magic bytes, whatever the
/// name) is inflated, at most [`MAX_INFLATED`] bytes.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    let bytes = std::fs::read(path)?;
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(bytes);
    }
    let mut inflated = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .take(MAX_INFLATED + 1)
        .read_to_end(&mut inflated)
        .map_err(|e| std::io::Error::new(e.kind(), format!("not a gzip stream: {e}")))?;
    if inflated.len() as u64 > MAX_INFLATED {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("inflates to more than {MAX_INFLATED} bytes"),
        ));
    }
    Ok(inflated)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn compressed_and_plain_plugin_files_read_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("vm.wasm");
        let packed = dir.path().join("vm.wasm.gz");
        let content = b"\0asm component bytes".repeat(1000);
        std::fs::write(&plain, &content).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&content).unwrap();
        std::fs::write(&packed, gz.finish().unwrap()).unwrap();
        assert_eq!(read(&plain).unwrap(), content);
        assert_eq!(read(&packed).unwrap(), content);
        assert_eq!((stem(&plain), stem(&packed)), (Some("vm"), Some("vm")));
        assert!(!is_plugin_file(&dir.path().join("vm.toml")));
        assert!(!is_plugin_file(&dir.path().join(".wasm")));
        std::fs::write(&packed, [0x1f, 0x8b, 0, 1, 2]).unwrap();
        assert!(read(&packed).is_err(), "a broken gzip stream is an error");
    }
}
