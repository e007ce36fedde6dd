//! Reading a reconcile [`Request`] and reporting an [`Error`].

use std::fmt;

use serde::de::DeserializeOwned;

use crate::Timestamp;

/// One reconcile: the key, the cached object and the host's clock.
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
        }
    }

    /// [`now`](Self::now) as Kubernetes writes times (`metav1.Time`): RFC 3339 in UTC, to the
    /// second (`2026-11-22T10:00:00Z`).
    pub fn now_rfc3339(&self) -> String {
        self.now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
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

/// A failed reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What went wrong, naming the object.
    pub message: String,
    /// Retryable errors back off exponentially; terminal ones are reported and not retried
    /// until the object changes.
    pub retryable: bool,
}

impl Error {
    /// A failure worth retrying with backoff (a dependency is not ready, a read failed).
    pub fn retryable(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            retryable: true,
        }
    }

    /// A failure retrying cannot fix (invalid spec); reported, not retried until the object changes.
    pub fn terminal(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            retryable: false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.retryable {
            "retryable"
        } else {
            "terminal"
        };
        write!(f, "{} ({kind})", self.message)
    }
}

impl std::error::Error for Error {}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::terminal(e)
    }
}
