//! [`ObjectMeta`]: the standard `metadata` of a Kubernetes object, as plugins read it, and
//! [`Object`]: a custom resource as most controllers read it.
//!
//! A plugin declares its own structs for the parts of an object it cares about (`spec`,
//! `status`) and uses [`ObjectMeta`] for `metadata`, so every plugin reads names, owners and
//! deletion the same way.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// A custom resource with standard metadata, a `spec` (its default when absent) and an optional
/// `status`: `type VirtualMachine = Object<Spec, Status>;` then `req.object::<VirtualMachine>()`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(bound(deserialize = "Spec: Deserialize<'de> + Default, Status: Deserialize<'de>"))]
pub struct Object<Spec, Status> {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: Spec,
    /// Reported state, absent until a controller has written one.
    #[serde(default)]
    pub status: Option<Status>,
}

/// The `metadata` fields plugins use; every other field is ignored.
///
/// Every field is optional: an absent or `null` field reads as its default (an empty string,
/// `0`, an empty map or list, `None`), as Kubernetes treats them. Serializing leaves empty
/// fields out, as the API server does.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObjectMeta {
    /// `metadata.name`.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_default")]
    pub name: String,
    /// `metadata.namespace`; empty for cluster-scoped objects.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_default")]
    pub namespace: String,
    /// `metadata.uid`: tells an object from an earlier one of the same name.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_default")]
    pub uid: String,
    /// `metadata.resourceVersion`: changes with every write of the object.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_default")]
    pub resource_version: String,
    /// `metadata.generation`: bumped by the API server when the spec changes.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_default")]
    pub generation: i64,
    /// `metadata.labels`.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_default")]
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_default")]
    pub annotations: BTreeMap<String, String>,
    /// `metadata.finalizers`: what must happen before a deleted object goes.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_default")]
    pub finalizers: Vec<String>,
    /// `metadata.deletionTimestamp` (RFC 3339): set once the object is being deleted.
    #[serde(skip_serializing_if = "is_default")]
    pub deletion_timestamp: Option<String>,
    /// `metadata.ownerReferences`.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_default")]
    pub owner_references: Vec<OwnerReference>,
}

/// One entry of `metadata.ownerReferences`: an object this one belongs to.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct OwnerReference {
    /// The owner's `apiVersion`.
    #[serde(deserialize_with = "nullable")]
    pub api_version: String,
    /// The owner's kind.
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    /// The owner's name.
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    /// The owner's uid.
    #[serde(deserialize_with = "nullable")]
    pub uid: String,
    /// `Some(true)` when the owner is the object's managing controller.
    #[serde(skip_serializing_if = "is_default")]
    pub controller: Option<bool>,
}

/// Reads `null` as the default, like an absent field: the API server may store either.
fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

impl ObjectMeta {
    /// A child object of `kind` named `name`, for the object these are the metadata of, as
    /// [`Action::apply`](crate::Action::apply) takes it: `apiVersion`, `kind`, and `metadata`
    /// with the name and the owner's namespace (owned children live beside their owner; the
    /// host adds the controller owner reference when it applies them). Add the rest.
    pub fn child(&self, kind: &crate::Gvk, name: &str) -> serde_json::Value {
        let mut metadata = serde_json::json!({ "name": name });
        if !self.namespace.is_empty() {
            metadata["namespace"] = self.namespace.clone().into();
        }
        serde_json::json!({"apiVersion": kind.api_version(), "kind": kind.kind, "metadata": metadata})
    }
}

/// What the SDK's helpers ([`finalizer`](crate::finalizer), owned-child builders) read from an
/// object's metadata, for [`ObjectMeta`] and (feature `kube`) k8s-openapi's `ObjectMeta` alike.
pub trait Metadata {
    /// `metadata.name`.
    fn name(&self) -> &str;
    /// `metadata.namespace`; empty for cluster-scoped objects.
    fn namespace(&self) -> &str;
    /// `metadata.finalizers`.
    fn finalizers(&self) -> &[String];
    /// `metadata.uid`; empty until the server assigns one.
    fn uid(&self) -> &str;
    /// `metadata.generation`, what `observedGeneration` reports; 0 until the server sets it.
    fn generation(&self) -> i64;
}

impl Metadata for ObjectMeta {
    fn name(&self) -> &str {
        &self.name
    }

    fn namespace(&self) -> &str {
        &self.namespace
    }

    fn finalizers(&self) -> &[String] {
        &self.finalizers
    }

    fn uid(&self) -> &str {
        &self.uid
    }

    fn generation(&self) -> i64 {
        self.generation
    }
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_a_pods_metadata() {
        let meta: ObjectMeta = serde_json::from_value(json!({
            "name": "tools-5d8c7b9f4-x2k7q",
            "generateName": "tools-5d8c7b9f4-",
            "namespace": "default",
            "uid": "8a1f2c3d-0000-4b5e-9f6a-7b8c9d0e1f2a",
            "resourceVersion": "48213",
            "generation": 3,
            "creationTimestamp": "2026-11-22T09:00:00Z",
            "deletionTimestamp": "2026-11-22T10:00:00Z",
            "deletionGracePeriodSeconds": 30,
            "labels": {"app": "tools", "pod-template-hash": "5d8c7b9f4"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-22T08:00:00Z"},
            "finalizers": ["example.com/cleanup"],
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "tools-5d8c7b9f4",
                "uid": "1b2c3d4e-0000-4f5a-8b9c-0d1e2f3a4b5c",
                "controller": true,
                "blockOwnerDeletion": true,
            }],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update"}],
        }))
        .unwrap();
        assert_eq!(meta.name, "tools-5d8c7b9f4-x2k7q");
        assert_eq!(meta.namespace, "default");
        assert_eq!(meta.uid, "8a1f2c3d-0000-4b5e-9f6a-7b8c9d0e1f2a");
        assert_eq!(meta.resource_version, "48213");
        assert_eq!(meta.generation, 3);
        assert_eq!(meta.labels["pod-template-hash"], "5d8c7b9f4");
        assert_eq!(
            meta.annotations["kubectl.kubernetes.io/restartedAt"],
            "2026-11-22T08:00:00Z"
        );
        assert_eq!(meta.finalizers, vec!["example.com/cleanup"]);
        assert_eq!(
            meta.deletion_timestamp.as_deref(),
            Some("2026-11-22T10:00:00Z")
        );
        assert_eq!(
            meta.owner_references,
            vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "tools-5d8c7b9f4".into(),
                uid: "1b2c3d4e-0000-4f5a-8b9c-0d1e2f3a4b5c".into(),
                controller: Some(true),
            }]
        );
    }

    #[test]
    fn a_child_lives_in_its_owners_namespace() {
        let owner = ObjectMeta {
            name: "alice".into(),
            namespace: "team-a".into(),
            ..ObjectMeta::default()
        };
        let pod = owner.child(&crate::Gvk::new("", "v1", "Pod"), "alice-pod");
        assert_eq!(
            pod,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "alice-pod", "namespace": "team-a"}})
        );
        let cluster_scoped =
            ObjectMeta::default().child(&crate::Gvk::new("example.com", "v1", "Zone"), "z");
        assert_eq!(cluster_scoped["metadata"], json!({"name": "z"}));
        assert_eq!(cluster_scoped["apiVersion"], "example.com/v1");
    }

    #[test]
    fn everything_but_the_name_may_be_missing() {
        let meta: ObjectMeta = serde_json::from_value(json!({"name": "test-vm"})).unwrap();
        assert_eq!(
            meta,
            ObjectMeta {
                name: "test-vm".into(),
                ..ObjectMeta::default()
            }
        );
    }

    #[test]
    fn null_reads_as_absent_and_empty_fields_are_not_written() {
        let meta: ObjectMeta = serde_json::from_value(json!({
            "name": "a", "namespace": null, "generation": null, "labels": null,
            "annotations": null, "finalizers": null, "deletionTimestamp": null,
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": null}],
        }))
        .unwrap();
        assert_eq!(meta.owner_references[0].uid, "");
        assert_eq!(
            serde_json::to_value(&meta).unwrap(),
            json!({"name": "a", "ownerReferences": [
                {"apiVersion": "", "kind": "ReplicaSet", "name": "rs", "uid": ""}]})
        );
    }
}
