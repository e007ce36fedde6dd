//! Plugins as cluster resources: `WasmPlugin` (namespaced: a team's plugin, acting in its own
//! namespace only) and `ClusterWasmPlugin` (cluster-scoped: the operator's), in
//! `wasmctrl.io/v1alpha1`, as Kubewarden has `AdmissionPolicy` and `ClusterAdmissionPolicy` and
//! Istio has `WasmPlugin`. Each names a plugin in an OCI registry ([`crate::plugins::oci`]) and the
//! operator's config for it (what a plugin file's `<name>.toml` says). The CRDs are generated
//! from these types (`wasmctrl crds`); `examples/deploy/crds.yaml` is a checked-in copy a test
//! keeps current.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::identity::{Account, NotAnAccount};
use crate::kinds::WASMCTRL_GROUP;
use crate::plugins::loader::PluginConfig;

/// What both kinds say about their plugin.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginSource {
    /// The plugin in a registry: `oci://registry/repository:tag`, or pinned,
    /// `oci://registry/repository@sha256:<digest>`.
    #[schemars(regex(pattern = r"^oci://[^\s]+$"))]
    pub module: String,
    /// The plugin's settings (its typed `Settings`), as an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub settings: Option<serde_json::Map<String, serde_json::Value>>,
    /// Keys reconciled at once (default: the host's `--concurrency`); the host lowers it to
    /// its `--max-plugin-concurrency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub concurrency: Option<u32>,
    /// The deadline of one reconcile, in milliseconds (at most ten minutes); the host lowers
    /// it to its `--max-plugin-deadline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 600000))]
    pub deadline_ms: Option<u64>,
    /// The most memory one reconcile may use, in MiB (at most 4096); the host lowers it to its
    /// `--max-plugin-memory`.
    #[serde(default, rename = "memoryMiB", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4096))]
    pub memory_mib: Option<u32>,
    /// Secrets of type `kubernetes.io/dockerconfigjson`, in the resource's namespace (for a
    /// `ClusterWasmPlugin`, the host's), holding the registry's credentials.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<SecretReference>,
    /// Verify the plugin's signature (cosign's keyed format) before it loads: a digest not
    /// signed by one of these keys is `Verified=False` and never loads; what serves keeps
    /// serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verification>,
    /// How often a tag is resolved again to the digest it points to (`5m`, `1h`); a pinned
    /// reference is never. Default 5m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub refresh_interval: Option<String>,
}

/// An object of any fields, kept as given at every depth. Not schemars' schema of a map, whose
/// `additionalProperties: true` kube-apiserver reads as "values of any schema, their own
/// fields unknown": it refuses (or prunes) every field below the first level.
fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "The plugin's settings (its typed `Settings`), as an object.",
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// The keys a plugin's signature is verified with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct Verification {
    /// A signature by any of these verifies.
    #[schemars(length(min = 1))]
    pub keys: Vec<VerificationKey>,
}

/// One public key: given inline, or in a Secret.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationKey {
    /// An ECDSA P-256 public key, PEM (`-----BEGIN PUBLIC KEY-----`, as cosign writes
    /// `cosign.pub`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// The key in a Secret of the resource's namespace (for a `ClusterWasmPlugin`, the
    /// host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyReference>,
}

/// A key of a Secret.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct SecretKeyReference {
    /// The Secret's name.
    pub name: String,
    /// The key in its data (default `cosign.pub`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A Secret by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct SecretReference {
    /// Its name.
    pub name: String,
}

/// A team's plugin, acting only in the resource's own namespace whatever its manifest declares.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "wasmctrl.io",
    version = "v1alpha1",
    kind = "WasmPlugin",
    namespaced,
    status = "WasmPluginStatus",
    shortname = "wp",
    category = "wasmctrl",
    doc = "A wasmctrl plugin from an OCI registry, acting in its own namespace only",
    printcolumn = r#"{"name":"Module","type":"string","jsonPath":".spec.module"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.version"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WasmPluginSpec {
    /// The plugin and the team's config for it.
    #[serde(flatten)]
    pub source: PluginSource,
    /// The ServiceAccount of this namespace whose rights the plugin acts with (default
    /// `default`): the host makes every request for the plugin as it (impersonation), so its
    /// RBAC decides what the plugin may read and write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    #[schemars(regex(
        pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
    ))]
    pub service_account_name: Option<String>,
}

/// The ServiceAccount a `WasmPlugin` acts as when it names none (as Flux's
/// `--default-service-account`).
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// The operator's plugin, in the namespaces its manifest declares (narrowed by `namespaces`).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "wasmctrl.io",
    version = "v1alpha1",
    kind = "ClusterWasmPlugin",
    status = "WasmPluginStatus",
    shortname = "cwp",
    category = "wasmctrl",
    doc = "A wasmctrl plugin from an OCI registry, cluster-wide",
    printcolumn = r#"{"name":"Module","type":"string","jsonPath":".spec.module"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.version"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterWasmPluginSpec {
    /// The plugin and the operator's config for it.
    #[serde(flatten)]
    pub source: PluginSource,
    /// Narrows the namespaces the plugin's manifest declares (it can only narrow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// Permissions a new version (or new settings) may add to what the serving one holds (as
    /// `wasmctrl inspect` prints them); a version asking for more than it is approved for is
    /// refused, and the serving one keeps serving. (A `WasmPlugin` has no such field: its
    /// ServiceAccount's rights bound it.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approve: Vec<String>,
}

/// What the host made of a plugin resource.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WasmPluginStatus {
    /// `Pulled`, `PermissionsGranted`, `Loaded` and `Ready`; reason and message say what failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The manifest digest of the artifact serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The plugin's own version string, as its manifest gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The permissions the serving version holds, as `wasmctrl inspect` prints them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<String>,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// How often a tag is resolved again when `refreshInterval` is not given.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(300);

impl PluginSource {
    /// The config as the host loads the plugin with it (what a file plugin's `<name>.toml`
    /// says), served under `name`; what only one kind says is [`PluginResource::config`]'s.
    fn config(&self, name: &str) -> PluginConfig {
        PluginConfig {
            settings: (self.settings.clone()).map_or(serde_json::Value::Null, Into::into),
            concurrency: self.concurrency.map(|c| c as usize),
            deadline_ms: self.deadline_ms,
            name: Some(name.to_string()),
            memory_mib: self.memory_mib.map(|m| m as usize),
            ..PluginConfig::default()
        }
    }

    /// How often the tag is resolved again (`refreshInterval`, default five minutes).
    pub fn refresh(&self) -> Result<Duration, String> {
        match &self.refresh_interval {
            None => Ok(DEFAULT_REFRESH),
            Some(text) => parse_duration(text),
        }
    }
}

/// A Go-style duration (`90s`, `1h30m`, `1.5s`, `250ms`), as Kubernetes writes them.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    wasmctrl_core::duration::parse_go(text)
        .ok_or_else(|| format!("{text:?} is not a duration (such as 30s, 5m, 1h30m, 250ms)"))
}

/// Either kind, as the host serves them alike.
#[derive(Debug, Clone)]
pub enum PluginResource {
    /// A team's plugin, in its own namespace only.
    Namespaced(WasmPlugin),
    /// The operator's plugin.
    Cluster(ClusterWasmPlugin),
}

impl PluginResource {
    /// The resource a manifest describes; `None` for an object of another kind.
    pub fn from_value(object: &serde_json::Value) -> Result<Option<Self>, serde_json::Error> {
        if object["apiVersion"] != format!("{WASMCTRL_GROUP}/v1alpha1") {
            return Ok(None);
        }
        Ok(match object["kind"].as_str() {
            Some("WasmPlugin") => {
                let mut plugin: WasmPlugin = serde_json::from_value(object.clone())?;
                plugin
                    .metadata
                    .namespace
                    .get_or_insert_with(|| "default".into());
                Some(Self::Namespaced(plugin))
            }
            Some("ClusterWasmPlugin") => {
                Some(Self::Cluster(serde_json::from_value(object.clone())?))
            }
            _ => None,
        })
    }

    /// `WasmPlugin team-a/vm` or `ClusterWasmPlugin vm`, for messages.
    pub fn describe(&self) -> String {
        match self {
            Self::Namespaced(p) => format!(
                "WasmPlugin {}/{}",
                p.metadata.namespace.as_deref().unwrap_or_default(),
                p.metadata.name.as_deref().unwrap_or_default()
            ),
            Self::Cluster(p) => {
                format!(
                    "ClusterWasmPlugin {}",
                    p.metadata.name.as_deref().unwrap_or_default()
                )
            }
        }
    }

    /// The resource's metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Self::Namespaced(p) => &p.metadata,
            Self::Cluster(p) => &p.metadata,
        }
    }

    /// The plugin and its config as the resource gives them.
    pub fn source(&self) -> &PluginSource {
        match self {
            Self::Namespaced(p) => &p.spec.source,
            Self::Cluster(p) => &p.spec.source,
        }
    }

    /// The status the host last wrote.
    pub fn status(&self) -> Option<&WasmPluginStatus> {
        match self {
            Self::Namespaced(p) => p.status.as_ref(),
            Self::Cluster(p) => p.status.as_ref(),
        }
    }

    /// The namespace a tenant's plugin is confined to; `None` for a `ClusterWasmPlugin`.
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Self::Namespaced(p) => p.metadata.namespace.as_deref(),
            Self::Cluster(_) => None,
        }
    }

    /// The name the plugin is served under (its queue, metrics, field manager and RBAC): a
    /// `ClusterWasmPlugin`'s own name, a `WasmPlugin`'s prefixed with its namespace.
    pub fn served_name(&self) -> String {
        let name = self.metadata().name.clone().unwrap_or_default();
        match self.tenant() {
            Some(namespace) => format!("{namespace}-{name}"),
            None => name,
        }
    }

    /// The config the plugin is loaded with: a `ClusterWasmPlugin`'s narrowed namespaces and
    /// approvals; a `WasmPlugin`'s confinement to its namespace, and its ServiceAccount
    /// (absent only when [`account`](Self::account) refuses the name, and then the resource
    /// is not served).
    pub fn config(&self) -> PluginConfig {
        let mut config = self.source().config(&self.served_name());
        match self {
            Self::Namespaced(_) => {
                config.tenant = self.tenant().map(str::to_owned);
                config.account = self.account().ok().flatten();
            }
            Self::Cluster(p) => {
                config.namespaces = p.spec.namespaces.clone();
                config.approve = p.spec.approve.clone();
            }
        }
        config
    }

    /// The ServiceAccount a `WasmPlugin` acts as (`spec.serviceAccountName`, default
    /// [`DEFAULT_SERVICE_ACCOUNT`]); `None` for a `ClusterWasmPlugin`, which acts as the host.
    pub fn account(&self) -> Result<Option<Account>, NotAnAccount> {
        match self {
            Self::Namespaced(p) => {
                let namespace = p.metadata.namespace.as_deref().unwrap_or_default();
                let name =
                    (p.spec.service_account_name.as_deref()).unwrap_or(DEFAULT_SERVICE_ACCOUNT);
                Account::new(namespace, name).map(Some)
            }
            Self::Cluster(_) => Ok(None),
        }
    }

    /// Where its `imagePullSecrets` live: its own namespace, or for a `ClusterWasmPlugin`,
    /// the host's.
    pub fn secrets_namespace<'a>(&'a self, host: &'a str) -> &'a str {
        self.tenant().unwrap_or(host)
    }

    /// A reference to it, for events.
    pub fn object_ref(&self) -> ObjectReference {
        let (kind, meta) = match self {
            Self::Namespaced(p) => ("WasmPlugin", &p.metadata),
            Self::Cluster(p) => ("ClusterWasmPlugin", &p.metadata),
        };
        ObjectReference {
            api_version: Some(format!("{WASMCTRL_GROUP}/v1alpha1")),
            kind: Some(kind.into()),
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
            uid: meta.uid.clone(),
            ..ObjectReference::default()
        }
    }
}

/// The CRDs of both kinds, as YAML documents (what `wasmctrl crds` prints).
pub fn crds_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt as _;
    let mut out = String::from(
        "# Generated by `wasmctrl crds` from host/src/plugins/resources.rs; do not edit.\n",
    );
    for crd in [WasmPlugin::crd(), ClusterWasmPlugin::crd()] {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_as_an_operator_writes_them() {
        let cluster: ClusterWasmPluginSpec = serde_json::from_value(serde_json::json!({
            "module": "oci://registry.example.com/plugins/vm:1.0",
            "settings": {"deployment": "tools", "nested": {"a": [1, {"b": true}]}},
            "memoryMiB": 64,
            "imagePullSecrets": [{"name": "registry"}],
            "refreshInterval": "10m",
            "namespaces": ["team-a"],
        }))
        .unwrap();
        assert_eq!(cluster.source.memory_mib, Some(64));
        assert_eq!(cluster.source.image_pull_secrets[0].name, "registry");
        assert_eq!(
            cluster.namespaces.as_deref(),
            Some(&["team-a".to_string()][..])
        );
        assert_eq!(cluster.source.settings.unwrap()["deployment"], "tools");
    }

    #[test]
    fn refresh_intervals_read_as_kubernetes_writes_durations() {
        for (text, secs) in [
            ("30s", 30.0),
            ("5m", 300.0),
            ("1h30m", 5400.0),
            ("1.5s", 1.5),
        ] {
            assert_eq!(parse_duration(text).unwrap().as_secs_f64(), secs, "{text}");
        }
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        for bad in ["", "5", "m", "5x", "1h 30m", "-5s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert_eq!(PluginSource::default().refresh().unwrap(), DEFAULT_REFRESH);
    }

    #[test]
    fn a_tenants_plugin_is_served_under_its_namespace_and_confined_to_it() {
        let mut tenant = WasmPlugin::new("vm", WasmPluginSpec::default());
        tenant.metadata.namespace = Some("team-a".into());
        let tenant = PluginResource::Namespaced(tenant);
        assert_eq!(tenant.served_name(), "team-a-vm");
        assert_eq!(tenant.config().tenant.as_deref(), Some("team-a"));
        assert_eq!(tenant.secrets_namespace("wasmctrl"), "team-a");
        let cluster = PluginResource::Cluster(ClusterWasmPlugin::new(
            "vm",
            ClusterWasmPluginSpec {
                namespaces: Some(vec!["prod".into()]),
                ..ClusterWasmPluginSpec::default()
            },
        ));
        let config = cluster.config();
        assert_eq!((config.name.as_deref(), config.tenant), (Some("vm"), None));
        assert_eq!(config.namespaces, Some(vec!["prod".to_string()]));
        assert_eq!(cluster.secrets_namespace("wasmctrl"), "wasmctrl");
        assert_eq!(cluster.describe(), "ClusterWasmPlugin vm");
    }

    #[test]
    fn the_checked_in_crds_are_the_generated_ones() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/deploy/crds.yaml");
        let generated = crds_yaml().unwrap();
        if std::env::var_os("WASMCTRL_UPDATE_CRDS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &generated).unwrap();
            return;
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == generated,
            "{} is not what `wasmctrl crds` prints; regenerate it with \
             WASMCTRL_UPDATE_CRDS=1 cargo test -p wasmctrl --lib resources",
            path.display()
        );
    }
}
