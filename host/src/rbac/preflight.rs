//! The permission preflight: before a plugin starts, the host asks the API server, with one
//! SelfSubjectAccessReview per request it will make for the plugin (what [`rbac::generate`]
//! would grant), whether its own identity may make it; for a plugin that acts as a tenant's
//! ServiceAccount ([`crate::identity`]), one SubjectAccessReview per request asks the same of
//! that account, and one SelfSubjectAccessReview whether the host may impersonate it. A
//! SelfSubjectRulesReview would be one
//! call, but kube documents it as incomplete under authorizers other than RBAC and the answer
//! would still have to be matched rule by rule here; an access review is the authorizer's own
//! verdict on exactly the request.
//!
//! Kinds are resolved (plural, scope) by the API server's discovery, falling back to the
//! built-in table and kube's plural rule for a kind it does not serve yet.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use wasmctrl_core::{Gvk, Scope};

use crate::identity::Account;
use crate::kinds::KindInfo;
use crate::rbac::{self, Requirement, Resolver};

/// The plural and scope of every kind `scope` names, as the API server serves them.
pub async fn resolve(client: &kube::Client, scope: &Scope) -> Resolver {
    let mut resolver = Resolver::default();
    for kind in scope.kinds() {
        if resolver.get(kind).is_some() {
            continue;
        }
        let gvk = kube::core::GroupVersionKind::from(kind);
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((resource, capabilities)) => resolver.add(KindInfo {
                group: kind.group.clone(),
                kind: kind.kind.clone(),
                plural: resource.plural,
                namespaced: capabilities.scope == kube::discovery::Scope::Namespaced,
            }),
            // Not served (yet): the resolver guesses, as `wasmctrl rbac` does without a CRD.
            Err(e) => tracing::debug!(kind = %kind, error = %e, "kind not discovered"),
        }
    }
    resolver
}

/// The kinds `scope` names that are cluster-scoped, as `resolver` knows them.
pub fn cluster_scoped<'a>(scope: &'a Scope, resolver: &Resolver) -> Vec<&'a Gvk> {
    (scope.kinds().into_iter())
        .filter(|k| resolver.get(k).is_some_and(|info| !info.namespaced))
        .collect()
}

/// The requests for a plugin of `scope` that whoever it acts as (`account`, or the host's own
/// identity) may not make, in order.
pub async fn missing(
    client: &kube::Client,
    scope: &Scope,
    resolver: &Resolver,
    account: Option<&Account>,
) -> Result<Vec<Requirement>, kube::Error> {
    let asks = rbac::requirements(scope, resolver).into_iter().map(|need| {
        let (resource, subresource) = match need.resource.split_once('/') {
            Some((r, s)) => (r.to_string(), Some(s.to_string())),
            None => (need.resource.clone(), None),
        };
        let attributes = ResourceAttributes {
            group: Some(need.group.clone()),
            resource: Some(resource),
            subresource,
            verb: Some(need.verb.clone()),
            namespace: need.namespace.clone(),
            ..ResourceAttributes::default()
        };
        async move {
            let allowed = allowed(client, attributes, account).await?;
            Ok::<_, kube::Error>((!allowed).then_some(need))
        }
    });
    let answers = futures::future::try_join_all(asks).await?;
    Ok(answers.into_iter().flatten().collect())
}

/// Whether the host may act as `account` (`impersonate` on that ServiceAccount).
pub async fn may_impersonate(
    client: &kube::Client,
    account: &Account,
) -> Result<bool, kube::Error> {
    let attributes = ResourceAttributes {
        group: Some(String::new()),
        resource: Some("serviceaccounts".into()),
        verb: Some("impersonate".into()),
        namespace: Some(account.namespace().to_owned()),
        name: Some(account.name().to_owned()),
        ..ResourceAttributes::default()
    };
    allowed(client, attributes, None).await
}

/// The authorizer's verdict on a request with `attributes`, by `account` (a
/// SubjectAccessReview naming its user and groups) or by the host itself (a
/// SelfSubjectAccessReview).
async fn allowed(
    client: &kube::Client,
    attributes: ResourceAttributes,
    account: Option<&Account>,
) -> Result<bool, kube::Error> {
    let params = PostParams::default();
    let status = match account {
        Some(account) => {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    resource_attributes: Some(attributes),
                    user: Some(account.username()),
                    groups: Some(account.groups()),
                    ..SubjectAccessReviewSpec::default()
                },
                ..SubjectAccessReview::default()
            };
            let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
            reviews.create(&params, &review).await?.status
        }
        None => {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(attributes),
                    ..SelfSubjectAccessReviewSpec::default()
                },
                ..SelfSubjectAccessReview::default()
            };
            let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
            reviews.create(&params, &review).await?.status
        }
    };
    Ok(status.is_some_and(|s| s.allowed))
}
