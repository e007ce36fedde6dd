//! `wasmctrl:plugin/log`: plugin log lines into the host's tracing, tagged with plugin and key.
//! Bounded twice: lines per call (`State::log_budget`) and lines per second per plugin
//! ([`Throttle`]), so neither one call nor many cannot flood the host's logs.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::plugin::bindings::current::wasmctrl::plugin::log::Host;
use crate::plugin::wit::Level;

use super::State;
use wasmctrl_core::sync::lock;

/// Lines per second a plugin may log, over all its calls, once its burst is spent.
const LINES_PER_SECOND: f64 = 200.0;

/// Lines a plugin may log at once before the rate applies.
const BURST: f64 = 1000.0;

/// A token bucket per plugin version: [`LINES_PER_SECOND`], bursts of [`BURST`]. Lines past it
/// are dropped and counted; the count is reported at most once a second.
#[derive(Debug)]
pub(crate) struct Throttle {
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
    dropped: u64,
    reported: Option<Instant>,
}

impl Default for Throttle {
    fn default() -> Self {
        Self {
            state: Mutex::new(Bucket {
                tokens: BURST,
                refilled: Instant::now(),
                dropped: 0,
                reported: None,
            }),
        }
    }
}

impl Throttle {
    /// Whether a line logged at `now` may pass; `Some(n)` when `n` dropped lines are due to be
    /// reported.
    fn admit(&self, now: Instant) -> (bool, Option<u64>) {
        let mut b = lock(&self.state);
        let elapsed = now.saturating_duration_since(b.refilled).as_secs_f64();
        b.tokens = (b.tokens + elapsed * LINES_PER_SECOND).min(BURST);
        b.refilled = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return (true, None);
        }
        b.dropped += 1;
        let due = b
            .reported
            .is_none_or(|at| now.saturating_duration_since(at) >= Duration::from_secs(1));
        if due {
            b.reported = Some(now);
            return (false, Some(std::mem::take(&mut b.dropped)));
        }
        (false, None)
    }
}

/// The target of every line a plugin logs, so that a filter can pick plugins' logs out of the
/// host's (`--log-level info,plugin=debug`).
pub const PLUGIN_LOG_TARGET: &str = "plugin";

/// Longest message or field value kept; the rest is cut so one call cannot balloon the logs.
pub(super) const MAX_TEXT: usize = 4096;

fn clip(s: &str) -> &str {
    &s[..s.floor_char_boundary(MAX_TEXT)]
}

/// Whether one more line of `plugin` may be logged, spending a line of the call's `budget` and
/// of the plugin's `throttle`; reports dropped lines when due. Shared with WASI's stdout/stderr.
pub(super) fn admit(budget: &mut u32, throttle: &Throttle, plugin: &str) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    match throttle.admit(Instant::now()) {
        (true, _) => true,
        (false, Some(dropped)) => {
            tracing::warn!(
                plugin.name = plugin,
                dropped,
                rate = LINES_PER_SECOND,
                "plugin logs faster than its rate; dropping lines"
            );
            false
        }
        (false, None) => false,
    }
}

/// Whether the host's subscriber records plugin lines of `level`.
fn recorded(level: Level) -> bool {
    match level {
        Level::Trace => tracing::enabled!(target: PLUGIN_LOG_TARGET, tracing::Level::TRACE),
        Level::Debug => tracing::enabled!(target: PLUGIN_LOG_TARGET, tracing::Level::DEBUG),
        Level::Info => tracing::enabled!(target: PLUGIN_LOG_TARGET, tracing::Level::INFO),
        Level::Warn => tracing::enabled!(target: PLUGIN_LOG_TARGET, tracing::Level::WARN),
        Level::Error => tracing::enabled!(target: PLUGIN_LOG_TARGET, tracing::Level::ERROR),
    }
}

impl Host for State {
    fn log(&mut self, level: Level, message: String, fields: Vec<(String, String)>) {
        // The SDK's panic hook reports the panic message this way before the guest aborts.
        if fields.iter().any(|(k, v)| k == "panic" && v == "true") {
            self.panic = Some(clip(&message).to_string());
        }
        // A line no subscriber records is neither formatted nor counted against the budget.
        if !recorded(level) || !admit(&mut self.log_budget, &self.log_throttle, &self.plugin) {
            return;
        }
        let fields = fields
            .iter()
            .map(|(k, v)| format!("{}={}", clip(k), clip(v)))
            .collect::<Vec<_>>()
            .join(" ");
        // No empty `fields=`; and inside the controller's reconcile span, which names the plugin
        // and the key already, the line does not repeat them. Outside one (`wasmctrl test`, a
        // runtime used directly) it carries them itself.
        let fields = (!fields.is_empty()).then(|| tracing::field::display(fields));
        let in_reconcile = (tracing::Span::current().metadata())
            .is_some_and(|m| m.fields().field("object.key").is_some());
        let (plugin, key) = match in_reconcile {
            true => (None, None),
            false => (Some(&*self.plugin), Some(self.key.as_str())),
        };
        let message = clip(&message);
        match level {
            Level::Trace => {
                tracing::trace!(target: PLUGIN_LOG_TARGET, { plugin.name = plugin, object.key = key, fields = fields }, "{message}")
            }
            Level::Debug => {
                tracing::debug!(target: PLUGIN_LOG_TARGET, { plugin.name = plugin, object.key = key, fields = fields }, "{message}")
            }
            Level::Info => {
                tracing::info!(target: PLUGIN_LOG_TARGET, { plugin.name = plugin, object.key = key, fields = fields }, "{message}")
            }
            Level::Warn => {
                tracing::warn!(target: PLUGIN_LOG_TARGET, { plugin.name = plugin, object.key = key, fields = fields }, "{message}")
            }
            Level::Error => {
                tracing::error!(target: PLUGIN_LOG_TARGET, { plugin.name = plugin, object.key = key, fields = fields }, "{message}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records events of `PLUGIN_LOG_TARGET` at `max` and above, and nothing else.
    struct AtMost(tracing::Level);

    impl tracing::Subscriber for AtMost {
        fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
            metadata.target() == PLUGIN_LOG_TARGET && *metadata.level() <= self.0
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, _: &tracing::Event<'_>) {}
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    #[test]
    fn only_levels_a_subscriber_records_are_formatted() {
        let levels = [
            Level::Trace,
            Level::Debug,
            Level::Info,
            Level::Warn,
            Level::Error,
        ];
        let recorded_at =
            |max| tracing::subscriber::with_default(AtMost(max), || levels.map(recorded));
        assert_eq!(
            recorded_at(tracing::Level::INFO),
            [false, false, true, true, true]
        );
        assert_eq!(recorded_at(tracing::Level::TRACE), [true; 5]);
        let none =
            tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::new(), || {
                levels.map(recorded)
            });
        assert_eq!(none, [false; 5]);
    }

    #[test]
    fn a_plugin_logs_its_burst_then_its_rate_and_drops_are_reported_once_a_second() {
        let throttle = Throttle::default();
        let start = Instant::now();
        let passed = (0..1500).filter(|_| throttle.admit(start).0).count();
        assert_eq!(passed, BURST as usize);
        // The first drop was reported at once; later ones wait for the next second.
        let (ok, report) = throttle.admit(start);
        assert!(!ok && report.is_none());
        // Half a second refills 100 lines.
        let later = start + Duration::from_millis(500);
        let passed = (0..300).filter(|_| throttle.admit(later).0).count();
        assert_eq!(passed, 100);
        // A second after the first report, the next drop reports every line dropped since.
        let second = start + Duration::from_millis(1000);
        let passed = (0..100).filter(|_| throttle.admit(second).0).count();
        assert_eq!(passed, 100, "another half second's refill");
        let (ok, report) = throttle.admit(second);
        assert!(!ok);
        assert_eq!(report, Some(499 + 1 + 200 + 1));
    }
}
