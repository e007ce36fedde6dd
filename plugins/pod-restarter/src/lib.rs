//! The client-go informer seed as a wasmctrl plugin: restart a Deployment when a new Pod comes up.
//!
//! It watches Pods matching a label selector (`app=nginx`) in one namespace (`default`). When a
//! Pod it has not handled before is `Running`, it restarts the Deployment (`tools`) the way
//! `kubectl rollout restart` does, by setting the Pod template annotation
//! `kubectl.kubernetes.io/restartedAt` to the request's `now`, and records a Normal Event on the
//! Pod. All three are operator settings, see [`settings::Config`].
//!
//! **Exactly once per Pod, across crashes.** A plugin keeps nothing between calls, so the handled
//! Pod UIDs live on the Deployment itself, in the annotation [`restart::HANDLED`], and are written
//! by the same JSON Patch that sets `restartedAt`, behind a `test` of the record as it was read
//! (see [`restart`]). Record and effect are one write: the host can crash or restart at any moment
//! and still never restart the Deployment twice for one Pod, and two Pods handled at once cannot
//! lose each other's entry (the loser fails the `test` and is requeued). UIDs of Pods that no
//! longer exist in the namespace are dropped on each write, so the record stays as small as the
//! set of live Pods.
//!
//! **Pods already Running when the plugin first starts count as new**: there is no history to
//! tell them apart, so each of them restarts the Deployment once, as the original informer's
//! initial list did. After that only new Pods do.
//!
//! A Pod that is Pending, being deleted, gone or already handled needs nothing. Pods of the target
//! Deployment itself are ignored even if they match the selector, or every restart would trigger
//! the next. A missing Deployment is a retryable error: it may simply not be created yet.

pub mod restart;
pub mod settings;

use std::collections::BTreeSet;

use wasmctrl_sdk::k8s_openapi::api::core::v1::Pod;
use wasmctrl_sdk::manifest::Selector;
use wasmctrl_sdk::tracing;
use wasmctrl_sdk::{
    Action, Context, Error, Manifest, ObjectRef, Outcome, Reconcile, Reconciler, ResourceExt,
};

use crate::restart::{Deployment, Record};
use crate::settings::Config;

/// Whether the Pod reports phase `Running`.
pub fn is_running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// Whether a ReplicaSet of `deployment` (named `<deployment>-<pod-template-hash>`) owns the Pod:
/// the target Deployment's own Pods, which must not restart it.
pub fn belongs_to(pod: &Pod, deployment: &str) -> bool {
    pod.metadata.owner_references.iter().flatten().any(|o| {
        o.kind == "ReplicaSet"
            && o.name
                .strip_prefix(deployment)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|hash| !hash.is_empty() && !hash.contains('-'))
    })
}

/// The plugin.
pub struct PodRestarter;

impl Reconciler for PodRestarter {
    type Object = Pod;
    type Settings = Config;

    fn manifest(config: &Config) -> Result<Manifest, String> {
        config.validate()?;
        let namespace = std::slice::from_ref(&config.namespace);
        Ok(Manifest::for_::<Pod>("pod-restarter")
            .version(env!("CARGO_PKG_VERSION"))
            .namespaces(namespace)
            .labels(&config.label_selector)
            // Every Pod of the namespace, not only selected ones, is read to prune the record:
            // a Pod relabelled out of the selector still exists. No trigger: the watch covers
            // the Pods that call for a restart.
            .reads::<Pod>(
                Selector {
                    namespaces: namespace.to_vec(),
                    labels: String::new(),
                },
                None,
            )
            // Read to see the record; no trigger, since only Pod events call for a restart.
            .reads::<Deployment>(
                Selector {
                    namespaces: namespace.to_vec(),
                    labels: String::new(),
                },
                None,
            )
            .writes::<Deployment>())
    }

    fn reconcile(event: Reconcile<Pod>, ctx: &Context<'_, Config>) -> Result<Outcome, Error> {
        let config = ctx.settings();
        let key = ctx.key();
        let pod = match event {
            Reconcile::Apply(pod) if is_running(&pod) => pod,
            // Pending, being deleted or gone: nothing to restart for.
            _ => return Ok(Outcome::done()),
        };
        let target = format!("{}/{}", config.namespace, config.deployment);
        if belongs_to(&pod, &config.deployment) {
            tracing::debug!(%key, deployment = %target, "pod belongs to the deployment it would restart; ignored");
            return Ok(Outcome::done());
        }
        let Some(uid) = pod.metadata.uid.as_ref().filter(|u| !u.is_empty()) else {
            return Err(Error::terminal(format!("pod {key} has no metadata.uid")));
        };

        let deployment: Deployment = ctx
            .get::<Deployment>(&config.namespace, &config.deployment)?
            .ok_or_else(|| {
                Error::retryable(format!(
                    "Deployment {target} not found; pod {key} is waiting for it"
                ))
            })?;
        let mut handled = deployment
            .handled()
            .map_err(|e| Error::terminal(format!("Deployment {target}: {e}")))?;
        if handled.contains(uid) {
            return Ok(Outcome::done());
        }

        // Prune by existence, not by the selector: a Pod relabelled out and back in is not new.
        let existing: BTreeSet<String> = ctx
            .list::<Pod>(&config.namespace, "")?
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();
        handled.retain(|u| existing.contains(u));
        handled.insert(uid.clone());

        let ops = restart::patch(&deployment, &handled, &ctx.now_rfc3339())
            .map_err(|e| Error::terminal(format!("Deployment {target} {e}")))?;
        tracing::info!(%key, deployment = %target, pod.uid = %uid, "restarting deployment for a new running pod");
        let deployment_ref = ObjectRef::of::<Deployment>(&config.namespace, &config.deployment);
        Ok(Outcome::with(vec![
            Action::json_patch(deployment_ref, &ops)?,
            Action::event(
                "DeploymentRestarted",
                &format!(
                    "restarted Deployment {target}: new Pod {} is Running",
                    pod.name_any()
                ),
            ),
        ]))
    }
}

wasmctrl_sdk::export!(PodRestarter);

#[cfg(test)]
mod tests;
