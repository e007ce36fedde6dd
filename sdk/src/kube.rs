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
//! assert_eq!(wasmctrl_sdk::Gvk::of::<Memcached>().api_version(), "example.com/v1");
//! ```
//!
//! and a k8s-openapi child of it, in its namespace (the host adds the owner reference):
//!
//! ```
//! # use wasmctrl_sdk::k8s_openapi::api::core::v1::ConfigMap;
//! # let owner = ConfigMap { metadata: wasmctrl_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
//! #     name: Some("cache".into()), namespace: Some("team-a".into()), ..Default::default() }, ..Default::default() };
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

use crate::Condition;

/// The metadata of an owned child of `owner` named `name`: it lives in its owner's namespace
/// (the host adds the controller owner reference when it applies it). Add labels and
/// annotations as needed.
pub fn child_meta(owner: &impl Resource, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: owner.meta().namespace.clone().filter(|ns| !ns.is_empty()),
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

/// `K`'s CRD with every schema description cut to `max_len` characters and dropped when that
/// is 0, as kubebuilder's `crd:maxDescLen` does. A CRD embedding Kubernetes' own types (a
/// `JobTemplateSpec` carries the whole Pod template's documentation) runs to hundreds of KB; a
/// plain `kubectl apply` of it fails (`metadata.annotations: Too long`, its copy in the
/// last-applied annotation) unless it is trimmed or applied with `--server-side`.
pub fn crd_with_descriptions_cut<K: kube_core::CustomResourceExt>(
    max_len: usize,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    let mut crd = K::crd();
    for version in &mut crd.spec.versions {
        let schema = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut());
        if let Some(schema) = schema {
            cut_descriptions(schema, max_len);
        }
    }
    crd
}

/// Cuts the descriptions of a schema and of every schema inside it (the keys that hold schemas,
/// so that a property named `description` keeps its name).
fn cut_descriptions(
    schema: &mut k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps,
    max_len: usize,
) {
    if let Some(description) = &mut schema.description {
        match description.char_indices().nth(max_len) {
            _ if max_len == 0 => schema.description = None,
            Some((end, _)) => description.truncate(end),
            None => {}
        }
    }
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    };
    let maps = [
        &mut schema.properties,
        &mut schema.pattern_properties,
        &mut schema.definitions,
    ];
    for map in maps.into_iter().flatten() {
        map.values_mut().for_each(|s| cut_descriptions(s, max_len));
    }
    let lists = [&mut schema.all_of, &mut schema.any_of, &mut schema.one_of];
    for list in lists.into_iter().flatten() {
        list.iter_mut().for_each(|s| cut_descriptions(s, max_len));
    }
    if let Some(not) = &mut schema.not {
        cut_descriptions(not, max_len);
    }
    match &mut schema.items {
        Some(JSONSchemaPropsOrArray::Schema(s)) => cut_descriptions(s, max_len),
        Some(JSONSchemaPropsOrArray::Schemas(list)) => {
            list.iter_mut().for_each(|s| cut_descriptions(s, max_len));
        }
        None => {}
    }
    for nested in [
        &mut schema.additional_properties,
        &mut schema.additional_items,
    ] {
        if let Some(JSONSchemaPropsOrBool::Schema(s)) = nested {
            cut_descriptions(s, max_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use crate::{Action, Gvk, Outcome};

    #[test]
    fn descriptions_are_cut_everywhere_but_property_names_stay() {
        use k8s_openapi::api::batch::v1::JobTemplateSpec;
        use serde::{Deserialize, Serialize};

        #[derive(
            crate::CustomResource, Serialize, Deserialize, Clone, Debug, schemars::JsonSchema,
        )]
        #[kube(
            group = "example.com",
            version = "v1",
            kind = "Batch",
            namespaced,
            crates(kube_core = "::kube_core", k8s_openapi = "::k8s_openapi")
        )]
        struct BatchSpec {
            /// What the batch is about.
            description: String,
            /// The Jobs it makes.
            job_template: JobTemplateSpec,
        }

        let size = |crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| {
            serde_json::to_string(crd).unwrap().len()
        };
        let full = crd_with_descriptions_cut::<Batch>(usize::MAX);
        assert_eq!(full, <Batch as kube_core::CustomResourceExt>::crd());
        let none = crd_with_descriptions_cut::<Batch>(0);
        let text = serde_json::to_string(&none).unwrap();
        assert!(!text.contains("\"description\":\""), "no description left");
        let spec = &none.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema;
        let spec = &spec.as_ref().unwrap().properties.as_ref().unwrap()["spec"];
        assert!(
            spec.properties
                .as_ref()
                .unwrap()
                .contains_key("description")
        );
        let short = crd_with_descriptions_cut::<Batch>(10);
        assert!(size(&none) < size(&short) && size(&short) < size(&full) / 2);
        let props = short.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref();
        let spec = &props.unwrap().properties.as_ref().unwrap()["spec"].properties;
        let described = spec.as_ref().unwrap()["description"].description.as_deref();
        assert_eq!(described, Some("What the b"));
    }

    #[test]
    fn children_are_the_objects_the_owner_controls() {
        use k8s_openapi::api::core::v1::ConfigMap;

        use crate::testing::Harness;
        use crate::{Context, Error, Manifest, NoSettings, Reconcile, Reconciler};

        struct Lister;

        impl Reconciler for Lister {
            type Object = kube_core::DynamicObject;
            type Settings = NoSettings;

            fn manifest(_: &NoSettings) -> Result<Manifest, String> {
                Ok(
                    Manifest::new("lister", Gvk::new("example.com", "v1", "Owner"))
                        .owns::<ConfigMap>(),
                )
            }

            fn reconcile(
                event: Reconcile<kube_core::DynamicObject>,
                ctx: &Context<'_>,
            ) -> Result<Outcome, Error> {
                let Reconcile::Apply(owner) = event else {
                    return Err(Error::terminal("not live"));
                };
                let mut names: Vec<String> = (ctx.children::<ConfigMap>(&owner)?)
                    .into_iter()
                    .filter_map(|c| c.metadata.name)
                    .collect();
                names.sort();
                Ok(Outcome::with(vec![Action::event(
                    "Children",
                    &names.join(","),
                )]))
            }
        }

        let reference = |uid: &str, controller: bool| {
            serde_json::json!([{"apiVersion": "example.com/v1", "kind": "Owner", "name": "o",
                "uid": uid, "controller": controller}])
        };
        let cm = |name: &str, namespace: &str, owners: serde_json::Value| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace, "ownerReferences": owners}})
        };
        let outcome = Harness::new()
            .object(cm("mine-a", "ns", reference("u-1", true)))
            .object(cm("mine-b", "ns", reference("u-1", true)))
            .object(cm("merely-owned", "ns", reference("u-1", false)))
            .object(cm("someone-elses", "ns", reference("u-2", true)))
            .object(cm("orphan", "ns", serde_json::json!([])))
            .reconcile::<Lister>(&serde_json::json!({"apiVersion": "example.com/v1",
                "kind": "Owner", "metadata": {"name": "o", "namespace": "ns", "uid": "u-1"}}))
            .unwrap();
        let [Action::EmitEvent(event)] = &outcome.actions[..] else {
            panic!("{:?}", outcome.actions)
        };
        assert_eq!(event.note, "mine-a,mine-b");
    }

    #[test]
    fn kinds_of_typed_objects() {
        assert_eq!(Gvk::of::<Pod>(), Gvk::new("", "v1", "Pod"));
        assert_eq!(
            Gvk::of::<Deployment>(),
            Gvk::new("apps", "v1", "Deployment")
        );
    }

    #[test]
    fn typed_children_live_beside_their_owner() {
        let owner = Pod {
            metadata: ObjectMeta {
                namespace: Some("team-a".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
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
        let cluster = child_meta(&k8s_openapi::api::core::v1::Namespace::default(), "z");
        assert_eq!(cluster.namespace, None);
    }
}
