//! Kubernetes Events about reconciled objects and about the host itself, recorded as
//! kube-runtime's [`Recorder`] records them: events.k8s.io/v1 objects with valid names,
//! `reportingController`/`reportingInstance`, and **series**: the same event again (same
//! object, type, reason and action) within kube-runtime's six-minute window updates the first
//! one's `series.count` instead of creating another object, so a plugin that warns on every
//! retry cannot flood etcd.
//!
//! Events are best effort, as in kube-runtime and client-go: one the server refuses is logged
//! with the server's message and counted (`wasmctrl_events_failed_total{controller}`), and never
//! fails the reconcile that emitted it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::metrics::Metrics;
use wasmctrl_scope::validation::EVENT_NOTE_MAX;

/// Who reports the host's own events (plugins loaded or refused, on the host's Pod).
pub const HOST_CONTROLLER: &str = "wasmctrl";

/// One event to record.
#[derive(Debug, Clone)]
pub struct Note<'a> {
    /// `Normal` or `Warning`.
    pub warning: bool,
    /// Why, in PascalCase (`Active`, `Forbidden`).
    pub reason: &'a str,
    /// What happened, for people; cut to the server's 1 KiB.
    pub note: &'a str,
    /// What was done (`Reconcile`, `Load`).
    pub action: &'a str,
}

/// One kube-runtime [`Recorder`] per reporting controller (`wasmctrl/<plugin>`, or
/// [`HOST_CONTROLLER`]), so each keeps its own series.
pub struct Recorders {
    client: kube::Client,
    instance: String,
    recorders: Mutex<HashMap<String, Recorder>>,
    metrics: Option<Arc<Metrics>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A map of recorders: a panic mid-insert loses at worst one series.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `note` cut to at most `max` bytes on a character boundary (the server counts bytes).
fn cut(note: &str, max: usize) -> &str {
    &note[..note.floor_char_boundary(max)]
}

impl Recorders {
    /// Recorders sending with `client`, reporting as `instance` (the host's Pod name).
    pub fn new(client: kube::Client, instance: &str) -> Self {
        Self {
            client,
            // The server allows 128 characters; a Pod name has at most 63, a hostname 64.
            instance: cut(instance, wasmctrl_scope::validation::EVENT_INSTANCE_MAX).to_owned(),
            recorders: Mutex::new(HashMap::new()),
            metrics: None,
        }
    }

    /// Counts refused events into `metrics`.
    pub fn counted(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The `reportingInstance` events carry.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    fn recorder(&self, controller: &str) -> Recorder {
        lock(&self.recorders)
            .entry(controller.to_owned())
            .or_insert_with(|| {
                let reporter = Reporter {
                    controller: controller.to_owned(),
                    instance: Some(self.instance.clone()),
                };
                Recorder::new(self.client.clone(), reporter)
            })
            .clone()
    }

    /// Forgets a controller's series (its plugin is gone or replaced).
    pub fn forget(&self, controller: &str) {
        lock(&self.recorders).remove(controller);
    }

    /// Records `note` about `regarding` for `controller`; `metric` names the controller in
    /// `wasmctrl_events_failed_total`. Returns whether the server took it; a refusal is logged
    /// and counted, never returned.
    pub async fn record(
        &self,
        controller: &str,
        metric: &str,
        regarding: &ObjectReference,
        note: &Note<'_>,
    ) -> bool {
        let event = Event {
            type_: if note.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: note.reason.to_owned(),
            note: Some(cut(note.note, EVENT_NOTE_MAX).to_owned()),
            action: note.action.to_owned(),
            secondary: None,
        };
        let recorder = self.recorder(controller);
        match recorder.publish(&event, regarding).await {
            Ok(()) => true,
            Err(e) => {
                let message = match &e {
                    kube::Error::Api(status) => status.message.clone(),
                    other => other.to_string(),
                };
                tracing::warn!(
                    controller,
                    object.kind = regarding.kind.as_deref().unwrap_or_default(),
                    object.namespace = regarding.namespace.as_deref().unwrap_or_default(),
                    object.name = regarding.name.as_deref().unwrap_or_default(),
                    event.reason = note.reason,
                    error = %message,
                    "event not recorded"
                );
                if let Some(metrics) = &self.metrics {
                    metrics.event_failed(metric);
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn notes_are_cut_to_the_server_s_byte_limit_on_a_character_boundary() {
        assert_eq!(cut("short", 1024), "short");
        let long = "é".repeat(600); // 1,200 bytes
        let cut = cut(&long, 1024);
        assert_eq!(cut.len(), 1024);
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(super::cut("aé", 2), "a");
    }
}
