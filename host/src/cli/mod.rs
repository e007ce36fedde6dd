//! The `wasmctrl` command line: argument parsing and one module per subcommand.

#[cfg(feature = "apiserver")]
mod apiserver;
mod build;
#[cfg(feature = "apiserver")]
mod dev;
mod inspect;
mod new;
mod oci;
mod rbac;
mod run;
mod test;
mod webhooks;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use serde_json::Value;

use clap::{Parser, Subcommand};

/// Kubernetes controllers as sandboxed WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "wasmctrl", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log line format on stderr: `text` for people, `json` (one object per line, with the
    /// reconcile span's fields) for log pipelines.
    #[arg(long, global = true, value_enum, env = "WASMCTRL_LOG_FORMAT", default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Log filter (`info`, `debug`, `wasmctrl::reconcile::controller=debug,info`, ...); `RUST_LOG` is used
    /// when this is not given, and `info` when neither is. The compiler's own logs (cranelift,
    /// wasmtime's compiler: tens of thousands of lines per plugin at `debug`) stay at `info`
    /// unless the filter names them (`debug,cranelift_codegen=debug`). Plugins' own logs are
    /// target `plugin`: `info,plugin=debug` shows
    /// only theirs at debug.
    #[arg(long, global = true)]
    log_level: Option<String>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a new plugin crate: a reconciler, its CRD, a sample, tests and a README.
    New(new::Args),
    /// Build a plugin crate into a WebAssembly component (`target/plugins/<name>.wasm`).
    Build(build::Args),
    /// Run one reconcile of a plugin offline and print its result as JSON.
    Test(test::Args),
    /// Show what a plugin declares and the permissions that implies, without running it.
    Inspect(inspect::Args),
    /// Push a plugin to an OCI registry as a wasm artifact.
    Push(oci::PushArgs),
    /// Pull a plugin from an OCI registry, by digest.
    Pull(oci::PullArgs),
    /// Sign a plugin in an OCI registry with a key, as `cosign sign --key` does.
    Sign(oci::SignArgs),
    /// Print the least-privilege RBAC (ServiceAccount, Roles, bindings) for a plugin directory.
    Rbac(rbac::Args),
    /// Print the webhook configurations (and CRD conversions) the plugins in a directory serve.
    Webhooks(webhooks::Args),
    /// Print the CRDs of WasmPlugin and ClusterWasmPlugin (plugins as cluster resources).
    Crds,
    /// Run the embedded Kubernetes API server on its own.
    #[cfg(feature = "apiserver")]
    Apiserver(apiserver::Args),
    /// Run the host against a cluster, serving a directory of plugins (and plugin resources).
    Run(Box<run::Args>),
    /// Run the host against the embedded API server, with manifests applied: no cluster needed.
    #[cfg(feature = "apiserver")]
    Dev(Box<dev::Args>),
}

/// Parses the command line, runs the subcommand and maps its outcome to an exit code.
///
/// Errors print as one line (`error: <cause>: <cause>...`) so scripts and humans can read them.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = init_tracing(cli.log_format, cli.log_level.as_deref()) {
        eprintln!("error: --log-level: {e}");
        return ExitCode::from(2);
    }
    crate::memory::configure();
    let result = match cli.command {
        Command::New(args) => new::run(args),
        Command::Build(args) => build::run(args),
        Command::Test(args) => test::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Push(args) => oci::push(args),
        Command::Pull(args) => oci::pull(args),
        Command::Sign(args) => oci::sign(args),
        Command::Rbac(args) => rbac::run(args),
        Command::Webhooks(args) => webhooks::run(args),
        Command::Crds => crate::plugins::resources::crds_yaml()
            .map_err(anyhow::Error::from)
            .map(|yaml| {
                say(yaml.trim_end());
                ExitCode::SUCCESS
            }),
        #[cfg(feature = "apiserver")]
        Command::Apiserver(args) => apiserver::run(args),
        Command::Run(args) => run::run(*args),
        #[cfg(feature = "apiserver")]
        Command::Dev(args) => dev::run(*args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", one_line(&err));
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr (stdout carries command output such as `wasmctrl test` JSON), filtered by
/// `--log-level` (else `RUST_LOG`, else `info`), as text or JSON lines.
fn init_tracing(format: LogFormat, level: Option<&str>) -> anyhow::Result<()> {
    use tracing_subscriber::{EnvFilter, fmt};
    let spec = match level {
        Some(level) => level.to_string(),
        None => std::env::var(EnvFilter::DEFAULT_ENV).unwrap_or_else(|_| "info".into()),
    };
    let filter = EnvFilter::try_new(quiet_compiler(&spec))?;
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A second init (tests calling `main` twice) is harmless; ignore it.
    let _ = match format {
        // The reconcile span's fields (plugin.name, object.key, reconcile.id, outcome) ride
        // along under "span" on every line logged inside it.
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
    };
    Ok(())
}

/// Log targets of the compiler that turns plugins into machine code: at `debug` they log every
/// pass over every function, drowning what an operator is looking for.
const COMPILER_TARGETS: [&str; 4] = [
    "cranelift_codegen",
    "cranelift_frontend",
    "wasmtime_internal_cranelift",
    "regalloc2",
];

/// `spec` with the compiler's targets held at `info` unless it names them itself.
fn quiet_compiler(spec: &str) -> String {
    let mut spec = spec.to_string();
    for target in COMPILER_TARGETS {
        if !spec.contains(target) {
            spec.push_str(&format!(",{target}=info"));
        }
    }
    spec
}

/// Completes on SIGINT or SIGTERM (or at once if the handlers cannot be installed, so that a
/// process that cannot be stopped cleanly does not start).
pub(crate) fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    // Registered now, not when first awaited: a SIGTERM while plugins are still loading is
    // kept until the host looks, instead of killing the process before it can leave its shard
    // group or release its Lease.
    let term = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        let (Ok(mut term), Ok(mut interrupt)) = (term, interrupt) else {
            return;
        };
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
    }
}

/// Prints a line of command output. A reader that went away (`wasmctrl test ... | head`) is
/// not an error: `println!` would panic there, and the output was simply not wanted.
pub(crate) fn say(line: impl std::fmt::Display) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("error: writing output: {e}");
    }
}

/// Every object in a YAML or JSON file: multi-document YAML and `kind: List` are flattened.
pub(crate) fn read_documents(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(doc)
            .map_err(|e| anyhow::anyhow!("{}: invalid YAML/JSON: {e}", path.display()))?;
        match value {
            Value::Null => {}
            Value::Object(ref o) if o.get("kind").and_then(Value::as_str) == Some("List") => {
                out.extend(
                    o.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            Value::Object(_) => out.push(value),
            _ => bail!("{}: expected an object, found {value}", path.display()),
        }
    }
    Ok(out)
}

/// The YAML/JSON files under `path`, sorted. A directory with a `kustomization.yaml` below
/// `path` is a kustomize root (`kubectl apply -k`), not a set of plain manifests: it is skipped.
pub(crate) fn manifest_files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    manifests_under(path)
}

fn manifests_under(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))?;
    for entry in entries {
        let p = entry?.path();
        if p.is_dir() && p.join("kustomization.yaml").exists() {
            tracing::info!(dir = %p.display(), "skipping a kustomization (apply it with kubectl apply -k)");
        } else if p.is_dir() {
            files.extend(manifests_under(&p)?);
        } else if p
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            files.push(p);
        }
    }
    files.sort();
    Ok(files)
}

/// An error and its causes on one line (`<error>: <cause>: ...`), whatever they contain, so
/// scripts can read it. A cause whose words its error already printed (libraries that put their
/// source in their own message too) is not printed again.
fn one_line(err: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in err.chain() {
        let text = cause.to_string().replace('\n', " ");
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_print_on_one_line_without_repeating_a_cause() {
        #[derive(Debug, thiserror::Error)]
        #[error("sending failed: {0}")]
        struct Repeats(#[source] std::io::Error);
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused\nnow");
        let err = anyhow::Error::new(Repeats(io)).context("oci://r/p:1");
        assert_eq!(
            super::one_line(&err),
            "oci://r/p:1: sending failed: refused now"
        );
    }

    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::quiet_compiler;

    /// Which of a compiler debug line and a host debug line pass the filter made of `spec`.
    fn passes(spec: &str) -> (bool, bool) {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let writer = move || super::tests::Sink(sink.clone());
        let filter = EnvFilter::try_new(quiet_compiler(spec)).unwrap();
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(false);
        let subscriber = tracing_subscriber::registry().with(filter).with(fmt);
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "cranelift_codegen::context", "compiler pass");
            tracing::debug!(target: "wasmctrl::reconcile::controller", "host detail");
        });
        let text = String::from_utf8(seen.lock().unwrap().clone()).unwrap();
        (text.contains("compiler pass"), text.contains("host detail"))
    }

    struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn debug_leaves_the_compiler_at_info_unless_it_is_named() {
        assert_eq!(passes("debug"), (false, true));
        assert_eq!(passes("info"), (false, false));
        assert_eq!(passes("debug,cranelift_codegen=debug"), (true, true));
    }
}
