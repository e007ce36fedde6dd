//! The [`Error`] a reconcile reports: retryable or terminal. Below the actions and the
//! request, which both return it.

use std::fmt;

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
