//! Reading a reconcile [`Request`] and reporting an [`Error`].

use std::fmt;

use serde::de::DeserializeOwned;

use crate::{Error, Request, Settings};

impl Request {
    /// A request for an object that exists, as the host would send it.
    pub fn for_object(object: &serde_json::Value) -> Self {
        let meta = &object["metadata"];
        Self {
            namespace: meta["namespace"].as_str().unwrap_or_default().into(),
            name: meta["name"].as_str().unwrap_or_default().into(),
            deleting: !meta["deletionTimestamp"].is_null(),
            object: Some(object.to_string()),
            settings: "{}".into(),
            now: "1970-01-01T00:00:00Z".into(),
        }
    }

    /// A request for an object that no longer exists.
    pub fn for_deleted(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            object: None,
            deleting: false,
            settings: "{}".into(),
            now: "1970-01-01T00:00:00Z".into(),
        }
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

    /// The operator's settings for this plugin.
    pub fn settings(&self) -> Result<Settings, Error> {
        Settings::parse(&self.settings).map_err(Error::terminal)
    }
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

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::terminal(e)
    }
}
