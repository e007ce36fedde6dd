//! The host side of the plugin's imports, one file per WIT interface, plus the per-call store
//! state they share.

mod cache;
mod log;
mod sql;
mod wasi;

pub(crate) use log::Throttle;
pub(crate) use wasi::poll as wasi_poll;

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmctrl_core::{Refusal, Scope};

use crate::sql::Databases;
use crate::view::View;

/// Log lines one call may write (the `log` import, and stdout and stderr together).
pub(crate) const LOG_LINES_PER_CALL: u32 = 100;

/// Everything one sandboxed call can see. A fresh `State` (and store) is made for every call.
pub(crate) struct State {
    pub(crate) plugin: Arc<str>,
    pub(crate) key: String,
    /// `None` while `manifest()` runs: nothing is declared yet, so nothing may be read.
    pub(crate) scope: Option<Arc<Scope>>,
    /// The first host call refused for being outside the scope; it fails the reconcile.
    pub(crate) refused: Option<Refusal>,
    pub(crate) view: Arc<dyn View>,
    /// The databases the operator granted (the `sql` import checks the manifest too).
    pub(crate) databases: Databases,
    pub(crate) limits: Limits,
    pub(crate) started: Instant,
    pub(crate) deadline: Duration,
    /// Log lines left for this call; a plugin cannot flood the host's logs.
    pub(crate) log_budget: u32,
    /// The plugin's log rate over all its calls.
    pub(crate) log_throttle: Arc<log::Throttle>,
    /// The message of the guest's panic, if it reported one before trapping.
    pub(crate) panic: Option<String>,
    /// WASI, built on the call's first WASI import; `None` for plugins that import none.
    pub(crate) wasi: Option<Box<wasi::Wasi>>,
}

impl crate::plugin::bindings::current::wasmctrl::plugin::types::Host for State {}

/// A plugin built against the previous contract imports the same services under their 0.2.0
/// names, with types of the same shape: each call goes to the current implementation.
mod previous {
    use crate::plugin::bindings::current::wasmctrl::plugin as current;
    use crate::plugin::bindings::previous::convert;
    use crate::plugin::bindings::previous::wasmctrl::plugin as previous;
    use crate::plugin::wit;

    use super::State;

    impl previous::types::Host for State {}

    impl previous::log::Host for State {
        fn log(
            &mut self,
            level: previous::types::Level,
            message: String,
            fields: Vec<(String, String)>,
        ) {
            let level = match level {
                previous::types::Level::Trace => wit::Level::Trace,
                previous::types::Level::Debug => wit::Level::Debug,
                previous::types::Level::Info => wit::Level::Info,
                previous::types::Level::Warn => wit::Level::Warn,
                previous::types::Level::Error => wit::Level::Error,
            };
            current::log::Host::log(self, level, message, fields);
        }
    }

    fn gvk(kind: previous::types::Gvk) -> wit::Gvk {
        wit::Gvk {
            group: kind.group,
            version: kind.version,
            kind: kind.kind,
        }
    }

    impl previous::cache::Host for State {
        fn get(
            &mut self,
            kind: previous::types::Gvk,
            namespace: String,
            name: String,
        ) -> Result<Option<String>, String> {
            current::cache::Host::get(self, gvk(kind), namespace, name)
        }

        fn list(
            &mut self,
            kind: previous::types::Gvk,
            namespace: String,
            labels: String,
        ) -> Result<Vec<String>, String> {
            current::cache::Host::list(self, gvk(kind), namespace, labels)
        }
    }

    impl previous::sql::Host for State {
        fn execute(
            &mut self,
            database: String,
            statements: Vec<previous::sql::Statement>,
        ) -> Result<Vec<previous::sql::Rows>, previous::sql::SqlError> {
            let unconvertible = |e: wasmtime::Error| previous::sql::SqlError {
                message: format!("converting between contract versions: {e}"),
                sqlstate: None,
                transient: false,
            };
            let statements = convert(&statements).map_err(unconvertible)?;
            match current::sql::Host::execute(self, database, statements) {
                Ok(rows) => convert(&rows).map_err(unconvertible),
                Err(e) => Err(convert(&e).map_err(unconvertible)?),
            }
        }
    }
}

/// Caps what a guest may allocate; remembers that it tried to go over so the resulting trap can
/// be reported as memory exhaustion rather than a generic failure.
pub(crate) struct Limits {
    pub(crate) memory: usize,
    pub(crate) exceeded: bool,
    /// The largest size a memory was allowed to grow to in this call.
    pub(crate) peak: usize,
}

impl wasmtime::ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory {
            self.exceeded = true;
            return Ok(false);
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold function references; 100k entries is far beyond any reconciler.
        Ok(desired <= 100_000)
    }
}
