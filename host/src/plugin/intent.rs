//! Turning a plugin's actions into checked [`Intent`]s: parsed, limited to the kinds and
//! namespaces the plugin's [`Scope`] allows, with owner references added to owned children.
//! Nothing reaches the API server unchecked.

use kube::core::GroupVersionKind;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wasmctrl_scope::validation::{self, EVENT_REASON_MAX, NameRule};
use wasmctrl_scope::{Kind, Refusal, Scope, Verb};

use super::{Manifest, wit};

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
    pub fn gvk(&self) -> GroupVersionKind {
        let kind = Kind::from_api_version(&self.api_version, &self.kind);
        GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind)
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
        /// The RFC 6902 operations.
        patch: Value,
    },
    /// Delete an object.
    Delete {
        /// Which object.
        target: Target,
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
}

/// The contract's verb for an action.
pub fn verb(a: &wit::Action) -> Verb {
    match a {
        wit::Action::Apply(_) => Verb::Apply,
        wit::Action::Patch(_) => Verb::Patch,
        wit::Action::Delete(_) => Verb::Delete,
        wit::Action::UpdateStatus(_) => Verb::UpdateStatus,
        wit::Action::AddFinalizer(_) => Verb::AddFinalizer,
        wit::Action::RemoveFinalizer(_) => Verb::RemoveFinalizer,
        wit::Action::EmitEvent(_) => Verb::EmitEvent,
        wit::Action::Children(_) => Verb::Apply,
    }
}

/// Checks every action against the plugin's scope and the request; the first bad one refuses
/// all, so a plugin never gets half its intent applied because of a mistake later in the list.
pub fn check_actions(
    manifest: &Manifest,
    scope: &Scope,
    request: &wit::Request,
    actions: &[wit::Action],
) -> Result<Vec<Intent>, ActionError> {
    // Only owned children need the owner's identity; reading it scans the whole object.
    let parsed = std::cell::OnceCell::new();
    let owner = || -> Option<&Owner> {
        parsed
            .get_or_init(|| {
                request
                    .object
                    .as_deref()
                    .and_then(|o| serde_json::from_str(o).ok())
            })
            .as_ref()
    };
    actions
        .iter()
        .enumerate()
        .map(|(index, action)| {
            let verb = verb(action);
            let malformed = |reason: String| ActionError::Malformed {
                index,
                action: verb.as_str(),
                reason,
            };
            let writable = |target: &Target| {
                let kind = Kind::from_api_version(&target.api_version, &target.kind);
                scope
                    .check_write(
                        verb,
                        &kind,
                        &target.namespace,
                        &target.name,
                        &request.namespace,
                    )
                    .map_err(|refusal| ActionError::Refused { index, refusal })
            };
            // Status, finalizers and events act on the reconciled object itself, which must be
            // in the plugin's namespaces (the controller only queues such keys; this holds the
            // line for any other caller).
            let needs_object = || {
                request.object.as_ref().ok_or_else(|| {
                    malformed(format!("{} no longer exists", request_key(request)))
                })?;
                scope
                    .check_reconciled(verb, &request.namespace, &request.name)
                    .map_err(|refusal| ActionError::Refused { index, refusal })
            };
            Ok(match action {
                wit::Action::Apply(json) => {
                    let mut object: Value = parse(json).map_err(&malformed)?;
                    let target = target_of(&object).map_err(&malformed)?;
                    writable(&target)?;
                    if manifest.owns(&target.gvk())
                        && let Some(owner) = owner()
                    {
                        add_owner_reference(&mut object, owner);
                    }
                    admissible(&target, &object).map_err(&malformed)?;
                    Intent::Apply { target, object }
                }
                wit::Action::Patch(p) => {
                    let target = checked_ref(&p.target).map_err(&malformed)?;
                    writable(&target)?;
                    match &p.body {
                        wit::PatchBody::Merge(json) => {
                            let patch = parse(json).map_err(&malformed)?;
                            Intent::MergePatch { target, patch }
                        }
                        wit::PatchBody::Json(json) => {
                            let patch: Value = parse(json).map_err(&malformed)?;
                            serde_json::from_value::<json_patch::Patch>(patch.clone())
                                .map_err(|e| malformed(format!("not an RFC 6902 patch: {e}")))?;
                            Intent::JsonPatch { target, patch }
                        }
                    }
                }
                wit::Action::Delete(r) => {
                    let target = checked_ref(r).map_err(&malformed)?;
                    writable(&target)?;
                    Intent::Delete { target }
                }
                wit::Action::UpdateStatus(json) => {
                    needs_object()?;
                    let status: Value = parse(json).map_err(&malformed)?;
                    if !status.is_object() {
                        return Err(malformed("status must be a JSON object".into()));
                    }
                    Intent::UpdateStatus { status }
                }
                wit::Action::AddFinalizer(f) | wit::Action::RemoveFinalizer(f) => {
                    needs_object()?;
                    if !validation::qualified_name(f).is_empty() {
                        return Err(malformed(format!(
                            "{f:?} is not a qualified finalizer name"
                        )));
                    }
                    let finalizer = f.clone();
                    if matches!(action, wit::Action::AddFinalizer(_)) {
                        Intent::AddFinalizer { finalizer }
                    } else {
                        Intent::RemoveFinalizer { finalizer }
                    }
                }
                wit::Action::EmitEvent(e) => {
                    needs_object()?;
                    // What the API server would refuse (the note is cut to its limit instead).
                    for (field, value) in [("reason", &e.reason), ("action", &e.action)] {
                        if value.is_empty() || value.len() > EVENT_REASON_MAX {
                            return Err(malformed(format!(
                                "event {field} must be 1-{EVENT_REASON_MAX} characters"
                            )));
                        }
                    }
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
                wit::Action::Children(set) => {
                    needs_object()?;
                    let gvk = GroupVersionKind::gvk(&set.kind.group, &set.kind.version, &set.kind.kind);
                    if !manifest.owns(&gvk) {
                        return Err(malformed(format!(
                            "{} is not an owned kind: declare it with `owns` to return its children",
                            set.kind.kind
                        )));
                    }
                    let owner = owner().ok_or_else(|| malformed("the reconciled object does not parse".into()))?;
                    let mut names = std::collections::HashSet::new();
                    let mut objects = Vec::with_capacity(set.objects.len());
                    for json in &set.objects {
                        let mut object: Value = parse(json).map_err(&malformed)?;
                        let target = target_of(&object).map_err(&malformed)?;
                        if target.gvk() != gvk {
                            return Err(malformed(format!(
                                "child {} is a {}, not a {}",
                                target.name, target.kind, set.kind.kind
                            )));
                        }
                        writable(&target)?;
                        let namespace = if target.namespace.is_empty() { &request.namespace } else { &target.namespace };
                        if !names.insert((namespace.clone(), target.name.clone())) {
                            return Err(malformed(format!("child {} appears twice", target.name)));
                        }
                        add_owner_reference(&mut object, owner);
                        admissible(&target, &object).map_err(&malformed)?;
                        objects.push(Child { target, object });
                    }
                    Intent::Children {
                        api_version: gvk.api_version(),
                        kind: gvk.kind,
                        objects,
                    }
                }
            })
        })
        .collect()
}

fn request_key(r: &wit::Request) -> String {
    if r.namespace.is_empty() {
        r.name.clone()
    } else {
        format!("{}/{}", r.namespace, r.name)
    }
}

fn parse(json: &str) -> Result<Value, String> {
    serde_json::from_str(json).map_err(|e| format!("invalid JSON: {e}"))
}

fn target_of(object: &Value) -> Result<Target, String> {
    let (kind, namespace, name) = wasmctrl_scope::object_id(object)?;
    Ok(Target {
        api_version: kind.api_version(),
        kind: kind.kind,
        namespace,
        name,
    })
}

fn checked_ref(r: &wit::ObjectRef) -> Result<Target, String> {
    if r.api_version.is_empty() || r.kind.is_empty() || r.name.is_empty() {
        return Err("target needs apiVersion, kind and name".into());
    }
    Ok(Target {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    })
}

/// What the API server would refuse of an object a plugin sends whole, said before anything is
/// sent and in the server's words: its name by its kind's rule, labels, annotations, owner
/// references (the one the host adds included) and finalizers.
fn admissible(target: &Target, object: &Value) -> Result<(), String> {
    let kind = Kind::from_api_version(&target.api_version, &target.kind);
    let errors = validation::sent_meta(&object["metadata"], NameRule::of(&kind.group, &kind.kind));
    if errors.is_empty() {
        return Ok(());
    }
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    Err(format!(
        "the API server would refuse {} {}: {}",
        target.kind,
        target.name,
        errors.join("; ")
    ))
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

    fn manifest() -> Manifest {
        Manifest::from_wit(&super::super::manifest::tests::sample()).unwrap()
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
        }
    }

    fn pod() -> String {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ns", "name": "p"}})
            .to_string()
    }

    #[test]
    fn owned_children_get_a_controller_owner_reference() {
        let intents = check_actions(
            &manifest(),
            &manifest().scope(None),
            &request(),
            &[wit::Action::Apply(pod())],
        )
        .unwrap();
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
        let err =
            check_actions(&manifest(), &manifest().scope(None), &request(), &actions).unwrap_err();
        assert!(
            matches!(err, ActionError::Refused { index: 1, .. }),
            "{err}"
        );
        let read_only = wit::Action::Delete(wit::ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: "c".into(),
        });
        assert!(matches!(
            check_actions(
                &manifest(),
                &manifest().scope(None),
                &request(),
                &[read_only]
            ),
            Err(ActionError::Refused { .. })
        ));
    }

    #[test]
    fn actions_outside_the_plugins_namespaces_refuse_the_whole_result() {
        let m = manifest();
        let scope = m.scope(Some(&["ns".to_string()]));
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
        let delete = wit::Action::Delete(wit::ObjectRef {
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
            let err = check_actions(&m, &scope, &request(), &actions).unwrap_err();
            let ActionError::Refused { index, refusal } = err else {
                panic!("{err}")
            };
            assert_eq!(
                (index, refusal.verb, refusal.namespace.as_str()),
                (1, verb, "other")
            );
        }
        assert!(check_actions(&m, &scope, &request(), &[patch("ns"), patch("")]).is_ok());
        // A key outside the plugin's namespaces gets nothing done to it at all.
        let mut stray = request();
        stray.namespace = "other".into();
        let err = check_actions(
            &m,
            &scope,
            &stray,
            &[wit::Action::UpdateStatus("{}".into())],
        );
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
            let err = check_actions(&manifest(), &manifest().scope(None), &request(), &[action])
                .unwrap_err();
            assert!(matches!(err, ActionError::Malformed { .. }), "{err}");
        }
        let mut gone = request();
        gone.object = None;
        let err = check_actions(
            &manifest(),
            &manifest().scope(None),
            &gone,
            &[wit::Action::UpdateStatus("{}".into())],
        );
        assert!(err.unwrap_err().to_string().contains("no longer exists"));
    }
}
