//! `wasmctrl build`: compile plugin crates (and Python projects) to WebAssembly components.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use crate::build::{self, Built, Options, Profile, Target};

/// Arguments of `wasmctrl build`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Plugin directories: Rust crates (a Cargo.toml with a cdylib library) or Python projects
    /// (a pyproject.toml whose `[tool.wasmctrl] plugin` names the reconciler class, built with
    /// componentize-py: `$WASMCTRL_COMPONENTIZE_PY`, else the one on PATH).
    #[arg(required = true, value_name = "PLUGIN_DIR")]
    pub crate_dir: Vec<PathBuf>,
    /// Where to write `<name>.wasm` (default: `<target dir>/plugins` of each crate's
    /// workspace; `<project>/target/plugins` for a Python project).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// The wasm target (wasm32-unknown-unknown, wasm32-wasip1 or wasm32-wasip2; default: the
    /// crate's `[package.metadata.wasmctrl] target`, else wasm32-unknown-unknown).
    #[arg(long, value_name = "TRIPLE")]
    pub target: Option<Target>,
    /// Build with the `plugin-dev` profile (opt-level 1, no LTO, incremental): seconds per edit
    /// instead of most of a minute, for `wasmctrl dev`'s hot reload. Without it, the `plugin`
    /// profile (opt-level 3, LTO): what `wasmctrl push` and images should carry. Python
    /// projects have one build.
    #[arg(long)]
    pub dev: bool,
}

/// Builds every crate, printing each written component's path on stdout and, on stderr, how long
/// it took and how large it is.
///
/// A failing crate does not stop the others (a `make plugins` run reports every broken plugin at
/// once); the exit code is failure if any failed.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let total = args.crate_dir.len();
    let profile = if args.dev {
        Profile::Dev
    } else {
        Profile::Release
    };
    let mut failures = Vec::new();
    for crate_dir in args.crate_dir {
        let opts = Options {
            crate_dir,
            out_dir: args.out_dir.clone(),
            target: args.target,
            profile,
        };
        let started = Instant::now();
        match build::build(&opts) {
            Ok(built) => {
                eprintln!("{}", summary(&built, started.elapsed().as_secs_f64()));
                super::say(built.path.display());
            }
            Err(err) => failures.push(err),
        }
    }
    match failures.len() {
        0 => Ok(ExitCode::SUCCESS),
        // One failure is the whole story: let `main` print it as the single error line.
        1 if total == 1 => Err(failures.remove(0).into()),
        failed => {
            for err in failures {
                eprintln!("error: {:#}", anyhow::Error::from(err));
            }
            anyhow::bail!("{failed} of {total} plugins failed to build")
        }
    }
}

/// One line saying what was built, how (the profile), how long it took and its size:
/// `built target/plugins/vm.wasm (plugin-dev profile) in 6.4 s, 1.2 MiB`.
fn summary(built: &Built, seconds: f64) -> String {
    format!(
        "built {} ({}) in {seconds:.1} s, {}",
        built.path.display(),
        built.how,
        size(built.size)
    )
}

fn size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b >= KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else if b >= KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_names_profile_time_and_size() {
        let built = Built {
            path: PathBuf::from("out/vm.wasm"),
            size: 1_258_291,
            how: format!("{} profile", Profile::Dev),
        };
        assert_eq!(
            summary(&built, 6.44),
            "built out/vm.wasm (plugin-dev profile) in 6.4 s, 1.2 MiB"
        );
        assert_eq!(size(512), "512 B");
        assert_eq!(size(2048), "2.0 KiB");
    }
}
