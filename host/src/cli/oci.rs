//! `wasmctrl push` and `wasmctrl pull`: plugins to and from OCI registries (see [`crate::oci`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::oci::{DECLARATION_ANNOTATION, Options, Pulled, Registry};

/// How to reach a registry.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RegistryArgs {
    /// A registry (`host:port`) to speak plain HTTP to, for development registries. Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
    insecure: Vec<String>,
    /// A PEM file of certificates to trust besides the system's, for a registry with its own
    /// authority. Repeatable.
    #[arg(long = "registry-ca", value_name = "FILE")]
    ca_files: Vec<PathBuf>,
    /// The docker `config.json` to take registry credentials from (default:
    /// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`).
    #[arg(long, value_name = "FILE")]
    docker_config: Option<PathBuf>,
}

impl RegistryArgs {
    pub(crate) fn options(&self) -> Options {
        Options {
            insecure: self.insecure.clone(),
            ca_files: self.ca_files.clone(),
            docker_config: self.docker_config.clone(),
        }
    }
}

/// Arguments of `wasmctrl push`.
#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// The plugin component (`target/plugins/<name>.wasm`).
    plugin: PathBuf,
    /// Where to push it: `[oci://]registry/repository:tag`.
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Arguments of `wasmctrl pull`.
#[derive(Debug, clap::Args)]
pub struct PullArgs {
    /// What to pull: `[oci://]registry/repository:tag` or `...@sha256:<digest>`.
    reference: String,
    /// Where to write the component (default: `<last part of the repository>.wasm`).
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Runs a registry operation to completion on a small runtime of its own.
fn block_on<T>(work: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(work)
}

/// Pulls `reference` (by its digest) for a command that reads it.
pub(crate) fn pull_blocking(registry: &RegistryArgs, reference: &str) -> anyhow::Result<Pulled> {
    block_on(async {
        let client = Registry::new(&registry.options())?;
        Ok(client.pull(reference).await?)
    })
}

/// Loads the plugin as the host would (refusing one that does not load), then pushes it with its
/// name, version and declaration as annotations. Prints the reference pinned to its digest.
pub fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let component = std::fs::read(&args.plugin)
        .with_context(|| format!("cannot read plugin {}", args.plugin.display()))?;
    let runtime = super::inspect::review_runtime()?;
    let source = args.plugin.display().to_string();
    let plugin = super::inspect::load_bytes(&runtime, &source, &component, None)?;
    let declaration = super::inspect::report(&plugin, None);
    let manifest = plugin.manifest();
    let annotations = BTreeMap::from([
        (
            "org.opencontainers.image.title".into(),
            manifest.name.clone(),
        ),
        (
            "org.opencontainers.image.version".into(),
            manifest.version.clone(),
        ),
        (DECLARATION_ANNOTATION.into(), declaration.to_string()),
    ]);
    let pushed = block_on(async {
        let client = Registry::new(&args.registry.options())?;
        Ok(client
            .push(&args.reference, &component, annotations)
            .await?)
    })?;
    super::say(&pushed.pinned);
    Ok(ExitCode::SUCCESS)
}

/// Pulls a plugin by digest and writes its component. Prints the reference pinned to the digest.
pub fn pull(args: PullArgs) -> anyhow::Result<ExitCode> {
    let pulled = pull_blocking(&args.registry, &args.reference)?;
    let output = match args.output {
        Some(path) => path,
        None => {
            let reference = crate::oci::reference(&args.reference)?;
            let name = reference
                .repository()
                .rsplit('/')
                .next()
                .unwrap_or("plugin");
            PathBuf::from(format!("{name}.wasm"))
        }
    };
    std::fs::write(&output, &pulled.component)
        .with_context(|| format!("cannot write {}", output.display()))?;
    super::say(format!("{} -> {}", pulled.pinned, output.display()));
    Ok(ExitCode::SUCCESS)
}
