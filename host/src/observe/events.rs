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
use crate::requests::{BuildRequest, send_text};
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
/// own, the same for all): the controller, reason, action, type and the object's apiVersion,
/// kind, namespace, name and uid, packed into one allocation. Each field is written with its
/// length (and whether it is there at all), so no two different keys pack alike.
///
/// One allocation, not eight strings (and two more for the first event's name): the host keeps
/// a series per object it recorded an event about for six minutes, and converging 100,000
/// VirtualMachines the host held about 400 bytes per object more with them (resident added
/// +280.6 against +240.9 MiB, `cargo bench --bench convergence`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey(Box<[u8]>);

impl SeriesKey {
    fn new(controller: &str, note: &Note<'_>, regarding: &ObjectReference) -> Self {
        let fields = [
            Some(controller),
            Some(note.reason),
            Some(note.action),
            regarding.api_version.as_deref(),
            regarding.kind.as_deref(),
            regarding.namespace.as_deref(),
            regarding.name.as_deref(),
            regarding.uid.as_deref(),
        ];
        let size = fields
            .iter()
            .map(|f| 5 + f.map_or(0, str::len))
            .sum::<usize>()
            + 1;
        let mut packed = Vec::with_capacity(size);
        for field in fields {
            match field {
                None => packed.push(0),
                Some(text) => {
                    packed.push(1);
                    // Strings longer than 4 GiB do not reach an event.
                    let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
                    packed.extend_from_slice(&len.to_le_bytes());
                    packed.extend_from_slice(text.as_bytes());
                }
            }
        }
        packed.push(u8::from(note.warning));
        Self(packed.into_boxed_slice())
    }

    /// Whether the series is `controller`'s (its first field).
    fn of(&self, controller: &str) -> bool {
        let expected = u32::try_from(controller.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes();
        self.0.get(1..5) == Some(&expected[..])
            && self.0.get(5..5 + controller.len()) == Some(controller.as_bytes())
    }
}

/// A series: when its first event was created (which names it, with the object's name, as
/// [`event_name`] does), how many events it counts and the last one's time.
#[derive(Debug, Clone, Copy)]
struct Seen {
    first: Timestamp,
    count: i32,
    last: Timestamp,
}

/// The name of the event first recorded at `at` about `regarding` (reported by `controller`):
/// `<object>.<hex nanoseconds>`, as kube-runtime and client-go name events.
fn event_name(regarding: &ObjectReference, controller: &str, at: Timestamp) -> String {
    format!(
        "{}.{:x}",
        regarding.name.as_deref().unwrap_or(controller),
        at.as_nanosecond()
    )
}

/// The namespace of the events about `regarding`: its own, or kube-runtime's choice for a
/// cluster-scoped object, `default`.
fn event_namespace(regarding: &ObjectReference) -> &str {
    regarding.namespace.as_deref().unwrap_or("default")
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
            .retain(|key, _| !key.of(controller));
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
        let key = SeriesKey::new(controller, note, regarding);
        let now = Timestamp::now();
        let result = match self.seen(&key, now) {
            Some(mut seen) => {
                seen.count = seen.count.saturating_add(1);
                seen.last = now;
                match self.repeat(client, controller, regarding, &seen).await {
                    Ok(()) => Ok(seen),
                    // The first event is gone from the server (its TTL, or someone deleted
                    // it): start the series again, as client-go does.
                    Err(kube::Error::Api(status)) if status.is_not_found() => {
                        let event = self.event(controller, regarding, note, now);
                        self.create(client, event_namespace(regarding), event, now)
                            .await
                    }
                    Err(e) => Err(e),
                }
            }
            None => {
                let event = self.event(controller, regarding, note, now);
                self.create(client, event_namespace(regarding), event, now)
                    .await
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
            .copied()
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
                name: Some(event_name(regarding, controller, now)),
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
        namespace: &str,
        verb: &'static str,
        build: impl BuildRequest,
    ) -> Result<(), kube::Error> {
        let url = Event::url_path(&(), Some(namespace));
        send_text(client, &url, verb, build).await.map(drop)
    }

    async fn create(
        &self,
        client: &kube::Client,
        namespace: &str,
        event: Event,
        now: Timestamp,
    ) -> Result<Seen, kube::Error> {
        let body = serde_json::to_vec(&event).map_err(kube::Error::SerdeError)?;
        Self::send(client, namespace, "create", |r| {
            r.create(&PostParams::default(), body)
        })
        .await?;
        // Named, not generated: the server keeps the name, which `now` makes again.
        Ok(Seen {
            first: now,
            count: 1,
            last: now,
        })
    }

    /// Sends only the series, as client-go does for a repeat.
    async fn repeat(
        &self,
        client: &kube::Client,
        controller: &str,
        regarding: &ObjectReference,
        seen: &Seen,
    ) -> Result<(), kube::Error> {
        let series = EventSeries {
            count: seen.count,
            last_observed_time: MicroTime(seen.last),
        };
        let patch = Patch::Merge(json!({ "series": series }));
        let name = event_name(regarding, controller, seen.first);
        Self::send(client, event_namespace(regarding), "patch", |r| {
            r.patch(&name, &PatchParams::default(), &patch)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note<'a>(reason: &'a str, action: &'a str) -> Note<'a> {
        Note {
            warning: true,
            reason,
            note: "",
            action,
        }
    }

    fn object(namespace: Option<&str>, name: &str) -> ObjectReference {
        ObjectReference {
            namespace: namespace.map(Into::into),
            name: Some(name.into()),
            ..ObjectReference::default()
        }
    }

    fn key(name: &str) -> SeriesKey {
        SeriesKey::new(
            "wasmctrl/p",
            &note("NotReady", "Reconcile"),
            &object(Some("default"), name),
        )
    }

    #[test]
    fn series_keys_differ_whenever_a_field_does() {
        let reconcile = note("NotReady", "Reconcile");
        let same = |a: SeriesKey, b: SeriesKey| a == b;
        assert!(same(key("a"), key("a")));
        // Where one field ends and the next begins is part of the key.
        assert!(!same(
            SeriesKey::new("c", &note("a\0b", "c"), &object(None, "x")),
            SeriesKey::new("c", &note("a", "b\0c"), &object(None, "x")),
        ));
        // An absent field is not an empty one.
        assert!(!same(
            SeriesKey::new("c", &reconcile, &object(None, "x")),
            SeriesKey::new("c", &reconcile, &object(Some(""), "x")),
        ));
        assert!(!same(
            key("a"),
            SeriesKey::new(
                "wasmctrl/p",
                &Note {
                    warning: false,
                    ..reconcile.clone()
                },
                &object(Some("default"), "a")
            ),
        ));
        assert!(key("a").of("wasmctrl/p"));
        assert!(!key("a").of("wasmctrl/pp"));
        assert!(!key("a").of("wasmctrl/"));
    }

    #[test]
    fn series_expire_six_minutes_after_their_last_event_and_are_swept_once_a_minute() {
        let recorders = Recorders::new("host-0");
        let start = Timestamp::now();
        let later = start + SignedDuration::from_mins(5);
        let seen = |last: Timestamp| Seen {
            first: last,
            count: 1,
            last,
        };
        {
            let mut series = lock(&recorders.series);
            series.swept = start;
            series.by_key.insert(key("old"), seen(start));
            series.by_key.insert(key("new"), seen(later));
        }
        let at = |mins: i64, secs: i64| {
            start + SignedDuration::from_mins(mins) + SignedDuration::from_secs(secs)
        };
        // Within six minutes of its last event a series goes on (this lookup also sweeps,
        // a minute or more after the last sweep, and both series are live).
        assert_eq!(recorders.seen(&key("old"), at(5, 59)).unwrap().first, start);
        assert_eq!(recorders.series(), 2);
        // After, it is over (a new event starts a new series), though not swept yet...
        assert!(recorders.seen(&key("old"), at(6, 0)).is_none());
        assert_eq!(recorders.series(), 2);
        // ...until a minute after that sweep: then only the live one is kept.
        assert_eq!(recorders.seen(&key("new"), at(6, 58)).unwrap().first, later);
        assert_eq!(recorders.series(), 2);
        assert_eq!(recorders.seen(&key("new"), at(6, 59)).unwrap().first, later);
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
