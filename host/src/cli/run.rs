//! `wasmctrl run`: the host against a cluster (kubeconfig, or the in-cluster service account),
//! serving every plugin in a directory and following changes to it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::ObjectReference;

use crate::clock::Clock;
use crate::observe::metrics::{Metrics, Secure};
use crate::observe::probes::{self, Check, Readiness};
use crate::plugins::cluster_plugins::{self, ClusterPlugins};
use crate::plugins::loader::{self, Loader};
use crate::plugins::oci::Registry;
use crate::reconcile::controller::Manager;
use crate::replicas::leader::{self, Leadership};
use crate::replicas::membership;
use crate::replicas::sharding::Shards;
use crate::runtime::{self, Runtime};
use crate::sql::{self, Databases};
use wasmctrl_core::{Gvk, shard};
use wasmctrl_runtime::plugin::bindings::hooks::Declaration;

/// Options shared by `run` and `dev`: where plugins come from and the limits they run under.
#[derive(Debug, Clone, clap::Args)]
pub struct HostArgs {
    /// Directory of plugin components (`*.wasm`, each with an optional `<name>.toml` config);
    /// watched for new, replaced and removed files.
    #[arg(long, default_value = "plugins")]
    pub plugins: PathBuf,
    /// Reconciles at once per plugin unless its config says otherwise.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Wall-clock deadline of one reconcile, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub deadline_ms: u64,
    /// Memory cap of one plugin instance, in MiB.
    #[arg(long, default_value_t = 64)]
    pub memory_mib: usize,
    /// Directory for compiled plugin artifacts (skips recompiling on restart).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// On SIGINT/SIGTERM, and when a plugin's controller restarts, how long in-flight
    /// reconciles get to finish, in seconds; then they are cancelled.
    #[arg(long, default_value_t = 30)]
    pub shutdown_grace_secs: u64,
    /// Where `/healthz`, `/livez` and `/readyz` are served (`:8081`, `127.0.0.1:8081`; `0`
    /// serves none). `/readyz` is 200 once every plugin is loaded (or failed) and its caches
    /// are synced.
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: String,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub webhooks: WebhookArgs,
    #[command(flatten)]
    pub sql: SqlArgs,
}

/// Where and how the plugins' webhooks are served: controller-runtime's webhook server, with
/// kubebuilder's flags and defaults.
#[derive(Debug, Clone, clap::Args)]
pub struct WebhookArgs {
    /// Where the plugins' admission and conversion webhooks are served over HTTPS (`:9443`,
    /// `127.0.0.1:9443`; `0` serves none). Default `:9443`; for `dev`, a free port on
    /// 127.0.0.1.
    #[arg(long, value_name = "ADDRESS")]
    pub webhook_bind_address: Option<String>,
    /// Directory with the webhook server's certificate and key (cert-manager's Secret,
    /// mounted; read again when renewed). Without it, a self-signed certificate is made at
    /// start, which the API server trusts only through a `caBundle` that names it.
    #[arg(long, value_name = "DIR")]
    pub webhook_cert_path: Option<PathBuf>,
    /// The certificate's file name in `--webhook-cert-path`.
    #[arg(long, default_value = "tls.crt", value_name = "FILE")]
    pub webhook_cert_name: String,
    /// The key's file name in `--webhook-cert-path`.
    #[arg(long, default_value = "tls.key", value_name = "FILE")]
    pub webhook_cert_key: String,
}

impl WebhookArgs {
    /// `dev`'s default: a free port on loopback, where the embedded API server reaches it.
    #[cfg(feature = "apiserver")]
    pub fn dev_defaults(&mut self) {
        self.webhook_bind_address
            .get_or_insert_with(|| "127.0.0.1:0".to_string());
    }

    /// Where to serve the webhooks, if at all (`default` when the flag is not given).
    pub fn address(&self, default: &str) -> anyhow::Result<Option<std::net::SocketAddr>> {
        let flag = self.webhook_bind_address.as_deref().unwrap_or(default);
        probes::bind_address(flag).map_err(|e| anyhow::anyhow!("--webhook-bind-address: {e}"))
    }

    /// The server's certificate: the files in `--webhook-cert-path`, or one made now for the
    /// names it will be reached by, with its PEM (what a `caBundle` must hold to trust it).
    pub fn certificate(
        &self,
        names: &[&str],
    ) -> anyhow::Result<(crate::tls::Server, Option<String>)> {
        match &self.webhook_cert_path {
            Some(dir) => {
                let (cert, key) = (
                    dir.join(&self.webhook_cert_name),
                    dir.join(&self.webhook_cert_key),
                );
                let server = crate::tls::Server::from_files(&cert, &key, crate::tls::HTTP1)
                    .with_context(|| format!("the webhook certificate in {}", dir.display()))?;
                Ok((server, None))
            }
            None => {
                let (server, pem) = crate::tls::Server::self_signed_with_pem(
                    names,
                    "wasmctrl-webhooks",
                    crate::tls::HTTP1,
                )
                .context("a self-signed webhook certificate")?;
                Ok((server, Some(pem)))
            }
        }
    }
}

/// Where and how `/metrics` is served: kubebuilder's flags, names and defaults.
#[derive(Debug, Clone, clap::Args)]
pub struct MetricsArgs {
    /// Where Prometheus metrics are served at `/metrics` (`:8443`, `127.0.0.1:8080`; `0`
    /// serves none). Default: `:8443` (HTTPS), `:8080` with `--metrics-secure=false`; for
    /// `dev`, the same ports on 127.0.0.1.
    #[arg(long, value_name = "ADDRESS")]
    pub metrics_bind_address: Option<String>,
    /// Serve `/metrics` over HTTPS, only to bearer tokens the API server authenticates
    /// (TokenReview) and allows `get` on `/metrics` (SubjectAccessReview), as kubebuilder's
    /// scaffold does; `--metrics-secure=false` serves plain HTTP to anyone. Default: true, but
    /// false for `dev` (loopback, one user).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub metrics_secure: Option<bool>,
    /// Directory with the metrics server's certificate and key (a mounted cert-manager Secret;
    /// read again when renewed). Without it, a self-signed certificate is made at start.
    #[arg(long, visible_alias = "metrics-cert-dir", value_name = "DIR")]
    pub metrics_cert_path: Option<PathBuf>,
    /// The certificate's file name in `--metrics-cert-path`.
    #[arg(long, default_value = "tls.crt", value_name = "FILE")]
    pub metrics_cert_name: String,
    /// The key's file name in `--metrics-cert-path`.
    #[arg(long, default_value = "tls.key", value_name = "FILE")]
    pub metrics_cert_key: String,
}

/// The metrics port kubebuilder's scaffold uses for HTTPS, and for HTTP.
const fn metrics_port(secure: bool) -> u16 {
    if secure { 8443 } else { 8080 }
}

impl MetricsArgs {
    /// `dev`'s defaults: plain HTTP on loopback, beside the embedded API server, which listens
    /// on loopback too.
    #[cfg(feature = "apiserver")]
    pub fn dev_defaults(&mut self) {
        let secure = *self.metrics_secure.get_or_insert(false);
        (self.metrics_bind_address)
            .get_or_insert_with(|| format!("127.0.0.1:{}", metrics_port(secure)));
    }

    /// Whether `/metrics` is served over HTTPS to allowed scrapers only.
    pub fn secure(&self) -> bool {
        self.metrics_secure.unwrap_or(true)
    }

    /// Where to serve `/metrics`, if at all.
    pub fn address(&self) -> anyhow::Result<Option<std::net::SocketAddr>> {
        let default = format!(":{}", metrics_port(self.secure()));
        let flag = self.metrics_bind_address.as_deref().unwrap_or(&default);
        probes::bind_address(flag).map_err(|e| anyhow::anyhow!("--metrics-bind-address: {e}"))
    }

    /// The HTTPS and the scrapers' checks, when secure; tokens are reviewed with `client`.
    pub fn security(&self, client: &kube::Client) -> anyhow::Result<Option<Secure>> {
        if !self.secure() {
            if let Some(dir) = &self.metrics_cert_path {
                tracing::warn!(dir = %dir.display(), "--metrics-cert-path is not used with --metrics-secure=false");
            }
            return Ok(None);
        }
        let files = (self.metrics_cert_path.as_ref()).map(|dir| {
            (
                dir.join(&self.metrics_cert_name),
                dir.join(&self.metrics_cert_key),
            )
        });
        let cert = files.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
        let secure = Secure::new(client.clone(), cert).context("the metrics certificate")?;
        Ok(Some(secure))
    }
}

/// The databases granted to plugins (`sql:<name>` capabilities).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SqlArgs {
    /// Grant a PostgreSQL database to plugins that declare `sql:<NAME>`: a `postgresql://` URL
    /// or a libpq `key=value` string. Repeatable.
    #[arg(long = "sql", value_name = "NAME=CONNECTION")]
    pub sql: Vec<String>,
    /// A TOML file of databases, one table per name: `url`, and the password from
    /// `password_env` or `password_file` (a mounted Secret), `max_connections`.
    #[arg(long, value_name = "FILE")]
    pub sql_config: Option<PathBuf>,
}

impl SqlArgs {
    /// Whether no database is granted.
    pub fn is_empty(&self) -> bool {
        self.sql.is_empty() && self.sql_config.is_none()
    }

    /// Pools for the granted databases; call it inside the tokio runtime that will run queries.
    pub fn databases(&self) -> anyhow::Result<Databases> {
        let mut databases = self
            .sql
            .iter()
            .map(|flag| sql::parse_flag(flag))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(path) = &self.sql_config {
            databases.extend(sql::read_file(path)?);
        }
        let databases = Databases::new(databases)?;
        for db in databases.iter() {
            tracing::info!(database = %db.name, target = %db.target(), max_connections = db.max_connections, "sql database granted");
        }
        Ok(databases)
    }
}

/// Leader election among replicas of the host (controller-runtime's flags and timings).
#[derive(Debug, Clone, clap::Args)]
pub struct LeaderElectionArgs {
    /// Run as one of several replicas: only the holder of a coordination.k8s.io Lease
    /// reconciles; the others keep their caches warm and take over when it goes.
    #[arg(long)]
    pub leader_elect: bool,
    /// Name of the Lease the replicas compete for.
    #[arg(long, default_value = "wasmctrl")]
    pub leader_election_id: String,
    /// Namespace of the Lease; default: the Pod's own (from its service account), else
    /// `default`.
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// How long a Lease stays held without renewal before a standby may take it, in seconds.
    #[arg(long, default_value_t = 15)]
    pub leader_elect_lease_duration: u64,
    /// How long the leader keeps reconciling without a successful renewal, in seconds; it
    /// stops before the Lease can pass on.
    #[arg(long, default_value_t = 10)]
    pub leader_elect_renew_deadline: u64,
    /// How often standbys try to take the Lease and the leader renews it, in seconds.
    #[arg(long, default_value_t = 2)]
    pub leader_elect_retry_period: u64,
    /// Run as one of several replicas that share the reconciling: each holds a membership Lease
    /// in `--leader-election-namespace` (renewed, and fenced, with the `--leader-elect-*`
    /// timings) and reconciles the keys of its share of namespaces; a key moves between
    /// replicas only after its old owner has stopped reconciling it.
    #[arg(long, conflicts_with = "leader_elect")]
    pub sharding: bool,
    /// The shard group: replicas with the same group (and namespace) share the keys.
    #[arg(long, default_value = "wasmctrl", value_name = "NAME")]
    pub shard_group: String,
    /// What places a key on a replica: the reconciled object's `uid` (keys spread evenly; the
    /// caches of owned kinds stay whole on every replica) or its `namespace` (an owner and its
    /// children together, owned kinds' caches sharded too; even only over many, differently
    /// named namespaces). Every replica of a group must use the same.
    #[arg(long, value_enum, default_value_t = ShardKey::Uid)]
    pub shard_key: ShardKey,
}

/// `--shard-key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShardKey {
    /// `metadata.uid` of the reconciled object.
    Uid,
    /// `metadata.namespace` of the reconciled object (its name when cluster-scoped).
    Namespace,
}

impl LeaderElectionArgs {
    /// The election to run, if any, with this replica's identity.
    pub fn config(&self) -> anyhow::Result<Option<leader::Config>> {
        if !self.leader_elect {
            return Ok(None);
        }
        let config = self.lease(&self.leader_election_id)?;
        Ok(Some(config))
    }

    /// The shard group to join, if any (its Leases are timed as the election's), and the field
    /// keys are placed by.
    pub fn sharding(&self) -> anyhow::Result<Option<(leader::Config, shard::Field)>> {
        if !self.sharding {
            return Ok(None);
        }
        let group = &self.shard_group;
        // Member Leases are named `<group>-<16 hex digits>`, and labelled with the group.
        let valid = !group.is_empty()
            && group.len() <= 46
            && group
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !group.starts_with('-')
            && !group.ends_with('-');
        if !valid {
            anyhow::bail!(
                "--shard-group {group:?}: must be at most 46 lowercase letters, digits and '-', starting and ending with a letter or digit"
            );
        }
        let field = match self.shard_key {
            ShardKey::Uid => shard::Field::Uid,
            ShardKey::Namespace => shard::Field::Namespace,
        };
        Ok(Some((self.lease(group)?, field)))
    }

    fn lease(&self, name: &str) -> anyhow::Result<leader::Config> {
        let namespace =
            (self.leader_election_namespace.clone()).unwrap_or_else(leader::own_namespace);
        let config = leader::Config {
            lease_duration: Duration::from_secs(self.leader_elect_lease_duration),
            renew_deadline: Duration::from_secs(self.leader_elect_renew_deadline),
            retry_period: Duration::from_secs(self.leader_elect_retry_period),
            ..leader::Config::new(name, &namespace, leader::identity())
        };
        config
            .check()
            .map_err(|e| anyhow::anyhow!("leader election: {e}"))?;
        Ok(config)
    }
}

/// Arguments of `wasmctrl run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    host: HostArgs,
    #[command(flatten)]
    election: LeaderElectionArgs,
    /// Kubeconfig to use; without it, `KUBECONFIG`, `~/.kube/config`, then the in-cluster
    /// service account.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Also serve plugins from `WasmPlugin` and `ClusterWasmPlugin` resources (apply `wasmctrl
    /// crds` first), pulled from OCI registries by digest, each with its status on its
    /// resource. With it, the `--plugins` directory may be absent.
    #[arg(long)]
    plugin_resources: bool,
    #[command(flatten)]
    registry: super::oci::RegistryArgs,
    #[command(flatten)]
    policy: PolicyArgs,
}

/// What plugin resources may ask for (with `--plugin-resources`).
#[derive(Debug, Clone, clap::Args)]
pub struct PolicyArgs {
    /// Registries a tenant's `WasmPlugin` may name: `host[:port]`, or `host[:port]/path` for
    /// the repositories below a path. Repeatable, or comma-separated. Default: none (a
    /// `WasmPlugin` is refused, `RegistryNotAllowed`, and nothing is fetched).
    /// `ClusterWasmPlugin`s may name any registry.
    #[arg(long, value_name = "HOST[/PATH]", value_delimiter = ',')]
    tenant_registries: Vec<String>,
    /// The most workers a plugin resource may ask for (`spec.concurrency`); more is lowered
    /// to this, and its `Loaded` condition says so.
    #[arg(long, value_name = "N", default_value_t = cluster_plugins::MAX_CONCURRENCY)]
    max_plugin_concurrency: usize,
    /// The longest reconcile deadline a plugin resource may ask for (`spec.deadlineMs`).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::plugins::resources::parse_duration)]
    max_plugin_deadline: Duration,
    /// The most memory per instance, in MiB, a plugin resource may ask for (`spec.memoryMiB`).
    #[arg(long, value_name = "MIB", default_value_t = cluster_plugins::MAX_MEMORY_MIB)]
    max_plugin_memory: usize,
    /// Load a plugin resource's plugin only when its digest is signed (cosign's keyed format)
    /// by a key its `spec.verify.keys` names; a resource naming none is `Verified=False`.
    #[arg(long)]
    require_signatures: bool,
    /// A capability a tenant's `WasmPlugin` in a namespace may have: `NAMESPACE=CAPABILITY`
    /// (`team-a=sql:students`). Repeatable, or comma-separated. Default: none (a tenant's
    /// plugin declaring one is `PermissionsGranted=False`, `CapabilityNotGranted`).
    #[arg(long, value_name = "NAMESPACE=CAPABILITY", value_delimiter = ',', value_parser = parse_grant)]
    tenant_capabilities: Vec<(String, String)>,
}

/// `NAMESPACE=CAPABILITY`.
fn parse_grant(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((ns, capability)) if !ns.is_empty() && !capability.is_empty() => {
            Ok((ns.to_string(), capability.to_string()))
        }
        _ => Err(format!(
            "{text:?} is not NAMESPACE=CAPABILITY (such as team-a=sql:students)"
        )),
    }
}

impl PolicyArgs {
    fn policy(&self) -> cluster_plugins::Policy {
        cluster_plugins::Policy {
            tenant_registries: self.tenant_registries.clone(),
            max_concurrency: self.max_plugin_concurrency.max(1),
            max_deadline: self.max_plugin_deadline,
            max_memory_mib: self.max_plugin_memory.max(1),
            require_signatures: self.require_signatures,
            tenant_capabilities: self.tenant_capabilities.clone(),
        }
    }
}

/// Runs the subcommand until SIGINT/SIGTERM.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let election = args.election.config()?;
    let sharding = args.election.sharding()?;
    rt.block_on(async {
        let config = match &args.kubeconfig {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path)
                    .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                    .await
                    .with_context(|| format!("using kubeconfig {}", path.display()))?
            }
            None => kube::Config::infer()
                .await
                .context("no kubeconfig and not in a cluster")?,
        };
        let metrics = Arc::new(Metrics::new());
        let server = config.cluster_url.authority().map(|a| a.to_string());
        let layer = metrics.rest_client_layer(server.as_deref().unwrap_or_default());
        let client = kube::client::ClientBuilder::try_from(config)?
            .with_layer(&layer)
            .build();
        let registry = if args.plugin_resources {
            Some((
                Registry::new(&args.registry.options())?,
                args.policy.policy(),
            ))
        } else {
            None
        };
        let extras = Extras {
            election,
            sharding,
            registry,
            ..Extras::default()
        };
        serve(
            client,
            metrics,
            &args.host,
            extras,
            super::shutdown_signal(),
        )
        .await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The host's own Pod, named by the downward API (`POD_NAME`, `POD_NAMESPACE`), as an Event's
/// `regarding`; its UID is looked up when the API allows (events still land without it).
async fn own_pod(client: &kube::Client) -> Option<ObjectReference> {
    let (name, namespace) = (
        std::env::var("POD_NAME").ok()?,
        std::env::var("POD_NAMESPACE").ok()?,
    );
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), &namespace);
    let uid = match pods.get_opt(&name).await {
        Ok(pod) => pod.and_then(|p| p.metadata.uid),
        Err(e) => {
            tracing::info!(error = %e, pod = %name, "cannot read the host's Pod; its events carry no uid");
            None
        }
    };
    Some(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(namespace),
        name: Some(name),
        uid,
        ..ObjectReference::default()
    })
}

/// Ready once the plugin directory was loaded and every cache of every plugin has synced (and,
/// in a shard group, this replica has joined and taken up its share).
struct HostReadiness {
    host: Arc<Manager>,
    plugins_loaded: AtomicBool,
    shards: Option<Shards>,
}

impl Readiness for HostReadiness {
    fn checks(&self) -> Vec<Check> {
        let loaded = if self.plugins_loaded.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err("the plugin directory is still being loaded".into())
        };
        let unsynced = self.host.unsynced();
        let synced = if unsynced.is_empty() {
            Ok(())
        } else {
            Err(format!("waiting for {}", unsynced.join("; ")))
        };
        let mut checks = vec![("plugins-loaded", loaded), ("informer-sync", synced)];
        if let Some(shards) = &self.shards {
            let joined = if shards.settled() {
                Ok(())
            } else {
                Err("joining the shard group and taking up this replica's share".into())
            };
            checks.push(("shard-membership", joined));
        }
        checks
    }
}

/// Called with every served plugin's name and scope before a plugin is (re)loaded, so that
/// `wasmctrl dev` can grant the host's ServiceAccount what the plugins now declare.
pub(crate) type Grant = Box<
    dyn Fn(Vec<(String, wasmctrl_core::Scope)>) -> futures::future::BoxFuture<'static, ()>
        + Send
        + Sync,
>;

/// What `serve` does besides serving the plugin directory.
#[derive(Default)]
pub(crate) struct Extras {
    /// Reconcile only while this replica holds the Lease; release it last.
    pub election: Option<leader::Config>,
    /// Share the reconciling with the other members of this shard group, placing keys by the
    /// field's hash; leave it last.
    pub sharding: Option<(leader::Config, shard::Field)>,
    /// Keep the host's RBAC in step with its plugins.
    pub grant: Option<Grant>,
    /// Serve plugin resources, pulling with this client, under this policy.
    pub registry: Option<(Registry, cluster_plugins::Policy)>,
    /// Tell reconciles this clock's time (`wasmctrl dev`'s test clock) rather than the system's.
    pub clock: Option<Clock>,
    /// Register the plugins' webhooks with the cluster whenever they change (`wasmctrl dev`).
    pub webhooks: Option<RegisterWebhooks>,
}

/// What registers the served plugins' webhooks with the cluster: each plugin that serves some
/// (name, kind, declaration), the webhook server's base URL and the CA (PEM) that trusts it.
pub(crate) type RegisterWebhooks = Box<
    dyn Fn(
            Vec<(String, Gvk, Declaration)>,
            String,
            String,
        ) -> futures::future::BoxFuture<'static, ()>
        + Send
        + Sync,
>;

/// The sandbox plugins run in, with `args`' deadline, memory cap and cache, and `databases`.
fn sandbox(args: &HostArgs, databases: Databases) -> anyhow::Result<Runtime> {
    Ok(Runtime::new(runtime::Config {
        deadline: Duration::from_millis(args.deadline_ms),
        memory_limit: args.memory_mib << 20,
        cache_dir: args.cache_dir.clone(),
        databases,
        ..runtime::Config::default()
    })?)
}

/// How this replica takes part: alone, as the elected leader, or as a member of a shard group.
struct Replica {
    /// Whether (and which keys) it may reconcile now.
    leadership: Leadership,
    /// The Lease it campaigns for, and the campaign (leader election).
    election: Option<(String, leader::Election)>,
    /// Its place in a shard group, and the shards it moves (sharding).
    sharding: Option<(membership::Member, Shards)>,
}

impl Replica {
    fn join(
        client: &kube::Client,
        election: Option<leader::Config>,
        sharding: Option<(leader::Config, shard::Field)>,
    ) -> Self {
        let (mut leadership, election) = match election {
            Some(config) => {
                let lease = config.name.clone();
                let (leadership, election) = leader::campaign(client.clone(), config);
                (leadership, Some((lease, election)))
            }
            None => (Leadership::sole(), None),
        };
        let sharding = sharding.map(|(config, field)| {
            let shards = Shards::new(field);
            let (membership, member) = membership::join(client.clone(), config, shards.clone());
            leadership = membership;
            (member, shards)
        });
        Self {
            leadership,
            election,
            sharding,
        }
    }

    fn shards(&self) -> Option<&Shards> {
        self.sharding.as_ref().map(|(_, shards)| shards)
    }
}

/// The controllers' manager for this replica, reporting to the host's Pod when it has one and
/// telling reconciles `clock`'s time when given one.
async fn manager(
    client: &kube::Client,
    metrics: Arc<Metrics>,
    replica: &Replica,
    clock: Option<Clock>,
) -> Arc<Manager> {
    let leadership = replica.leadership.clone();
    let mut host = match replica.shards() {
        Some(shards) => Manager::sharded(client.clone(), metrics, leadership, shards.clone()),
        None => Manager::led(client.clone(), metrics, leadership),
    };
    if let Some(pod) = own_pod(client).await {
        host = host.report_to(pod);
    }
    let moving = clock.is_some();
    if let Some(clock) = clock {
        host = host.clock(clock);
    }
    let host = Arc::new(host);
    if moving {
        tokio::spawn(host.clone().follow());
    }
    host
}

/// Serves the health probes, the metrics and the webhooks, where their flags ask for them; the
/// webhook server's base URL and, for a certificate made here, its PEM.
async fn serve_endpoints(
    args: &HostArgs,
    client: &kube::Client,
    host: &Arc<Manager>,
    readiness: Arc<HostReadiness>,
    databases: Databases,
) -> anyhow::Result<Option<(String, Option<String>)>> {
    let probe_address =
        probes::bind_address(&args.health_probe_bind_address).map_err(anyhow::Error::msg)?;
    if let Some(addr) = probe_address {
        let bound = probes::serve(addr, readiness)
            .await
            .with_context(|| format!("serving health probes on {addr}"))?;
        tracing::info!(address = %bound, "health probes listening");
    }
    if let Some(addr) = args.metrics.address()? {
        let scraped = host.clone();
        let render = Arc::new(move |openmetrics: bool| {
            scraped.refresh_metrics();
            scraped.metrics().sql_calls(databases.calls());
            scraped.metrics().encode(openmetrics)
        });
        let secure = args.metrics.security(client)?;
        let https = secure.is_some();
        let bound = crate::observe::metrics::serve(addr, render, secure)
            .await
            .with_context(|| format!("serving metrics on {addr}"))?;
        tracing::info!(address = %bound, https, "metrics listening");
    }
    let Some(addr) = args.webhooks.address(":9443")? else {
        return Ok(None);
    };
    let (tls, pem) = args.webhooks.certificate(crate::tls::LOOPBACK)?;
    let bound = crate::webhooks::serve(addr, &tls, host.clone())
        .await
        .with_context(|| format!("serving webhooks on {addr}"))?;
    tracing::info!(address = %bound, "webhook server listening");
    Ok(Some((format!("https://{bound}"), pem)))
}

/// The plugin directory to watch: `--plugins`, or an empty one of its own when only plugin
/// resources are served and the directory does not exist (kept alive by the returned guard).
fn plugin_directory(
    args: &HostArgs,
    resources_only: bool,
) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    if !resources_only || args.plugins.exists() {
        return Ok((args.plugins.clone(), None));
    }
    tracing::info!(plugins = %args.plugins.display(), "no plugin directory; serving plugin resources only");
    let empty = tempfile::tempdir().context("an empty plugin directory")?;
    Ok((empty.path().to_path_buf(), Some(empty)))
}

/// What follows each change of the plugin directory before the controllers take it.
struct Changes<'a> {
    /// The directory as `--plugins` names it.
    plugins: &'a std::path::Path,
    loader: &'a Loader,
    host: &'a Arc<Manager>,
    grant: Option<&'a Grant>,
    /// Registers the plugins' webhooks (served at the URL, trusted by the PEM) after each change.
    webhooks: Option<&'a (RegisterWebhooks, String, String)>,
    concurrency: usize,
    grace: Duration,
}

impl Changes<'_> {
    /// Follows the initial scan's changes (queued before the loader's `start` returned), marks
    /// the directory loaded for readiness, then follows every later change until `stop`.
    async fn until(
        &self,
        changes: &mut tokio::sync::mpsc::Receiver<loader::Change>,
        readiness: &HostReadiness,
        stop: impl std::future::Future<Output = ()>,
    ) {
        while let Ok(change) = changes.try_recv() {
            self.follow(change).await;
        }
        readiness.plugins_loaded.store(true, Ordering::Release);
        tracing::info!(plugins = %self.plugins.display(), "serving plugins");
        tokio::pin!(stop);
        loop {
            tokio::select! {
                change = changes.recv() => match change {
                    Some(change) => self.follow(change).await,
                    None => break,
                },
                () = &mut stop => break,
            }
        }
    }

    /// In `dev`, grants the host the RBAC the loaded plugins need; then starts the permission
    /// preflight of a loaded file plugin (it reports, it does not hold the plugin back); then
    /// hands the change to the controllers.
    async fn follow(&self, change: loader::Change) {
        let loaded = matches!(
            change,
            loader::Change::Added(..) | loader::Change::Replaced { .. }
        );
        if let Some(grant) = self.grant.filter(|_| loaded) {
            let scopes = (self.loader.current().into_iter())
                .map(|(p, _)| (p.manifest().name.clone(), p.scope().clone()))
                .collect();
            grant(scopes).await;
        }
        if let loader::Change::Added(plugin, _) | loader::Change::Replaced { new: plugin, .. } =
            &change
        {
            let (host, plugin) = (self.host.clone(), plugin.clone());
            tokio::spawn(async move { host.preflight(&plugin).await });
        }
        change
            .deliver(self.host, self.concurrency, self.grace)
            .await;
        if let Some((register, url, pem)) = self.webhooks {
            let served = (self.loader.current().into_iter())
                .filter_map(|(p, _)| {
                    let declaration = p.webhooks()?.clone();
                    Some((
                        p.manifest().name.clone(),
                        p.manifest().kind().clone(),
                        declaration,
                    ))
                })
                .collect();
            register(served, url.clone(), pem.clone()).await;
        }
    }
}

/// Serves `WasmPlugin` and `ClusterWasmPlugin` resources, pulling with `registry`.
fn serve_cluster_plugins(
    args: &HostArgs,
    (client, host, runtime, leadership): (&kube::Client, &Arc<Manager>, &Runtime, Leadership),
    registry: Registry,
    policy: cluster_plugins::Policy,
    grace: Duration,
) -> ClusterPlugins {
    let options = cluster_plugins::Options {
        registry,
        policy,
        cache_dir: args.cache_dir.clone(),
        host_namespace: leader::own_namespace(),
        concurrency: args.concurrency,
        grace,
        leadership,
    };
    ClusterPlugins::start(client.clone(), host.clone(), runtime.clone(), options)
}

/// Serves the plugin directory with `client` until `stop` completes, then shuts down gracefully:
/// no new keys are taken and in-flight reconciles get the grace period to finish.
pub(crate) async fn serve(
    client: kube::Client,
    metrics: Arc<Metrics>,
    args: &HostArgs,
    extras: Extras,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let Extras {
        election,
        sharding,
        grant,
        registry,
        clock,
        webhooks,
    } = extras;
    let replica = Replica::join(&client, election, sharding);
    let databases = args
        .sql
        .databases()?
        .fenced(replica.leadership.fence().clone());
    let runtime = sandbox(args, databases.clone())?;
    let host = manager(&client, metrics, &replica, clock).await;
    let readiness = Arc::new(HostReadiness {
        host: host.clone(),
        plugins_loaded: AtomicBool::new(false),
        shards: replica.shards().cloned(),
    });
    let Replica {
        leadership,
        election,
        sharding,
    } = replica;
    let membership = sharding.map(|(member, _)| member.start(host.clone()));
    let webhook_server =
        serve_endpoints(args, &client, &host, readiness.clone(), databases).await?;
    let register = match (webhooks, webhook_server) {
        (Some(register), Some((url, Some(pem)))) => Some((register, url, pem)),
        _ => None,
    };
    tokio::spawn(crate::memory::return_freed_memory(Duration::from_secs(10)));
    if let Some((lease, _)) = &election {
        tokio::spawn(follow_leadership(
            host.clone(),
            leadership.clone(),
            lease.clone(),
        ));
    }
    let grace = Duration::from_secs(args.shutdown_grace_secs);
    let cluster_plugins = registry.map(|(registry, policy)| {
        let serving = (&client, &host, &runtime, leadership);
        serve_cluster_plugins(args, serving, registry, policy, grace)
    });
    let running = Running {
        host: host.clone(),
        cluster_plugins,
        election: election.map(|(_, election)| election),
        membership,
    };
    let (dir, _empty) = plugin_directory(args, running.cluster_plugins.is_some())?;
    let (loader, mut changes) = Loader::start(dir, runtime, loader::Options::default()).await?;
    let following = Changes {
        plugins: &args.plugins,
        loader: &loader,
        host: &host,
        grant: grant.as_ref(),
        webhooks: register.as_ref(),
        concurrency: args.concurrency,
        grace,
    };
    following.until(&mut changes, &readiness, stop).await;
    running.stop(grace).await;
    loader.shutdown().await;
    Ok(())
}

/// What runs until the host shuts down, besides the plugin directory's loader.
struct Running {
    host: Arc<Manager>,
    cluster_plugins: Option<ClusterPlugins>,
    election: Option<leader::Election>,
    membership: Option<membership::Membership>,
}

impl Running {
    /// Stops taking plugins and keys, gives in-flight reconciles `grace`, then hands the
    /// replica's Lease (or its slots) over.
    async fn stop(self, grace: Duration) {
        tracing::info!("shutting down: finishing in-flight reconciles");
        if let Some(cluster_plugins) = self.cluster_plugins {
            cluster_plugins.shutdown().await;
        }
        self.host.shutdown(grace).await;
        // Only now that nothing is reconciled any more: a standby takes over at once.
        if let Some(election) = self.election {
            election.resign().await;
        }
        if let Some(membership) = self.membership {
            membership.leave().await;
        }
    }
}

/// Keeps the leader metric current and, on becoming leader, queues every object again.
async fn follow_leadership(host: Arc<Manager>, mut leadership: Leadership, lease: String) {
    host.metrics().leading(&lease, false);
    while let Some(leading) = leadership.changed().await {
        host.metrics().leading(&lease, leading);
        if leading {
            host.requeue_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        metrics: MetricsArgs,
    }

    fn parse(args: &[&str]) -> MetricsArgs {
        let argv = std::iter::once("wasmctrl").chain(args.iter().copied());
        Flags::try_parse_from(argv).unwrap().metrics
    }

    fn address(metrics: &MetricsArgs) -> String {
        metrics.address().unwrap().unwrap().to_string()
    }

    #[test]
    fn metrics_flags_default_as_kubebuilder_and_dev_serves_plain_http_on_loopback() {
        let secure = parse(&[]);
        assert!(secure.secure());
        assert_eq!(address(&secure), "0.0.0.0:8443");
        let plain = parse(&["--metrics-secure=false"]);
        assert!(!plain.secure());
        assert_eq!(
            address(&plain),
            "0.0.0.0:8080",
            "as before HTTPS was the default"
        );
        assert!(parse(&["--metrics-secure"]).secure());
        let argv = ["wasmctrl", "--metrics-secure", "false"];
        assert!(
            Flags::try_parse_from(argv).is_err(),
            "a boolean's value follows `=`, as Go's flags want it"
        );
        let certs = parse(&["--metrics-cert-dir", "/certs"]);
        assert_eq!(certs.metrics_cert_path, Some(PathBuf::from("/certs")));
        assert_eq!(
            (
                certs.metrics_cert_name.as_str(),
                certs.metrics_cert_key.as_str()
            ),
            ("tls.crt", "tls.key")
        );

        let mut dev = parse(&[]);
        dev.dev_defaults();
        assert!(!dev.secure());
        assert_eq!(address(&dev), "127.0.0.1:8080");
        let mut dev = parse(&["--metrics-secure"]);
        dev.dev_defaults();
        assert_eq!(address(&dev), "127.0.0.1:8443");
        let mut dev = parse(&["--metrics-bind-address=:9090"]);
        dev.dev_defaults();
        assert_eq!(address(&dev), "0.0.0.0:9090");
        assert_eq!(
            parse(&["--metrics-bind-address=0"]).address().unwrap(),
            None
        );
    }
}
