//! `wasmctrl build` (being written).

use std::process::ExitCode;

/// Arguments of `wasmctrl build`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
