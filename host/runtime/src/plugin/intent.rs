//! Turning a plugin's actions into checked [`Intent`]s: parsed, limited to the kinds and
//! namespaces the plugin's [`Scope`] allows, with owner references added to owned children.
//! Nothing reaches the API server unchecked.
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wasmctrl_core::ActionError as Checked;
use wasmctrl_core::{Act, Gvk, Reconciled, Refusal, Scope, Verb};

use super::wit;

/// An object other than the reconciled one, by kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// `group/version` or `v1`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace; empty for cluster-scoped objects.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl Target {
    /// The target's group/version/kind.
    pub fn gvk(&self) -> Gvk {
        Gvk::from_api_version(&self.api_version, &self.kind)
    }
}

/// One desired child of a [`Intent::Children`] set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Child {
    /// Which object.
    pub target: Target,
    /// The desired object, owner reference included.
    pub object: Value,
}

/// A checked action, as the host will carry it out. Serializes to the JSON `wasmctrl test` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum Intent {
    /// Server-side apply of `object` with the plugin's field manager.
    Apply {
        /// Which object.
        target: Target,
        /// The desired object, owner reference included for owned kinds.
        object: Value,
    },
    /// A merge patch.
    MergePatch {
        /// Which object.
        target: Target,
        /// The RFC 7386 patch.
        patch: Value,
    },
    /// A JSON patch.
    JsonPatch {
        /// Which object.
        target: Target,
        /// The RFC 6902 operations, read once here and sent as read.
        patch: json_patch::Patch,
    },
    /// Delete an object.
    Delete {
        /// Which object.
        target: Target,
        /// What becomes of its dependents (`Background`, `Foreground` or `Orphan`, spelled as
        /// the API's `propagationPolicy`).
        propagation: wit::Propagation,
    },
    /// Replace the reconciled object's status.
    UpdateStatus {
        /// The new `.status`.
        status: Value,
    },
    /// Add a finalizer to the reconciled object.
    AddFinalizer {
        /// Finalizer name.
        finalizer: String,
    },
    /// Remove a finalizer from the reconciled object.
    RemoveFinalizer {
        /// Finalizer name.
        finalizer: String,
    },
    /// Record an Event about the reconciled object.
    Event {
        /// `Normal` or `Warning`.
        #[serde(rename = "type")]
        type_: String,
        /// Machine-readable reason.
        reason: String,
        /// Human-readable note.
        note: String,
        /// What was done (the Event's `action` field).
        #[serde(rename = "eventAction")]
        action: String,
    },
    /// The complete desired set of the reconciled object's children of one owned kind: each is
    /// applied, then every child of that kind the object controls that is not in the set is
    /// deleted.
    Children {
        /// `group/version` (or `v1`) of the kind.
        #[serde(rename = "apiVersion")]
        api_version: String,
        /// The kind.
        kind: String,
        /// The desired children.
        objects: Vec<Child>,
    },
}

/// Why an action was refused; `index` is its position in the plugin's result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ActionError {
    /// The action is not well-formed (bad JSON, missing name, no object to act on).
    #[error("action {index} ({action}) is malformed: {reason}")]
    Malformed {
        /// Position in the result.
        index: usize,
        /// Action name.
        action: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The action is outside what the plugin declared (kind or namespace).
    #[error("action {index}: {refusal}")]
    Refused {
        /// Position in the result.
        index: usize,
        /// What was refused and why.
        refusal: Refusal,
    },
    /// The outcome marks as best effort a position past its last action.
    #[error(transparent)]
    BestEffort(wasmctrl_core::BestEffortError),
}

/// The contract's verb for an action.
pub fn verb(a: &wit::Action) -> Verb {
    match a {
        wit::Action::Apply(_) | wit::Action::Children(_) => Verb::Apply,
        wit::Action::Patch(_) => Verb::Patch,
        wit::Action::Delete(_) => Verb::Delete,
        wit::Action::UpdateStatus(_) => Verb::UpdateStatus,
        wit::Action::AddFinalizer(_) => Verb::AddFinalizer,
        wit::Action::RemoveFinalizer(_) => Verb::RemoveFinalizer,
        wit::Action::EmitEvent(_) => Verb::EmitEvent,
    }
}

/// Checks every action against the plugin's scope and the request; the first bad one refuses
/// all, so a plugin never gets half its intent applied because of a mistake later in the list.
/// The rules are `wasmctrl-core`'s ([`Scope::check_action`], which the SDK's test harness
/// calls too); here the JSON is parsed, JSON Patches are read, and owned children get their
/// owner reference before the check (so a reference the server would refuse is caught).
pub fn check_actions(
    scope: &Scope,
    request: &wit::Request,
    actions: &[wit::Action],
) -> Result<Vec<Intent>, ActionError> {
    let checker = Checker {
        scope,
        request,
        reconciled: Reconciled {
            namespace: &request.namespace,
            name: &request.name,
            exists: request.object.is_some(),
        },
        owner: std::cell::OnceCell::new(),
    };
    (actions.iter().enumerate())
        .map(|(index, action)| {
            checker.intent(action).map_err(|error| match error {
                Checked::Malformed(reason) => ActionError::Malformed {
                    index,
                    action: verb(action).as_str(),
                    reason,
                },
                Checked::Refused(refusal) => ActionError::Refused { index, refusal },
            })
        })
        .collect()
}

/// The positions of an outcome's best-effort actions, sorted, once each (`wasmctrl-core`'s
/// rule, which the SDK's test harness applies too).
pub fn best_effort(positions: &[u32], actions: usize) -> Result<Vec<usize>, ActionError> {
    wasmctrl_core::best_effort(positions.iter().map(|&p| p as usize), actions)
        .map_err(ActionError::BestEffort)
}

/// One reconcile's actions being checked.
struct Checker<'a> {
    scope: &'a Scope,
    request: &'a wit::Request,
    reconciled: Reconciled<'a>,
    /// The reconciled object's identity, read once, when an owned child first needs it (it
    /// scans the whole object).
    owner: std::cell::OnceCell<Option<Owner>>,
}

impl Checker<'_> {
    fn owner(&self) -> Option<&Owner> {
        self.owner
            .get_or_init(|| {
                (self.request.object.as_deref()).and_then(|o| serde_json::from_str(o).ok())
            })
            .as_ref()
    }

    fn check(&self, act: Act<'_>) -> Result<(), Checked> {
        self.scope.check_action(&self.reconciled, &act)
    }

    /// A whole object to apply, owned children getting their owner reference first.
    fn apply(&self, json: &str) -> Result<Intent, Checked> {
        let mut object = parse(json)?;
        if let Ok((kind, _, _)) = wasmctrl_core::object_id(&object)
            && self.scope.is_owned(&kind)
            && let Some(owner) = self.owner()
        {
            add_owner_reference(&mut object, owner);
        }
        self.check(Act::Apply(&object))?;
        let target = target_of(&object)?;
        Ok(Intent::Apply { target, object })
    }

    /// The complete set of the reconciled object's children of one owned kind, each with its
    /// owner reference.
    fn children(&self, set: &wit::Children) -> Result<Intent, Checked> {
        let kind = Gvk::from(&set.kind);
        let mut objects = (set.objects.iter())
            .map(|json| parse(json))
            .collect::<Result<Vec<_>, _>>()?;
        if self.reconciled.exists {
            let owner = self
                .owner()
                .ok_or_else(|| Checked::Malformed("the reconciled object does not parse".into()))?;
            objects
                .iter_mut()
                .for_each(|o| add_owner_reference(o, owner));
        }
        self.check(Act::Children {
            kind: &kind,
            objects: &objects,
        })?;
        let objects = (objects.into_iter())
            .map(|object| {
                Ok(Child {
                    target: target_of(&object)?,
                    object,
                })
            })
            .collect::<Result<_, Checked>>()?;
        Ok(Intent::Children {
            api_version: kind.api_version(),
            kind: kind.kind,
            objects,
        })
    }

    fn intent(&self, action: &wit::Action) -> Result<Intent, Checked> {
        Ok(match action {
            wit::Action::Apply(json) => self.apply(json)?,
            wit::Action::Children(set) => self.children(set)?,
            wit::Action::Patch(p) => {
                self.check(Act::Patch(shared_target(&p.target)))?;
                let target = owned_target(&p.target);
                match &p.body {
                    wit::PatchBody::Merge(json) => Intent::MergePatch {
                        target,
                        patch: parse(json)?,
                    },
                    wit::PatchBody::Json(json) => {
                        let patch = serde_json::from_value(parse(json)?).map_err(|e| {
                            Checked::Malformed(format!("not an RFC 6902 patch: {e}"))
                        })?;
                        Intent::JsonPatch { target, patch }
                    }
                }
            }
            wit::Action::Delete(d) => {
                self.check(Act::Delete(shared_target(&d.target)))?;
                Intent::Delete {
                    target: owned_target(&d.target),
                    propagation: d.propagation,
                }
            }
            wit::Action::UpdateStatus(json) => {
                // A deleted object's status is refused before its JSON is read.
                let status = if self.reconciled.exists {
                    parse(json)?
                } else {
                    Value::Null
                };
                self.check(Act::UpdateStatus(&status))?;
                Intent::UpdateStatus { status }
            }
            wit::Action::AddFinalizer(f) => {
                self.check(Act::AddFinalizer(f))?;
                Intent::AddFinalizer {
                    finalizer: f.clone(),
                }
            }
            wit::Action::RemoveFinalizer(f) => {
                self.check(Act::RemoveFinalizer(f))?;
                Intent::RemoveFinalizer {
                    finalizer: f.clone(),
                }
            }
            wit::Action::EmitEvent(e) => {
                self.check(Act::EmitEvent {
                    reason: &e.reason,
                    action: &e.action,
                })?;
                let type_ = match e.type_ {
                    wit::EventType::Normal => "Normal",
                    wit::EventType::Warning => "Warning",
                };
                Intent::Event {
                    type_: type_.into(),
                    reason: e.reason.clone(),
                    note: e.note.clone(),
                    action: e.action.clone(),
                }
            }
        })
    }
}

fn parse(json: &str) -> Result<Value, Checked> {
    serde_json::from_str(json).map_err(|e| Checked::Malformed(format!("invalid JSON: {e}")))
}

/// The target of an object already checked (so it has its kind and name).
fn target_of(object: &Value) -> Result<Target, Checked> {
    let (kind, namespace, name) = wasmctrl_core::object_id(object).map_err(Checked::Malformed)?;
    Ok(Target {
        api_version: kind.api_version(),
        kind: kind.kind,
        namespace,
        name,
    })
}

fn shared_target(r: &wit::ObjectRef) -> wasmctrl_core::Target<'_> {
    wasmctrl_core::Target {
        api_version: &r.api_version,
        kind: &r.kind,
        namespace: &r.namespace,
        name: &r.name,
    }
}

fn owned_target(r: &wit::ObjectRef) -> Target {
    Target {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

/// Makes the reconciled object the controller owner of a child (unless it already is), so that
/// garbage collection deletes the child with its owner and child events map back to the owner.
/// What an owner reference names of the reconciled object: read from its JSON without building
/// the rest of it (a `Value` of a large object cost more than the plugin's own call).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Owner {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: OwnerMeta,
}

#[derive(Default, Deserialize)]
struct OwnerMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uid: Option<String>,
}

fn add_owner_reference(child: &mut Value, owner: &Owner) {
    let Some(uid) = owner.metadata.uid.as_deref() else {
        return;
    };
    let reference = json!({
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.metadata.name,
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true,
    });
    let Some(meta) = child.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let refs = meta.entry("ownerReferences").or_insert_with(|| json!([]));
    if let Some(refs) = refs.as_array_mut()
        && !refs.iter().any(|r| r["uid"] == uid)
    {
        refs.push(reference);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> super::super::Manifest {
        super::super::Manifest::from_wit(&super::super::manifest::tests::sample()).unwrap()
    }

    fn scope() -> Scope {
        manifest().scope(None).unwrap()
    }

    fn request() -> wit::Request {
        wit::Request {
            namespace: "ns".into(),
            name: "t".into(),
            object: Some(
                json!({"apiVersion": "example.com/v1", "kind": "Thing",
                    "metadata": {"namespace": "ns", "name": "t", "uid": "u-1"}})
                .to_string(),
            ),
            deleting: false,
            settings: "{}".into(),
            now: wit::Timestamp {
                seconds: 0,
                nanoseconds: 0,
            },
            previous: Vec::new(),
        }
    }

    fn delete(target: wit::ObjectRef) -> wit::Action {
        wit::Action::Delete(wit::Deletion {
            target,
            propagation: wit::Propagation::Background,
        })
    }

    fn pod() -> String {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ns", "name": "p"}})
            .to_string()
    }

    #[test]
    fn owned_children_get_a_controller_owner_reference() {
        let intents = check_actions(&scope(), &request(), &[wit::Action::Apply(pod())]).unwrap();
        let Intent::Apply { object, target } = &intents[0] else {
            panic!()
        };
        assert_eq!(target.name, "p");
        assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(object["metadata"]["ownerReferences"][0]["controller"], true);
    }

    #[test]
    fn undeclared_kinds_are_refused() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        let actions = [
            wit::Action::Apply(pod()),
            wit::Action::Apply(secret.to_string()),
        ];
        let err = check_actions(&scope(), &request(), &actions).unwrap_err();
        assert!(
            matches!(err, ActionError::Refused { index: 1, .. }),
            "{err}"
        );
        let read_only = delete(wit::ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: "c".into(),
        });
        assert!(matches!(
            check_actions(&scope(), &request(), &[read_only]),
            Err(ActionError::Refused { .. })
        ));
    }

    #[test]
    fn actions_outside_the_plugins_namespaces_refuse_the_whole_result() {
        let scope = manifest().scope(Some(&["ns".to_string()])).unwrap();
        let patch = |namespace: &str| {
            wit::Action::Patch(wit::Patch {
                target: wit::ObjectRef {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    namespace: namespace.into(),
                    name: "d".into(),
                },
                body: wit::PatchBody::Merge("{}".into()),
            })
        };
        let elsewhere_pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "other", "name": "p"}});
        let delete = delete(wit::ObjectRef {
            api_version: "example.com/v1".into(),
            kind: "Thing".into(),
            namespace: "other".into(),
            name: "t2".into(),
        });
        for (action, verb) in [
            (patch("other"), Verb::Patch),
            (wit::Action::Apply(elsewhere_pod.to_string()), Verb::Apply),
            (delete, Verb::Delete),
        ] {
            let actions = [wit::Action::UpdateStatus("{}".into()), action];
            let err = check_actions(&scope, &request(), &actions).unwrap_err();
            let ActionError::Refused { index, refusal } = err else {
                panic!("{err}")
            };
            assert_eq!(
                (index, refusal.verb, refusal.namespace.as_str()),
                (1, verb, "other")
            );
        }
        assert!(check_actions(&scope, &request(), &[patch("ns"), patch("")]).is_ok());
        // A key outside the plugin's namespaces gets nothing done to it at all.
        let mut stray = request();
        stray.namespace = "other".into();
        let err = check_actions(&scope, &stray, &[wit::Action::UpdateStatus("{}".into())]);
        assert!(matches!(err, Err(ActionError::Refused { .. })), "{err:?}");
    }

    #[test]
    fn malformed_actions_are_refused() {
        let cases = [
            wit::Action::Apply("{not json".into()),
            wit::Action::Apply(json!({"apiVersion": "v1", "kind": "Pod"}).to_string()),
            wit::Action::UpdateStatus("[1]".into()),
            wit::Action::AddFinalizer("bad name!".into()),
            wit::Action::Patch(wit::Patch {
                target: wit::ObjectRef {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    namespace: "ns".into(),
                    name: "d".into(),
                },
                body: wit::PatchBody::Json(json!({"op": "add"}).to_string()),
            }),
        ];
        for action in cases {
            let err = check_actions(&scope(), &request(), &[action]).unwrap_err();
            assert!(matches!(err, ActionError::Malformed { .. }), "{err}");
        }
        let mut gone = request();
        gone.object = None;
        let err = check_actions(&scope(), &gone, &[wit::Action::UpdateStatus("{}".into())]);
        assert!(err.unwrap_err().to_string().contains("no longer exists"));
    }
}
