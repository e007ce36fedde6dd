//! `wasmctrl dev`: no cluster needed. Starts the embedded API server on loopback, writes a
//! kubeconfig for kubectl, applies the given manifests, and runs the host against it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;

use std::sync::Arc;

use super::run::{HostArgs, serve};
use crate::apiserver::ApiServer;
use crate::metrics::Metrics;

/// Arguments of `wasmctrl dev`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    host: HostArgs,
    /// Manifests (files or directories of YAML/JSON) to apply once the server is up; CRDs and
    /// Namespaces go first. Repeatable.
    #[arg(long = "apply")]
    apply: Vec<PathBuf>,
    /// Address of the embedded API server (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write the kubeconfig for kubectl.
    #[arg(long, default_value = "wasmctrl-dev.kubeconfig")]
    kubeconfig_out: PathBuf,
}

/// Runs the subcommand until SIGINT/SIGTERM.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let server = ApiServer::builder()
            .gc(true)
            .namespace_cleanup(true)
            .build()?;
        let http = server.serve(args.listen).await?;
        let tmp = args.kubeconfig_out.with_extension("tmp");
        std::fs::write(&tmp, http.kubeconfig())
            .and_then(|()| std::fs::rename(&tmp, &args.kubeconfig_out))
            .with_context(|| format!("writing {}", args.kubeconfig_out.display()))?;
        let kubeconfig = std::fs::canonicalize(&args.kubeconfig_out)?;
        super::say(format_args!(
            "embedded API server listening on {}",
            http.url()
        ));
        super::say(format_args!(
            "use it with: kubectl --kubeconfig {} get all -A",
            kubeconfig.display()
        ));

        let client = server.client();
        for path in &args.apply {
            apply_manifests(&client, path).await?;
        }
        // The host's own client counts its requests (rest_client_*); the manifests above are
        // the user's, not the host's.
        let metrics = Arc::new(Metrics::new());
        let layer = metrics.rest_client_layer(&http.addr().to_string());
        let host_client =
            kube::Client::new(tower::Layer::layer(&layer, server.service()), "default");
        serve(
            host_client,
            metrics,
            &args.host,
            None,
            super::shutdown_signal(),
        )
        .await?;
        http.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// Server-side applies every object under `path` (field manager `wasmctrl-dev`), CRDs and
/// Namespaces first so that what depends on them finds them served.
pub(crate) async fn apply_manifests(client: &kube::Client, path: &Path) -> anyhow::Result<()> {
    let mut objects = Vec::new();
    for file in manifest_files(path)? {
        objects.extend(
            super::read_documents(&file)?
                .into_iter()
                .map(|o| (file.clone(), o)),
        );
    }
    let rank = |o: &Value| match o["kind"].as_str() {
        Some("CustomResourceDefinition") => 0,
        Some("Namespace") => 1,
        _ => 2,
    };
    objects.sort_by_key(|(_, o)| rank(o));
    for (file, object) in objects {
        apply_one(client, &object).await.with_context(|| {
            format!(
                "{}: applying {} {}",
                file.display(),
                object["kind"],
                object["metadata"]["name"]
            )
        })?;
    }
    Ok(())
}

fn manifest_files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let entries = std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))?;
    for entry in entries {
        let p = entry?.path();
        if p.is_dir() {
            files.extend(manifest_files(&p)?);
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

async fn apply_one(client: &kube::Client, object: &Value) -> anyhow::Result<()> {
    let api_version = object["apiVersion"].as_str().context("no apiVersion")?;
    let kind = object["kind"].as_str().context("no kind")?;
    let name = object["metadata"]["name"]
        .as_str()
        .context("no metadata.name")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    // A custom resource right after its CRD: give discovery a moment to serve it.
    let mut tries = 0;
    let (resource, caps) = loop {
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok(found) => break found,
            Err(_) if tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e).context("kind is not served"),
        }
    };
    let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        Api::namespaced_with(client.clone(), namespace, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    api.patch(
        name,
        &PatchParams::apply("wasmctrl-dev").force(),
        &Patch::Apply(object),
    )
    .await?;
    super::say(format_args!("applied {kind} {name}"));
    Ok(())
}
