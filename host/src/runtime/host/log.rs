//! `wasmctrl:plugin/log`: plugin log lines into the host's tracing, tagged with plugin and key.

use crate::plugin::bindings::wasmctrl::plugin::log::Host;
use crate::plugin::wit::Level;

use super::State;

/// Longest message or field value kept; the rest is cut so one call cannot balloon the logs.
const MAX_TEXT: usize = 4096;

fn clip(s: &str) -> &str {
    if s.len() <= MAX_TEXT {
        return s;
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl Host for State {
    fn log(&mut self, level: Level, message: String, fields: Vec<(String, String)>) {
        // The SDK's panic hook reports the panic message this way before the guest aborts.
        if fields.iter().any(|(k, v)| k == "panic" && v == "true") {
            self.panic = Some(clip(&message).to_string());
        }
        if self.log_budget == 0 {
            return;
        }
        self.log_budget -= 1;
        let fields = fields
            .iter()
            .map(|(k, v)| format!("{}={}", clip(k), clip(v)))
            .collect::<Vec<_>>()
            .join(" ");
        let (plugin, key, message) = (&*self.plugin, &self.key, clip(&message));
        match level {
            Level::Trace => {
                tracing::trace!(plugin.name = plugin, object.key = key, %fields, "{message}")
            }
            Level::Debug => {
                tracing::debug!(plugin.name = plugin, object.key = key, %fields, "{message}")
            }
            Level::Info => {
                tracing::info!(plugin.name = plugin, object.key = key, %fields, "{message}")
            }
            Level::Warn => {
                tracing::warn!(plugin.name = plugin, object.key = key, %fields, "{message}")
            }
            Level::Error => {
                tracing::error!(plugin.name = plugin, object.key = key, %fields, "{message}")
            }
        }
    }
}
