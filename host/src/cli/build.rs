//! `wasmctrl build`: compile plugin crates to WebAssembly components.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::build::{self, Options, Target};

/// Arguments of `wasmctrl build`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Plugin crate directories (each holding a Cargo.toml with a cdylib library).
    #[arg(required = true, value_name = "CRATE_DIR")]
    pub crate_dir: Vec<PathBuf>,
    /// Where to write `<package-name>.wasm` (default: `<target dir>/plugins` of each crate's
    /// workspace).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// The wasm target (wasm32-unknown-unknown, wasm32-wasip1 or wasm32-wasip2; default: the
    /// crate's `[package.metadata.wasmctrl] target`, else wasm32-unknown-unknown).
    #[arg(long, value_name = "TRIPLE")]
    pub target: Option<Target>,
}

/// Builds every crate, printing each written component's path on stdout.
///
/// A failing crate does not stop the others (a `make plugins` run reports every broken plugin at
/// once); the exit code is failure if any failed.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let total = args.crate_dir.len();
    let mut failures = Vec::new();
    for crate_dir in args.crate_dir {
        let opts = Options {
            crate_dir,
            out_dir: args.out_dir.clone(),
            target: args.target,
        };
        match build::build(&opts) {
            Ok(path) => super::say(path.display()),
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
