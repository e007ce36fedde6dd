//! Building the [`Action`]s and the [`Outcome`] a reconcile returns, and the parts of actions.

use std::any::type_name;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Gvk};

/// Identifies an object other than the one being reconciled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// `group/version`, or `v1` for the core group, as in an object's `apiVersion`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// How a delete treats the object's dependents (the objects whose `ownerReferences` name it),
/// as the API's `propagationPolicy` says it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Propagation {
    /// The object goes at once; the garbage collector deletes its dependents afterwards.
    /// kubectl's default, and [`Action::delete`]'s.
    #[default]
    Background,
    /// The object stays, being deleted, until the garbage collector has deleted the dependents
    /// that block its owner's deletion.
    Foreground,
    /// The object goes; its dependents stay, their owner references to it removed.
    Orphan,
}

/// A delete of a named object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    /// Which object.
    pub target: ObjectRef,
    /// What becomes of its dependents.
    pub propagation: Propagation,
}

/// The body of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchBody {
    /// An RFC 7386 JSON merge patch, as JSON.
    Merge(String),
    /// An RFC 6902 JSON patch: a JSON array of operations, `test` included.
    Json(String),
}

/// A patch to a named object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// Which object.
    pub target: ObjectRef,
    /// The patch.
    pub body: PatchBody,
}

/// The type of a Kubernetes Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something needs attention.
    Warning,
}

/// A Kubernetes Event (events.k8s.io/v1) about the reconciled object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// UpperCamelCase machine-readable reason, e.g. `Created`.
    pub reason: String,
    /// Human-readable note.
    pub note: String,
    /// What was done, e.g. `Reconcile`.
    pub action: String,
}

/// The complete desired set of the reconciled object's children of one owned kind
/// ([`Action::children`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Children {
    /// The kind; the manifest must declare it in `owns`.
    pub kind: Gvk,
    /// Each desired child as JSON.
    pub objects: Vec<String>,
}

/// Something the plugin wants done. The host checks each against the manifest before sending
/// anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Server-side apply of a desired object (JSON) with the plugin's field manager; objects of
    /// an owned kind get a controller owner reference to the reconciled object.
    Apply(String),
    /// Patch an object of a watched, owned or writable kind.
    Patch(Patch),
    /// Delete an object of a watched, owned or writable kind. An object already gone is not a
    /// failure: the next reconcile sees it as [`ActionStatus::Unchanged`](crate::ActionStatus).
    Delete(Deletion),
    /// Replace `.status` of the reconciled object (a JSON object).
    UpdateStatus(String),
    /// Add this finalizer to the reconciled object (no-op when present).
    AddFinalizer(String),
    /// Remove this finalizer from the reconciled object (no-op when absent).
    RemoveFinalizer(String),
    /// Record an Event about the reconciled object.
    EmitEvent(Event),
    /// Apply each child of the set and delete the reconciled object's other children of the kind.
    Children(Children),
}

/// A successful reconcile: the actions, in order, and when to look again.
///
/// The host carries the actions out in order. The first failure of an action that is not best
/// effort stops the rest; any failure has the key retried with backoff, and the next reconcile
/// reads what each action did in [`Request::previous`](crate::Request::previous).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Carried out in order.
    pub actions: Vec<Action>,
    /// Positions in `actions` of those whose failure does not stop the ones after them
    /// ([`Outcome::push_best_effort`]).
    pub best_effort: Vec<usize>,
    /// Reconcile this key again after this long, even if nothing changes.
    pub requeue_after: Option<Duration>,
}

fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    serde_json::to_string(value).map_err(|e| Error::terminal(format!("serializing action: {e}")))
}

impl ObjectRef {
    /// Names an object of kind `K` (a k8s-openapi or derived custom resource type):
    /// `ObjectRef::of::<Pod>("default", "web-0")`; `namespace` is empty for cluster-scoped kinds.
    pub fn of<K: kube_core::Resource<DynamicType = ()>>(namespace: &str, name: &str) -> Self {
        Self::new(&crate::Gvk::of::<K>(), namespace, name)
    }

    /// Names an object of `kind` given by its group, version and kind (for a kind with no Rust
    /// type; [`of`](Self::of) takes the type); `namespace` is empty for cluster-scoped kinds.
    pub fn new(kind: &Gvk, namespace: &str, name: &str) -> Self {
        Self {
            api_version: kind.api_version(),
            kind: kind.kind.clone(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl Action {
    /// Server-side apply of a full desired object (it must carry apiVersion, kind and name).
    pub fn apply<T: Serialize + ?Sized>(object: &T) -> Result<Self, Error> {
        Ok(Action::Apply(to_json(object)?))
    }

    /// Replaces the reconciled object's `.status`.
    pub fn update_status<T: Serialize + ?Sized>(status: &T) -> Result<Self, Error> {
        Ok(Action::UpdateStatus(to_json(status)?))
    }

    /// An RFC 7386 merge patch of `target`.
    pub fn merge_patch<T: Serialize + ?Sized>(target: ObjectRef, patch: &T) -> Result<Self, Error> {
        Ok(Action::Patch(Patch {
            target,
            body: PatchBody::Merge(to_json(patch)?),
        }))
    }

    /// An RFC 6902 JSON patch (an array of operations) of `target`.
    pub fn json_patch<T: Serialize + ?Sized>(target: ObjectRef, ops: &T) -> Result<Self, Error> {
        Ok(Action::Patch(Patch {
            target,
            body: PatchBody::Json(to_json(ops)?),
        }))
    }

    /// Deletes `target`, its dependents deleted in the background afterwards (kubectl's default).
    pub fn delete(target: ObjectRef) -> Self {
        Self::delete_with(target, Propagation::Background)
    }

    /// Deletes `target` with this propagation policy for its dependents.
    pub fn delete_with(target: ObjectRef, propagation: Propagation) -> Self {
        Action::Delete(Deletion {
            target,
            propagation,
        })
    }

    /// Adds a finalizer to the reconciled object.
    pub fn add_finalizer(name: &str) -> Self {
        Action::AddFinalizer(name.into())
    }

    /// Removes a finalizer from the reconciled object.
    pub fn remove_finalizer(name: &str) -> Self {
        Action::RemoveFinalizer(name.into())
    }

    /// A `Normal` Event about the reconciled object.
    pub fn event(reason: &str, note: &str) -> Self {
        Action::EmitEvent(Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: note.into(),
            action: "Reconcile".into(),
        })
    }

    /// The complete desired set of the reconciled object's children of `kind` (an owned kind):
    /// the host applies each, then deletes every child of that kind the object controls that
    /// the set does not name, as Metacontroller's sync hook does. Children the object does not
    /// control are never touched. An empty set deletes them all.
    pub fn children<T: Serialize>(kind: &Gvk, objects: &[T]) -> Result<Self, Error> {
        Ok(Action::Children(Children {
            kind: kind.clone(),
            objects: objects
                .iter()
                .map(|o| to_json(o))
                .collect::<Result<_, _>>()?,
        }))
    }

    /// A `Warning` Event about the reconciled object.
    pub fn warning(reason: &str, note: &str) -> Self {
        Action::EmitEvent(Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: note.into(),
            action: "Reconcile".into(),
        })
    }
}

impl Outcome {
    /// Nothing to do.
    pub fn done() -> Self {
        Self::default()
    }

    /// These actions, in order.
    pub fn with(actions: Vec<Action>) -> Self {
        Self {
            actions,
            ..Self::default()
        }
    }

    /// Appends an action.
    pub fn push(mut self, action: Action) -> Self {
        self.actions.push(action);
        self
    }

    /// Appends an action whose failure does not stop the ones after it (say, a cleanup that
    /// must not keep the status from being written). Its failure still has the key retried,
    /// and the next reconcile sees it.
    pub fn push_best_effort(mut self, action: Action) -> Self {
        self.best_effort.push(self.actions.len());
        self.actions.push(action);
        self
    }

    /// Asks to be reconciled again after `after` even if nothing changes.
    pub fn requeue_after(mut self, after: Duration) -> Self {
        self.requeue_after = Some(after);
        self
    }
}

/// Reading an outcome back, typed, as tests do:
///
/// ```ignore
/// let outcome = Harness::new().reconcile::<Memcached>(&sample)?;
/// let [deployment] = &outcome.applied::<Deployment>()[..] else { panic!("{outcome:?}") };
/// let status: MemcachedStatus = outcome.status().expect("a status");
/// ```
impl Outcome {
    /// The objects of kind `K` it applies, in order: by [`Action::apply`] and in
    /// [`Action::children`] sets of `K`.
    ///
    /// # Panics
    ///
    /// When an applied object of `K`'s kind is not JSON that decodes as `K` (the plugin's bug,
    /// which the test should show rather than skip).
    pub fn applied<K>(&self) -> Vec<K>
    where
        K: kube_core::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let kind = Gvk::of::<K>();
        let (api_version, name) = (kind.api_version(), kind.kind.as_str());
        let decode = |json: &str| -> K {
            serde_json::from_str(json).unwrap_or_else(|e| {
                panic!(
                    "an applied {name} does not decode as {}: {e}",
                    type_name::<K>()
                )
            })
        };
        let mut out = Vec::new();
        for action in &self.actions {
            match action {
                Action::Apply(json) => {
                    let head: ObjectHead = serde_json::from_str(json).unwrap_or_default();
                    if head.api_version == api_version && head.kind == name {
                        out.push(decode(json));
                    }
                }
                Action::Children(set) if set.kind == kind => {
                    out.extend(set.objects.iter().map(|json| decode(json)));
                }
                _ => {}
            }
        }
        out
    }

    /// The status its last [`Action::update_status`] writes, decoded as `S`; `None` when it
    /// writes none.
    ///
    /// # Panics
    ///
    /// When that status does not decode as `S`.
    pub fn status<S: DeserializeOwned>(&self) -> Option<S> {
        let json = self.actions.iter().rev().find_map(|action| match action {
            Action::UpdateStatus(json) => Some(json),
            _ => None,
        })?;
        Some(serde_json::from_str(json).unwrap_or_else(|e| {
            panic!(
                "the status written does not decode as {}: {e}",
                type_name::<S>()
            )
        }))
    }

    /// The Events it records, in order.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.actions.iter().filter_map(|action| match action {
            Action::EmitEvent(event) => Some(event),
            _ => None,
        })
    }

    /// The objects it deletes, in order.
    pub fn deleted(&self) -> impl Iterator<Item = &ObjectRef> {
        self.actions.iter().filter_map(|action| match action {
            Action::Delete(deletion) => Some(&deletion.target),
            _ => None,
        })
    }
}

/// What [`Outcome::applied`] reads of an applied object before decoding it.
#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectHead {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn config_map(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: kube_core::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn typed_accessors_read_back_what_the_outcome_carries() {
        let outcome = Outcome::done()
            .push(Action::apply(&config_map("a")).unwrap())
            .push(
                Action::apply(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web"}}))
                .unwrap(),
            )
            .push(
                Action::children(&Gvk::of::<ConfigMap>(), &[config_map("b"), config_map("c")])
                    .unwrap(),
            )
            .push(Action::update_status(&json!({"phase": "Old"})).unwrap())
            .push(Action::warning("Finalizing", "going"))
            .push(Action::delete(ObjectRef::of::<ConfigMap>("ns", "gone")))
            .push(Action::update_status(&json!({"phase": "New"})).unwrap());
        let names = |maps: Vec<ConfigMap>| -> Vec<String> {
            maps.into_iter().filter_map(|m| m.metadata.name).collect()
        };
        assert_eq!(names(outcome.applied::<ConfigMap>()), ["a", "b", "c"]);
        let deployments = outcome.applied::<Deployment>();
        assert_eq!(deployments.len(), 1);
        assert_eq!(deployments[0].metadata.name.as_deref(), Some("web"));
        // The last status written is the one the object ends with.
        let status: serde_json::Value = outcome.status().unwrap();
        assert_eq!(status["phase"], "New");
        let reasons: Vec<&str> = outcome.events().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, ["Finalizing"]);
        let deleted: Vec<&str> = outcome.deleted().map(|o| o.name.as_str()).collect();
        assert_eq!(deleted, ["gone"]);
        assert!(Outcome::done().status::<serde_json::Value>().is_none());
    }

    #[test]
    #[should_panic(expected = "an applied ConfigMap does not decode as")]
    fn an_applied_object_that_does_not_decode_is_a_failure_not_a_skip() {
        let outcome = Outcome::done().push(
            Action::apply(&json!({"apiVersion": "v1", "kind": "ConfigMap", "data": 3})).unwrap(),
        );
        outcome.applied::<ConfigMap>();
    }
}
