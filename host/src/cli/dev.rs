//! `wasmctrl dev`: no cluster needed. Starts the embedded API server on loopback, writes a
//! kubeconfig for kubectl, applies the given manifests, and runs the host against it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::Scope;
use serde_json::Value;
use wasmctrl_core::Gvk;

use std::sync::Arc;

use super::run::{Extras, Grant, HostArgs, RegisterWebhooks, serve};
use crate::apiserver::ApiServer;
use crate::clock::Clock;
use crate::observe::metrics::Metrics;
use crate::rbac::{self, Resolver};
use wasmctrl_core::Scope as PluginScope;

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
    /// Run the host with full rights. By default it runs as ServiceAccount
    /// `wasmctrl/wasmctrl` under the RBAC `wasmctrl rbac` generates from its plugins (re-applied
    /// when they change), so a plugin that needs what it did not declare fails here as it
    /// would in a cluster.
    #[arg(long)]
    no_rbac: bool,
    #[command(flatten)]
    cluster: super::apiserver::ClusterArgs,
}

/// The namespace and ServiceAccount the host runs as in dev mode.
const HOST_NAMESPACE: &str = "wasmctrl";

/// Runs the subcommand until SIGINT/SIGTERM.
pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    args.host.metrics.dev_defaults();
    args.host.webhooks.dev_defaults();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let server = args
            .cluster
            .builder(super::apiserver::Pods::Auto)?
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
        let (host_client, extras) = if args.no_rbac {
            let admin = server.service_with_token(server.admin_token());
            let service = tower::Layer::layer(&layer, admin);
            (kube::Client::new(service, "default"), Extras::default())
        } else {
            let token = service_account(&server, &client).await?;
            // The host's own needs (its Lease, its scrapers' reviews) before any plugin's.
            grant_rbac(&client, &[]).await?;
            let service = tower::Layer::layer(&layer, server.service_with_token(&token));
            let extras = Extras {
                grant: Some(grant(client.clone())),
                ..Extras::default()
            };
            super::say(format_args!(
                "the host runs as system:serviceaccount:{HOST_NAMESPACE}:{HOST_NAMESPACE} with the RBAC its plugins declare (--no-rbac: full rights)"
            ));
            (kube::Client::new(service, "default"), extras)
        };
        let conversions = Conversions::default();
        tokio::spawn(keep_conversions(client.clone(), conversions.clone()));
        // One time for the cluster and the plugins: the server's test clock.
        let clock = Clock::system();
        tokio::spawn(follow_test_clock(server.clone(), clock.clone()));
        let extras = Extras {
            clock: Some(clock),
            webhooks: Some(register_webhooks(client.clone(), conversions)),
            ..extras
        };
        serve(host_client, metrics, &args.host, extras, super::shutdown_signal()).await?;
        http.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// Moves `clock` with the embedded server's test clock (`POST /_admin/advance-cronjob-clock`),
/// so that reconciles are told the time the server's CronJob controller runs by. Polled: the
/// clock moves only when a test or a developer moves it, and a tenth of a second is soon enough.
async fn follow_test_clock(server: ApiServer, clock: Clock) {
    let mut every = tokio::time::interval(Duration::from_millis(100));
    loop {
        every.tick().await;
        clock.set_ahead(server.cronjob_clock());
    }
}

/// Creates the host's namespace and ServiceAccount; a token for it.
async fn service_account(server: &ApiServer, client: &kube::Client) -> anyhow::Result<String> {
    let namespace = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": HOST_NAMESPACE}});
    let account = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": HOST_NAMESPACE, "namespace": HOST_NAMESPACE}});
    for object in [namespace, account] {
        apply_object(client, &object).await?;
    }
    // A development session's token: it ends with the session (the server is in memory).
    let year = Duration::from_secs(365 * 24 * 3600);
    server
        .token(HOST_NAMESPACE, HOST_NAMESPACE, year)
        .context("the host's ServiceAccount was not created")
}

/// Re-applies the RBAC the served plugins need (as `wasmctrl rbac` prints it) before each
/// plugin (re)load.
fn grant(client: kube::Client) -> Grant {
    Box::new(move |scopes| {
        let client = client.clone();
        Box::pin(async move {
            if let Err(e) = grant_rbac(&client, &scopes).await {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "could not grant the host's ServiceAccount what its plugins declare"
                );
            }
        })
    })
}

/// The plurals and scopes of the built-in kinds and of the CRDs the server has now.
async fn resolver(client: &kube::Client) -> anyhow::Result<Resolver> {
    let mut resolver = Resolver::default();
    for crd in crds(client).list(&Default::default()).await? {
        resolver.add_crd(&serde_json::to_value(&crd)?)?;
    }
    Ok(resolver)
}

/// Registers the plugins' validating and defaulting webhooks with the embedded server (as
/// `wasmctrl webhooks --url <server> --ca-bundle <its CA>` prints them), after each change of
/// the plugins: `kubectl apply` of an object a plugin refuses is refused here as on a cluster.
fn register_webhooks(client: kube::Client, conversions: Conversions) -> RegisterWebhooks {
    Box::new(move |served, url, pem| {
        let (client, conversions) = (client.clone(), conversions.clone());
        Box::pin(async move {
            if let Err(e) = apply_webhooks(&client, served, &url, &pem, &conversions).await {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "could not register the plugins' webhooks"
                );
            }
        })
    })
}

async fn apply_webhooks(
    client: &kube::Client,
    served: Vec<(
        String,
        Gvk,
        crate::runtime::plugin::bindings::hooks::Declaration,
    )>,
    url: &str,
    pem: &str,
    conversions: &Conversions,
) -> anyhow::Result<()> {
    use crate::webhooks::{Exposure, Served, Trust};
    let resolver = resolver(client).await?;
    let served: Vec<Served> = (served.into_iter())
        .map(|(plugin, kind, declaration)| {
            let plural = match resolver.get(&kind) {
                Some(info) => info.plural.clone(),
                None => kube::core::ApiResource::from_gvk(&(&kind).into()).plural,
            };
            Served {
                plugin,
                kind,
                plural,
                declaration,
            }
        })
        .collect();
    let exposure = Exposure::Url(url.to_string());
    let trust = Trust::CaBundle(pem.as_bytes().to_vec());
    let configurations = crate::webhooks::generate(&served, &exposure, &trust);
    let kinds = [
        (
            "ValidatingWebhookConfiguration",
            "wasmctrl-validating-webhook-configuration",
            configurations.validating,
        ),
        (
            "MutatingWebhookConfiguration",
            "wasmctrl-mutating-webhook-configuration",
            configurations.mutating,
        ),
    ];
    for (kind, name, object) in kinds {
        match object {
            Some(object) => apply_object(client, &object).await?,
            None => {
                let resource = kube::api::ApiResource::from_gvk(
                    &kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
                );
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                match api.delete(name, &Default::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    *wasmctrl_core::sync::lock(&conversions.0) = configurations.conversions.clone();
    convert_crds(client, &configurations.conversions, url).await?;
    tracing::info!(
        plugins = served.len(),
        url,
        "registered the plugins' webhooks"
    );
    Ok(())
}

/// The CRD conversions the served plugins ask for (merge patches naming their CRDs), kept so
/// that a CRD installed after its plugin loaded is converted too.
#[derive(Clone, Default)]
struct Conversions(Arc<std::sync::Mutex<Vec<Value>>>);

/// Gives each CRD that is created or changed the conversion a served plugin asks for, when it
/// does not have it (a CRD applied after the plugin that converts it).
async fn keep_conversions(client: kube::Client, conversions: Conversions) {
    use futures::StreamExt as _;
    use kube::runtime::WatchStreamExt as _;
    let crds = crds(&client);
    let mut changed = kube::runtime::watcher(crds.clone(), Default::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(crd) = changed.next().await {
        let crd = match crd {
            Ok(crd) => crd,
            // Backed off: the in-process client ends with the server, and a watcher that
            // retried at once would spin on the runtime that is shutting down.
            Err(e) => {
                tracing::debug!(error = %e, "watching CRDs for their conversion");
                continue;
            }
        };
        let name = crd.metadata.name.as_deref().unwrap_or_default();
        let wanted = (wasmctrl_core::sync::lock(&conversions.0).iter())
            .find(|c| c["metadata"]["name"] == name)
            .map(|c| c["spec"]["conversion"].clone());
        let Some(wanted) = wanted else { continue };
        let url = &wanted["webhook"]["clientConfig"]["url"];
        if crd.data["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == *url {
            continue;
        }
        let patch = serde_json::json!({"spec": {"conversion": wanted}});
        if let Err(e) = crds
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(crd = name, error = %e, "could not set the CRD's conversion webhook");
        }
    }
}

/// The CustomResourceDefinitions.
fn crds(client: &kube::Client) -> Api<DynamicObject> {
    let gvk =
        kube::core::GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    Api::all_with(client.clone(), &kube::api::ApiResource::from_gvk(&gvk))
}

/// Points each CRD a plugin converts at the host's conversion webhook (a merge patch of its
/// `spec.conversion`; a CRD not installed yet is left to its manifests), and CRDs this session
/// pointed at it that no plugin converts any more back at `None`.
async fn convert_crds(
    client: &kube::Client,
    conversions: &[Value],
    url: &str,
) -> anyhow::Result<()> {
    let gvk =
        kube::core::GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    let crds: Api<DynamicObject> =
        Api::all_with(client.clone(), &kube::api::ApiResource::from_gvk(&gvk));
    let converted: Vec<&str> = (conversions.iter())
        .filter_map(|c| c["metadata"]["name"].as_str())
        .collect();
    for crd in crds.list(&Default::default()).await? {
        let name = crd.metadata.name.as_deref().unwrap_or_default();
        let ours = (crd.data["spec"]["conversion"]["webhook"]["clientConfig"]["url"].as_str())
            .is_some_and(|u| u.starts_with(url));
        let patch = match conversions.iter().find(|c| c["metadata"]["name"] == name) {
            Some(conversion) => serde_json::json!({"spec": conversion["spec"]}),
            None if ours && !converted.contains(&name) => {
                serde_json::json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}})
            }
            None => continue,
        };
        crds.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("setting the conversion of the CRD {name}"))?;
    }
    Ok(())
}

async fn grant_rbac(client: &kube::Client, scopes: &[(String, PluginScope)]) -> anyhow::Result<()> {
    let resolver = resolver(client).await?;
    let options = rbac::Options {
        namespace: HOST_NAMESPACE.into(),
        service_account: HOST_NAMESPACE.into(),
        lease: "wasmctrl".into(),
        plugin_resources: false,
        sharding: false,
    };
    let plugins: Vec<rbac::Grantee> = (scopes.iter())
        .map(|(name, scope)| rbac::Grantee::host(name.clone(), scope.clone()))
        .collect();
    let (objects, notes) = rbac::generate(&plugins, &resolver, &options);
    for note in notes {
        tracing::info!(%note, "rbac");
    }
    for object in &objects {
        apply_object(client, object).await?;
    }
    tracing::info!(
        plugins = scopes.len(),
        objects = objects.len(),
        "granted the host's ServiceAccount what its plugins declare"
    );
    Ok(())
}

/// Server-side applies every object under `path` (field manager `wasmctrl-dev`), CRDs and
/// Namespaces first so that what depends on them finds them served.
pub(crate) async fn apply_manifests(client: &kube::Client, path: &Path) -> anyhow::Result<()> {
    let mut objects = Vec::new();
    for file in super::manifest_files(path)? {
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

async fn apply_one(client: &kube::Client, object: &Value) -> anyhow::Result<()> {
    apply_object(client, object).await?;
    super::say(format_args!(
        "applied {} {}",
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    ));
    Ok(())
}

/// Server-side applies one object (field manager `wasmctrl-dev`), waiting briefly for the kind
/// to be served (a custom resource right after its CRD).
async fn apply_object(client: &kube::Client, object: &Value) -> anyhow::Result<()> {
    let api_version = object["apiVersion"].as_str().context("no apiVersion")?;
    let kind = object["kind"].as_str().context("no kind")?;
    let name = object["metadata"]["name"]
        .as_str()
        .context("no metadata.name")?;
    let gvk = Gvk::from_api_version(api_version, kind);
    // A custom resource right after its CRD: give discovery a moment to serve it.
    let mut tries = 0;
    let (resource, caps) = loop {
        match kube::discovery::pinned_kind(client, &(&gvk).into()).await {
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
    Ok(())
}
