//! `tracing` in plugins: events a plugin records with `tracing`'s macros (re-exported as
//! [`crate::tracing`]) go to the host's `log` import, which adds the plugin's name and the key
//! being reconciled and puts them in the host's own log pipeline; under
//! [`crate::testing::Harness`] they are captured for [`Harness::logs`](crate::testing::Harness::logs).
//!
//! ```
//! use wasmctrl_sdk::tracing::{debug, info};
//! # let (replicas, name) = (3, "web");
//! info!(replicas, %name, "scaled");           // fields keep their values' formatting
//! debug!("{} of {} ready", 2, replicas);       // a formatted message
//! ```
//!
//! Written here rather than with `tracing-subscriber`: a plugin needs one event sink and no
//! filtering (the host filters), and every byte of a plugin is compiled and instantiated.
//! Spans are accepted and ignored: the host's reconcile span already names plugin and key.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use crate::context::Level;

/// Where a record goes: level, message and fields.
type Sink = Box<dyn Fn(Level, String, Vec<(String, String)>) + Send + Sync>;

/// A `tracing` subscriber handing every event to a sink.
pub(crate) struct Forward {
    sink: Sink,
}

impl Forward {
    pub(crate) fn new(
        sink: impl Fn(Level, String, Vec<(String, String)>) + Send + Sync + 'static,
    ) -> Self {
        Self {
            sink: Box::new(sink),
        }
    }

    /// Makes this the subscriber of the whole instance (a plugin instance serves one call, so
    /// setting it once per call is setting it once).
    pub(crate) fn install(self) {
        // Already set: an earlier call in the same instance did it.
        let _ = tracing::subscriber::set_global_default(self);
    }
}

impl Subscriber for Forward {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let level = match *event.metadata().level() {
            tracing::Level::TRACE => Level::Trace,
            tracing::Level::DEBUG => Level::Debug,
            tracing::Level::INFO => Level::Info,
            tracing::Level::WARN => Level::Warn,
            tracing::Level::ERROR => Level::Error,
        };
        (self.sink)(level, fields.message, fields.pairs);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// An event's message and its other fields, as text.
#[derive(Default)]
struct Fields {
    message: String,
    pairs: Vec<(String, String)>,
}

impl Fields {
    fn push(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.pairs.push((field.name().to_string(), value));
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, format!("{value:?}"));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn events_reach_the_sink_with_their_fields_as_written() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let forward = Forward::new(move |level, message, fields| {
            sink.lock().unwrap().push((level, message, fields));
        });
        tracing::subscriber::with_default(forward, || {
            let name = "web";
            let _span = tracing::info_span!("ignored", name).entered();
            tracing::info!(replicas = 3, %name, quoted = ?name, "scaled");
            tracing::warn!("{} of {} ready", 2, 3);
        });
        let seen = seen.lock().unwrap();
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            seen[0],
            (
                Level::Info,
                "scaled".to_string(),
                pairs(&[("replicas", "3"), ("name", "web"), ("quoted", "\"web\"")])
            )
        );
        assert_eq!(seen[1], (Level::Warn, "2 of 3 ready".to_string(), vec![]));
    }
}
