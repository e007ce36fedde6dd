//! [`Reconcile`]: what [`Reconciler::reconcile`] is asked to do with its key, and how the SDK
//! decides it from the host's request, the plugin's finalizer included.

use kube_core::Resource;

use crate::request::Request;
use crate::{Action, Context, Error, Outcome, Reconciler};

/// What a reconcile is asked to do with its key, as kube-runtime's `finalizer::Event` says it,
/// plus the key whose object is gone.
///
/// With a finalizer declared ([`Manifest::finalizer`](crate::Manifest::finalizer)) the SDK adds
/// it before the first `Apply` and removes it after a `Cleanup` that succeeded, so a plugin
/// never handles finalizers itself.
#[derive(Debug, Clone, PartialEq)]
pub enum Reconcile<K> {
    /// The object exists and is not being deleted (and holds the plugin's finalizer, when it
    /// declares one): bring the world in line with it.
    Apply(K),
    /// The object is being deleted. With a finalizer declared, that finalizer holds it until
    /// this cleanup succeeds, then the SDK removes it; without one, other finalizers hold it
    /// and nothing waits for this plugin.
    Cleanup(K),
    /// The object no longer exists: what it owned goes with it by garbage collection, and what
    /// it did not own is the plugin's to let go of.
    Gone {
        /// Its namespace; empty for cluster-scoped kinds.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl<K> Reconcile<K> {
    /// The object, unless it is gone.
    pub fn object(&self) -> Option<&K> {
        match self {
            Reconcile::Apply(object) | Reconcile::Cleanup(object) => Some(object),
            Reconcile::Gone { .. } => None,
        }
    }
}

/// Runs `R` for the host's `request`: decodes the object into `R::Object`, handles the
/// finalizer the manifest declares, and calls [`Reconciler::reconcile`] with what is left to do.
pub(crate) fn run<R: Reconciler>(
    request: &Request,
    ctx: &Context<'_, R::Settings>,
) -> Result<Outcome, Error> {
    let Some(object) = request.object::<R::Object>()? else {
        let gone = Reconcile::Gone {
            namespace: request.namespace.clone(),
            name: request.name.clone(),
        };
        return R::reconcile(gone, ctx);
    };
    let manifest = R::manifest(ctx.settings()).map_err(Error::terminal)?;
    match manifest.finalizer.as_deref() {
        Some(name) => crate::finalizer(object, name, |event| R::reconcile(event, ctx)),
        None if object.meta().deletion_timestamp.is_some() => {
            R::reconcile(Reconcile::Cleanup(object), ctx)
        }
        None => R::reconcile(Reconcile::Apply(object), ctx),
    }
}

/// kube-runtime's `finalizer()` for plugins, which [`Reconciler`]s with a declared finalizer get
/// without calling it. For `object` and the finalizer `name`:
///
/// - live without the finalizer: adds it, and nothing else (the change brings the object back;
///   declare [`Predicate::FinalizersChanged`](crate::manifest::Predicate) if you filter events);
/// - live with it: `reconcile(Reconcile::Apply(object))`;
/// - being deleted with it: `reconcile(Reconcile::Cleanup(object))`, then, when that succeeded,
///   removes the finalizer so the object can go; a failed cleanup keeps it and is retried;
/// - being deleted without it: nothing (it is not ours to clean up).
pub fn finalizer<K: Resource>(
    object: K,
    name: &str,
    reconcile: impl FnOnce(Reconcile<K>) -> Result<Outcome, Error>,
) -> Result<Outcome, Error> {
    let meta = object.meta();
    let deleting = meta.deletion_timestamp.is_some();
    let ours = (meta.finalizers.iter().flatten()).any(|f| f == name);
    match (deleting, ours) {
        (true, false) => Ok(Outcome::done()),
        (true, true) => {
            let mut outcome = reconcile(Reconcile::Cleanup(object))?;
            outcome.actions.push(Action::remove_finalizer(name));
            Ok(outcome)
        }
        (false, false) => Ok(Outcome::with(vec![Action::add_finalizer(name)])),
        (false, true) => reconcile(Reconcile::Apply(object)),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    const NAME: &str = "example.com/cleanup";

    fn object(holding: bool, deleting: bool) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                finalizers: holding.then(|| vec![NAME.into()]),
                deletion_timestamp: deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    /// What `finalizer` returns, and what the reconcile was asked, if it was called.
    fn run(holding: bool, deleting: bool) -> (Outcome, Option<&'static str>) {
        let mut seen = None;
        let outcome = finalizer(object(holding, deleting), NAME, |event| {
            seen = Some(match event {
                Reconcile::Apply(_) => "apply",
                Reconcile::Cleanup(_) => "cleanup",
                Reconcile::Gone { .. } => "gone",
            });
            Ok(Outcome::with(vec![Action::event("Did", "it")]))
        })
        .unwrap();
        (outcome, seen)
    }

    #[test]
    fn live_objects_get_the_finalizer_first_then_apply() {
        let (outcome, seen) = run(false, false);
        assert_eq!(seen, None);
        assert_eq!(outcome.actions, vec![Action::add_finalizer(NAME)]);
        let (outcome, seen) = run(true, false);
        assert_eq!(seen, Some("apply"));
        assert_eq!(outcome.actions, vec![Action::event("Did", "it")]);
    }

    #[test]
    fn deletion_cleans_up_then_releases_and_ignores_objects_not_held() {
        let (outcome, seen) = run(true, true);
        assert_eq!(seen, Some("cleanup"));
        assert_eq!(
            outcome.actions,
            vec![Action::event("Did", "it"), Action::remove_finalizer(NAME)]
        );
        let (outcome, seen) = run(false, true);
        assert_eq!((outcome.actions.len(), seen), (0, None));
        let failed = finalizer(object(true, true), NAME, |_| {
            Err(Error::retryable("db down"))
        });
        assert!(failed.is_err(), "a failed cleanup keeps the finalizer");
    }
}
