//! The host side of the plugin's imports, one file per WIT interface, plus the per-call store
//! state they share.

mod cache;
mod log;
mod sql;
mod wasi;

pub(crate) use log::Throttle;

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmctrl_scope::{Refusal, Scope};

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

impl crate::plugin::bindings::wasmctrl::plugin::types::Host for State {}

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
