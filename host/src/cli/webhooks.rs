//! `wasmctrl webhooks`: the webhook configurations the plugins in a directory imply, as
//! `wasmctrl rbac` prints their RBAC: a `ValidatingWebhookConfiguration` and a
//! `MutatingWebhookConfiguration` for the kinds they validate and default, and each converted
//! CRD's `spec.conversion`, reaching the host's Service (or a URL) and trusted through
//! cert-manager's CA injector (or a CA bundle).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::rbac::Resolver;
use crate::webhooks::{Exposure, Served, Trust};

/// Arguments of `wasmctrl webhooks`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory of plugin components (`*.wasm`, each with its optional `<name>.toml` config).
    #[arg(long, default_value = "plugins")]
    plugins: PathBuf,
    /// Namespace the host runs in (its webhook Service's).
    #[arg(long, default_value = "wasmctrl")]
    namespace: String,
    /// The Service in front of the host's webhook server.
    #[arg(long, default_value = "wasmctrl-webhook-service")]
    service_name: String,
    /// The Service's port.
    #[arg(long, default_value_t = 443)]
    service_port: u16,
    /// Reach the webhooks at this base URL (`https://host:9443`) instead of the Service.
    #[arg(long, value_name = "URL", conflicts_with_all = ["service_name", "service_port"])]
    url: Option<String>,
    /// Trust the webhook server by this CA bundle (a PEM file) instead of cert-manager.
    #[arg(long, value_name = "FILE")]
    ca_bundle: Option<PathBuf>,
    /// The cert-manager Certificate whose CA the injector writes into the configurations
    /// (`<namespace>/<name>`); default `<--namespace>/wasmctrl-serving-cert`.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "ca_bundle")]
    certificate: Option<String>,
    /// CustomResourceDefinitions (files or directories of YAML), for the plural of custom
    /// kinds. Repeatable.
    #[arg(long = "crds")]
    crds: Vec<PathBuf>,
}

/// Prints the configurations for every plugin in the directory that serves webhooks.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let resolver = super::rbac::crd_resolver(&args.crds)?;
    let served = served(&args.plugins, &resolver)?;
    let exposure = match args.url {
        Some(url) => Exposure::Url(url),
        None => Exposure::Service {
            namespace: args.namespace.clone(),
            name: args.service_name,
            port: args.service_port,
        },
    };
    let trust = match args.ca_bundle {
        Some(file) => Trust::CaBundle(
            std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?,
        ),
        None => Trust::CertManager(
            (args.certificate)
                .unwrap_or_else(|| format!("{}/wasmctrl-serving-cert", args.namespace)),
        ),
    };
    let objects = crate::webhooks::generate(&served, &exposure, &trust).objects();
    if objects.is_empty() {
        eprintln!(
            "note: no plugin in {} serves webhooks",
            args.plugins.display()
        );
    }
    super::say(crate::rbac::to_yaml(&objects).trim_end());
    Ok(ExitCode::SUCCESS)
}

/// What each plugin in `dir` serves, loaded as the host loads it; plurals from `resolver`
/// (kube's plural rule for a kind it does not know, with a note).
pub(crate) fn served(dir: &std::path::Path, resolver: &Resolver) -> anyhow::Result<Vec<Served>> {
    let files = super::rbac::plugin_files(dir)?;
    let runtime = super::inspect::review_runtime()?;
    let mut out = Vec::new();
    for file in files {
        let (plugin, _) = super::inspect::load(&runtime, &file, None)?;
        let Some(declaration) = plugin.webhooks().cloned() else {
            continue;
        };
        let kind = plugin.manifest().kind().clone();
        let plural = match resolver.get(&kind) {
            Some(info) => info.plural.clone(),
            None => {
                let plural = kube::core::ApiResource::from_gvk(&(&kind).into()).plural;
                eprintln!(
                    "note: {kind}: no CRD known for it; assuming the plural {plural:?} (pass --crds)"
                );
                plural
            }
        };
        out.push(Served {
            plugin: plugin.manifest().name.clone(),
            kind,
            plural,
            declaration,
        });
    }
    Ok(out)
}
