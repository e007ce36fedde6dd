//! The permission preflight: before a plugin starts, the host asks the API server, with one
//! SelfSubjectAccessReview per request it will make for the plugin (what [`rbac::generate`]
//! would grant), whether its own identity may make it. A SelfSubjectRulesReview would be one
//! call, but kube documents it as incomplete under authorizers other than RBAC and the answer
//! would still have to be matched rule by rule here; an access review is the authorizer's own
//! verdict on exactly the request.
//!
//! Kinds are resolved (plural, scope) by the API server's discovery, falling back to the
//! built-in table and kube's plural rule for a kind it does not serve yet.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use wasmctrl_scope::{Kind, Scope};

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
pub fn cluster_scoped<'a>(scope: &'a Scope, resolver: &Resolver) -> Vec<&'a Kind> {
    (scope.kinds().into_iter())
        .filter(|k| resolver.get(k).is_some_and(|info| !info.namespaced))
        .collect()
}

/// The requests for a plugin of `scope` that the host's identity may not make, in order.
pub async fn missing(
    client: &kube::Client,
    scope: &Scope,
    resolver: &Resolver,
) -> Result<Vec<Requirement>, kube::Error> {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let asks = rbac::requirements(scope, resolver).into_iter().map(|need| {
        let reviews = reviews.clone();
        async move {
            let (resource, subresource) = match need.resource.split_once('/') {
                Some((r, s)) => (r.to_string(), Some(s.to_string())),
                None => (need.resource.clone(), None),
            };
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(need.group.clone()),
                        resource: Some(resource),
                        subresource,
                        verb: Some(need.verb.clone()),
                        namespace: need.namespace.clone(),
                        ..ResourceAttributes::default()
                    }),
                    ..SelfSubjectAccessReviewSpec::default()
                },
                ..SelfSubjectAccessReview::default()
            };
            let answer = reviews.create(&PostParams::default(), &review).await?;
            let allowed = answer.status.is_some_and(|s| s.allowed);
            Ok::<_, kube::Error>((!allowed).then_some(need))
        }
    });
    let answers = futures::future::try_join_all(asks).await?;
    Ok(answers.into_iter().flatten().collect())
}
