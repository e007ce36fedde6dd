//! Plugins as cluster resources: `WasmPlugin` (namespaced: a team's plugin, acting in its own
//! namespace only) and `ClusterWasmPlugin` (cluster-scoped: the operator's), in
//! `wasmctrl.io/v1alpha1`, as Kubewarden has `AdmissionPolicy` and `ClusterAdmissionPolicy` and
//! Istio has `WasmPlugin`. Each names a plugin in an OCI registry ([`crate::oci`]) and the
//! operator's config for it (what a plugin file's `<name>.toml` says). The CRDs are generated
//! from these types (`wasmctrl crds`); `examples/deploy/crds.yaml` is a checked-in copy a test
//! keeps current.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// Keys reconciled at once (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub concurrency: Option<u32>,
    /// The deadline of one reconcile, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub deadline_ms: Option<u64>,
    /// The most memory one reconcile may use, in MiB.
    #[serde(default, rename = "memoryMiB", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub memory_mib: Option<u32>,
    /// Permissions a new version may add to what the running one holds (as `wasmctrl inspect`
    /// prints them); a version asking for more than it is approved for is refused, and the
    /// running one keeps serving.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approve: Vec<String>,
    /// Secrets of type `kubernetes.io/dockerconfigjson`, in the resource's namespace (for a
    /// `ClusterWasmPlugin`, the host's), holding the registry's credentials.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<SecretReference>,
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
pub struct WasmPluginSpec {
    /// The plugin and the operator's config for it.
    #[serde(flatten)]
    pub source: PluginSource,
}

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

/// The CRDs of both kinds, as YAML documents (what `wasmctrl crds` prints).
pub fn crds_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt as _;
    let mut out =
        String::from("# Generated by `wasmctrl crds` from host/src/resources.rs; do not edit.\n");
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
