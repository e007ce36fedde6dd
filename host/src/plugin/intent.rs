//! Turning a plugin's actions into checked [`Intent`]s: parsed, limited to declared kinds, with
//! owner references added to owned children. Nothing reaches the API server unchecked.

use kube::core::GroupVersionKind;
use serde::Serialize;
use serde_json::{Value, json};

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
        gvk_of(&self.api_version, &self.kind)
    }
}

fn gvk_of(api_version: &str, kind: &str) -> GroupVersionKind {
    match api_version.split_once('/') {
        Some((group, version)) => GroupVersionKind::gvk(group, version, kind),
        None => GroupVersionKind::gvk("", api_version, kind),
    }
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
    /// The action names a kind the manifest did not declare for writing.
    #[error(
        "action {index} ({action}) targets {kind}, which the manifest does not declare as watched, owned or writable"
    )]
    Undeclared {
        /// Position in the result.
        index: usize,
        /// Action name.
        action: &'static str,
        /// `group/version/kind` of the target.
        kind: String,
    },
}

fn action_name(a: &wit::Action) -> &'static str {
    match a {
        wit::Action::Apply(_) => "apply",
        wit::Action::Patch(_) => "patch",
        wit::Action::Delete(_) => "delete",
        wit::Action::UpdateStatus(_) => "update-status",
        wit::Action::AddFinalizer(_) => "add-finalizer",
        wit::Action::RemoveFinalizer(_) => "remove-finalizer",
        wit::Action::EmitEvent(_) => "emit-event",
    }
}

/// Checks every action against the manifest and the request; the first bad one refuses all,
/// so a plugin never gets half its intent applied because of a mistake later in the list.
pub fn check_actions(
    manifest: &Manifest,
    request: &wit::Request,
    actions: &[wit::Action],
) -> Result<Vec<Intent>, ActionError> {
    // Parsing the whole object costs as much as a small reconcile; only owned children need it.
    let parsed = std::cell::OnceCell::new();
    let owner = || -> Option<&Value> {
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
            let name = action_name(action);
            let malformed = |reason: String| ActionError::Malformed {
                index,
                action: name,
                reason,
            };
            let writable = |target: &Target| {
                let kind = target.gvk();
                if manifest.can_write(&kind) {
                    Ok(())
                } else {
                    let kind = format!("{}/{}", target.api_version, target.kind);
                    Err(ActionError::Undeclared {
                        index,
                        action: name,
                        kind,
                    })
                }
            };
            let needs_object =
                || {
                    request.object.as_ref().map(|_| ()).ok_or_else(|| {
                        malformed(format!("{} no longer exists", request_key(request)))
                    })
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
                    if !is_qualified_name(f) {
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
                    if e.reason.is_empty() || e.reason.len() > 128 {
                        return Err(malformed("event reason must be 1-128 characters".into()));
                    }
                    let type_ = match e.type_ {
                        wit::EventType::Normal => "Normal",
                        wit::EventType::Warning => "Warning",
                    };
                    Intent::Event {
                        type_: type_.into(),
                        reason: e.reason.clone(),
                        note: e.note.chars().take(1024).collect(),
                        action: e.action.clone(),
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
    let field = |v: &Value, name: &str| {
        v.as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or(format!("object has no {name}"))
    };
    Ok(Target {
        api_version: field(&object["apiVersion"], "apiVersion")?,
        kind: field(&object["kind"], "kind")?,
        namespace: object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .into(),
        name: field(&object["metadata"]["name"], "metadata.name")?,
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

/// `[prefix/]name` as Kubernetes requires for finalizers.
fn is_qualified_name(s: &str) -> bool {
    let name = s.rsplit_once('/').map_or(
        s,
        |(prefix, name)| if prefix.is_empty() { "" } else { name },
    );
    !name.is_empty()
        && s.len() <= 316
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Makes the reconciled object the controller owner of a child (unless it already is), so that
/// garbage collection deletes the child with its owner and child events map back to the owner.
fn add_owner_reference(child: &mut Value, owner: &Value) {
    let Some(uid) = owner["metadata"]["uid"].as_str() else {
        return;
    };
    let reference = json!({
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
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
            now: String::new(),
        }
    }

    fn pod() -> String {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ns", "name": "p"}})
            .to_string()
    }

    #[test]
    fn owned_children_get_a_controller_owner_reference() {
        let intents = check_actions(&manifest(), &request(), &[wit::Action::Apply(pod())]).unwrap();
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
        let err = check_actions(&manifest(), &request(), &actions).unwrap_err();
        assert!(
            matches!(err, ActionError::Undeclared { index: 1, .. }),
            "{err}"
        );
        let read_only = wit::Action::Delete(wit::ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: "c".into(),
        });
        assert!(matches!(
            check_actions(&manifest(), &request(), &[read_only]),
            Err(ActionError::Undeclared { .. })
        ));
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
            let err = check_actions(&manifest(), &request(), &[action]).unwrap_err();
            assert!(matches!(err, ActionError::Malformed { .. }), "{err}");
        }
        let mut gone = request();
        gone.object = None;
        let err = check_actions(
            &manifest(),
            &gone,
            &[wit::Action::UpdateStatus("{}".into())],
        );
        assert!(err.unwrap_err().to_string().contains("no longer exists"));
    }
}
