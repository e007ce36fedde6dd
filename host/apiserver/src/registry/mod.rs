//! What the server does with each kind, as kube-apiserver's registry strategies say it
//! (`pkg/registry/<group>/<kind>/strategy.go`): one file per built-in kind,
//! `registry/<group>/<kind>.rs`, implementing [`Strategy`]; custom resources share one,
//! driven by their CRD (`custom`).
//!
//! The write and read paths (`admission`, `write`, `delete`, `table`, `handlers`) ask [`of`]
//! for a resource's strategy and never match on kind names themselves. A strategy picks its
//! kind's rules from where kube keeps them too: defaults in `defaults`
//! (`pkg/apis/<group>/v1/defaults.go`), validation in `validate`
//! (`pkg/apis/<group>/validation`), columns in `printers` (`pkg/printers/internalversion`),
//! selectable fields in `selector`. Everything a strategy leaves at its default is what kube's
//! generic registry does for every object (`rest.BeforeCreate` / `BeforeUpdate`, `admission`).

mod admissionregistration;
mod apiextensions;
mod apiregistration;
pub(crate) mod apps;
mod authentication;
mod authorization;
mod autoscaling;
pub(crate) mod batch;
mod certificates;
mod coordination;
pub(crate) mod core;
mod custom;
pub(crate) mod discovery;
mod events;
mod flowcontrol;
mod networking;
mod node;
mod policy;
mod rbac;
mod scheduling;
mod storage;

use std::collections::HashMap;
use std::sync::LazyLock;

use serde_json::Value;

use super::catalog::Resource;
use super::printers::{self, Printer};
use super::selector::Field;
use super::status::ApiResult;
use super::store::State;
use super::validate::Errors;

/// One kind's strategy. Every method has kube's generic behaviour as its default, so a kind's
/// file says only where the kind differs.
pub(crate) trait Strategy: Sync {
    /// The API group and kind it is the strategy of.
    fn group_kind(&self) -> (&'static str, &'static str);

    /// Whether its objects carry `metadata.generation` (kube's strategies that set
    /// `Generation = 1` in `PrepareForCreate`); it then counts changes to what
    /// [`Self::generation_source`] returns.
    fn has_generation(&self) -> bool {
        false
    }

    /// The part of an object whose changes bump its generation: everything but metadata,
    /// and but the status where it has its own subresource (`status_sub`).
    fn generation_source(&self, obj: &Value, status_sub: bool) -> Value {
        without_metadata(obj, status_sub)
    }

    /// Whether a PUT without a resourceVersion overwrites what is stored (kube's
    /// `AllowUnconditionalUpdate`).
    fn allows_unconditional_update(&self) -> bool {
        true
    }

    /// Fills in kube's defaults of an object being created (`old` is `None`) or updated
    /// through the main resource; a field the client set is never changed.
    fn default(&self, _st: &State, _obj: &mut Value, _old: Option<&Value>) {}

    /// What the kind's `PrepareForCreate` (and the admission plugins every cluster enables)
    /// set on a new object once it is defaulted: its initial status, labels, annotations.
    fn prepare_for_create(&self, _st: &State, _obj: &mut Value, _now: &str) -> ApiResult<()> {
        Ok(())
    }

    /// What the kind's `PrepareForUpdate` sets on an update of the main resource once it is
    /// defaulted and its generation counted (`old` is what is stored).
    fn prepare_for_update(
        &self,
        _st: &State,
        _new: &mut Value,
        _old: &Value,
        _now: &str,
    ) -> ApiResult<()> {
        Ok(())
    }

    /// What kube refuses of a new object (`Validate`).
    fn validate(&self, _obj: &Value) -> Errors {
        Errors::new()
    }

    /// What kube refuses of an update of the main resource from `old` to `new`
    /// (`ValidateUpdate`): by default the new object's own checks.
    fn validate_update(&self, new: &Value, _old: &Value) -> Errors {
        self.validate(new)
    }

    /// Of a subresource that writes one part of the object (not `status`), its name and that
    /// part's path; kube's strategy for the subresource takes the rest from the stored object.
    fn subresource_part(&self, _sub: &str) -> Option<(&'static str, &'static [&'static str])> {
        None
    }

    /// Fills in what the strategy of subresource `sub` sets on the part it writes.
    fn prepare_subresource_update(&self, _sub: &str, _new: &mut Value, _old: &Value, _now: &str) {}

    /// What kube refuses of an update through subresource `sub` (a part, as above).
    fn validate_subresource_update(&self, _sub: &str, _new: &Value, _old: &Value) -> Errors {
        Errors::new()
    }

    /// The columns `kubectl get` shows and how each cell is worked out.
    fn printer(&self) -> &'static Printer {
        &printers::DEFAULT
    }

    /// The fields it can be selected by beyond `metadata.name` and `metadata.namespace`
    /// (`ToSelectableFields`).
    fn selectable_fields(&self) -> &'static [Field] {
        &[]
    }

    /// Called as an object is stored by a create or update (not a dry run), before it is.
    fn storing(&self, _st: &mut State, _obj: &Value) {}

    /// Called as an object is removed for good, before it is.
    fn removing(&self, _st: &mut State, _obj: &Value) -> ApiResult<()> {
        Ok(())
    }
}

/// A built-in kind's `apiVersion` and `kind`, as its objects and references to them carry
/// them (kube's `TypeMeta`): what the simulated cluster's controllers write and look for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TypeMeta {
    /// `group/version`, or `version` in the core group.
    pub(crate) api_version: &'static str,
    /// The kind.
    pub(crate) kind: &'static str,
}

impl TypeMeta {
    pub(crate) const fn new(api_version: &'static str, kind: &'static str) -> Self {
        Self { api_version, kind }
    }

    /// Whether `reference` (an owner reference, say) names this kind.
    pub(crate) fn named_by(&self, reference: &Value) -> bool {
        reference["apiVersion"] == self.api_version && reference["kind"] == self.kind
    }
}

/// `obj` without its metadata, and without its status when `status_sub`.
pub(crate) fn without_metadata(obj: &Value, status_sub: bool) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        if status_sub {
            m.remove("status");
        }
    }
    v
}

/// Every built-in kind's strategy.
static BUILT_IN: &[&dyn Strategy] = &[
    &admissionregistration::MutatingWebhookConfiguration,
    &admissionregistration::ValidatingAdmissionPolicy,
    &admissionregistration::ValidatingAdmissionPolicyBinding,
    &admissionregistration::ValidatingWebhookConfiguration,
    &apiextensions::CustomResourceDefinition,
    &apiregistration::ApiService,
    &apps::ControllerRevision,
    &apps::DaemonSet,
    &apps::Deployment,
    &apps::ReplicaSet,
    &apps::StatefulSet,
    &authentication::SelfSubjectReview,
    &authentication::TokenReview,
    &authorization::LocalSubjectAccessReview,
    &authorization::SelfSubjectAccessReview,
    &authorization::SelfSubjectRulesReview,
    &authorization::SubjectAccessReview,
    &autoscaling::HorizontalPodAutoscaler,
    &batch::CronJob,
    &batch::Job,
    &certificates::CertificateSigningRequest,
    &coordination::Lease,
    &core::Binding,
    &core::ComponentStatus,
    &core::ConfigMap,
    &core::Endpoints,
    &core::Event,
    &core::LimitRange,
    &core::Namespace,
    &core::Node,
    &core::PersistentVolume,
    &core::PersistentVolumeClaim,
    &core::Pod,
    &core::PodTemplate,
    &core::ReplicationController,
    &core::ResourceQuota,
    &core::Secret,
    &core::Service,
    &core::ServiceAccount,
    &discovery::EndpointSlice,
    &events::Event,
    &flowcontrol::FlowSchema,
    &flowcontrol::PriorityLevelConfiguration,
    &networking::Ingress,
    &networking::IngressClass,
    &networking::NetworkPolicy,
    &node::RuntimeClass,
    &policy::PodDisruptionBudget,
    &rbac::ClusterRole,
    &rbac::ClusterRoleBinding,
    &rbac::Role,
    &rbac::RoleBinding,
    &scheduling::PriorityClass,
    &storage::CsiDriver,
    &storage::CsiNode,
    &storage::CsiStorageCapacity,
    &storage::StorageClass,
    &storage::VolumeAttachment,
];

/// [`BUILT_IN`] by group and kind.
static BY_KIND: LazyLock<HashMap<(&'static str, &'static str), &'static dyn Strategy>> =
    LazyLock::new(|| BUILT_IN.iter().map(|s| (s.group_kind(), *s)).collect());

/// The strategy of `res`'s kind: its CRD's for a custom resource.
pub(crate) fn of(res: &Resource) -> &'static dyn Strategy {
    if res.custom {
        return &custom::CustomResource;
    }
    (BY_KIND
        .get(&(res.group.as_str(), res.kind.as_str()))
        .copied())
    .unwrap_or(&custom::UNLISTED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    #[test]
    fn every_built_in_kind_has_its_own_strategy_and_every_strategy_a_kind() {
        let catalog = Catalog::default();
        let kinds: std::collections::BTreeSet<_> = (catalog.all())
            .map(|r| (r.group.clone(), r.kind.clone()))
            .collect();
        for (group, kind) in &kinds {
            let found = BY_KIND.get(&(group.as_str(), kind.as_str()));
            assert!(found.is_some(), "no strategy for {group}/{kind}");
        }
        assert_eq!(BY_KIND.len(), BUILT_IN.len(), "a kind has two strategies");
        for s in BUILT_IN {
            let (group, kind) = s.group_kind();
            assert!(
                kinds.contains(&(group.to_string(), kind.to_string())),
                "{group}/{kind} has a strategy but is not in the catalog"
            );
        }
    }

    #[test]
    fn generation_is_kept_where_kube_keeps_it() {
        let catalog = Catalog::default();
        let kept = |group: &str, plural: &str| {
            let res = (catalog.all())
                .find(|r| r.group == group && r.plural == plural)
                .unwrap();
            of(res).has_generation()
        };
        for (group, plural) in [
            ("apps", "deployments"),
            ("batch", "jobs"),
            ("", "replicationcontrollers"),
            ("networking.k8s.io", "ingresses"),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
        ] {
            assert!(kept(group, plural), "{group}/{plural}");
        }
        for (group, plural) in [("", "pods"), ("", "configmaps"), ("", "services")] {
            assert!(!kept(group, plural), "{group}/{plural}");
        }
    }
}
