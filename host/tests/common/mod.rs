//! Shared helpers for the host's integration tests.

#![allow(dead_code)]

use std::path::PathBuf;

/// Where `make plugins` / `make test-plugins` put built components.
pub fn plugin_dir() -> PathBuf {
    std::env::var_os("WASMCTRL_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins"))
}

/// A built plugin's path; panics with the command to run when it has not been built.
pub fn plugin_path(name: &str) -> PathBuf {
    let path = plugin_dir().join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: build the plugins first with `make plugins test-plugins` (make test does)",
        path.display()
    );
    path
}

/// A built plugin's bytes.
pub fn plugin_bytes(name: &str) -> Vec<u8> {
    std::fs::read(plugin_path(name)).expect("read plugin")
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}
