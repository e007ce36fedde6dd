//! The host's [`Request`] for one reconcile and what the previous reconcile's actions did
//! ([`ActionResult`]).

use jiff::Timestamp;
use serde::de::DeserializeOwned;

use crate::{Error, ObjectRef};

/// One reconcile as the host asks for it: the key, the cached object and the host's clock. The
/// SDK turns it into a [`Reconcile`](crate::Reconcile) and a [`Context`](crate::Context); tests
/// build one to run a plugin on ([`Harness::run`](crate::testing::Harness::run)).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Namespace of the object; empty for cluster-scoped kinds.
    pub namespace: String,
    /// Name of the object.
    pub name: String,
    /// The cached object as JSON (without `managedFields`); `None` once it no longer exists.
    /// Read it with [`Request::object`].
    pub object: Option<String>,
    /// The object exists and has a `deletionTimestamp`: finalizers are holding it.
    pub deleting: bool,
    /// The host's current time. Read it rather than a clock: one reconcile sees one time.
    pub now: Timestamp,
    /// What each action of this key's previous reconcile did, in order; empty when there was
    /// none since the host (or this version of the plugin) started, or when it returned an
    /// error. [`Request::failures`] picks out the failed ones.
    pub previous: Vec<ActionResult>,
}

/// What became of one action of the previous reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionResult {
    /// The action's position in that reconcile's [`Outcome::actions`](crate::Outcome).
    pub index: usize,
    /// What it did.
    pub status: ActionStatus,
}

/// What the host did with one action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionStatus {
    /// The request was sent and the API server accepted it.
    Applied,
    /// No request was needed: the host's cache showed the action's effect already in place (the
    /// same apply as last time, a finalizer already there, an object already gone). A delete
    /// the server answers with 404 Not Found is unchanged too.
    Unchanged,
    /// The request failed.
    Failed(ActionFailure),
    /// Not attempted: an earlier action that was not best effort failed.
    Skipped,
}

/// Why an action failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionFailure {
    /// The object the failed request was about: the action's target, the reconciled object for
    /// status, finalizer and event actions, and for a set of children the child that failed.
    pub target: ObjectRef,
    /// The HTTP status code the API server answered (422, 409, 403, ...); 0 when the request
    /// got no answer or was not sent.
    pub code: u16,
    /// The API server's `Status.reason` (`Invalid`, `Conflict`, `Forbidden`, ...); when the
    /// request got no answer or was not sent, the host's own (`RequestFailed`, `NotServed`,
    /// `Uncached`, `Malformed`, `NotLeader`).
    pub reason: String,
    /// What the server (or the host) said.
    pub message: String,
}

impl Request {
    /// A request for an object that exists, as the host would send it.
    pub fn for_object(object: &serde_json::Value) -> Self {
        let meta = &object["metadata"];
        Self {
            namespace: meta["namespace"].as_str().unwrap_or_default().into(),
            name: meta["name"].as_str().unwrap_or_default().into(),
            deleting: !meta["deletionTimestamp"].is_null(),
            object: Some(object.to_string()),
            now: Timestamp::UNIX_EPOCH,
            previous: Vec::new(),
        }
    }

    /// The request behind an admission of the object `json` (its key and the object).
    pub(crate) fn for_admission(json: Option<&String>) -> Self {
        match json.and_then(|j| serde_json::from_str::<serde_json::Value>(j).ok()) {
            Some(object) => Self::for_object(&object),
            None => Self::for_deleted("", ""),
        }
    }

    /// A request for an object that no longer exists.
    pub fn for_deleted(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            object: None,
            deleting: false,
            now: Timestamp::UNIX_EPOCH,
            previous: Vec::new(),
        }
    }

    /// The same request, as if the previous reconcile's actions had done `previous` (for
    /// tests of how a plugin answers its failures).
    pub fn after(mut self, previous: Vec<ActionResult>) -> Self {
        self.previous = previous;
        self
    }

    /// The previous reconcile's failed actions: each one's position and failure.
    pub fn failures(&self) -> impl Iterator<Item = (usize, &ActionFailure)> {
        self.previous.iter().filter_map(|r| match &r.status {
            ActionStatus::Failed(failure) => Some((r.index, failure)),
            _ => None,
        })
    }

    /// [`now`](Self::now) as Kubernetes writes times (`metav1.Time`): RFC 3339 in UTC, to the
    /// second (`2026-11-22T10:00:00Z`).
    pub fn now_rfc3339(&self) -> String {
        // jiff's RFC 3339 printer at precision 0 truncates to the second, as `strftime` with
        // `%S` does, at a fraction of its cost: a format string is interpreted on every call,
        // in every fresh instance.
        format!("{:.0}", self.now)
    }

    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }

    /// The object deserialized into `T`; `Ok(None)` when it no longer exists.
    ///
    /// An object that does not fit `T` is a terminal error: retrying cannot help until it changes.
    pub fn object<T: DeserializeOwned>(&self) -> Result<Option<T>, Error> {
        let Some(json) = &self.object else {
            return Ok(None);
        };
        serde_json::from_str(json)
            .map(Some)
            .map_err(|e| Error::terminal(format!("{}: object does not parse: {e}", self.key())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(now: &str) -> Request {
        Request {
            namespace: "default".into(),
            name: "web".into(),
            object: None,
            deleting: false,
            now: now.parse().unwrap(),
            previous: Vec::new(),
        }
    }

    #[test]
    fn now_is_written_as_kubernetes_writes_times_truncated_to_the_second() {
        assert_eq!(
            at("2026-11-22T10:00:00Z").now_rfc3339(),
            "2026-11-22T10:00:00Z"
        );
        // A fraction is dropped, never rounded up into the next second.
        assert_eq!(
            at("2026-11-22T10:00:59.999999999Z").now_rfc3339(),
            "2026-11-22T10:00:59Z"
        );
        assert_eq!(
            at("1970-01-01T00:00:00Z").now_rfc3339(),
            "1970-01-01T00:00:00Z"
        );
    }
}
