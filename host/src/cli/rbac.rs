//! `wasmctrl rbac`: the ServiceAccount, Roles and bindings that grant the host exactly what the
//! plugins in a directory declare, as YAML for `kubectl apply` or a kustomization.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use wasmctrl_scope::Scope;

use crate::rbac::{self, Options, Resolver};

/// Arguments of `wasmctrl rbac`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory of plugin components (`*.wasm`, each with its optional `<name>.toml` config,
    /// read as the host reads it).
    #[arg(long, default_value = "plugins")]
    plugins: PathBuf,
    /// Namespace the host runs in: its ServiceAccount, leader-election Lease and Pod.
    #[arg(long, default_value = "wasmctrl")]
    namespace: String,
    /// The host's ServiceAccount.
    #[arg(long, default_value = "wasmctrl")]
    service_account: String,
    /// The leader-election Lease's name, as `run --leader-election-id`.
    #[arg(long, default_value = "wasmctrl")]
    leader_election_id: String,
    /// CustomResourceDefinitions (files or directories of YAML), for the plural and scope of
    /// custom kinds; without one, a custom kind is assumed namespaced. Repeatable.
    #[arg(long = "crds")]
    crds: Vec<PathBuf>,
}

/// Prints the RBAC for every plugin in the directory; notes about guesses go to stderr.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let plugins = scopes(&args.plugins)?;
    let mut resolver = Resolver::default();
    for path in &args.crds {
        for file in super::manifest_files(path)? {
            for doc in super::read_documents(&file)? {
                if doc["kind"] == "CustomResourceDefinition" {
                    resolver.add_crd(&doc).with_context(|| {
                        format!("{}: not a usable CustomResourceDefinition", file.display())
                    })?;
                }
            }
        }
    }
    let options = Options {
        namespace: args.namespace,
        service_account: args.service_account,
        lease: args.leader_election_id,
    };
    let (objects, notes) = rbac::generate(&plugins, &resolver, &options);
    for note in notes {
        eprintln!("note: {note}");
    }
    super::say(rbac::to_yaml(&objects).trim_end());
    Ok(ExitCode::SUCCESS)
}

/// Each plugin in `dir` by name, with its effective scope (its config's narrowing applied).
pub(crate) fn scopes(dir: &Path) -> anyhow::Result<Vec<(String, Scope)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading plugin directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    files.sort();
    let runtime = super::inspect::review_runtime()?;
    let mut out: Vec<(String, Scope)> = Vec::new();
    for file in files {
        let (plugin, _) = super::inspect::load(&runtime, &file, None)?;
        let name = plugin.manifest().name.clone();
        if out.iter().any(|(n, _)| *n == name) {
            anyhow::bail!("{}: a second plugin named {name}", file.display());
        }
        out.push((name, plugin.scope().clone()));
    }
    Ok(out)
}
