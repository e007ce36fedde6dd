//! `wasmctrl rbac`: the ServiceAccount, Roles and bindings that grant the host exactly what the
//! plugins in a directory declare, as YAML for `kubectl apply` or a kustomization; for a
//! `WasmPlugin` (`--resources`), its ServiceAccount gets what the plugin declares and the host
//! only the right to impersonate that account in its namespace.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use wasmctrl_core::Scope;

use crate::plugins::resources::PluginResource;
use crate::rbac::{self, Grantee, Options, Resolver};

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
    /// Also grant what a shard group's member takes (`run --sharding`): creating, renewing and
    /// deleting its own Lease, listing and watching the others' (a Role `<account>:sharding`).
    #[arg(long)]
    sharding: bool,
    /// Print only what `--sharding` adds (a Role and its binding), for an overlay on RBAC
    /// generated without it.
    #[arg(long)]
    sharding_only: bool,
    /// CustomResourceDefinitions (files or directories of YAML), for the plural and scope of
    /// custom kinds; without one, a custom kind is assumed namespaced. Repeatable.
    #[arg(long = "crds")]
    crds: Vec<PathBuf>,
    /// Also grant what serving `WasmPlugin` and `ClusterWasmPlugin` resources takes (`run
    /// --plugin-resources`).
    #[arg(long)]
    plugin_resources: bool,
    /// Print only what `--plugin-resources` adds (a ClusterRole and its binding), for an
    /// overlay on RBAC generated without it.
    #[arg(long)]
    plugin_resources_only: bool,
    /// `WasmPlugin` and `ClusterWasmPlugin` manifests (files or directories of YAML): each
    /// plugin is pulled from its registry and granted what it declares; a `WasmPlugin`'s rights
    /// go to its ServiceAccount, in its own namespace only, and the host gets `impersonate` on
    /// that account there. Implies `--plugin-resources`. Repeatable.
    #[arg(long = "resources", value_name = "PATH")]
    resources: Vec<PathBuf>,
    #[command(flatten)]
    registry: super::oci::RegistryArgs,
}

/// Prints the RBAC for every plugin in the directory; notes about guesses go to stderr.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Only resources: the plugin directory may not exist.
    let mut plugins: Vec<Grantee> = if args.resources.is_empty() || args.plugins.is_dir() {
        (scopes(&args.plugins)?.into_iter())
            .map(|(name, scope)| Grantee::host(name, scope))
            .collect()
    } else {
        Vec::new()
    };
    for path in &args.resources {
        for grantee in resource_grantees(path, &args.registry)? {
            if plugins.iter().any(|p| p.name == grantee.name) {
                anyhow::bail!(
                    "{}: a second plugin served as {}",
                    path.display(),
                    grantee.name
                );
            }
            plugins.push(grantee);
        }
    }
    let resolver = crd_resolver(&args.crds)?;
    let options = Options {
        namespace: args.namespace,
        service_account: args.service_account,
        lease: args.leader_election_id,
        sharding: args.sharding || args.sharding_only,
        plugin_resources: args.plugin_resources
            || args.plugin_resources_only
            || !args.resources.is_empty(),
    };
    let (mut objects, notes) = rbac::generate(&plugins, &resolver, &options);
    if args.plugin_resources_only || args.sharding_only {
        let mut only = Vec::new();
        if args.plugin_resources_only {
            only.push(rbac::plugin_resources_role(&options));
        }
        if args.sharding_only {
            only.push(rbac::sharding_role(&options));
        }
        objects.retain(|o| {
            only.iter()
                .any(|name| o["metadata"]["name"] == name.as_str())
        });
    }
    for note in notes {
        eprintln!("note: {note}");
    }
    super::say(rbac::to_yaml(&objects).trim_end());
    Ok(ExitCode::SUCCESS)
}

/// Each plugin in `dir` by name, with its effective scope (its config's narrowing applied).
pub(crate) fn scopes(dir: &Path) -> anyhow::Result<Vec<(String, Scope)>> {
    let files = plugin_files(dir)?;
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

/// The plugin files in `dir`, in name order.
pub(crate) fn plugin_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading plugin directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| crate::plugins::loader::files::is_plugin_file(p))
        .collect();
    files.sort();
    Ok(files)
}

/// The built-in kinds' plurals and scopes, and those of the CRDs in `paths` (files or
/// directories of YAML).
pub(crate) fn crd_resolver(paths: &[PathBuf]) -> anyhow::Result<Resolver> {
    let mut resolver = Resolver::default();
    for path in paths {
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
    Ok(resolver)
}

/// Each plugin resource under `path`, pulled and loaded as `run --plugin-resources` loads it,
/// by the name it is served under, with its effective scope and (a `WasmPlugin`'s) the
/// ServiceAccount it acts as.
fn resource_grantees(
    path: &Path,
    registry: &super::oci::RegistryArgs,
) -> anyhow::Result<Vec<Grantee>> {
    let runtime = super::inspect::review_runtime()?;
    let mut out = Vec::new();
    for file in super::manifest_files(path)? {
        for doc in super::read_documents(&file)? {
            let Some(resource) = PluginResource::from_value(&doc)
                .with_context(|| format!("{}: not a usable plugin resource", file.display()))?
            else {
                continue;
            };
            let module = &resource.source().module;
            let (pulled, component) = super::oci::pull_blocking(registry, module)?;
            let source = format!("{} ({})", resource.describe(), pulled.digest);
            let config = resource.config();
            let plugin = runtime.load_with(&source, &component, &config.overrides())?;
            config
                .check_narrows(plugin.manifest())
                .map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
            let account = resource.account().with_context(|| source.clone())?;
            out.push(Grantee {
                name: resource.served_name(),
                scope: plugin.scope().clone(),
                account,
            });
        }
    }
    Ok(out)
}
