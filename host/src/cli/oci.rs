//! `wasmctrl push` and `wasmctrl pull`: plugins to and from OCI registries (see [`crate::plugins::oci`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

use crate::plugins::oci::{DECLARATION_ANNOTATION, Limits, Options, Pulled, Registry};

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
    /// The largest plugin a pull takes: its layer's declared size is checked before the
    /// download and its bytes while they arrive (`64Mi`, `128Mi`, `1Gi`, or bytes).
    #[arg(long, value_name = "SIZE", default_value = "64Mi", value_parser = parse_size)]
    max_plugin_size: u64,
    /// How long one pull (or one resolution of a tag) may take in all (`30s`, `5m`).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_timeout)]
    registry_timeout: std::time::Duration,
    /// Follow a registry's redirects and token realms to loopback, link-local and private
    /// addresses other than its own (refused by default: a registry must not make the host
    /// read internal endpoints).
    #[arg(long)]
    allow_private_registry_redirects: bool,
}

impl RegistryArgs {
    pub(crate) fn options(&self) -> Options {
        Options {
            insecure: self.insecure.clone(),
            ca_files: self.ca_files.clone(),
            docker_config: self.docker_config.clone(),
            limits: Limits {
                plugin_bytes: self.max_plugin_size,
                timeout: self.registry_timeout,
                private_redirects: self.allow_private_registry_redirects,
                ..Limits::default()
            },
        }
    }
}

/// A size as Kubernetes quantities write bytes: a whole number, optionally with `Ki`, `Mi` or
/// `Gi`.
fn parse_size(text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let shift = match unit {
        "" => 0,
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        _ => {
            return Err(format!(
                "{text:?} is not a size (such as 64Mi, 1Gi, 1048576)"
            ));
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (such as 64Mi, 1Gi, 1048576)"))?;
    n.checked_mul(1 << shift)
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{text:?} is not a size greater than zero that fits in 64 bits"))
}

fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    crate::plugins::resources::parse_duration(text).and_then(|d| {
        (!d.is_zero())
            .then_some(d)
            .ok_or_else(|| "a timeout must be longer than zero".to_string())
    })
}

/// Arguments of `wasmctrl push`.
#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// The plugin component (`target/plugins/<name>.wasm`).
    plugin: PathBuf,
    /// Where to push it: `[oci://]registry/repository:tag`.
    reference: String,
    /// Also sign it with this key (ECDSA P-256, unencrypted PKCS#8 PEM), as `wasmctrl sign`.
    #[arg(long, value_name = "KEY")]
    sign: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Arguments of `wasmctrl sign`.
#[derive(Debug, clap::Args)]
pub struct SignArgs {
    /// The plugin to sign: `[oci://]registry/repository:tag` or `...@sha256:<digest>` (a tag
    /// is resolved to its digest, and the digest is signed).
    reference: String,
    /// The private key (ECDSA P-256, unencrypted PKCS#8 PEM, as `openssl genpkey -algorithm
    /// EC -pkeyopt ec_paramgen_curve:P-256` writes; its public key, `openssl pkey -pubout`, is
    /// what `spec.verify.keys` takes). cosign's encrypted key files are not read.
    #[arg(long, value_name = "KEY")]
    key: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// The signing key in `path`.
fn signing_key(path: &Path) -> anyhow::Result<crate::plugins::oci::sign::SigningKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read key {}", path.display()))?;
    crate::plugins::oci::sign::SigningKey::from_pem(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Signs the manifest a reference names and pushes the signature in cosign's format. Prints the
/// signature's reference.
pub fn sign(args: SignArgs) -> anyhow::Result<ExitCode> {
    let key = signing_key(&args.key)?;
    let signature = block_on(async {
        let client = Registry::new(&args.registry.options())?;
        Ok(client.sign(&args.reference, &key).await?)
    })?;
    super::say(&signature);
    Ok(ExitCode::SUCCESS)
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

/// Pulls `reference` (by its digest) into a temporary file in `dir`.
fn pull_into(registry: &RegistryArgs, reference: &str, dir: &Path) -> anyhow::Result<Pulled> {
    block_on(async {
        let client = Registry::new(&registry.options())?;
        Ok(client.pull(reference, dir).await?)
    })
}

/// Pulls `reference` (by its digest) for a command that reads it: its digest, pinned
/// reference and component.
pub(crate) fn pull_blocking(
    registry: &RegistryArgs,
    reference: &str,
) -> anyhow::Result<(Pulled, Vec<u8>)> {
    let pulled = pull_into(registry, reference, &std::env::temp_dir())?;
    let component = pulled.component()?;
    Ok((pulled, component))
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
    let key = args.sign.as_deref().map(signing_key).transpose()?;
    let pushed = block_on(async {
        let client = Registry::new(&args.registry.options())?;
        let pushed = (client.push(&args.reference, &component, annotations)).await?;
        if let Some(key) = &key {
            client.sign(&pushed.pinned, key).await?;
        }
        Ok(pushed)
    })?;
    super::say(&pushed.pinned);
    Ok(ExitCode::SUCCESS)
}

/// Pulls a plugin by digest and writes its component. Prints the reference pinned to the digest.
pub fn pull(args: PullArgs) -> anyhow::Result<ExitCode> {
    let output = match args.output {
        Some(path) => path,
        None => {
            let reference = crate::plugins::oci::reference(&args.reference)?;
            let name = reference
                .repository()
                .rsplit('/')
                .next()
                .unwrap_or("plugin");
            PathBuf::from(format!("{name}.wasm"))
        }
    };
    // Pulled beside the output, so that writing it is a rename.
    let dir = match output.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let pulled = pull_into(&args.registry, &args.reference, &dir)?;
    let pinned = pulled.pinned.clone();
    (pulled.file.persist(&output))
        .map_err(|e| e.error)
        .with_context(|| format!("cannot write {}", output.display()))?;
    super::say(format!("{pinned} -> {}", output.display()));
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_quantities_of_bytes() {
        assert_eq!(parse_size("64Mi"), Ok(64 << 20));
        assert_eq!(parse_size("1Gi"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2Ki"), Ok(2048));
        for bad in ["", "0", "64M", "Mi", "-1", "99999999999Gi", "1.5Mi"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
