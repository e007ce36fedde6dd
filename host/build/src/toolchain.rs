//! Which Rust toolchain can build a plugin's wasm [`Target`] on this machine, and the cargo
//! command that uses it.
//!
//! Two toolchains qualify, tried in order:
//!
//! 1. **rustup** with the target's standard library installed (what plugin authors have after
//!    `rustup target add wasm32-unknown-unknown`, or `wasm32-wasip1` / `wasm32-wasip2`).
//! 2. **Debian's `rustc-web`**: its own cargo and rustc plus the std sources (`rust-web-src`), with
//!    std built for wasm by `-Zbuild-std` and linked by `wasm-ld` (`lld`). This is for machines
//!    where the rustup target cannot be downloaded; see `TOOLCHAIN.md` in the shared notes.
//!    `wasm32-wasip1` also needs Debian's `wasi-libc`, linked instead of a self-contained copy.
//!    `wasm32-wasip2` has no Debian fallback (it needs `wasm-component-ld` and a preview2 libc).
//!
//! Detection only looks at files, so it is unit-tested against a fake filesystem root. Nothing is
//! ever installed from here: when neither toolchain is complete, [`Missing`] says what to install.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The wasm target a plugin is compiled for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Target {
    /// `wasm32-unknown-unknown`: no WASI imports at all (the default).
    #[default]
    Unknown,
    /// `wasm32-wasip1`: a core module importing `wasi_snapshot_preview1`, turned into a component
    /// with the preview1 adapter; the host gives it a deny-all WASI context.
    WasiP1,
    /// `wasm32-wasip2`: already a component importing `wasi:*@0.2`, as `cargo component` makes.
    WasiP2,
}

impl Target {
    /// Every target, in the order `--target` lists them.
    pub const ALL: [Target; 3] = [Target::Unknown, Target::WasiP1, Target::WasiP2];

    /// The rustc target triple.
    pub fn triple(self) -> &'static str {
        match self {
            Target::Unknown => "wasm32-unknown-unknown",
            Target::WasiP1 => "wasm32-wasip1",
            Target::WasiP2 => "wasm32-wasip2",
        }
    }

    /// Cargo's `CARGO_TARGET_<TRIPLE>_<key>` environment variable for this target.
    fn cargo_env(self, key: &str) -> String {
        format!(
            "CARGO_TARGET_{}_{key}",
            self.triple().to_uppercase().replace('-', "_")
        )
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.triple())
    }
}

impl std::str::FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Target::ALL
            .into_iter()
            .find(|t| t.triple() == s)
            .ok_or_else(|| {
                let all: Vec<&str> = Target::ALL.iter().map(|t| t.triple()).collect();
                format!("unknown target `{s}` (one of {})", all.join(", "))
            })
    }
}

/// Where Debian's `wasi-libc` puts the wasm32 C library that std for `wasm32-wasip1` links.
const WASI_LIBC: &str = "usr/lib/wasm32-wasi";

/// The cargo profile a plugin is built with.
///
/// [`Profile::Release`] (`plugin`: opt-level 3, fat LTO, one codegen unit) is what `push`, images
/// and `make bench` use: reconciles are the hot path. [`Profile::Dev`] (`plugin-dev`: opt-level 1,
/// no LTO, 16 codegen units, incremental) is for the edit-build loop (and `make test`): a one-line
/// edit of a small plugin rebuilds in seconds rather than most of a minute. Both abort on panic
/// (wasm32 cannot unwind) and strip debug information.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// `plugin`: optimised for reconcile speed.
    #[default]
    Release,
    /// `plugin-dev`: optimised for build time.
    Dev,
}

impl Profile {
    /// The cargo profile's name (`--profile`, and the directory cargo writes under).
    pub fn name(self) -> &'static str {
        match self {
            Profile::Release => "plugin",
            Profile::Dev => "plugin-dev",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to install the Debian fallback, quoted in errors.
const DEBIAN_HINT: &str = "apt-get install rustc-web cargo-web rust-web-src lld";

/// Environment variables through which a rustup-managed process would steer cargo back to the
/// rustup toolchain (or wrap its rustc). The Debian build must use Debian's rustc for everything,
/// because `-Zbuild-std` compiles the std sources of exactly that rustc version.
const RUSTUP_ENV: &[&str] = &[
    "RUSTUP_TOOLCHAIN",
    "RUSTC",
    "CARGO",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTDOC",
    "CARGO_BUILD_RUSTC",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
    "CARGO_BUILD_RUSTDOC",
];

/// A toolchain able to compile plugins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Toolchain {
    /// rustup's toolchain with its prebuilt wasm32 standard library.
    Rustup {
        /// The cargo to run (`$CARGO` or `cargo` from `PATH`).
        cargo: PathBuf,
    },
    /// Debian's `rustc-web`, building std from `rust-web-src`.
    Debian {
        /// Debian's cargo (`/usr/bin/cargo`).
        cargo: PathBuf,
        /// Debian's rustc (`/usr/bin/rustc`).
        rustc: PathBuf,
        /// The `wasm-ld` found on `PATH`, used as the linker (Debian's `rust-lld` is a dangling
        /// symlink).
        wasm_ld: PathBuf,
        /// `PATH` for cargo, with `/usr/bin` first so every tool cargo looks up is Debian's.
        path: OsString,
        /// Debian's `wasi-libc` directory, linked instead of a self-contained libc; `None` for
        /// `wasm32-unknown-unknown`, which has no libc.
        wasi_libc: Option<PathBuf>,
    },
}

impl Toolchain {
    /// Subdirectory of the crate's target directory for this toolchain's wasm artifacts. The two
    /// rustc versions must never share artifacts (they cannot read each other's metadata).
    pub fn target_subdir(&self) -> &'static str {
        match self {
            Toolchain::Rustup { .. } => "wasm-rustup",
            Toolchain::Debian { .. } => "wasm-debian",
        }
    }

    /// A short human description for logs.
    pub fn describe(&self) -> &'static str {
        match self {
            Toolchain::Rustup { .. } => "rustup's prebuilt wasm32 std",
            Toolchain::Debian { .. } => "Debian rustc-web, std built from source",
        }
    }

    /// The `cargo build` command compiling package `package` (run in `crate_dir`) for `target`
    /// with `profile` into `target_dir`. `extra` is appended (profile definitions for crates that
    /// lack one).
    pub fn cargo_build(
        &self,
        target: Target,
        profile: Profile,
        crate_dir: &Path,
        package: &str,
        target_dir: &Path,
        extra: &[String],
    ) -> Command {
        let mut cmd = match self {
            Toolchain::Rustup { cargo } => {
                let mut cmd = Command::new(cargo);
                cmd.arg("build");
                cmd
            }
            Toolchain::Debian {
                cargo,
                rustc,
                wasm_ld,
                path,
                wasi_libc,
            } => {
                let mut cmd = Command::new(cargo);
                for var in RUSTUP_ENV {
                    cmd.env_remove(var);
                }
                // Naming Debian's rustc explicitly (rather than trusting PATH order alone) also
                // overrides a `build.rustc` in someone's cargo config.
                cmd.env("RUSTC", rustc)
                    .env("PATH", path)
                    // `-Zbuild-std` is unstable; Debian ships a stable cargo.
                    .env("RUSTC_BOOTSTRAP", "1")
                    .env(target.cargo_env("LINKER"), wasm_ld)
                    .args(["build", "-Zbuild-std=std,panic_abort"]);
                if let Some(libc) = wasi_libc {
                    // Debian's rustc ships no self-contained wasi libc and crt objects: link the
                    // system's. Target rustflags, so build scripts are unaffected.
                    cmd.env(
                        target.cargo_env("RUSTFLAGS"),
                        format!("-Clink-self-contained=no -Lnative={}", libc.display()),
                    );
                }
                cmd
            }
        };
        cmd.current_dir(crate_dir)
            .args([
                "--lib",
                "--target",
                target.triple(),
                "--profile",
                profile.name(),
                "-p",
                package,
            ])
            .arg("--target-dir")
            .arg(target_dir)
            .args(extra);
        cmd
    }
}

/// What detection looks at. [`Probe::system`] reads the real machine; tests build fake ones.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The sysroot `rustc --print sysroot` reports in the crate directory (so a
    /// `rust-toolchain.toml` there is honoured); `None` when rustc could not be run.
    pub sysroot: Option<PathBuf>,
    /// The cargo used with the rustup toolchain.
    pub cargo: PathBuf,
    /// Directory the Debian paths (`/usr/bin/cargo`, ...) are resolved under: `/` on a real
    /// machine.
    pub root: PathBuf,
    /// The caller's `PATH`.
    pub path: OsString,
}

impl Probe {
    /// Probes this machine, asking rustc about the toolchain that applies in `crate_dir`.
    pub fn system(crate_dir: &Path) -> Probe {
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let sysroot = Command::new(rustc)
            .args(["--print", "sysroot"])
            .current_dir(crate_dir)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .map(|s| PathBuf::from(s.trim()))
            .filter(|p| !p.as_os_str().is_empty());
        Probe {
            sysroot,
            cargo: std::env::var_os("CARGO")
                .unwrap_or_else(|| "cargo".into())
                .into(),
            root: PathBuf::from("/"),
            path: std::env::var_os("PATH").unwrap_or_default(),
        }
    }
}

/// Neither toolchain is usable; says what is missing and how to get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The target asked for.
    pub target: Target,
    /// The directory where the rustup wasm32 std was expected; `None` when rustc did not run.
    pub rustup_std: Option<PathBuf>,
    /// The absent parts of the Debian fallback.
    pub debian: Vec<String>,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = self.target;
        match &self.rustup_std {
            Some(dir) => write!(
                f,
                "the rustup toolchain has no {target} standard library ({} does not exist; \
                 run `rustup target add {target}`)",
                dir.display()
            )?,
            None => write!(
                f,
                "`rustc --print sysroot` did not run, so there is no rustup toolchain \
                 (install rustup, then `rustup target add {target}`)"
            )?,
        }
        if target == Target::WasiP2 {
            return write!(
                f,
                ", and there is no Debian fallback for {target} (it needs wasm-component-ld and \
                 a preview2 wasi-libc; wasm32-wasip1 builds there and loads the same way)"
            );
        }
        let hint = if target == Target::WasiP1 {
            format!("{DEBIAN_HINT} wasi-libc")
        } else {
            DEBIAN_HINT.to_owned()
        };
        write!(
            f,
            ", and the Debian fallback is incomplete (missing {}; on Debian run `{hint}`, \
             or `make deps` in the wasmctrl repository)",
            self.debian.join(", ")
        )
    }
}

/// Picks the toolchain to build plugins for `target` with, preferring rustup's prebuilt std.
pub fn detect(probe: &Probe, target: Target) -> Result<Toolchain, Missing> {
    let rustup_std = probe
        .sysroot
        .as_ref()
        .map(|s| s.join("lib/rustlib").join(target.triple()).join("lib"));
    if rustup_std.as_ref().is_some_and(|dir| dir.is_dir()) {
        return Ok(Toolchain::Rustup {
            cargo: probe.cargo.clone(),
        });
    }

    let cargo = probe.root.join("usr/bin/cargo");
    let rustc = probe.root.join("usr/bin/rustc");
    let std_src = probe
        .root
        .join("usr/lib/rustlib/src/rust/library/Cargo.toml");
    let usr_bin = probe.root.join("usr/bin");
    let path = prepend_path(&usr_bin, &probe.path);
    let wasm_ld = find_executable("wasm-ld", &path);

    let mut missing = Vec::new();
    if target == Target::WasiP2 {
        missing.push("a wasm32-wasip2 toolchain (Debian has none)".to_owned());
    }
    let wasi_libc = (target == Target::WasiP1).then(|| probe.root.join(WASI_LIBC));
    if let Some(dir) = &wasi_libc
        && !dir.join("libc.a").is_file()
    {
        missing.push(format!("{}/libc.a (package wasi-libc)", dir.display()));
    }
    for (file, package) in [
        (&cargo, "cargo-web"),
        (&rustc, "rustc-web"),
        (&std_src, "rust-web-src"),
    ] {
        if !file.is_file() {
            missing.push(format!("{} (package {package})", file.display()));
        }
    }
    if wasm_ld.is_none() {
        missing.push("wasm-ld on PATH (package lld)".to_owned());
    }
    match wasm_ld {
        Some(wasm_ld) if missing.is_empty() => Ok(Toolchain::Debian {
            cargo,
            rustc,
            wasm_ld,
            path,
            wasi_libc,
        }),
        _ => Err(Missing {
            target,
            rustup_std,
            debian: missing,
        }),
    }
}

/// `dir` followed by the entries of `path`.
fn prepend_path(dir: &Path, path: &OsStr) -> OsString {
    let dirs = std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(path));
    // Only fails for a directory containing the separator, which `/usr/bin` and entries
    // already split from PATH cannot.
    std::env::join_paths(dirs).unwrap_or_else(|_| path.to_owned())
}

/// The first executable file called `name` in `path`'s directories.
fn find_executable(name: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|file| is_executable(file))
}

#[cfg(unix)]
fn is_executable(file: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    // `metadata` follows symlinks: Debian's `wasm-ld` is a link to `wasm-ld-14`, and a dangling
    // link (like Debian's `rust-lld`) must not count.
    file.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(file: &Path) -> bool {
    file.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake machine: a root directory to create files under.
    struct Fake {
        dir: tempfile::TempDir,
    }

    impl Fake {
        fn new() -> Fake {
            Fake {
                dir: tempfile::tempdir().unwrap(),
            }
        }

        fn root(&self) -> &Path {
            self.dir.path()
        }

        fn touch(&self, rel: &str, mode: u32) -> PathBuf {
            let file = self.root().join(rel);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, b"").unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            file
        }

        fn rustup_std(&self) {
            let dir = self
                .root()
                .join("rustup/lib/rustlib/wasm32-unknown-unknown/lib");
            std::fs::create_dir_all(dir).unwrap();
        }

        fn debian(&self) {
            self.touch("usr/bin/cargo", 0o755);
            self.touch("usr/bin/rustc", 0o755);
            self.touch("usr/lib/rustlib/src/rust/library/Cargo.toml", 0o644);
            self.touch("usr/bin/wasm-ld", 0o755);
        }

        fn probe(&self) -> Probe {
            Probe {
                sysroot: Some(self.root().join("rustup")),
                cargo: "cargo".into(),
                root: self.root().to_path_buf(),
                path: self.root().join("home/bin").into(),
            }
        }
    }

    #[test]
    fn rustup_target_wins_when_installed() {
        let fake = Fake::new();
        fake.rustup_std();
        fake.debian();
        assert_eq!(
            detect(&fake.probe(), Target::Unknown),
            Ok(Toolchain::Rustup {
                cargo: "cargo".into()
            })
        );
    }

    #[test]
    fn debian_fallback_when_rustup_has_no_wasm_std() {
        let fake = Fake::new();
        fake.debian();
        let Ok(Toolchain::Debian {
            cargo,
            rustc,
            wasm_ld,
            path,
            wasi_libc: None,
        }) = detect(&fake.probe(), Target::Unknown)
        else {
            panic!("expected the Debian toolchain");
        };
        assert_eq!(cargo, fake.root().join("usr/bin/cargo"));
        assert_eq!(rustc, fake.root().join("usr/bin/rustc"));
        assert_eq!(wasm_ld, fake.root().join("usr/bin/wasm-ld"));
        let dirs: Vec<_> = std::env::split_paths(&path).collect();
        assert_eq!(
            dirs,
            [fake.root().join("usr/bin"), fake.root().join("home/bin")]
        );
    }

    #[test]
    fn wasm_ld_is_found_anywhere_on_path() {
        let fake = Fake::new();
        fake.debian();
        std::fs::remove_file(fake.root().join("usr/bin/wasm-ld")).unwrap();
        let elsewhere = fake.touch("home/bin/wasm-ld", 0o755);
        let toolchain = detect(&fake.probe(), Target::Unknown).unwrap();
        assert!(matches!(toolchain, Toolchain::Debian { wasm_ld, .. } if wasm_ld == elsewhere));
    }

    #[cfg(unix)]
    #[test]
    fn non_executable_or_dangling_wasm_ld_does_not_count() {
        let fake = Fake::new();
        fake.debian();
        fake.touch("usr/bin/wasm-ld", 0o644);
        std::fs::create_dir_all(fake.root().join("home")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/lld", fake.root().join("home/wasm-ld")).unwrap();
        let mut probe = fake.probe();
        probe.path = fake.root().join("home").into();
        let missing = detect(&probe, Target::Unknown).unwrap_err();
        assert_eq!(missing.debian, ["wasm-ld on PATH (package lld)"]);
    }

    #[test]
    fn nothing_installed_names_every_missing_piece() {
        let fake = Fake::new();
        let missing = detect(&fake.probe(), Target::Unknown).unwrap_err();
        let root = fake.root().display();
        assert_eq!(
            missing.to_string(),
            format!(
                "the rustup toolchain has no wasm32-unknown-unknown standard library \
                 ({root}/rustup/lib/rustlib/wasm32-unknown-unknown/lib does not exist; run \
                 `rustup target add wasm32-unknown-unknown`), and the Debian fallback is \
                 incomplete (missing {root}/usr/bin/cargo (package cargo-web), \
                 {root}/usr/bin/rustc (package rustc-web), \
                 {root}/usr/lib/rustlib/src/rust/library/Cargo.toml (package rust-web-src), \
                 wasm-ld on PATH (package lld); on Debian run \
                 `apt-get install rustc-web cargo-web rust-web-src lld`, or `make deps` in the \
                 wasmctrl repository)"
            )
        );
    }

    #[test]
    fn partial_debian_install_names_only_what_is_absent() {
        let fake = Fake::new();
        fake.debian();
        std::fs::remove_file(
            fake.root()
                .join("usr/lib/rustlib/src/rust/library/Cargo.toml"),
        )
        .unwrap();
        let missing = detect(&fake.probe(), Target::Unknown).unwrap_err();
        assert_eq!(missing.debian.len(), 1);
        assert!(missing.debian[0].ends_with("Cargo.toml (package rust-web-src)"));
    }

    #[test]
    fn no_rustc_at_all_is_explained() {
        let fake = Fake::new();
        let mut probe = fake.probe();
        probe.sysroot = None;
        let message = detect(&probe, Target::Unknown).unwrap_err().to_string();
        assert!(
            message.starts_with("`rustc --print sysroot` did not run"),
            "{message}"
        );
        assert!(
            message.contains("rustup target add wasm32-unknown-unknown"),
            "{message}"
        );
    }

    fn envs(cmd: &Command) -> Vec<(String, Option<String>)> {
        let mut envs: Vec<_> = cmd
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        envs.sort();
        envs
    }

    fn args(cmd: &Command) -> Vec<String> {
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn rustup_command_uses_the_prebuilt_std() {
        let toolchain = Toolchain::Rustup {
            cargo: "/rustup/cargo".into(),
        };
        let cmd = toolchain.cargo_build(
            Target::Unknown,
            Profile::Release,
            Path::new("/src/p"),
            "my-plugin",
            Path::new("/t/w"),
            &[],
        );
        assert_eq!(cmd.get_program(), "/rustup/cargo");
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/src/p")));
        assert_eq!(
            args(&cmd),
            [
                "build",
                "--lib",
                "--target",
                "wasm32-unknown-unknown",
                "--profile",
                "plugin",
                "-p",
                "my-plugin",
                "--target-dir",
                "/t/w"
            ]
        );
        assert!(envs(&cmd).is_empty());
        assert_eq!(toolchain.target_subdir(), "wasm-rustup");
    }

    #[test]
    fn debian_command_builds_std_and_sheds_rustup() {
        let toolchain = Toolchain::Debian {
            cargo: "/usr/bin/cargo".into(),
            rustc: "/usr/bin/rustc".into(),
            wasm_ld: "/usr/bin/wasm-ld".into(),
            path: "/usr/bin:/bin".into(),
            wasi_libc: None,
        };
        let extra = ["--config".to_owned(), "x=1".to_owned()];
        let cmd = toolchain.cargo_build(
            Target::Unknown,
            Profile::Dev,
            Path::new("/src/p"),
            "p",
            Path::new("/t/w"),
            &extra,
        );
        assert_eq!(cmd.get_program(), "/usr/bin/cargo");
        assert_eq!(&args(&cmd)[..2], ["build", "-Zbuild-std=std,panic_abort"]);
        assert_eq!(&args(&cmd)[args(&cmd).len() - 2..], ["--config", "x=1"]);
        assert!(
            args(&cmd)
                .windows(2)
                .any(|w| w == ["--profile", "plugin-dev"])
        );
        let envs = envs(&cmd);
        let set = |k: &str, v: &str| envs.contains(&(k.to_owned(), Some(v.to_owned())));
        assert!(set("PATH", "/usr/bin:/bin"));
        assert!(set("RUSTC_BOOTSTRAP", "1"));
        assert!(set("RUSTC", "/usr/bin/rustc"));
        assert!(set(
            "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER",
            "/usr/bin/wasm-ld"
        ));
        for var in ["RUSTUP_TOOLCHAIN", "CARGO", "RUSTC_WRAPPER", "RUSTDOC"] {
            assert!(
                envs.contains(&(var.to_owned(), None)),
                "{var} is not removed"
            );
        }
        assert_eq!(toolchain.target_subdir(), "wasm-debian");
    }

    #[test]
    fn targets_parse_from_their_triples() {
        for target in Target::ALL {
            assert_eq!(target.triple().parse::<Target>(), Ok(target));
        }
        assert_eq!(Target::default(), Target::Unknown);
        let err = "wasm32-wasi".parse::<Target>().unwrap_err();
        assert_eq!(
            err,
            "unknown target `wasm32-wasi` (one of wasm32-unknown-unknown, wasm32-wasip1, \
             wasm32-wasip2)"
        );
    }

    #[test]
    fn wasip1_on_debian_links_the_system_wasi_libc() {
        let fake = Fake::new();
        fake.debian();
        let missing = detect(&fake.probe(), Target::WasiP1).unwrap_err();
        assert_eq!(
            missing.debian,
            [format!(
                "{}/usr/lib/wasm32-wasi/libc.a (package wasi-libc)",
                fake.root().display()
            )]
        );
        assert!(
            missing
                .to_string()
                .contains("rustup target add wasm32-wasip1")
        );
        assert!(missing.to_string().contains("lld wasi-libc`"));
        fake.touch("usr/lib/wasm32-wasi/libc.a", 0o644);
        let toolchain = detect(&fake.probe(), Target::WasiP1).unwrap();
        let libc = fake.root().join("usr/lib/wasm32-wasi");
        assert!(
            matches!(&toolchain, Toolchain::Debian { wasi_libc: Some(dir), .. } if *dir == libc)
        );
        let cmd = toolchain.cargo_build(
            Target::WasiP1,
            Profile::Release,
            Path::new("/p"),
            "p",
            Path::new("/t"),
            &[],
        );
        assert!(
            args(&cmd)
                .windows(2)
                .any(|w| w == ["--target", "wasm32-wasip1"])
        );
        let envs = envs(&cmd);
        let flags = format!("-Clink-self-contained=no -Lnative={}", libc.display());
        assert!(envs.contains(&("CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS".into(), Some(flags))));
        assert!(envs.contains(&(
            "CARGO_TARGET_WASM32_WASIP1_LINKER".into(),
            Some(fake.root().join("usr/bin/wasm-ld").display().to_string())
        )));
        // The rustup target, when installed, needs none of that.
        std::fs::create_dir_all(fake.root().join("rustup/lib/rustlib/wasm32-wasip1/lib")).unwrap();
        assert!(matches!(
            detect(&fake.probe(), Target::WasiP1),
            Ok(Toolchain::Rustup { .. })
        ));
    }

    #[test]
    fn wasip2_needs_the_rustup_target() {
        let fake = Fake::new();
        fake.debian();
        fake.touch("usr/lib/wasm32-wasi/libc.a", 0o644);
        let message = detect(&fake.probe(), Target::WasiP2)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("run `rustup target add wasm32-wasip2`"),
            "{message}"
        );
        assert!(message.contains("no Debian fallback"), "{message}");
        std::fs::create_dir_all(fake.root().join("rustup/lib/rustlib/wasm32-wasip2/lib")).unwrap();
        assert!(matches!(
            detect(&fake.probe(), Target::WasiP2),
            Ok(Toolchain::Rustup { .. })
        ));
    }
}
