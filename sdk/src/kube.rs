//! Typed Kubernetes objects (feature `kube`): built-in kinds from [`k8s_openapi`], custom
//! resources from kube's `#[derive(CustomResource)]`, and the few helpers that let a plugin
//! use them without JSON.
//!
//! A custom resource, its CRD generated from the types (plugin crates depend on `schemars`
//! themselves, as on `serde`, so that `#[derive(JsonSchema)]` finds it):
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use wasmctrl_sdk::CustomResource;
//!
//! #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
//! #[kube(group = "example.com", version = "v1", kind = "Memcached", namespaced,
//!     status = "MemcachedStatus",
//!     crates(kube_core = "::wasmctrl_sdk::kube_core", k8s_openapi = "::wasmctrl_sdk::k8s_openapi"))]
//! pub struct MemcachedSpec {
//!     #[schemars(range(min = 1, max = 5))]
//!     pub size: i32,
//! }
//!
//! #[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
//! pub struct MemcachedStatus {
//!     pub nodes: Vec<String>,
//! }
//!
//! assert_eq!(wasmctrl_sdk::kube::gvk::<Memcached>().api_version(), "example.com/v1");
//! ```
//!
//! and a k8s-openapi child of it, in its namespace (the host adds the owner reference):
//!
//! ```
//! # use wasmctrl_sdk::k8s_openapi::api::core::v1::ConfigMap;
//! # let owner = wasmctrl_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
//! #     name: Some("cache".into()), namespace: Some("team-a".into()), ..Default::default() };
//! let config = ConfigMap {
//!     metadata: wasmctrl_sdk::kube::child_meta(&owner, "cache-config"),
//!     data: Some([("size".to_string(), "3".to_string())].into()),
//!     ..Default::default()
//! };
//! let apply = wasmctrl_sdk::Action::apply(&config).unwrap(); // serialized with apiVersion/kind
//! # assert!(matches!(apply, wasmctrl_sdk::Action::Apply(json) if json.contains("\"kind\":\"ConfigMap\"")));
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::Resource;

use crate::{Condition, Gvk, Metadata};

/// The kind of `K`, a k8s-openapi type or a derived custom resource, as the manifest and
/// [`Context::get`](crate::Context::get) name it: `gvk::<Pod>()`.
pub fn gvk<K: Resource<DynamicType = ()>>() -> Gvk {
    Gvk::new(&K::group(&()), &K::version(&()), &K::kind(&()))
}

/// The metadata of an owned child named `name` of the object `owner` are the metadata of: it
/// lives in its owner's namespace (the host adds the controller owner reference when it applies
/// it). Add labels and annotations as needed.
pub fn child_meta(owner: &impl Metadata, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(owner.namespace().to_owned()).filter(|ns| !ns.is_empty()),
        ..ObjectMeta::default()
    }
}

/// The schema of a status's `conditions`, for `#[schemars(schema_with = "wasmctrl_sdk::kube::conditions")]`
/// on a `Vec<Condition>`: a list map keyed by `type`, as `metav1.Condition` lists are, so that
/// server-side apply merges conditions by type and the API server refuses two of one type.
pub fn conditions(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<Condition>>();
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema
}

impl Metadata for ObjectMeta {
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }

    fn finalizers(&self) -> &[String] {
        self.finalizers.as_deref().unwrap_or_default()
    }

    fn uid(&self) -> &str {
        self.uid.as_deref().unwrap_or_default()
    }

    fn generation(&self) -> i64 {
        self.generation.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use crate::{Action, Finalizer, Outcome, finalizer};

    #[test]
    fn kinds_of_typed_objects() {
        assert_eq!(gvk::<Pod>(), Gvk::new("", "v1", "Pod"));
        assert_eq!(gvk::<Deployment>(), Gvk::new("apps", "v1", "Deployment"));
    }

    #[test]
    fn typed_children_live_beside_their_owner() {
        let owner = crate::ObjectMeta {
            namespace: "team-a".into(),
            ..crate::ObjectMeta::default()
        };
        let pod = Pod {
            metadata: child_meta(&owner, "alice"),
            ..Pod::default()
        };
        assert_eq!(
            serde_json::to_value(&pod).unwrap(),
            serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "alice", "namespace": "team-a"}})
        );
        let cluster = child_meta(&ObjectMeta::default(), "z");
        assert_eq!(cluster.namespace, None);
    }

    #[test]
    fn the_finalizer_helper_reads_k8s_openapi_metadata() {
        let meta = ObjectMeta {
            finalizers: Some(vec!["example.com/x".into()]),
            ..ObjectMeta::default()
        };
        let outcome = finalizer(&meta, true, "example.com/x", |event| {
            assert_eq!(event, Finalizer::Cleanup);
            Ok(Outcome::done())
        })
        .unwrap();
        assert_eq!(
            outcome.actions,
            vec![Action::remove_finalizer("example.com/x")]
        );
    }
}
