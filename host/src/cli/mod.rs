//! The `wasmctrl` command line: argument parsing and one module per subcommand.

mod apiserver;
mod build;
mod test;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Kubernetes controllers as sandboxed WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "wasmctrl", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build a plugin crate into a WebAssembly component (`target/plugins/<name>.wasm`).
    Build(build::Args),
    /// Run one reconcile of a plugin offline and print its result as JSON.
    Test(test::Args),
    /// Run the embedded Kubernetes API server on its own.
    Apiserver(apiserver::Args),
}

/// Parses the command line, runs the subcommand and maps its outcome to an exit code.
///
/// Errors print as one line (`error: <cause>: <cause>...`) so scripts and humans can read them.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let result = match cli.command {
        Command::Build(args) => build::run(args),
        Command::Test(args) => test::run(args),
        Command::Apiserver(args) => apiserver::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr (stdout carries command output such as `wasmctrl test` JSON); `RUST_LOG`
/// filters them, `WASMCTRL_LOG_FORMAT=json` switches to JSON lines.
fn init_tracing() {
    use tracing_subscriber::{EnvFilter, fmt};
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let json = std::env::var("WASMCTRL_LOG_FORMAT").is_ok_and(|v| v == "json");
    // A second init (tests calling `main` twice) is harmless; ignore it.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
