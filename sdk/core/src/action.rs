//! The check of one action a plugin returns, made by the host before anything is sent and by the
//! SDK's test harness on the same rules: is the target in the plugin's [`Scope`], is the action
//! well-formed, and would the API server accept the metadata it sends.
//!
//! The check reads actions already parsed ([`Act`]), whichever bindings produced them; parsing
//! the JSON, JSON Patch syntax and the owner references the host adds stay with the host (an
//! object is checked with them added, so a reference the server would refuse is caught here).

use std::collections::HashSet;

use serde_json::Value;

use crate::validation::{self, EVENT_REASON_MAX, NameRule};
use crate::{Gvk, Refusal, Scope, Verb, object_id};

/// One action, parsed.
#[derive(Debug, Clone, Copy)]
pub enum Act<'a> {
    /// Server-side apply of this object.
    Apply(&'a Value),
    /// The complete set of the reconciled object's children of `kind`.
    Children {
        /// Their kind, which must be owned.
        kind: &'a Gvk,
        /// Each child.
        objects: &'a [Value],
    },
    /// A patch of this object.
    Patch(Target<'a>),
    /// A delete of this object.
    Delete(Target<'a>),
    /// The reconciled object's new status.
    UpdateStatus(&'a Value),
    /// A finalizer added to the reconciled object.
    AddFinalizer(&'a str),
    /// A finalizer removed from the reconciled object.
    RemoveFinalizer(&'a str),
    /// An Event about the reconciled object.
    EmitEvent {
        /// Why (`reason`).
        reason: &'a str,
        /// What was done (`action`).
        action: &'a str,
    },
}

impl Act<'_> {
    /// The contract's verb for the action (a children set applies).
    pub fn verb(&self) -> Verb {
        match self {
            Act::Apply(_) | Act::Children { .. } => Verb::Apply,
            Act::Patch(_) => Verb::Patch,
            Act::Delete(_) => Verb::Delete,
            Act::UpdateStatus(_) => Verb::UpdateStatus,
            Act::AddFinalizer(_) => Verb::AddFinalizer,
            Act::RemoveFinalizer(_) => Verb::RemoveFinalizer,
            Act::EmitEvent { .. } => Verb::EmitEvent,
        }
    }
}

/// The object a patch or delete names.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// Its `apiVersion`.
    pub api_version: &'a str,
    /// Its kind.
    pub kind: &'a str,
    /// Its namespace; empty for the reconciled object's (or a cluster-scoped object).
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
}

/// The key being reconciled, and whether its object still exists.
#[derive(Debug, Clone, Copy)]
pub struct Reconciled<'a> {
    /// Its namespace (empty: cluster-scoped).
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// False when the reconcile is for a deleted object.
    pub exists: bool,
}

/// Why an action is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// The action cannot be carried out as written, or the API server would refuse it.
    #[error("{0}")]
    Malformed(String),
    /// The action is outside what the plugin declared.
    #[error(transparent)]
    Refused(#[from] Refusal),
}

/// An outcome marks as best effort a position past its last action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("best-effort position {position} names no action (the outcome has {actions})")]
pub struct BestEffortError {
    /// The position given.
    pub position: usize,
    /// How many actions the outcome has.
    pub actions: usize,
}

/// The positions of an outcome's best-effort actions, sorted, once each; each must name one of
/// its `actions` actions.
pub fn best_effort(
    positions: impl IntoIterator<Item = usize>,
    actions: usize,
) -> Result<Vec<usize>, BestEffortError> {
    let mut checked = (positions.into_iter())
        .map(|position| match position < actions {
            true => Ok(position),
            false => Err(BestEffortError { position, actions }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    checked.sort_unstable();
    checked.dedup();
    Ok(checked)
}

impl Scope {
    /// Checks one action of a reconcile of `reconciled`.
    pub fn check_action(
        &self,
        reconciled: &Reconciled<'_>,
        act: &Act<'_>,
    ) -> Result<(), ActionError> {
        let verb = act.verb();
        match *act {
            Act::Apply(object) => self.check_applied(verb, reconciled, object).map(drop),
            Act::Children { kind, objects } => self.check_children(reconciled, kind, objects),
            Act::Patch(target) | Act::Delete(target) => {
                if target.api_version.is_empty() || target.kind.is_empty() || target.name.is_empty()
                {
                    return Err(malformed("target needs apiVersion, kind and name"));
                }
                let kind = Gvk::from_api_version(target.api_version, target.kind);
                let (namespace, name) = (target.namespace, target.name);
                Ok(self.check_write(verb, &kind, namespace, name, reconciled.namespace)?)
            }
            Act::UpdateStatus(status) => {
                self.check_on_reconciled(verb, reconciled)?;
                if !status.is_object() {
                    return Err(malformed("status must be a JSON object"));
                }
                Ok(())
            }
            Act::AddFinalizer(finalizer) | Act::RemoveFinalizer(finalizer) => {
                self.check_on_reconciled(verb, reconciled)?;
                if !validation::qualified_name(finalizer).is_empty() {
                    return Err(malformed(format!(
                        "{finalizer:?} is not a qualified finalizer name"
                    )));
                }
                Ok(())
            }
            Act::EmitEvent { reason, action } => {
                self.check_on_reconciled(verb, reconciled)?;
                // What the API server would refuse (the host cuts the note to its limit instead).
                for (field, value) in [("reason", reason), ("action", action)] {
                    if value.is_empty() || value.len() > EVENT_REASON_MAX {
                        return Err(malformed(format!(
                            "event {field} must be 1-{EVENT_REASON_MAX} characters"
                        )));
                    }
                }
                Ok(())
            }
        }
    }

    /// Status, finalizers, events and children act on the reconciled object itself, which must
    /// exist and be in the plugin's namespaces (the controller only queues such keys; this
    /// holds the line for any other caller).
    fn check_on_reconciled(
        &self,
        verb: Verb,
        reconciled: &Reconciled<'_>,
    ) -> Result<(), ActionError> {
        if !reconciled.exists {
            let key = match reconciled.namespace {
                "" => reconciled.name.to_string(),
                namespace => format!("{namespace}/{}", reconciled.name),
            };
            return Err(malformed(format!("{key} no longer exists")));
        }
        Ok(self.check_reconciled(verb, reconciled.namespace, reconciled.name)?)
    }

    /// An object sent whole: in scope, and with metadata the API server accepts (its name by
    /// its kind's rule, labels, annotations, owner references and finalizers). Returns its
    /// kind, namespace and name.
    fn check_applied(
        &self,
        verb: Verb,
        reconciled: &Reconciled<'_>,
        object: &Value,
    ) -> Result<(Gvk, String, String), ActionError> {
        let (kind, namespace, name) = object_id(object).map_err(malformed)?;
        self.check_write(verb, &kind, &namespace, &name, reconciled.namespace)?;
        let refused =
            validation::sent_meta(&object["metadata"], NameRule::of(&kind.group, &kind.kind));
        if !refused.is_empty() {
            let errors: Vec<String> = refused.iter().map(ToString::to_string).collect();
            let errors = errors.join("; ");
            return Err(malformed(format!(
                "the API server would refuse {} {name}: {errors}",
                kind.kind
            )));
        }
        Ok((kind, namespace, name))
    }

    fn check_children(
        &self,
        reconciled: &Reconciled<'_>,
        kind: &Gvk,
        objects: &[Value],
    ) -> Result<(), ActionError> {
        self.check_on_reconciled(Verb::Apply, reconciled)?;
        if !self.is_owned(kind) {
            return Err(malformed(format!(
                "{} is not an owned kind: declare it with `owns` to return its children",
                kind.kind
            )));
        }
        let mut names = HashSet::new();
        for object in objects {
            let (child, namespace, name) = self.check_applied(Verb::Apply, reconciled, object)?;
            if child != *kind {
                return Err(malformed(format!(
                    "child {name} is a {}, not a {}",
                    child.kind, kind.kind
                )));
            }
            let namespace = if namespace.is_empty() {
                reconciled.namespace.to_string()
            } else {
                namespace
            };
            if !names.insert((namespace, name.clone())) {
                return Err(malformed(format!("child {name} appears twice")));
            }
        }
        Ok(())
    }
}

fn malformed(reason: impl Into<String>) -> ActionError {
    ActionError::Malformed(reason.into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn best_effort_positions_must_name_actions() {
        assert_eq!(super::best_effort([2, 0, 2], 3), Ok(vec![0, 2]));
        let err = super::best_effort([1, 3], 3).unwrap_err();
        assert_eq!(
            err.to_string(),
            "best-effort position 3 names no action (the outcome has 3)"
        );
    }

    use serde_json::json;

    use super::*;
    use crate::{LabelSelector, Namespaces};

    fn scope() -> Scope {
        Scope::new(
            Gvk::new("example.com", "v1", "Thing"),
            Namespaces::declared(&["ns"]),
            LabelSelector::default(),
        )
        .owns(Gvk::new("", "v1", "ConfigMap"))
        .writes(Gvk::new("apps", "v1", "Deployment"))
    }

    const LIVE: Reconciled<'static> = Reconciled {
        namespace: "ns",
        name: "a",
        exists: true,
    };
    const GONE: Reconciled<'static> = Reconciled {
        namespace: "ns",
        name: "a",
        exists: false,
    };

    fn check(reconciled: &Reconciled<'_>, act: Act<'_>) -> Result<(), String> {
        scope()
            .check_action(reconciled, &act)
            .map_err(|e| e.to_string())
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
    }

    #[test]
    fn applies_must_be_in_scope_and_admissible() {
        assert_eq!(check(&LIVE, Act::Apply(&cm("a"))), Ok(()));
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        assert!(
            check(&LIVE, Act::Apply(&secret))
                .unwrap_err()
                .contains("not declared")
        );
        let elsewhere = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "other"}});
        assert!(
            check(&LIVE, Act::Apply(&elsewhere))
                .unwrap_err()
                .contains("owner's namespace")
        );
        let err = check(&LIVE, Act::Apply(&cm("Bad_Name"))).unwrap_err();
        assert!(
            err.starts_with("the API server would refuse ConfigMap Bad_Name: metadata.name"),
            "{err}"
        );
        assert_eq!(
            check(&LIVE, Act::Apply(&json!({"kind": "ConfigMap"}))),
            Err("object has no apiVersion".into())
        );
    }

    #[test]
    fn children_are_of_one_owned_kind_each_once() {
        let cms = Gvk::new("", "v1", "ConfigMap");
        let children = |reconciled: &Reconciled<'_>, kind: &Gvk, objects: &[Value]| {
            check(reconciled, Act::Children { kind, objects })
        };
        assert_eq!(children(&LIVE, &cms, &[cm("a"), cm("b")]), Ok(()));
        let deployments = Gvk::new("apps", "v1", "Deployment");
        let err = children(&LIVE, &deployments, &[]).unwrap_err();
        assert!(err.contains("not an owned kind"), "{err}");
        let twice = children(&LIVE, &cms, &[cm("a"), cm("a")]);
        assert_eq!(twice, Err("child a appears twice".into()));
        let deployment =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}});
        let mixed = children(&LIVE, &cms, &[deployment]);
        assert_eq!(
            mixed,
            Err("child d is a Deployment, not a ConfigMap".into())
        );
        let gone = children(&GONE, &cms, &[]);
        assert_eq!(gone, Err("ns/a no longer exists".into()));
    }

    #[test]
    fn the_reconciled_object_must_exist_for_status_finalizers_and_events() {
        let status = json!({"ready": true});
        assert_eq!(check(&LIVE, Act::UpdateStatus(&status)), Ok(()));
        assert_eq!(
            check(&GONE, Act::UpdateStatus(&status)),
            Err("ns/a no longer exists".into())
        );
        assert_eq!(
            check(&LIVE, Act::UpdateStatus(&json!([]))),
            Err("status must be a JSON object".into())
        );
        assert_eq!(
            check(&LIVE, Act::AddFinalizer("example.com/cleanup")),
            Ok(())
        );
        assert!(
            check(&LIVE, Act::RemoveFinalizer("not a name!"))
                .unwrap_err()
                .contains("qualified finalizer")
        );
        assert_eq!(
            check(
                &LIVE,
                Act::EmitEvent {
                    reason: "Made",
                    action: "Make"
                }
            ),
            Ok(())
        );
        let long = "x".repeat(EVENT_REASON_MAX + 1);
        let err = check(
            &LIVE,
            Act::EmitEvent {
                reason: &long,
                action: "Make",
            },
        )
        .unwrap_err();
        assert_eq!(
            err,
            format!("event reason must be 1-{EVENT_REASON_MAX} characters")
        );
        let outside = Reconciled {
            namespace: "other",
            ..LIVE
        };
        assert!(
            check(&outside, Act::AddFinalizer("example.com/x"))
                .unwrap_err()
                .contains("outside")
        );
    }

    #[test]
    fn patches_and_deletes_name_a_writable_target() {
        let target = |kind, name| Target {
            api_version: "apps/v1",
            kind,
            namespace: "",
            name,
        };
        assert_eq!(check(&LIVE, Act::Patch(target("Deployment", "d"))), Ok(()));
        assert_eq!(
            check(&GONE, Act::Delete(target("Deployment", "d"))),
            Ok(()),
            "no object needed"
        );
        assert!(
            check(&LIVE, Act::Delete(target("StatefulSet", "s")))
                .unwrap_err()
                .contains("not declared")
        );
        assert_eq!(
            check(&LIVE, Act::Patch(target("Deployment", ""))),
            Err("target needs apiVersion, kind and name".into())
        );
    }
}
