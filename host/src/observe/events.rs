//! Kubernetes Events about reconciled objects and about the host itself, recorded as
//! kube-runtime's `Recorder` and client-go's events/v1 recorder record them: events.k8s.io/v1
//! objects named `<object>.<hex nanoseconds>`, with `reportingController`/`reportingInstance`,
//! and **series**: the same event again (same object, type, reason and action, from the same
//! controller) within six minutes of the last one patches the first one's `series` (`count`,
//! `lastObservedTime`) instead of creating another object, so a plugin that warns on every
//! retry cannot flood etcd.
//!
//! Why not kube-runtime's `Recorder`, which the host used until the 100,000-VM benchmark
//! (`cargo bench --bench convergence`, `convergence(vm, 100000 VMs)`): every `publish` sweeps its
//! whole cache, each event of the last six minutes, for expired entries, and the cache keeps a
//! whole Event per series. With one event per object that is quadratic: converging 100,000 VMs
//! the host spent about 200 CPU-s in that sweep (as did the plain kube-runtime controller beside
//! it), and held a full Event per VM. Here a series keeps only what its next request needs (the
//! event's name and namespace, its count, when it was last seen), expired series are swept at
//! most once a minute, and a repeat sends only the new `series`, as client-go's
//! `tools/events` does (kube-runtime re-sends the whole event).
//!
//! Events are best effort, as in kube-runtime and client-go: one the server refuses is logged
//! with the server's message and counted (`wasmctrl_events_failed_total{controller}`), and never
//! fails the reconcile that emitted it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Resource;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::observe::metrics::Metrics;
use wasmctrl_core::sync::lock;
use wasmctrl_core::validation::EVENT_NOTE_MAX;

/// Who reports the host's own events (plugins loaded or refused, on the host's Pod).
pub const HOST_CONTROLLER: &str = "wasmctrl";

/// How long after its last occurrence an event still counts as the same series: kube-runtime's
/// and client-go's six minutes.
const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// How often, at most, expired series are dropped (on the next event after this long).
const SWEEP_EVERY: SignedDuration = SignedDuration::from_mins(1);

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

/// What makes two events one series: kube-runtime's key (the reporting instance is the host's
/// own, the same for all).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    controller: String,
    warning: bool,
    reason: String,
    action: String,
    /// The object: apiVersion, kind, namespace, name, uid.
    regarding: [Option<String>; 5],
}

/// A series' first event (by name) and its latest count.
#[derive(Debug, Clone)]
struct Seen {
    namespace: String,
    name: String,
    count: i32,
    last: Timestamp,
}

#[derive(Debug)]
struct Series {
    by_key: HashMap<SeriesKey, Seen>,
    swept: Timestamp,
}

/// The Events of every reporting controller (`wasmctrl/<plugin>`, or [`HOST_CONTROLLER`]),
/// each with its own series.
pub struct Recorders {
    instance: String,
    series: Mutex<Series>,
    metrics: Option<Arc<Metrics>>,
}

/// `note` cut to at most `max` bytes on a character boundary (the server counts bytes).
fn cut(note: &str, max: usize) -> &str {
    &note[..note.floor_char_boundary(max)]
}

impl Recorders {
    /// Recorders reporting as `instance` (the host's Pod name).
    pub fn new(instance: &str) -> Self {
        Self {
            // The server allows 128 characters; a Pod name has at most 63, a hostname 64.
            instance: cut(instance, wasmctrl_core::validation::EVENT_INSTANCE_MAX).to_owned(),
            series: Mutex::new(Series {
                by_key: HashMap::new(),
                swept: Timestamp::now(),
            }),
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

    /// Forgets a controller's series (its plugin is gone or replaced).
    pub fn forget(&self, controller: &str) {
        lock(&self.series)
            .by_key
            .retain(|key, _| key.controller != controller);
    }

    /// Series being remembered, all controllers together.
    pub fn series(&self) -> usize {
        lock(&self.series).by_key.len()
    }

    /// Records `note` about `regarding` for `controller`, sent with `client` (the host's, or
    /// the account its plugin acts as); `metric` names the controller in
    /// `wasmctrl_events_failed_total`. Returns whether the server took it; a refusal is logged
    /// and counted, never returned.
    pub async fn record(
        &self,
        client: &kube::Client,
        controller: &str,
        metric: &str,
        regarding: &ObjectReference,
        note: &Note<'_>,
    ) -> bool {
        let key = SeriesKey {
            controller: controller.to_owned(),
            warning: note.warning,
            reason: note.reason.to_owned(),
            action: note.action.to_owned(),
            regarding: [
                regarding.api_version.clone(),
                regarding.kind.clone(),
                regarding.namespace.clone(),
                regarding.name.clone(),
                regarding.uid.clone(),
            ],
        };
        let now = Timestamp::now();
        let result = match self.seen(&key, now) {
            Some(mut seen) => {
                seen.count = seen.count.saturating_add(1);
                seen.last = now;
                match self.repeat(client, &seen).await {
                    Ok(()) => Ok(seen),
                    // The first event is gone from the server (its TTL, or someone deleted
                    // it): start the series again, as client-go does.
                    Err(kube::Error::Api(status)) if status.is_not_found() => {
                        let event = self.event(controller, regarding, note, now);
                        self.create(client, event, now).await
                    }
                    Err(e) => Err(e),
                }
            }
            None => {
                let event = self.event(controller, regarding, note, now);
                self.create(client, event, now).await
            }
        };
        match result {
            Ok(seen) => {
                lock(&self.series).by_key.insert(key, seen);
                true
            }
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

    /// The live series `key` belongs to, if any; drops expired series first when the last
    /// sweep is a minute old.
    fn seen(&self, key: &SeriesKey, now: Timestamp) -> Option<Seen> {
        let mut series = lock(&self.series);
        if series.swept + SWEEP_EVERY <= now {
            series.by_key.retain(|_, seen| seen.last + SERIES_TTL > now);
            series.swept = now;
        }
        series
            .by_key
            .get(key)
            .filter(|seen| seen.last + SERIES_TTL > now)
            .cloned()
    }

    /// A new event, as kube-runtime's `Recorder` makes one.
    fn event(
        &self,
        controller: &str,
        regarding: &ObjectReference,
        note: &Note<'_>,
        now: Timestamp,
    ) -> Event {
        Event {
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(format!(
                    "{}.{:x}",
                    regarding.name.as_deref().unwrap_or(controller),
                    now.as_nanosecond()
                )),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(if note.warning { "Warning" } else { "Normal" }.into()),
            reason: Some(note.reason.to_owned()),
            action: Some(note.action.to_owned()),
            note: Some(cut(note.note, EVENT_NOTE_MAX).to_owned()),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(controller.to_owned()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        }
    }

    /// Sends the request `build` makes with `client` against the events of `namespace`, and
    /// reads nothing of the response but its status: the server answers with the whole Event,
    /// and decoding it into k8s-openapi's types took about 3% of the controller's CPU on the
    /// VirtualMachine benchmark (`cargo bench --bench convergence`, `perf`), for a name the host
    /// chose itself.
    async fn send(
        client: &kube::Client,
        namespace: Option<&str>,
        verb: &'static str,
        build: impl FnOnce(
            &kube::core::Request,
        ) -> Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<(), kube::Error> {
        // kube-runtime's choice for a cluster-scoped object's events.
        let url = Event::url_path(&(), Some(namespace.unwrap_or("default")));
        let mut request =
            build(&kube::core::Request::new(url)).map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert(verb);
        client.request_text(request).await.map(drop)
    }

    async fn create(
        &self,
        client: &kube::Client,
        event: Event,
        now: Timestamp,
    ) -> Result<Seen, kube::Error> {
        let body = serde_json::to_vec(&event).map_err(kube::Error::SerdeError)?;
        let namespace = event.metadata.namespace;
        Self::send(client, namespace.as_deref(), "create", |r| {
            r.create(&PostParams::default(), body)
        })
        .await?;
        Ok(Seen {
            namespace: namespace.unwrap_or_else(|| "default".into()),
            // Named, not generated: the server keeps the name.
            name: event.metadata.name.unwrap_or_default(),
            count: 1,
            last: now,
        })
    }

    /// Sends only the series, as client-go does for a repeat.
    async fn repeat(&self, client: &kube::Client, seen: &Seen) -> Result<(), kube::Error> {
        let series = EventSeries {
            count: seen.count,
            last_observed_time: MicroTime(seen.last),
        };
        let patch = Patch::Merge(json!({ "series": series }));
        Self::send(client, Some(&seen.namespace), "patch", |r| {
            r.patch(&seen.name, &PatchParams::default(), &patch)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> SeriesKey {
        SeriesKey {
            controller: "wasmctrl/p".into(),
            warning: true,
            reason: "NotReady".into(),
            action: "Reconcile".into(),
            regarding: [None, None, Some("default".into()), Some(name.into()), None],
        }
    }

    #[test]
    fn series_expire_six_minutes_after_their_last_event_and_are_swept_once_a_minute() {
        let recorders = Recorders::new("host-0");
        let start = Timestamp::now();
        let seen = |name: &str, last: Timestamp| Seen {
            namespace: "default".into(),
            name: name.into(),
            count: 1,
            last,
        };
        {
            let mut series = lock(&recorders.series);
            series.swept = start;
            series.by_key.insert(key("old"), seen("old.1", start));
            let later = start + SignedDuration::from_mins(5);
            series.by_key.insert(key("new"), seen("new.1", later));
        }
        let at = |mins: i64, secs: i64| {
            start + SignedDuration::from_mins(mins) + SignedDuration::from_secs(secs)
        };
        // Within six minutes of its last event a series goes on (this lookup also sweeps,
        // a minute or more after the last sweep, and both series are live).
        assert_eq!(
            recorders.seen(&key("old"), at(5, 59)).unwrap().name,
            "old.1"
        );
        assert_eq!(recorders.series(), 2);
        // After, it is over (a new event starts a new series), though not swept yet...
        assert!(recorders.seen(&key("old"), at(6, 0)).is_none());
        assert_eq!(recorders.series(), 2);
        // ...until a minute after that sweep: then only the live one is kept.
        assert_eq!(
            recorders.seen(&key("new"), at(6, 58)).unwrap().name,
            "new.1"
        );
        assert_eq!(recorders.series(), 2);
        assert_eq!(
            recorders.seen(&key("new"), at(6, 59)).unwrap().name,
            "new.1"
        );
        assert_eq!(recorders.series(), 1);
        recorders.forget("wasmctrl/other");
        assert_eq!(recorders.series(), 1);
        recorders.forget("wasmctrl/p");
        assert_eq!(recorders.series(), 0);
    }

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
