//! Building plugin crates into WebAssembly components (`wasmctrl build`).
//!
//! A plugin is an ordinary Rust `cdylib` crate that uses wit-bindgen against `wit/plugin.wit`.
//! Building one takes four steps, each its own function below: ask `cargo metadata` for the
//! package name, target directory and wasm [`Target`]; pick a toolchain that can compile for that
//! target ([`toolchain`]); run `cargo build` with the `plugin` profile; wrap the resulting core
//! module into a component with `wit-component` (a `wasm32-wasip1` module through the preview1
//! adapter of the wasmtime release the host links; a `wasm32-wasip2` build already is one) and
//! write it atomically, so that a host watching the output directory never loads a half-written
//! file. Plugin authors need no tool besides cargo.
//!
//! The target is `--target`, else `[package.metadata.wasmctrl] target = "..."` in the crate's
//! `Cargo.toml`, else `wasm32-unknown-unknown`.
//!
//! A directory with a `pyproject.toml` instead is a Python plugin ([`python`]), one with a
//! `package.json` a TypeScript (or JavaScript) one ([`typescript`]).

pub mod immortal;
pub mod python;
pub mod toolchain;
pub mod typescript;

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use serde::Deserialize;

pub use toolchain::{Missing, Probe, Profile, Target, Toolchain, detect};

/// What to build and where to put it.
#[derive(Debug, Clone)]
pub struct Options {
    /// The plugin crate's directory (holding its `Cargo.toml`).
    pub crate_dir: PathBuf,
    /// Where `<package-name>.wasm` goes; defaults to `<target dir>/plugins` of the crate's
    /// workspace.
    pub out_dir: Option<PathBuf>,
    /// The wasm target; `None` takes the crate's `package.metadata.wasmctrl.target`, else
    /// [`Target::Unknown`].
    pub target: Option<Target>,
    /// The cargo profile: [`Profile::Release`] for what ships, [`Profile::Dev`] for the edit loop.
    pub profile: Profile,
}

/// A built component: where it was written and what it weighs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// `<out_dir>/<package-name>.wasm`.
    pub path: PathBuf,
    /// The component's size in bytes.
    pub size: u64,
    /// How it was built: `plugin profile`, `plugin-dev profile`, `componentize-py`.
    pub how: String,
}

/// Why a plugin could not be built. Every message names the crate (or its directory when the
/// name is not known yet).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The directory has no `Cargo.toml` (nor `pyproject.toml`).
    #[error("plugin at {}: no Cargo.toml or pyproject.toml there", dir.display())]
    NoManifest {
        /// The directory given.
        dir: PathBuf,
    },
    /// `cargo metadata` failed or printed something unreadable.
    #[error("plugin crate at {}: cargo metadata failed: {detail}", dir.display())]
    Metadata {
        /// The directory given.
        dir: PathBuf,
        /// Cargo's complaint, on one line.
        detail: String,
    },
    /// The `Cargo.toml` is a virtual workspace manifest, not a package.
    #[error("plugin crate at {}: Cargo.toml declares no package (a virtual workspace?)", dir.display())]
    NotAPackage {
        /// The directory given.
        dir: PathBuf,
    },
    /// The package has no `cdylib` library, so cargo would produce no `.wasm`.
    #[error(
        "plugin crate `{krate}`: no cdylib library target; add `[lib] crate-type = [\"cdylib\"]` \
         (plus \"rlib\" to keep native unit tests) to its Cargo.toml"
    )]
    NotCdylib {
        /// The package name.
        krate: String,
    },
    /// `package.metadata.wasmctrl.target` names no known target.
    #[error("plugin crate `{krate}`: package.metadata.wasmctrl.target: {reason}")]
    BadTarget {
        /// The package name.
        krate: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No toolchain on this machine can compile for the plugin's target.
    #[error("plugin crate `{krate}`: cannot compile for {}: {missing}", missing.target)]
    NoToolchain {
        /// The package name.
        krate: String,
        /// What is missing and how to install it.
        missing: Missing,
    },
    /// A project's own description (`pyproject.toml`) is missing something or malformed.
    #[error("plugin project at {}: {detail}", dir.display())]
    Project {
        /// The directory given.
        dir: PathBuf,
        /// What is wrong, on one line.
        detail: String,
    },
    /// The scratch directory a build writes its inputs to could not be made.
    #[error("plugin `{plugin}`: preparing the build's scratch directory")]
    Scratch {
        /// The plugin's name.
        plugin: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A build tool other than cargo (componentize-py) ran and failed.
    #[error("plugin `{plugin}`: {program} failed ({status}); its errors are printed above")]
    Tool {
        /// The plugin's name.
        plugin: String,
        /// The tool.
        program: String,
        /// Its exit status.
        status: ExitStatus,
    },
    /// Cargo (or another build tool) could not be started.
    #[error("plugin `{krate}`: could not run {program}")]
    Spawn {
        /// The package name.
        krate: String,
        /// The program that failed to start.
        program: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Cargo ran and failed; its diagnostics went to stderr.
    #[error("plugin crate `{krate}`: cargo build failed ({status}); its errors are printed above")]
    Cargo {
        /// The package name.
        krate: String,
        /// Cargo's exit status.
        status: ExitStatus,
    },
    /// Cargo succeeded but left no core module where one was expected.
    #[error(
        "plugin crate `{krate}`: cargo produced no core module at {}; is \"cdylib\" in its \
         crate-type?",
        path.display()
    )]
    ModuleMissing {
        /// The package name.
        krate: String,
        /// Where the module was expected.
        path: PathBuf,
    },
    /// Reading the core module failed.
    #[error("plugin `{krate}`: reading {}", path.display())]
    Read {
        /// The package name.
        krate: String,
        /// The module's path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The core module is not a valid wit-bindgen guest of a well-formed world.
    #[error("plugin crate `{krate}`: turning {} into a component failed: {detail}", path.display())]
    Encode {
        /// The package name.
        krate: String,
        /// The core module's path.
        path: PathBuf,
        /// wit-component's error chain, on one line.
        detail: String,
    },
    /// Writing the component failed.
    #[error("plugin `{krate}`: writing {}", path.display())]
    Write {
        /// The package name.
        krate: String,
        /// The component's path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// The plugin contract, written where another language's build tool reads it.
pub const WIT: &str = include_str!("../../../sdk/wit/plugin.wit");

/// The world plugins in other languages are built for: their SDKs answer `declare` with an
/// empty declaration when the plugin serves no webhooks.
pub const WORLD: &str = "plugin-with-webhooks";

/// Builds the plugin in `opts.crate_dir` (a Rust crate, or a Python project) and returns the
/// written component, `<out_dir>/<name>.wasm`. The tools' output goes to stderr as it happens.
pub fn build(opts: &Options) -> Result<Built, Error> {
    let dir = &opts.crate_dir;
    if dir.join("Cargo.toml").is_file() {
        build_crate(opts)
    } else if dir.join("pyproject.toml").is_file() {
        python::build(&absolute(dir), opts.out_dir.as_deref())
    } else if dir.join("package.json").is_file() {
        typescript::build(&absolute(dir), opts.out_dir.as_deref())
    } else {
        Err(Error::NoManifest { dir: dir.clone() })
    }
}

/// [`build`] of a Rust crate.
fn build_crate(opts: &Options) -> Result<Built, Error> {
    let dir = &opts.crate_dir;
    let (package, meta) = package_at(dir)?;
    let krate = package.name.clone();
    let lib = package
        .targets
        .iter()
        .find(|t| t.crate_types.iter().any(|c| c == "cdylib"))
        .ok_or_else(|| Error::NotCdylib {
            krate: krate.clone(),
        })?;

    let target = match opts.target {
        Some(target) => target,
        None => package.target().map_err(|reason| Error::BadTarget {
            krate: krate.clone(),
            reason,
        })?,
    };
    let toolchain = detect(&Probe::system(dir), target).map_err(|missing| Error::NoToolchain {
        krate: krate.clone(),
        missing,
    })?;
    let wasm_target_dir = meta.target_directory.join(toolchain.target_subdir());
    let profile = opts.profile;
    let extra = if defines_profile(&meta.workspace_root.join("Cargo.toml"), profile) {
        Vec::new()
    } else {
        default_profile_args(profile)
    };
    tracing::info!(plugin.name = %krate, %target, %profile, toolchain = toolchain.describe(), "building plugin");
    if matches!(toolchain, Toolchain::Debian { .. }) && !wasm_target_dir.exists() {
        tracing::info!(
            plugin.name = %krate,
            "first build into {}: std is compiled from source, this takes a few minutes",
            wasm_target_dir.display()
        );
    }
    let mut cmd = toolchain.cargo_build(target, profile, dir, &krate, &wasm_target_dir, &extra);
    run_cargo(&mut cmd, &krate)?;

    let module = wasm_target_dir
        .join(target.triple())
        .join(profile.name())
        .join(format!("{}.wasm", lib.name.replace('-', "_")));
    let component = component_of(&module, target, &krate)?;

    let out_dir = opts
        .out_dir
        .clone()
        .unwrap_or_else(|| meta.target_directory.join("plugins"));
    let out = out_dir.join(format!("{krate}.wasm"));
    write_atomically(&out, &component).map_err(|source| Error::Write {
        krate,
        path: out.clone(),
        source,
    })?;
    Ok(Built {
        path: out,
        size: component.len() as u64,
        how: format!("{profile} profile"),
    })
}

/// The component made of the core module cargo wrote at `module` for `krate`.
fn component_of(module: &Path, target: Target, krate: &str) -> Result<Vec<u8>, Error> {
    let bytes = fs::read(module).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => Error::ModuleMissing {
            krate: krate.to_owned(),
            path: module.to_owned(),
        },
        _ => Error::Read {
            krate: krate.to_owned(),
            path: module.to_owned(),
            source,
        },
    })?;
    componentize(&bytes, target).map_err(|err| Error::Encode {
        krate: krate.to_owned(),
        path: module.to_owned(),
        detail: format!("{err:#}"),
    })
}

/// Whether some toolchain on this machine can build plugins in `crate_dir` (tests use this to
/// decide whether to skip, with the reason).
pub fn toolchain_for(crate_dir: &Path, target: Target) -> Result<Toolchain, Missing> {
    detect(&Probe::system(crate_dir), target)
}

/// The preview1 component adapter (reactor flavour: no `_start`, plugins export functions) of
/// the wasmtime release the host links, so what it imports is what the host provides.
const PREVIEW1_ADAPTER: &[u8] =
    wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;

/// Wraps a wit-bindgen core module (which carries its world in a custom section) into a
/// validated component. A `wasm32-wasip1` module's `wasi_snapshot_preview1` imports are
/// satisfied by the preview1 adapter, which imports `wasi:*@0.2` instead; what a `wasm32-wasip2`
/// build produced is already a component and is kept as it is.
fn componentize(module: &[u8], target: Target) -> anyhow::Result<Vec<u8>> {
    if is_component(module) {
        return Ok(module.to_vec());
    }
    let mut encoder = wit_component::ComponentEncoder::default();
    encoder.module(module)?.validate(true);
    if target != Target::Unknown {
        encoder.adapter("wasi_snapshot_preview1", PREVIEW1_ADAPTER)?;
    }
    encoder.encode()
}

/// Whether `bytes` is a component rather than a core module: the binary format's "layer" field
/// (after the magic and the 16-bit version) is 1 for components, 0 for core modules.
fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [1, 0]
}

/// The parts of `cargo metadata` output used here.
#[derive(Debug, Deserialize)]
struct Metadata {
    packages: Vec<Package>,
    target_directory: PathBuf,
    workspace_root: PathBuf,
}

#[derive(Debug, Deserialize)]
struct Package {
    name: String,
    manifest_path: PathBuf,
    targets: Vec<CargoTarget>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
}

impl Package {
    /// `[package.metadata.wasmctrl] target`, else the default target.
    fn target(&self) -> Result<Target, String> {
        let Some(value) = self
            .metadata
            .as_ref()
            .and_then(|m| m.get("wasmctrl"))
            .and_then(|w| w.get("target"))
        else {
            return Ok(Target::default());
        };
        value
            .as_str()
            .ok_or_else(|| format!("expected a string, found {value}"))?
            .parse()
    }
}

/// A cargo build target (lib, bin, ...) of a package.
#[derive(Debug, Deserialize)]
struct CargoTarget {
    name: String,
    crate_types: Vec<String>,
}

/// The package whose manifest is `<dir>/Cargo.toml`, with its workspace's metadata. The
/// directory may be a workspace member, so the match is on the manifest path rather than on
/// "the only package".
fn package_at(dir: &Path) -> Result<(Package, Metadata), Error> {
    let fail = |detail: String| Error::Metadata {
        dir: dir.to_path_buf(),
        detail,
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(dir)
        .output()
        .map_err(|err| fail(format!("could not run {}: {err}", cargo.to_string_lossy())))?;
    if !out.status.success() {
        return Err(fail(one_line(&String::from_utf8_lossy(&out.stderr))));
    }
    let mut meta: Metadata = serde_json::from_slice(&out.stdout)
        .map_err(|err| fail(format!("unreadable output: {err}")))?;
    let manifest = canonical(&dir.join("Cargo.toml"));
    let index = meta
        .packages
        .iter()
        .position(|p| canonical(&p.manifest_path) == manifest)
        .ok_or_else(|| Error::NotAPackage {
            dir: dir.to_path_buf(),
        })?;
    let package = meta.packages.swap_remove(index);
    Ok((package, meta))
}

/// `dir` from the root: other languages' tools run in the project's directory, where a path
/// relative to ours would mean something else.
fn absolute(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// Symlinks resolved where possible, so `plugins/x` and `./plugins/x/` compare equal.
fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Cargo's multi-line error as one line, for a one-line CLI error.
fn one_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "Caused by:")
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect();
    if lines.is_empty() {
        "no error message".to_owned()
    } else {
        lines.join(": ")
    }
}

/// The scratch directory of one build by another language's tool: the contract's WIT in
/// `wit/`, room for what the build writes beside it.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn wit_dir(&self) -> PathBuf {
        self.0.path().join("wit")
    }

    /// Where a build writes the modules it generates.
    fn entry_dir(&self) -> PathBuf {
        self.0.path().join("entry")
    }
}

/// Builds `plugin` with another language's tool: `command` is given the scratch directory and
/// the path the tool must write the component to, and returns the tool's command line;
/// `finish` may then change the component's bytes, and says how it was built (`Built::how`);
/// the component is then written to `<out_dir>/<plugin>.wasm`.
fn in_scratch(
    plugin: &str,
    out_dir: &Path,
    command: impl FnOnce(&Scratch, &Path) -> io::Result<Command>,
    finish: impl FnOnce(&mut [u8]) -> String,
) -> Result<Built, Error> {
    let scratch_error = |source| Error::Scratch {
        plugin: plugin.to_owned(),
        source,
    };
    let scratch = tempfile::Builder::new()
        .prefix("wasmctrl-build-")
        .tempdir()
        .map(Scratch)
        .map_err(scratch_error)?;
    let component = scratch.0.path().join("plugin.wasm");
    fs::create_dir_all(scratch.wit_dir())
        .and_then(|()| fs::write(scratch.wit_dir().join("plugin.wit"), WIT))
        .map_err(scratch_error)?;
    let mut cmd = command(&scratch, &component).map_err(scratch_error)?;
    run_tool(&mut cmd, plugin)?;
    let mut bytes = fs::read(&component).map_err(|source| Error::Read {
        krate: plugin.to_owned(),
        path: component.clone(),
        source,
    })?;
    let how = finish(&mut bytes);
    let out = out_dir.join(format!("{plugin}.wasm"));
    write_atomically(&out, &bytes).map_err(|source| Error::Write {
        krate: plugin.to_owned(),
        path: out.clone(),
        source,
    })?;
    Ok(Built {
        path: out,
        size: bytes.len() as u64,
        how,
    })
}

/// Whether `name` can name a plugin built from another language's project (its component's
/// file name): lowercase letters, digits, '-' and '_', starting with a letter.
fn is_plugin_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Runs a build tool other than cargo, its stdout sent to our stderr (our stdout carries only
/// the written paths).
fn run_tool(cmd: &mut Command, plugin: &str) -> Result<(), Error> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let status = cmd
        .stdout(io::stderr())
        .status()
        .map_err(|source| Error::Spawn {
            krate: plugin.to_owned(),
            program: program.clone(),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Tool {
            plugin: plugin.to_owned(),
            program,
            status,
        })
    }
}

fn run_cargo(cmd: &mut Command, krate: &str) -> Result<(), Error> {
    // Cargo's stdout goes to our stderr: our stdout carries only the written paths.
    let status = cmd
        .stdout(io::stderr())
        .status()
        .map_err(|source| Error::Spawn {
            krate: krate.to_owned(),
            program: cmd.get_program().to_string_lossy().into_owned(),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Cargo {
            krate: krate.to_owned(),
            status,
        })
    }
}

/// The `plugin` profile, as in the wasmctrl workspace's root `Cargo.toml`, for crates whose own
/// workspace does not define one (a standalone plugin crate). Kept in step by a unit test.
const RELEASE_PROFILE: &[(&str, &str)] = &[
    ("inherits", "\"release\""),
    ("opt-level", "3"),
    ("lto", "true"),
    ("codegen-units", "1"),
    ("panic", "\"abort\""),
    ("debug", "false"),
    ("strip", "true"),
];

/// The `plugin-dev` profile, likewise. `inherits = "release"` rather than `"dev"`: the dev
/// profile's debug assertions and overflow checks would make a dev build behave unlike what
/// ships, and opt-level 1 keeps reconciles within a small factor of the release build's speed.
const DEV_PROFILE: &[(&str, &str)] = &[
    ("inherits", "\"release\""),
    ("opt-level", "1"),
    ("lto", "false"),
    ("codegen-units", "16"),
    ("incremental", "true"),
    ("panic", "\"abort\""),
    ("debug", "false"),
    ("strip", "true"),
];

fn profile_table(profile: Profile) -> &'static [(&'static str, &'static str)] {
    match profile {
        Profile::Release => RELEASE_PROFILE,
        Profile::Dev => DEV_PROFILE,
    }
}

fn default_profile_args(profile: Profile) -> Vec<String> {
    let name = profile.name();
    profile_table(profile)
        .iter()
        .flat_map(|(key, value)| {
            [
                "--config".to_owned(),
                format!("profile.{name}.{key}={value}"),
            ]
        })
        .collect()
}

/// Whether the workspace manifest has a `[profile.<name>]` table for `profile`. A plain text
/// check: the workspace has no TOML parser, and cargo config given on the command line would
/// override (not complement) the workspace's own profile, so it is only passed when there is
/// none.
fn defines_profile(manifest: &Path, profile: Profile) -> bool {
    let header = format!("[profile.{}]", profile.name());
    fs::read_to_string(manifest)
        .is_ok_and(|text| text.lines().any(|l| l.trim_start().starts_with(&header)))
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so
/// readers see either the old file or the complete new one. The temporary name does not end in
/// `.wasm`, so a directory watcher filtering on that suffix ignores it.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_manifest_is_one_line_naming_the_dir() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            crate_dir: dir.path().join("nope"),
            out_dir: None,
            target: None,
            profile: Profile::Release,
        };
        let err = build(&opts).unwrap_err();
        assert!(matches!(err, Error::NoManifest { .. }));
        let message = err.to_string();
        assert!(message.contains("nope"), "{message}");
        assert!(!message.contains('\n'), "{message}");
    }

    #[test]
    fn error_messages_name_the_crate() {
        let missing = Missing {
            target: Target::Unknown,
            rustup_std: None,
            debian: vec!["wasm-ld on PATH".into()],
        };
        let errors = [
            Error::NotCdylib { krate: "vm".into() },
            Error::NoToolchain {
                krate: "vm".into(),
                missing,
            },
            Error::ModuleMissing {
                krate: "vm".into(),
                path: "/t/vm.wasm".into(),
            },
            Error::Encode {
                krate: "vm".into(),
                path: "/t/vm.wasm".into(),
                detail: "bad".into(),
            },
        ];
        for err in errors {
            let message = err.to_string();
            assert!(message.starts_with("plugin crate `vm`: "), "{message}");
            assert!(!message.contains('\n'), "{message}");
        }
        let message = Error::ModuleMissing {
            krate: "vm".into(),
            path: "/x".into(),
        }
        .to_string();
        assert!(message.contains("cdylib"), "{message}");
    }

    #[test]
    fn cargo_errors_collapse_to_one_line() {
        let stderr = "error: failed to parse manifest at `/x/Cargo.toml`\n\nCaused by:\n  \
                      missing field `name`\n";
        assert_eq!(
            one_line(stderr),
            "failed to parse manifest at `/x/Cargo.toml`: missing field `name`"
        );
        assert_eq!(one_line(""), "no error message");
    }

    #[test]
    fn default_profiles_match_the_workspace_profiles() {
        // The defaults given to standalone crates must be the profiles workspace members get.
        let root = include_str!("../../../Cargo.toml");
        for profile in [Profile::Release, Profile::Dev] {
            let header = format!("[profile.{}]", profile.name());
            let mut in_table = false;
            let mut workspace: Vec<String> = Vec::new();
            for line in root.lines().map(str::trim) {
                if line.starts_with('[') {
                    in_table = line == header;
                } else if in_table && !line.is_empty() && !line.starts_with('#') {
                    workspace.push(line.replace(' ', ""));
                }
            }
            let mut ours: Vec<String> = profile_table(profile)
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            workspace.sort();
            ours.sort();
            assert_eq!(workspace, ours, "{header}");
        }
    }

    #[test]
    fn target_comes_from_package_metadata() {
        let package = |metadata: serde_json::Value| Package {
            name: "p".into(),
            manifest_path: "/p/Cargo.toml".into(),
            targets: Vec::new(),
            metadata: Some(metadata),
        };
        assert_eq!(
            package(serde_json::json!(null)).target(),
            Ok(Target::Unknown)
        );
        assert_eq!(
            package(serde_json::json!({"wasmctrl": {"target": "wasm32-wasip1"}})).target(),
            Ok(Target::WasiP1)
        );
        let err = package(serde_json::json!({"wasmctrl": {"target": 1}}))
            .target()
            .unwrap_err();
        assert_eq!(err, "expected a string, found 1");
        let err = package(serde_json::json!({"wasmctrl": {"target": "wasm64"}}))
            .target()
            .unwrap_err();
        assert!(err.starts_with("unknown target `wasm64`"), "{err}");
    }

    #[test]
    fn components_are_kept_and_core_modules_encoded() {
        let component = wat::parse_str("(component)").unwrap();
        assert!(is_component(&component));
        assert_eq!(componentize(&component, Target::WasiP2).unwrap(), component);
        let module = wat::parse_str("(module)").unwrap();
        assert!(!is_component(&module));
        // A preview1 module's imports are served by the embedded adapter.
        let p1 = wat::parse_str(
            r#"(module (import "wasi_snapshot_preview1" "random_get"
                (func (param i32 i32) (result i32))) (memory (export "memory") 1))"#,
        )
        .unwrap();
        assert!(componentize(&p1, Target::Unknown).is_err());
        let encoded = componentize(&p1, Target::WasiP1).unwrap();
        assert!(is_component(&encoded));
    }

    #[test]
    fn plugin_profile_detection() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("Cargo.toml");
        fs::write(&manifest, "[workspace]\n\n[profile.release]\nlto = true\n").unwrap();
        assert!(!defines_profile(&manifest, Profile::Release));
        fs::write(
            &manifest,
            "[workspace]\n  [profile.plugin] # small\ninherits = \"release\"\n",
        )
        .unwrap();
        assert!(defines_profile(&manifest, Profile::Release));
        // `[profile.plugin]` does not define `plugin-dev`, nor the other way round.
        assert!(!defines_profile(&manifest, Profile::Dev));
        fs::write(&manifest, "[profile.plugin-dev]\nopt-level = 1\n").unwrap();
        assert!(defines_profile(&manifest, Profile::Dev));
        assert!(!defines_profile(&manifest, Profile::Release));
        assert!(!defines_profile(
            &dir.path().join("absent.toml"),
            Profile::Release
        ));
        assert_eq!(
            default_profile_args(Profile::Release)[..2],
            ["--config", "profile.plugin.inherits=\"release\""]
        );
        assert!(
            default_profile_args(Profile::Dev)
                .iter()
                .any(|a| a == "profile.plugin-dev.codegen-units=16")
        );
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("sub/p.wasm");
        write_atomically(&out, b"one").unwrap();
        write_atomically(&out, b"two").unwrap();
        assert_eq!(fs::read(&out).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path().join("sub")).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn componentize_rejects_what_is_not_a_module() {
        assert!(componentize(b"not wasm", Target::Unknown).is_err());
    }
}
