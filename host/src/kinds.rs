//! What a kind is called in RBAC rules and URLs (its plural resource) and where its objects live
//! (namespaced or cluster-scoped), from the two sources Kubernetes itself has: the built-in
//! types' metadata as `k8s-openapi` carries it (`Resource::URL_PATH_SEGMENT` and `Scope`, for
//! the Kubernetes version it targets), and the CustomResourceDefinitions the user gives.
//!
//! Never from the embedded API server: what it happens to serve is no guide to what a cluster
//! serves, and production code (`wasmctrl rbac`, `wasmctrl dev`'s RBAC) must not depend on it.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource, SubResourceScope};
use serde::Deserialize as _;

/// The API group of wasmctrl's own kinds, `WasmPlugin` and `ClusterWasmPlugin`
/// (`plugins::resources`).
pub const WASMCTRL_GROUP: &str = "wasmctrl.io";

/// A kind's plural resource and scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindInfo {
    /// API group (`""` for core).
    pub group: String,
    /// Kind (`ConfigMap`).
    pub kind: String,
    /// Plural resource (`configmaps`).
    pub plural: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

/// Whether a `k8s-openapi` scope marker is the namespaced one (the crate's `ResourceScope` is a
/// marker trait with no value to read).
trait Scoped {
    const NAMESPACED: bool;
}

impl Scoped for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scoped for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// A kind created as a subresource (`Binding`, as `pods/binding`) is created in a namespace.
impl Scoped for SubResourceScope {
    const NAMESPACED: bool = true;
}

fn info<K: Resource>() -> KindInfo
where
    K::Scope: Scoped,
{
    KindInfo {
        group: K::GROUP.into(),
        kind: K::KIND.into(),
        plural: K::URL_PATH_SEGMENT.into(),
        namespaced: <K::Scope as Scoped>::NAMESPACED,
    }
}

macro_rules! builtin_kinds {
    ($($ty:path),* $(,)?) => {
        /// Every built-in kind of the Kubernetes version `k8s-openapi` targets, once (the first of
        /// its versions in the list: all versions of a kind share its plural and scope).
        pub fn builtin() -> Vec<KindInfo> {
            use k8s_openapi::{api, apiextensions_apiserver, kube_aggregator};
            let mut out: Vec<KindInfo> = Vec::new();
            for info in [$(info::<$ty>()),*] {
                if !out.iter().any(|o| o.group == info.group && o.kind == info.kind) {
                    out.push(info);
                }
            }
            out
        }

        /// The path of a built-in kind's type inside `k8s_openapi`
        /// (`api::core::v1::ConfigMap`), for code that names it.
        pub fn rust_path(of_group: &str, of_kind: &str) -> Option<String> {
            use k8s_openapi::{Resource, api, apiextensions_apiserver, kube_aggregator};
            $(
                if <$ty as Resource>::GROUP == of_group && <$ty as Resource>::KIND == of_kind {
                    return Some(stringify!($ty).replace(' ', ""));
                }
            )*
            None
        }
    };
}

// The paths are checked by the compiler and the names, plurals and scopes come from the types;
// the list is `wasmctrl-core`'s, every resource type of `k8s-openapi`.
wasmctrl_core::k8s_resource_types!(builtin_kinds);

/// Why a CustomResourceDefinition names no kind.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// Its `spec` is not a CRD's.
    #[error("its spec is not a CustomResourceDefinition's")]
    Spec(#[source] serde_json::Error),
    /// A field kube-apiserver requires is empty.
    #[error("spec.{0} is required")]
    Required(&'static str),
    /// `spec.scope` is neither `Namespaced` nor `Cluster`.
    #[error("spec.scope must be Namespaced or Cluster, not {0:?}")]
    Scope(String),
}

/// The kind a CustomResourceDefinition (as JSON) defines.
pub fn of_crd(crd: &serde_json::Value) -> Result<KindInfo, CrdError> {
    let spec = CustomResourceDefinitionSpec::deserialize(&crd["spec"]).map_err(CrdError::Spec)?;
    for (field, value) in [
        ("group", &spec.group),
        ("names.kind", &spec.names.kind),
        ("names.plural", &spec.names.plural),
    ] {
        if value.is_empty() {
            return Err(CrdError::Required(field));
        }
    }
    if spec.scope != "Namespaced" && spec.scope != "Cluster" {
        return Err(CrdError::Scope(spec.scope));
    }
    Ok(KindInfo {
        group: spec.group,
        kind: spec.names.kind,
        plural: spec.names.plural,
        namespaced: spec.scope == "Namespaced",
    })
}

/// Kinds by (group, kind): the built-in ones, then CRDs as they are added (a CRD may not redefine
/// a built-in kind in a real cluster either: kube-apiserver refuses a CRD in a built-in group).
#[derive(Debug, Clone)]
pub struct Kinds {
    known: BTreeMap<(String, String), KindInfo>,
}

impl Default for Kinds {
    fn default() -> Self {
        let known = builtin()
            .into_iter()
            .map(|info| ((info.group.clone(), info.kind.clone()), info))
            .collect();
        Self { known }
    }
}

impl Kinds {
    /// Learns the kind a CRD (as JSON) defines.
    pub fn add_crd(&mut self, crd: &serde_json::Value) -> Result<&KindInfo, CrdError> {
        let info = of_crd(crd)?;
        let key = (info.group.clone(), info.kind.clone());
        Ok(self.known.entry(key).insert_entry(info).into_mut())
    }

    /// Learns a kind the API server described (discovery).
    pub fn add(&mut self, info: KindInfo) {
        self.known
            .insert((info.group.clone(), info.kind.clone()), info);
    }

    /// The kind's plural and scope, if it is built in or a CRD defines it.
    pub fn get(&self, group: &str, kind: &str) -> Option<&KindInfo> {
        self.known.get(&(group.to_string(), kind.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_per_group() {
        let all = builtin();
        let kinds = Kinds::default();
        assert_eq!(kinds.known.len(), all.len(), "a kind is listed twice");
        assert!(all.len() > 70, "{}", all.len());
    }

    #[test]
    fn plurals_and_scopes_are_kubes() {
        let kinds = Kinds::default();
        let of = |group: &str, kind: &str| {
            let info = kinds.get(group, kind).expect(kind);
            (info.plural.as_str(), info.namespaced)
        };
        assert_eq!(of("", "Pod"), ("pods", true));
        assert_eq!(of("", "Endpoints"), ("endpoints", true));
        assert_eq!(of("", "Node"), ("nodes", false));
        assert_eq!(of("batch", "CronJob"), ("cronjobs", true));
        assert_eq!(
            of("networking.k8s.io", "IngressClass"),
            ("ingressclasses", false)
        );
        assert_eq!(
            of("networking.k8s.io", "NetworkPolicy"),
            ("networkpolicies", true)
        );
        assert_eq!(
            of("storage.k8s.io", "CSIStorageCapacity"),
            ("csistoragecapacities", true)
        );
        assert_eq!(
            of("apiextensions.k8s.io", "CustomResourceDefinition"),
            ("customresourcedefinitions", false)
        );
        assert_eq!(
            of("apiregistration.k8s.io", "APIService"),
            ("apiservices", false)
        );
        assert!(kinds.get("example.com", "Widget").is_none());
    }

    /// The embedded API server serves built-in kinds as Kubernetes does.
    #[test]
    fn the_embedded_servers_kinds_have_kubes_plural_and_scope() {
        let kinds = Kinds::default();
        for served in wasmctrl_apiserver::served_builtins() {
            let (group, kind) = (&served.group, &served.kind);
            let kube = (kinds.get(group, kind))
                .unwrap_or_else(|| panic!("{group}/{kind} is not a Kubernetes kind"));
            assert_eq!(
                (&served.plural, served.namespaced),
                (&kube.plural, kube.namespaced)
            );
        }
    }

    #[test]
    fn built_in_kinds_are_named_by_their_type() {
        let path = rust_path("apps", "Deployment");
        assert_eq!(path.as_deref(), Some("api::apps::v1::Deployment"));
        assert_eq!(
            rust_path("", "ConfigMap").as_deref(),
            Some("api::core::v1::ConfigMap")
        );
        assert_eq!(rust_path("example.com", "ConfigMap"), None);
    }

    #[test]
    fn a_crd_names_its_kind() {
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "geese.example.com"},
            "spec": {
                "group": "example.com",
                "names": {"kind": "Goose", "plural": "geese", "singular": "goose", "listKind": "GooseList"},
                "scope": "Cluster",
                "versions": [{"name": "v1", "served": true, "storage": true}]
            }
        });
        let mut kinds = Kinds::default();
        let info = kinds.add_crd(&crd).unwrap().clone();
        assert_eq!((info.plural.as_str(), info.namespaced), ("geese", false));
        assert_eq!(kinds.get("example.com", "Goose"), Some(&info));
        assert!(kinds.add_crd(&serde_json::json!({"spec": {}})).is_err());
    }
}
