//! `wasmctrl build` through the real binary: a minimal wit-bindgen guest becomes a component whose
//! world exports the plugin contract, and bad crate directories fail with one-line errors.
//!
//! Building the guest needs a wasm32 toolchain (see `wasmctrl::build::toolchain`). Where there is
//! none the test says so on the terminal and returns; `WASMCTRL_REQUIRE_WASM=1` (set by `make
//! test`, which installs the toolchain first) turns that into a failure.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use wit_component::DecodedWasm;

fn wasmctrl(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .arg("build")
        .args(args)
        .output()
        .expect("run wasmctrl")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ is inside the repository")
        .to_path_buf()
}

/// Writes `contents` unless the file already holds it, so cargo's mtime-based fingerprints keep
/// the guest warm between runs.
fn write_if_changed(path: &Path, contents: &str) {
    if std::fs::read_to_string(path).is_ok_and(|old| old == contents) {
        return;
    }
    let dir = path.parent().expect("a file path");
    std::fs::create_dir_all(dir).expect("create guest directory");
    std::fs::write(path, contents).expect("write guest file");
}

/// A standalone guest crate (its own `[workspace]`) implementing the contract trivially.
fn write_guest(dir: &Path) {
    write_if_changed(
        &dir.join("Cargo.toml"),
        r#"[package]
name = "build-test-plugin"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
wit-bindgen = { version = "0.61", default-features = false, features = ["macros", "realloc"] }

[workspace]
"#,
    );
    let wit = repo_root().join("wit");
    let lib = format!(
        r#"wit_bindgen::generate!({{ path: {wit:?}, world: "plugin" }});

use wasmctrl::plugin::types::{{Gvk, Selector, Watch}};

struct Plugin;

impl Guest for Plugin {{
    fn manifest(_settings: String) -> Result<Manifest, String> {{
        let kind = Gvk {{ group: String::new(), version: "v1".into(), kind: "ConfigMap".into() }};
        Ok(Manifest {{
            name: "build-test".into(),
            version: "0.1.0".into(),
            watches: Watch {{
                kind,
                selector: Selector {{ namespaces: Vec::new(), labels: String::new() }},
                predicates: Vec::new(),
            }},
            owns: Vec::new(),
            reads: Vec::new(),
            writes: Vec::new(),
            capabilities: Vec::new(),
        }})
    }}

    fn reconcile(_request: Request) -> Result<Outcome, Error> {{
        Ok(Outcome {{ actions: Vec::new(), requeue_after_ms: None }})
    }}
}}

export!(Plugin);
"#,
        wit = wit.to_str().expect("a UTF-8 repository path")
    );
    write_if_changed(&dir.join("src/lib.rs"), &lib);
}

#[test]
fn builds_a_guest_into_a_component_exporting_the_contract() {
    // Under cargo's per-target temp dir rather than a fresh one: the guest's lock file and its
    // wasm artifacts (std itself, on the Debian toolchain) survive between runs.
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("build-test");
    let guest = scratch.join("guest");
    write_guest(&guest);

    if let Err(missing) = wasmctrl::build::toolchain_for(&guest) {
        if std::env::var_os("WASMCTRL_REQUIRE_WASM").is_some_and(|v| v == "1") {
            panic!("WASMCTRL_REQUIRE_WASM=1 but no wasm toolchain: {missing}");
        }
        // Straight to stderr, not `eprintln!`: the test harness hides captured output of tests
        // that pass, and a skip must be visible.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED builds_a_guest_into_a_component: {missing}"
        );
        return;
    }

    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .arg("build")
        .arg(&guest)
        .arg("--out-dir")
        .arg(out.path())
        .env("CARGO_TARGET_DIR", scratch.join("target"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "wasmctrl build failed:\n{stderr}");

    let written = out.path().join("build-test-plugin.wasm");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        written.to_str().unwrap()
    );
    let bytes = std::fs::read(&written).unwrap();
    let DecodedWasm::Component(resolve, world) = wit_component::decode(&bytes).unwrap() else {
        panic!("{} is a WIT package, not a component", written.display());
    };
    let mut exports: Vec<String> = resolve.worlds[world]
        .exports
        .keys()
        .map(|key| resolve.name_world_key(key))
        .collect();
    exports.sort();
    assert_eq!(exports, ["manifest", "reconcile"]);
    // Nothing half-written is left beside it.
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
}

#[test]
fn a_directory_without_cargo_toml_fails_with_one_line() {
    let empty = tempfile::tempdir().unwrap();
    let output = wasmctrl(&[empty.path()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: plugin crate at "), "{stderr}");
    assert!(stderr.contains("no Cargo.toml"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn a_crate_without_cdylib_is_refused_before_compiling() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"not-a-plugin\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "").unwrap();
    let output = wasmctrl(&[dir.path()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: plugin crate `not-a-plugin`: no cdylib"),
        "{stderr}"
    );
}
