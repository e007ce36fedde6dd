//! What carrying out an intent came to: applied, unchanged, failed (and why), skipped.

use super::*;

/// Why carrying out an intent failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Someone else changed the object first (409, or a failed `test` precondition): requeue.
    #[error("{target}: conflict: {message}")]
    Conflict {
        /// The object.
        target: String,
        /// The server's answer: 409, or 422 for a failed `test`.
        code: u16,
        /// The server's `Status.reason`.
        reason: String,
        /// The server's message.
        message: String,
    },
    /// The API server refused or failed the request. (Causes are in the messages, so they are
    /// not also `source()`: a chain printed whole says each once.)
    #[error("{target}: {verb} failed: {error}")]
    Api {
        /// The object.
        target: String,
        /// What was attempted.
        verb: &'static str,
        /// The client error.
        error: kube::Error,
    },
    /// The plugin's intent cannot be sent as asked (a JSON Patch that does not parse): retrying
    /// the same intent cannot help.
    #[error("{target}: {message}")]
    Malformed {
        /// The object.
        target: String,
        /// What is wrong.
        message: String,
    },
    /// Not sent: this replica does not lead (any more); another one reconciles now.
    #[error("{target}: not sent: this replica is not the leader")]
    NotLeader {
        /// The object.
        target: String,
    },
    /// Children of a kind cannot be pruned: no informer caches them where they live (yet).
    #[error(
        "{target}: children of kind {kind} cannot be pruned: no cache of them covers namespace {namespace:?}"
    )]
    Uncached {
        /// The reconciled object.
        target: String,
        /// The children's kind.
        kind: String,
        /// Where they were looked for.
        namespace: String,
    },
    /// The kind is not served (CRD missing).
    #[error("{kind}: not served by the API server: {error}")]
    Discovery {
        /// The kind.
        kind: String,
        /// The client error.
        error: kube::Error,
    },
}

impl Error {
    /// A short stable label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Conflict { .. } => "conflict",
            Error::Api { .. } => "api_error",
            Error::Malformed { .. } => "malformed_intent",
            Error::Discovery { .. } => "discovery",
            Error::NotLeader { .. } => "not_leader",
            Error::Uncached { .. } => "uncached",
        }
    }

    /// Whether the API server refused the request as forbidden (RBAC): retrying helps only once
    /// an operator grants what is missing, so it deserves telling.
    pub fn forbidden(&self) -> bool {
        matches!(self, Error::Api { error: kube::Error::Api(s), .. } if s.code == 403)
    }

    /// Whether the same intent could succeed later.
    pub fn retryable(&self) -> bool {
        !matches!(self, Error::Malformed { .. })
    }

    /// The HTTP code and `Status.reason` the server answered, with its message; for a request
    /// that got no answer or was not sent, 0 and the host's own reason, with the whole error.
    pub(super) fn answer(&self) -> (u16, String, String) {
        let host = |reason: &str| (0, reason.to_owned(), self.to_string());
        match self {
            Error::Conflict {
                code,
                reason,
                message,
                ..
            } => (*code, reason.clone(), message.clone()),
            Error::Api {
                error: kube::Error::Api(status),
                ..
            } => (status.code, status.reason.clone(), status.message.clone()),
            Error::Api { .. } => host("RequestFailed"),
            Error::Discovery { .. } => host("NotServed"),
            Error::Malformed { .. } => host("Malformed"),
            Error::NotLeader { .. } => host("NotLeader"),
            Error::Uncached { .. } => host("Uncached"),
        }
    }
}

/// What became of one intent: the contract's `action-status`, kept small, since the controller
/// keeps one for each action of every key's last reconcile.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionStatus {
    /// A request was sent and accepted.
    Applied,
    /// No request was needed (the cache showed the effect in place), or a delete found the
    /// object gone.
    Unchanged,
    /// The request failed.
    Failed(Box<Failure>),
    /// Not attempted: an earlier intent that was not best effort failed.
    Skipped,
}

/// A failed intent: which object it was about, and how the server (or the host) answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The action's target; the reconciled object for status, finalizer and event intents; for
    /// a set of children, the child whose write failed.
    pub target: Target,
    /// The HTTP status code; 0 when the request got no answer or was not sent.
    pub code: u16,
    /// The server's `Status.reason`, or the host's own (see [`Error`]).
    pub reason: String,
    /// What the server (or the host) said.
    pub message: String,
}

impl Failure {
    pub(super) fn new(target: Target, error: &Error) -> Self {
        let (code, reason, message) = error.answer();
        Self {
            target,
            code,
            reason,
            message,
        }
    }
}

/// An intent that failed, and the object it failed on.
pub(super) struct Failed {
    pub(super) target: Target,
    pub(super) error: Error,
}

/// What the applier did for one reconcile.
#[derive(Debug, Default)]
pub struct Applied {
    /// Requests sent.
    pub writes: usize,
    /// Requests not sent because nothing would change.
    pub skipped: usize,
    /// The writes that changed a cached object, whose events the caches have yet to show.
    pub echoes: Vec<Echo>,
    /// What became of each intent, in order.
    pub statuses: Vec<ActionStatus>,
    /// The first failure, if any intent failed: it decides how the key is retried.
    pub error: Option<Error>,
}

impl Applied {
    /// What was done, when every intent succeeded; else the first failure.
    pub fn succeeded(self) -> Result<Self, Error> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(self),
        }
    }

    pub(super) fn count(&mut self, sent: bool) {
        if sent {
            self.writes += 1;
        } else {
            self.skipped += 1;
        }
    }
}
