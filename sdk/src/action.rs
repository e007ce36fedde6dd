//! Building the [`Action`]s and the [`Outcome`] a reconcile returns.

use serde::Serialize;

use crate::{Action, Error, Event, EventType, Gvk, ObjectRef, Outcome, Patch, PatchBody};

fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    serde_json::to_string(value).map_err(|e| Error::terminal(format!("serializing action: {e}")))
}

impl ObjectRef {
    /// Names an object of `kind`; `namespace` is empty for cluster-scoped kinds.
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

    /// Deletes `target`.
    pub fn delete(target: ObjectRef) -> Self {
        Action::Delete(target)
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
        Self {
            actions: Vec::new(),
            requeue_after_ms: None,
        }
    }

    /// These actions, in order.
    pub fn with(actions: Vec<Action>) -> Self {
        Self {
            actions,
            requeue_after_ms: None,
        }
    }

    /// Appends an action.
    pub fn push(mut self, action: Action) -> Self {
        self.actions.push(action);
        self
    }

    /// Asks to be reconciled again after `ms` milliseconds even if nothing changes.
    pub fn requeue_after_ms(mut self, ms: u64) -> Self {
        self.requeue_after_ms = Some(ms);
        self
    }
}
