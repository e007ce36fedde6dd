//! One plugin resource's slot: brings what serves in line with the resource, step by step,
//! and writes what happened to its status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Options;
use super::cache::Cache;
use super::status::{Report, Verdict};
use crate::kinds::WASMCTRL_GROUP;
use crate::observe::events::Note;
use crate::plugins::loader::{self, PluginConfig};
use crate::plugins::oci::{self, Registry};
use crate::plugins::resources::PluginResource;
use crate::rbac::preflight;
use crate::reconcile::controller::Manager;
use crate::runtime::{Plugin, Runtime};

/// What every slot shares.
pub(super) struct Shared {
    pub(super) client: kube::Client,
    pub(super) host: Arc<Manager>,
    pub(super) runtime: Runtime,
    pub(super) cache: Cache,
    pub(super) options: Options,
}

/// The version a slot serves.
/// What a resource asks for, read before anything is fetched ([`Slot::asked`]).
struct Asked {
    account: Option<crate::identity::Account>,
    config: PluginConfig,
    /// What the operator's policy took off the config, said in the `Loaded` condition.
    clamped: Vec<String>,
    refresh: Duration,
    pinned: bool,
}

struct Serving {
    plugin: Arc<Plugin>,
    /// The manifest digest it was pulled by.
    digest: String,
    config: PluginConfig,
    /// Loaded from the cache because the registry could not be reached.
    from_cache: bool,
    /// Its component, to load again under a changed config without pulling (or a cache).
    component: Arc<Vec<u8>>,
}

/// Retries of a failed step wait this long, doubling, up to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_secs(2);
/// The longest wait between retries of a registry that does not answer.
const RETRY_MAX: Duration = Duration::from_secs(300);
/// The longest wait between two permission preflights: the operator applying the missing
/// RBAC should not wait long for the plugin to start.
const PREFLIGHT_MAX: Duration = Duration::from_secs(15);
/// How long a loaded version's caches get to sync before `Ready` says they are syncing (and
/// the slot looks again soon).
const SYNC_WAIT: Duration = Duration::from_secs(10);

/// Whether the part of a resource a slot acts on changed (not its status, which the slot
/// writes itself).
pub(super) fn spec_changed(old: &PluginResource, new: &PluginResource) -> bool {
    let generation = |r: &PluginResource| r.metadata().generation;
    generation(old) != generation(new)
        || old.config() != new.config()
        || old.source() != new.source()
}

/// What one pass decided about when to look again.
enum Next {
    /// Only when the resource changes.
    Idle,
    /// After this long (a tag's refresh, a retry).
    After(Duration),
}

/// The slot's state between passes.
struct Slot {
    shared: Arc<Shared>,
    name: String,
    serving: Option<Serving>,
    /// Consecutive failed passes, for the backoff.
    failures: u32,
    /// The conditions last reported, so events mark transitions only.
    reported: Option<Report>,
}

/// Serves the resource `rx` holds until it is gone (the sender dropped) or `stop`.
pub(super) async fn run(
    shared: Arc<Shared>,
    mut rx: watch::Receiver<PluginResource>,
    stop: CancellationToken,
) {
    let name = rx.borrow().served_name();
    let mut slot = Slot {
        shared,
        name,
        serving: None,
        failures: 0,
        reported: None,
    };
    loop {
        let resource = rx.borrow_and_update().clone();
        let next = slot.pass(&resource).await;
        let wait = async {
            match next {
                Next::Idle => std::future::pending().await,
                Next::After(after) => tokio::time::sleep(after).await,
            }
        };
        tokio::select! {
            changed = rx.changed() => if changed.is_err() {
                slot.retire(&resource).await;
                return;
            },
            () = wait => {}
            () = stop.cancelled() => return,
        }
    }
}

/// Why a pass stopped short, as the condition to report.
struct Failed {
    condition: &'static str,
    reason: &'static str,
    message: String,
    /// The longest backoff for this kind of failure.
    max: Duration,
}

impl Failed {
    fn new(condition: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            condition,
            reason,
            message: message.into(),
            max: RETRY_MAX,
        }
    }
}

impl Slot {
    /// One pass: bring what serves in line with `resource`, write the status, and say when to
    /// look again.
    async fn pass(&mut self, resource: &PluginResource) -> Next {
        let mut report = Report::default();
        let outcome = self.converge(resource, &mut report).await;
        let next = match outcome {
            Ok(next) => {
                self.failures = 0;
                next
            }
            Err(failed) => {
                self.failures = self.failures.saturating_add(1);
                let what = format!("{}: {}", resource.describe(), failed.message);
                tracing::warn!(plugin.name = %self.name, reason = failed.reason, "{what}");
                report.set(failed.condition, Verdict::no(failed.reason, failed.message));
                Next::After(backoff(self.failures, failed.max))
            }
        };
        self.finish(resource, report).await;
        next
    }

    /// The steps, each setting its condition; the first that fails ends the pass.
    async fn converge(
        &mut self,
        resource: &PluginResource,
        report: &mut Report,
    ) -> Result<Next, Failed> {
        let asked = self.asked(resource)?;
        let registry = self.registry(resource).await?;
        // 1. The digest to run, and its artifact, signed as the resource (or the host) asks.
        let (digest, component) = self.fetch_verified(resource, &registry, report).await?;
        let next = if asked.pinned {
            Next::Idle
        } else {
            Next::After(asked.refresh)
        };
        if let Some(serving) = &self.serving
            && serving.digest == digest
            && serving.config == asked.config
        {
            report.set("PermissionsGranted", granted(asked.account.as_ref()));
            report.set(
                "Loaded",
                Verdict::yes("Loaded", serves(&serving.plugin, &digest, &asked.clamped)),
            );
            self.report_serving(report);
            return self.ready(report).await.map(|()| next);
        }
        // The digest serving, under another config (settings, namespaces, approvals): the
        // same component, loaded again.
        let component = match (component, &self.serving) {
            (Some(bytes), _) => Arc::new(bytes),
            (None, Some(serving)) => serving.component.clone(),
            (None, None) => return Err(Failed::new("Pulled", "PullFailed", "no artifact")),
        };
        // 2. Load it, as a file plugin is loaded.
        let plugin = (self.load(resource, &digest, component.clone(), &asked.config)).await?;
        // 3. May it do what it asks? Approved by the operator, and allowed to the host.
        self.permitted(resource, &plugin, &asked.config).await?;
        report.set("PermissionsGranted", granted(asked.account.as_ref()));
        // 4. Serve it.
        let serving = Serving {
            plugin,
            digest,
            config: asked.config,
            from_cache: (report.get("Pulled")).is_some_and(|v| v.reason == "FromCache"),
            component,
        };
        self.serve(resource, serving, &asked.clamped, report).await;
        self.ready(report).await.map(|()| next)
    }

    /// What the resource asks for, as far as it can be read before anything is fetched: whose
    /// rights (a tenant's plugin acts as its ServiceAccount, never as the host), the config
    /// within the operator's policy, how often to look for a new digest, and whether the
    /// reference pins one; a tenant may name only the registries the operator allows.
    fn asked(&self, resource: &PluginResource) -> Result<Asked, Failed> {
        let source = resource.source();
        let policy = &self.shared.options.policy;
        let account = resource.account().map_err(|e| {
            Failed::new("PermissionsGranted", "InvalidServiceAccount", e.to_string())
        })?;
        let (config, clamped) = policy.clamp(resource.config());
        let refresh = source
            .refresh()
            .map_err(|e| Failed::new("Pulled", "InvalidRefreshInterval", e))?;
        let reference = oci::reference(&source.module)
            .map_err(|e| Failed::new("Pulled", "InvalidReference", e.to_string()))?;
        if resource.tenant().is_some()
            && !policy.tenant_may_pull(reference.registry(), reference.repository())
        {
            return Err(Failed::new(
                "Pulled",
                "RegistryNotAllowed",
                format!(
                    "{}/{} is not in a registry the operator allows WasmPlugins to name (--tenant-registries); nothing was fetched",
                    reference.registry(),
                    reference.repository()
                ),
            ));
        }
        Ok(Asked {
            account,
            config,
            clamped,
            refresh,
            pinned: reference.digest().is_some(),
        })
    }

    /// The digest to run and its artifact (none when the cache or the serving version has
    /// it), its signatures checked at every pass so that changed keys apply at once. A version
    /// already serving keeps serving through a failure, and the report says which.
    async fn fetch_verified(
        &self,
        resource: &PluginResource,
        registry: &Registry,
        report: &mut Report,
    ) -> Result<(String, Option<Vec<u8>>), Failed> {
        let (digest, component) = match self.fetch(resource, registry, report).await {
            Ok(found) => found,
            Err(mut failed) if self.serving.is_some() => {
                // Nothing already serving stops because a registry is unreachable.
                if let Some(serving) = self.serving.as_ref().filter(|s| s.from_cache) {
                    failed.reason = "FromCache";
                    failed.message = format!(
                        "{}; running {}, the digest this resource last ran, from the cache",
                        failed.message, serving.digest
                    );
                }
                self.report_serving(report);
                return Err(failed);
            }
            Err(failed) => return Err(failed),
        };
        if let Err(failed) = self.verify(resource, registry, &digest, report).await {
            self.report_serving(report);
            return Err(failed);
        }
        Ok((digest, component))
    }

    /// Hands `serving` to the controllers (a swap in place when the old version declares the
    /// same, as for files), and says so in the report and an event.
    async fn serve(
        &mut self,
        resource: &PluginResource,
        serving: Serving,
        clamped: &[String],
        report: &mut Report,
    ) {
        let (plugin, config) = (serving.plugin.clone(), serving.config.clone());
        let change = match self.serving.take() {
            Some(old) => loader::Change::Replaced {
                old: old.plugin,
                new: plugin.clone(),
                config,
            },
            None => loader::Change::Added(plugin.clone(), config),
        };
        let options = &self.shared.options;
        (change.deliver(&self.shared.host, options.concurrency, options.grace)).await;
        let serves = serves(&plugin, &serving.digest, clamped);
        report.set("Loaded", Verdict::yes("Loaded", serves));
        let note = format!("{} serves", describe(&plugin, &serving.digest));
        self.event(resource, false, "Loaded", &note).await;
        self.serving = Some(serving);
        self.report_serving(report);
    }

    /// The registry client for this resource: the host's, with the credentials of its
    /// `imagePullSecrets` (read at every pass: a rotated Secret applies at once).
    async fn registry(&self, resource: &PluginResource) -> Result<Registry, Failed> {
        let shared = &self.shared;
        let namespace = resource.secrets_namespace(&shared.options.host_namespace);
        let secrets: Api<Secret> = Api::namespaced(shared.client.clone(), namespace);
        let mut credentials = BTreeMap::new();
        for reference in &resource.source().image_pull_secrets {
            let failed = |message: String| Failed::new("Pulled", "ImagePullSecretFailed", message);
            let name = &reference.name;
            let secret = secrets
                .get(name)
                .await
                .map_err(|e| failed(format!("imagePullSecret {namespace}/{name}: {e}")))?;
            let data = (secret.data.as_ref())
                .and_then(|d| d.get(".dockerconfigjson"))
                .ok_or_else(|| {
                    failed(format!(
                        "imagePullSecret {namespace}/{name} has no .dockerconfigjson (its type must be kubernetes.io/dockerconfigjson)"
                    ))
                })?;
            let text = String::from_utf8_lossy(&data.0);
            let auths = oci::parse_docker_config(&text)
                .map_err(|e| failed(format!("imagePullSecret {namespace}/{name}: {e}")))?;
            credentials.extend(auths);
        }
        // A tenant's pull carries its own Secrets' credentials only, never the host's.
        let inherit = resource.tenant().is_none();
        Ok(shared
            .options
            .registry
            .with_credentials(credentials, inherit))
    }

    /// Whether `digest` is signed (cosign's keyed format) by one of the keys the resource's
    /// `spec.verify.keys` gives; with none given, whether the host requires signatures.
    async fn verify(
        &self,
        resource: &PluginResource,
        registry: &Registry,
        digest: &str,
        report: &mut Report,
    ) -> Result<(), Failed> {
        let given = (resource.source().verify.as_ref()).map_or(&[][..], |v| &v.keys[..]);
        if given.is_empty() {
            if self.shared.options.policy.require_signatures {
                return Err(Failed::new(
                    "Verified",
                    "KeysRequired",
                    "the host loads only signed plugins (--require-signatures): name the keys in spec.verify.keys",
                ));
            }
            report.set(
                "Verified",
                Verdict::yes(
                    "NotRequired",
                    "no spec.verify.keys, and signatures are not required",
                ),
            );
            return Ok(());
        }
        let keys = self.keys(resource, given).await?;
        let module = &resource.source().module;
        let signatures = registry.signatures(module, digest).await.map_err(|e| {
            Failed::new(
                "Verified",
                "SignatureUnavailable",
                format!("cannot read the signatures: {}", chain(&e)),
            )
        })?;
        oci::sign::verify(&keys, digest, &signatures).map_err(|e| {
            let reason = match e {
                oci::sign::Unverified::Missing { .. } => "SignatureMissing",
                oci::sign::Unverified::Invalid { .. } => "SignatureInvalid",
            };
            Failed::new("Verified", reason, e.to_string())
        })?;
        report.set(
            "Verified",
            Verdict::yes(
                "Verified",
                format!("{digest} is signed by a key of spec.verify.keys"),
            ),
        );
        Ok(())
    }

    /// The public keys `given` names: inline, or read from Secrets of the resource's namespace
    /// (a `ClusterWasmPlugin`'s: the host's) at every pass, so a rotated key applies at once.
    async fn keys(
        &self,
        resource: &PluginResource,
        given: &[crate::plugins::resources::VerificationKey],
    ) -> Result<Vec<oci::sign::PublicKey>, Failed> {
        let failed = |message: String| Failed::new("Verified", "InvalidKey", message);
        let namespace = resource.secrets_namespace(&self.shared.options.host_namespace);
        let secrets: Api<Secret> = Api::namespaced(self.shared.client.clone(), namespace);
        let mut keys = Vec::new();
        for (i, key) in given.iter().enumerate() {
            let text = match (&key.public_key, &key.secret_ref) {
                (Some(pem), None) => pem.clone(),
                (None, Some(reference)) => {
                    let field = reference.key.as_deref().unwrap_or("cosign.pub");
                    let name = &reference.name;
                    let secret = secrets.get(name).await.map_err(|e| {
                        failed(format!(
                            "spec.verify.keys[{i}]: Secret {namespace}/{name}: {e}"
                        ))
                    })?;
                    let data = (secret.data.as_ref()).and_then(|d| d.get(field)).ok_or_else(|| {
                        failed(format!(
                            "spec.verify.keys[{i}]: Secret {namespace}/{name} has no key {field}"
                        ))
                    })?;
                    String::from_utf8_lossy(&data.0).into_owned()
                }
                _ => {
                    return Err(failed(format!(
                        "spec.verify.keys[{i}]: give exactly one of publicKey and secretRef"
                    )));
                }
            };
            let key = oci::sign::PublicKey::from_pem(&text)
                .map_err(|e| failed(format!("spec.verify.keys[{i}]: {e}")))?;
            keys.push(key);
        }
        Ok(keys)
    }

    /// Resolves the module to a digest and finds its artifact: the cache's copy, else pulled
    /// and verified. `None` for the artifact when the digest is the one serving. With the
    /// registry unreachable and nothing serving (a restart), the digest the status last
    /// recorded is run from the cache when it is there.
    async fn fetch(
        &self,
        resource: &PluginResource,
        registry: &Registry,
        report: &mut Report,
    ) -> Result<(String, Option<Vec<u8>>), Failed> {
        let failed = match self.resolve_and_pull(resource, registry, report).await {
            Ok(found) => return Ok(found),
            Err(failed) => failed,
        };
        let last = (resource.status()).and_then(|s| s.digest.clone());
        if self.serving.is_none()
            && let Some(last) = last
            && let Some(bytes) = self.shared.cache.get(&last)
        {
            report.set(
                "Pulled",
                Verdict::no(
                    "FromCache",
                    format!(
                        "{}; running {last}, the digest this resource last ran, from the cache",
                        failed.message
                    ),
                ),
            );
            return Ok((last, Some(bytes)));
        }
        Err(failed)
    }

    async fn resolve_and_pull(
        &self,
        resource: &PluginResource,
        registry: &Registry,
        report: &mut Report,
    ) -> Result<(String, Option<Vec<u8>>), Failed> {
        let module = &resource.source().module;
        let cache = &self.shared.cache;
        let digest = registry
            .resolve(module)
            .await
            .map_err(|e| pull_failure(&e))?;
        if self.serving.as_ref().is_some_and(|s| s.digest == digest) {
            report.set(
                "Pulled",
                Verdict::yes("Pulled", format!("{module} is {digest}")),
            );
            return Ok((digest, None));
        }
        if let Some(bytes) = cache.get(&digest) {
            report.set(
                "Pulled",
                Verdict::yes("Cached", format!("{module} is {digest}, kept in the cache")),
            );
            return Ok((digest, Some(bytes)));
        }
        let pinned = oci::reference(module)
            .map_err(|e| Failed::new("Pulled", "InvalidReference", e.to_string()))?
            .clone_with_digest(digest.clone())
            .to_string();
        let pulled =
            (registry.pull(&pinned, &cache.staging()).await).map_err(|e| pull_failure(&e))?;
        let component = pulled.component().map_err(|e| pull_failure(&e))?;
        cache.keep(&digest, pulled.file);
        report.set(
            "Pulled",
            Verdict::yes("Pulled", format!("{module} is {digest}")),
        );
        Ok((digest, Some(component)))
    }

    /// Loads the component on a blocking thread under the resource's config.
    async fn load(
        &self,
        resource: &PluginResource,
        digest: &str,
        component: Arc<Vec<u8>>,
        config: &PluginConfig,
    ) -> Result<Arc<Plugin>, Failed> {
        let failed = |message: String| Failed::new("Loaded", "LoadFailed", message);
        let source = format!("{} ({digest})", resource.describe());
        let (runtime, overrides) = (self.shared.runtime.clone(), config.overrides());
        let loaded =
            tokio::task::spawn_blocking(move || runtime.load_with(&source, &component, &overrides))
                .await
                .map_err(|e| failed(format!("the loading thread failed: {e}")))?;
        let plugin = loaded.map_err(|e| failed(e.to_string()))?;
        config
            .check_narrows(plugin.manifest())
            .map_err(|e| Failed::new("Loaded", "NamespacesNotNarrowed", e))?;
        let taken = self.serving.is_none() && self.shared.host.plugins().contains(&self.name);
        if taken {
            return Err(Failed::new(
                "Loaded",
                "NameConflict",
                format!(
                    "another plugin (a file, or another resource) is already served as {}",
                    self.name
                ),
            ));
        }
        Ok(Arc::new(plugin))
    }

    /// The version is approved (a `ClusterWasmPlugin`'s asks for nothing more than the serving
    /// one, or the operator approved each addition), confined if it is a tenant's, and whoever
    /// it acts as (the tenant's ServiceAccount, or the host) may make every request it implies.
    async fn permitted(
        &self,
        resource: &PluginResource,
        plugin: &Plugin,
        config: &PluginConfig,
    ) -> Result<(), Failed> {
        self.approved(resource, plugin, config)?;
        self.allowed(resource, plugin, config).await
    }

    /// What the version asks for beyond the serving one was approved by the operator (a
    /// `ClusterWasmPlugin`'s), and the capabilities it declares are granted to its namespace
    /// (a tenant's).
    fn approved(
        &self,
        resource: &PluginResource,
        plugin: &Plugin,
        config: &PluginConfig,
    ) -> Result<(), Failed> {
        // New bytes, or new settings (which may make the same bytes declare more): either
        // may widen what the operator's plugin asks for, and what it adds must be approved.
        // A tenant's is bounded by its ServiceAccount's rights instead, whatever it declares.
        if resource.tenant().is_none()
            && let Some(serving) = &self.serving
            && (serving.plugin.digest() != plugin.digest()
                || serving.plugin.settings() != plugin.settings())
        {
            let unapproved = loader::widened(&serving.plugin, plugin, &config.approve);
            if !unapproved.is_empty() {
                return Err(Failed::new(
                    "PermissionsGranted",
                    "NotApproved",
                    format!(
                        "this version asks for more than the one serving ({}), which keeps serving; \
                         to allow it, list each new permission in spec.approve: {unapproved:?}",
                        serving.digest
                    ),
                ));
            }
        }
        // Capabilities are the operator's to grant a tenant's namespace.
        if let Some(namespace) = resource.tenant() {
            let policy = &self.shared.options.policy;
            let ungranted = policy.ungranted(namespace, plugin.manifest().capabilities());
            if !ungranted.is_empty() {
                return Err(Failed::new(
                    "PermissionsGranted",
                    "CapabilityNotGranted",
                    format!(
                        "the plugin declares {ungranted:?}, which the operator has not granted WasmPlugins in {namespace} (--tenant-capabilities {namespace}=<capability>)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A tenant's plugin declares no cluster-scoped kind, and whoever it acts as (the
    /// tenant's ServiceAccount, by impersonation, or the host) may make every request it
    /// implies (the permission preflight).
    async fn allowed(
        &self,
        resource: &PluginResource,
        plugin: &Plugin,
        config: &PluginConfig,
    ) -> Result<(), Failed> {
        let client = &self.shared.client;
        let resolver = preflight::resolve(client, plugin.scope()).await;
        if resource.tenant().is_some() {
            let cluster: Vec<String> = (preflight::cluster_scoped(plugin.scope(), &resolver))
                .iter()
                .map(|k| k.to_string())
                .collect();
            if !cluster.is_empty() {
                return Err(Failed::new(
                    "Loaded",
                    "ClusterScopedKind",
                    format!(
                        "a WasmPlugin acts in its own namespace only, and the plugin declares cluster-scoped kinds {cluster:?}; serve it with a ClusterWasmPlugin"
                    ),
                ));
            }
        }
        let account = config.account.as_ref();
        let who = acting_as(account);
        let unanswered = |e: kube::Error| {
            Failed::new(
                "PermissionsGranted",
                "PreflightFailed",
                format!("cannot ask the API server what {who} may do: {e}"),
            )
        };
        if let Some(account) = account
            && !(preflight::may_impersonate(client, account).await).map_err(unanswered)?
        {
            return Err(Failed {
                max: PREFLIGHT_MAX,
                ..Failed::new(
                    "PermissionsGranted",
                    "CannotImpersonate",
                    format!(
                        "the host may not act as {account} (impersonate serviceaccounts in namespace {}); the operator grants it per namespace (wasmctrl rbac --resources)",
                        account.namespace()
                    ),
                )
            });
        }
        let missing = preflight::missing(client, plugin.scope(), &resolver, account)
            .await
            .map_err(unanswered)?;
        (self.shared.host.metrics()).missing_permissions(&self.name, missing.len());
        if missing.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
        let message = format!(
            "{who} may not make {} request(s) the plugin needs; grant them (wasmctrl rbac --resources) and it starts: {}",
            list.len(),
            list.join("; ")
        );
        Err(Failed {
            max: PREFLIGHT_MAX,
            ..Failed::new("PermissionsGranted", "MissingPermissions", message)
        })
    }

    /// Ready once the serving version's caches are synced.
    async fn ready(&self, report: &mut Report) -> Result<(), Failed> {
        let prefix = format!("{}: ", self.name);
        let synced = || {
            !(self.shared.host.unsynced())
                .iter()
                .any(|w| w.starts_with(&prefix))
        };
        let deadline = tokio::time::Instant::now() + SYNC_WAIT;
        while !synced() {
            if tokio::time::Instant::now() >= deadline {
                return Err(Failed {
                    max: PREFLIGHT_MAX,
                    ..Failed::new(
                        "Ready",
                        "CachesSyncing",
                        "the plugin's caches are not synced yet (is the CRD of each kind it declares installed?)",
                    )
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let serving = self
            .serving
            .as_ref()
            .map_or_else(String::new, |s| describe(&s.plugin, &s.digest));
        report.set(
            "Ready",
            Verdict::yes("Serving", format!("{serving} serves, its caches synced")),
        );
        Ok(())
    }

    /// Fills in what serves (digest, version, permissions).
    fn report_serving(&self, report: &mut Report) {
        let Some(serving) = &self.serving else { return };
        report.digest = Some(serving.digest.clone());
        report.version = Some(serving.plugin.manifest().version.clone());
        report.permissions = (serving.plugin.scope().permissions().iter())
            .map(ToString::to_string)
            .collect();
    }

    /// Writes the status (while leading), and an event for each condition that turned false.
    async fn finish(&mut self, resource: &PluginResource, mut report: Report) {
        if report.get("Ready").is_none() {
            let ready = match (&self.serving, report.first_failure()) {
                (Some(serving), Some((type_, failed))) => Verdict::yes(
                    "Serving",
                    format!(
                        "{} keeps serving; {type_} failed: {}",
                        describe(&serving.plugin, &serving.digest),
                        failed.reason
                    ),
                ),
                (None, Some((_, failed))) => {
                    Verdict::no(&failed.reason.clone(), failed.message.clone())
                }
                (_, None) => Verdict::no("Pending", "not served yet"),
            };
            report.set("Ready", ready);
        }
        for (i, verdict) in report.verdicts.iter().enumerate() {
            let Some(verdict) = verdict.as_ref().filter(|v| !v.ok) else {
                continue;
            };
            let before = self.reported.as_ref().and_then(|r| r.verdicts[i].as_ref());
            if before != Some(verdict) && super::status::TYPES[i] != "Ready" {
                let note = format!("{}: {}", verdict.reason, verdict.message);
                self.event(resource, true, verdict.reason.as_str(), &note)
                    .await;
            }
        }
        if self.shared.options.leadership.is_leading() {
            self.write_status(resource, &report).await;
        }
        self.reported = Some(report);
    }

    async fn write_status(&self, resource: &PluginResource, report: &Report) {
        let meta = resource.metadata();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let status = report.status(resource.status(), meta.generation, now);
        if resource
            .status()
            .is_some_and(|old| same_status(old, &status))
        {
            return;
        }
        let (kind, plural) = match resource.tenant() {
            Some(_) => ("WasmPlugin", "wasmplugins"),
            None => ("ClusterWasmPlugin", "clusterwasmplugins"),
        };
        let gvk = kube::core::GroupVersionKind::gvk(WASMCTRL_GROUP, "v1alpha1", kind);
        let api_resource = ApiResource::from_gvk_with_plural(&gvk, plural);
        let client = self.shared.client.clone();
        let api: Api<DynamicObject> = match resource.tenant() {
            Some(ns) => Api::namespaced_with(client, ns, &api_resource),
            None => Api::all_with(client, &api_resource),
        };
        let name = meta.name.as_deref().unwrap_or_default();
        let patch = serde_json::json!({ "status": status });
        if let Err(e) = api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(plugin.name = %self.name, error = %e, "cannot write the status of {}", resource.describe());
        }
    }

    /// An event about the resource.
    async fn event(&self, resource: &PluginResource, warning: bool, reason: &str, note: &str) {
        let note = Note {
            warning,
            reason,
            note,
            action: "Load",
        };
        (self.shared.host.applier())
            .host_event(&resource.object_ref(), &note)
            .await;
    }

    /// The resource is gone: stop its plugin (in-flight reconciles get the grace period) and
    /// free its informers.
    async fn retire(&mut self, resource: &PluginResource) {
        if self.serving.take().is_some() {
            let grace = self.shared.options.grace;
            self.shared.host.remove(&self.name, grace).await;
            tracing::info!(plugin.name = %self.name, "{} deleted; its plugin stopped", resource.describe());
        }
    }
}

/// Two statuses say the same, timestamps aside.
/// Who a plugin acting as `account` (`None`: the host) is, in a condition's message.
fn acting_as(account: Option<&crate::identity::Account>) -> String {
    account.map_or_else(|| "the host".to_owned(), ToString::to_string)
}

/// `PermissionsGranted=True`, naming who the plugin acts as.
fn granted(account: Option<&crate::identity::Account>) -> Verdict {
    let who = acting_as(account);
    Verdict::yes(
        "Granted",
        format!("{who} may make every request the plugin implies"),
    )
}

fn same_status(
    a: &crate::plugins::resources::WasmPluginStatus,
    b: &crate::plugins::resources::WasmPluginStatus,
) -> bool {
    let strip = |s: &crate::plugins::resources::WasmPluginStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        }
        s
    };
    strip(a) == strip(b)
}

/// `vm 1.2.0 (sha256:0123456789ab) serves`, and what of the resource's asks the ceilings
/// lowered.
fn serves(plugin: &Plugin, digest: &str, clamped: &[String]) -> String {
    let serves = format!("{} serves", describe(plugin, digest));
    if clamped.is_empty() {
        serves
    } else {
        format!("{serves}; {}", clamped.join("; "))
    }
}

/// `vm 1.2.0 (sha256:0123456789ab)`.
fn describe(plugin: &Plugin, digest: &str) -> String {
    let short = digest.get(..19).unwrap_or(digest);
    let m = plugin.manifest();
    format!("{} {} ({short})", m.name, m.version)
}

/// The wait before retry `n` (from 1): doubling from [`RETRY_MIN`], at most `max`.
fn backoff(n: u32, max: Duration) -> Duration {
    crate::reconcile::queue::exponential_backoff(RETRY_MIN, n.saturating_sub(1), max)
}

/// A registry failure as the `Pulled` condition reports it: the reason names the failure
/// (a digest mismatch, refused credentials, a bound exceeded), the message what the host saw,
/// with no more of the registry's answer than its error codes and messages.
fn pull_failure(error: &oci::Error) -> Failed {
    use oci::Error as E;
    let reason = match error {
        E::DigestMismatch { .. } => "DigestMismatch",
        E::Reference { .. } => "InvalidReference",
        E::NotAPlugin { .. } => "NotAPlugin",
        E::Unauthorized { .. } => "Unauthorized",
        E::TooLarge { what, .. } if what.contains("manifest") => "ManifestTooLarge",
        E::TooLarge { .. } => "PluginTooLarge",
        E::Timeout { .. } => "PullTimeout",
        E::PrivateAddress { .. } => "RedirectRefused",
        E::Registry { .. } | E::Refused { .. } | E::Transport { .. } | E::Setup { .. } => {
            "PullFailed"
        }
    };
    Failed::new("Pulled", reason, chain(error))
}

/// An error and its sources, on one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_to_a_ceiling() {
        assert_eq!(backoff(1, RETRY_MAX), RETRY_MIN);
        assert_eq!(backoff(2, RETRY_MAX), RETRY_MIN * 2);
        assert_eq!(backoff(40, RETRY_MAX), RETRY_MAX);
        assert_eq!(backoff(40, PREFLIGHT_MAX), PREFLIGHT_MAX);
    }
}
