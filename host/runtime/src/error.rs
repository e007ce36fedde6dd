//! Why a plugin failed to load or a reconcile failed: one variant per cause, each with a stable
//! metric label, each message naming the plugin (and key).

use std::time::Duration;

use wasmctrl_core::Refusal;

use crate::plugin::{ActionError, ManifestError};

/// A reconcile that did not produce checked intents.
///
/// Its message includes its cause's (logs and events print errors with `Display`), so the
/// cause is not also its `source()`: an error chain printed whole (`{:#}`) says it once.
#[derive(Debug, thiserror::Error)]
#[error("plugin {plugin}, key {key}: {kind}")]
pub struct Error {
    /// Plugin name.
    pub plugin: String,
    /// `namespace/name` being reconciled.
    pub key: String,
    /// What went wrong.
    pub kind: ErrorKind,
}

/// The cause of a failed reconcile.
#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    /// The plugin returned an error.
    #[error("plugin returned a {} error: {message}", if *retryable { "retryable" } else { "terminal" })]
    Plugin {
        /// Its message.
        message: String,
        /// Whether it asked to be retried.
        retryable: bool,
    },
    /// The guest trapped (panic, unreachable, out-of-bounds access, ...).
    #[error("trap: {0}")]
    Trap(String),
    /// The call ran past its deadline and was interrupted.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The guest tried to grow its memory past the cap.
    #[error("memory limit of {limit} bytes exceeded")]
    Memory {
        /// The cap.
        limit: usize,
    },
    /// The result was bigger than the cap.
    #[error("result of {size} bytes exceeds the {limit}-byte limit")]
    ResultTooLarge {
        /// Its size.
        size: usize,
        /// The cap.
        limit: usize,
    },
    /// An action was malformed or outside the plugin's declared scope.
    #[error(transparent)]
    Action(#[from] ActionError),
    /// A cache read was outside the plugin's declared scope (kind, namespace or labels). The
    /// whole reconcile fails even if the plugin went on without the answer.
    #[error("cache read {0}")]
    Read(Refusal),
    /// The sandbox could not be set up (instance pool exhausted, ...).
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// A webhook call the plugin did not declare (another kind than it reconciles, an
    /// operation it does not admit), or an answer that is not what the contract asks for.
    #[error("webhook: {0}")]
    Webhook(String),
}

impl ErrorKind {
    /// A short stable label for metrics (`controller_runtime_reconcile_errors_total{reason}`).
    pub fn label(&self) -> &'static str {
        match self {
            ErrorKind::Plugin {
                retryable: true, ..
            } => "plugin_retryable",
            ErrorKind::Plugin {
                retryable: false, ..
            } => "plugin_terminal",
            ErrorKind::Trap(_) => "trap",
            ErrorKind::Timeout(_) => "timeout",
            ErrorKind::Memory { .. } => "memory",
            ErrorKind::ResultTooLarge { .. } => "result_too_large",
            ErrorKind::Action(ActionError::Refused { .. }) | ErrorKind::Read(_) => "undeclared",
            ErrorKind::Action(ActionError::Malformed { .. } | ActionError::BestEffort(_)) => {
                "malformed_action"
            }
            ErrorKind::Sandbox(_) => "sandbox",
            ErrorKind::Webhook(_) => "webhook",
        }
    }

    /// The kind of sandbox failure, for `wasmctrl_sandbox_failures_total{kind}`: the plugin's
    /// own errors are one kind, `plugin_error`.
    pub fn metric_kind(&self) -> &'static str {
        match self {
            ErrorKind::Plugin { .. } => "plugin_error",
            other => other.label(),
        }
    }

    /// Whether retrying the same input could succeed. The plugin's own terminal errors and
    /// declaration errors (asking for something it did not declare, or malformed actions) are
    /// final for this version of the object; traps and timeouts may depend on cache contents
    /// and are retried with backoff.
    pub fn retryable(&self) -> bool {
        !matches!(
            self,
            ErrorKind::Plugin {
                retryable: false,
                ..
            } | ErrorKind::Action(_)
                | ErrorKind::Read(_)
                | ErrorKind::Webhook(_)
        )
    }

    /// What was refused, when the plugin asked for something outside its scope.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            ErrorKind::Action(ActionError::Refused { refusal, .. }) | ErrorKind::Read(refusal) => {
                Some(refusal)
            }
            _ => None,
        }
    }
}

/// The WebAssembly engine could not be set up (the machine refused what it needs, or the
/// contracts' imports could not be linked).
#[derive(Debug, thiserror::Error)]
#[error("setting up the WebAssembly runtime: {0:#}")]
pub struct SetupError(pub wasmtime::Error);

/// A plugin that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not a valid component for this engine.
    #[error("{source_name}: not a loadable WebAssembly component: {reason}")]
    Compile {
        /// File or label of the plugin.
        source_name: String,
        /// Compiler message.
        reason: String,
    },
    /// It implements neither plugin contract this host serves (wrong exports or imports).
    #[error(
        "{source_name}: does not implement a wasmctrl:plugin contract this host serves (0.3 or 0.2.0): {reason}"
    )]
    Contract {
        /// File or label of the plugin.
        source_name: String,
        /// Linker message.
        reason: String,
    },
    /// `manifest()` trapped, timed out or returned an error for these settings.
    #[error("{source_name}: manifest() failed: {reason}")]
    Manifest {
        /// File or label of the plugin.
        source_name: String,
        /// Why.
        reason: String,
    },
    /// The manifest was returned but is invalid.
    #[error("{source_name}: invalid manifest: {reason}")]
    InvalidManifest {
        /// File or label of the plugin.
        source_name: String,
        /// Why (in the message, so not also the error's `source()`).
        reason: ManifestError,
    },
    /// The compiled-artifact cache failed in a way that prevents loading.
    #[error("{source_name}: {reason}")]
    Io {
        /// File or label of the plugin.
        source_name: String,
        /// Why.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each cause is printed once, whether the error is shown alone or as a whole chain.
    #[test]
    fn a_cause_is_printed_once() {
        let error = Error {
            plugin: "p".into(),
            key: "ns/a".into(),
            kind: ErrorKind::Trap("boom".into()),
        };
        assert_eq!(error.to_string(), "plugin p, key ns/a: trap: boom");
        let chain = format!("{:#}", anyhow::Error::from(error));
        assert_eq!(chain.matches("boom").count(), 1, "{chain}");
        let load = LoadError::InvalidManifest {
            source_name: "p.wasm".into(),
            reason: ManifestError::Name("P".into()),
        };
        let chain = format!("{:#}", anyhow::Error::from(load));
        assert_eq!(chain.matches("DNS-1123").count(), 1, "{chain}");
    }
}
