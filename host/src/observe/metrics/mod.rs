//! Prometheus metrics with controller-runtime's and client-go's names and labels, so existing
//! dashboards work: `controller_runtime_*{controller=<plugin>}`, `workqueue_*{name=<plugin>}`,
//! plus wasmctrl's own `wasmctrl_*`. Built on the `prometheus-client` crate.
//!
//! Counters that the controller already keeps (reconcile outcomes, queue adds and retries) and
//! gauges (depth, workers, cached objects) are read from their owners when scraped (see
//! `controller::Manager::refresh_metrics`); histograms are observed as things happen.
//!
//! `endpoint` serves them at `/metrics`: over HTTPS to scrapers the API server vouches for
//! ([`auth`]), as kubebuilder's scaffold does, or over plain HTTP.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub mod auth;
mod endpoint;
mod rest;

pub use endpoint::{Secure, serve};
pub use rest::{RestClient, RestClientLayer};

/// `controller=<plugin>`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    /// The plugin's name.
    pub controller: String,
}

/// `controller`, `result` (success, error, requeue, requeue_after).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// The plugin's name.
    pub controller: String,
    /// How reconciles ended.
    pub result: String,
}

/// `name=<plugin>`, as client-go's workqueue metrics label their queue.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabel {
    /// The plugin's name.
    pub name: String,
}

/// A loaded plugin version.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// Its name.
    pub name: String,
    /// Its version string.
    pub version: String,
    /// sha256 of its component.
    pub digest: String,
}

/// `result` of loading a plugin file: `loaded` or `failed`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LoadLabel {
    /// `loaded` or `failed`.
    pub result: String,
}

/// `controller`, `kind` of sandbox failure.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// The plugin's name.
    pub controller: String,
    /// timeout, memory, trap, result_too_large, undeclared, plugin_error, malformed_action,
    /// sandbox.
    pub kind: String,
}

/// `database`, `outcome` (`ok`, `error`, `transient_error`) of SQL calls.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SqlLabels {
    /// The database's name (`sql:<name>`).
    pub database: String,
    /// How the call ended.
    pub outcome: String,
}

/// `name` of a leader-election Lease.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabel {
    /// The Lease's name (`--leader-election-id`).
    pub name: String,
}

/// `kind` of cached objects (`group/version/Kind`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// The kind.
    pub kind: String,
}

fn seconds_histogram() -> Histogram {
    // 1 ms .. ~65 s, doubling: reconciles and queue waits alike.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn fast_histogram() -> Histogram {
    // 5 µs .. ~2.6 s: one sandboxed call.
    Histogram::new(exponential_buckets(0.000_005, 2.0, 20))
}

/// Every metric the host exports, registered once.
pub struct Metrics {
    registry: Registry,
    pub(crate) reconcile_total: Family<ResultLabels, Counter>,
    pub(crate) reconcile_errors: Family<ControllerLabel, Counter>,
    pub(crate) terminal_errors: Family<ControllerLabel, Counter>,
    pub(crate) held: Family<ControllerLabel, Counter>,
    reconcile_time: Family<ControllerLabel, Histogram, fn() -> Histogram>,
    pub(crate) active_workers: Family<ControllerLabel, Gauge>,
    pub(crate) max_concurrent: Family<ControllerLabel, Gauge>,
    pub(crate) depth: Family<QueueLabel, Gauge>,
    pub(crate) adds: Family<QueueLabel, Counter>,
    pub(crate) retries: Family<QueueLabel, Counter>,
    queue_duration: Family<QueueLabel, Histogram, fn() -> Histogram>,
    work_duration: Family<QueueLabel, Histogram, fn() -> Histogram>,
    pub(crate) unfinished: Family<QueueLabel, Gauge<f64, AtomicU64>>,
    pub(crate) longest: Family<QueueLabel, Gauge<f64, AtomicU64>>,
    pub(crate) plugin_info: Family<PluginLabels, Gauge>,
    loads: Family<LoadLabel, Counter>,
    failures: Family<FailureLabels, Counter>,
    events_failed: Family<ControllerLabel, Counter>,
    missing_permissions: Family<ControllerLabel, Gauge>,
    sandbox_call: Family<ControllerLabel, Histogram, fn() -> Histogram>,
    pub(crate) guest_memory: Family<ControllerLabel, Gauge>,
    pub(crate) cached: Family<KindLabel, Gauge>,
    sql_calls: Family<SqlLabels, Counter>,
    rest_requests: Family<rest::RequestLabels, Counter>,
    rest_latency: Family<rest::LatencyLabels, Histogram, fn() -> Histogram>,
    leader: Family<LeaseLabel, Gauge>,
    pub(crate) shard_members: Gauge,
    pub(crate) shard_owned_keys: Family<ControllerLabel, Gauge>,
    pub(crate) shard_server_side: Gauge,
    pub(crate) webhook_requests: Family<WebhookCodeLabels, Counter>,
    webhook_latency: Family<WebhookLabel, Histogram, fn() -> Histogram>,
    pub(crate) webhook_in_flight: Family<WebhookLabel, Gauge>,
}

/// `webhook=<path>` (controller-runtime's label: the webhook's path).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabel {
    /// The path served (`/validate-example-com-v1-thing`, `/convert`).
    pub webhook: String,
}

/// `webhook`, `code` (the HTTP status answered).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookCodeLabels {
    /// The path served.
    pub webhook: String,
    /// The HTTP status code.
    pub code: String,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every family, registered under its exported name.
    pub fn new() -> Self {
        let mut m = Self {
            registry: Registry::default(),
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            terminal_errors: Family::default(),
            held: Family::default(),
            reconcile_time: Family::new_with_constructor(seconds_histogram),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
            depth: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            queue_duration: Family::new_with_constructor(seconds_histogram),
            work_duration: Family::new_with_constructor(seconds_histogram),
            unfinished: Family::default(),
            longest: Family::default(),
            plugin_info: Family::default(),
            loads: Family::default(),
            failures: Family::default(),
            events_failed: Family::default(),
            missing_permissions: Family::default(),
            sandbox_call: Family::new_with_constructor(fast_histogram),
            guest_memory: Family::default(),
            cached: Family::default(),
            sql_calls: Family::default(),
            rest_requests: Family::default(),
            rest_latency: Family::new_with_constructor(seconds_histogram),
            leader: Family::default(),
            shard_members: Gauge::default(),
            shard_owned_keys: Family::default(),
            shard_server_side: Gauge::default(),
            webhook_requests: Family::default(),
            webhook_latency: Family::new_with_constructor(seconds_histogram),
            webhook_in_flight: Family::default(),
        };
        m.register_controller_runtime();
        m.register_workqueue();
        m.register_clients();
        m.register_wasmctrl();
        m.register_replicas();
        m
    }

    /// Registers controller-runtime's per-controller series (`controller_runtime_*`).
    fn register_controller_runtime(&mut self) {
        let r = &mut self.registry;
        r.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            self.reconcile_total.clone(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.reconcile_errors.clone(),
        );
        r.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            self.terminal_errors.clone(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            self.reconcile_time.clone(),
        );
        r.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            self.active_workers.clone(),
        );
        r.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            self.max_concurrent.clone(),
        );
        r.register(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by HTTP status code.",
            self.webhook_requests.clone(),
        );
        r.register(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            self.webhook_latency.clone(),
        );
        r.register(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            self.webhook_in_flight.clone(),
        );
    }

    /// Records a webhook request's answer and how long it took.
    pub fn webhook_answered(&self, webhook: &str, code: u16, took: std::time::Duration) {
        let label = WebhookLabel {
            webhook: webhook.to_string(),
        };
        self.webhook_latency
            .get_or_create(&label)
            .observe(took.as_secs_f64());
        self.webhook_requests
            .get_or_create(&WebhookCodeLabels {
                webhook: webhook.to_string(),
                code: code.to_string(),
            })
            .inc();
    }

    /// Registers client-go's workqueue series (`workqueue_*`), per controller's queue.
    fn register_workqueue(&mut self) {
        let r = &mut self.registry;
        r.register(
            "workqueue_depth",
            "Current depth of workqueue",
            self.depth.clone(),
        );
        r.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            self.adds.clone(),
        );
        r.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            self.retries.clone(),
        );
        r.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            self.queue_duration.clone(),
        );
        r.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            self.work_duration.clone(),
        );
        r.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
            self.unfinished.clone(),
        );
        r.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            self.longest.clone(),
        );
    }

    /// Registers client-go's REST client and leader-election series.
    fn register_clients(&mut self) {
        let r = &mut self.registry;
        r.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host",
            self.rest_requests.clone(),
        );
        r.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds, broken down by verb and host",
            self.rest_latency.clone(),
        );
        r.register(
            "leader_election_master_status",
            "Whether this replica leads (1) or stands by (0), by Lease name",
            self.leader.clone(),
        );
    }

    /// Registers the host's own series: plugins, the sandbox, Events, the caches, `sql`.
    fn register_wasmctrl(&mut self) {
        let r = &mut self.registry;
        r.register(
            "wasmctrl_sql_calls",
            "Calls of the sql capability by database and outcome",
            self.sql_calls.clone(),
        );
        r.register(
            "wasmctrl_plugin_info",
            "A loaded plugin version (always 1)",
            self.plugin_info.clone(),
        );
        r.register(
            "wasmctrl_plugin_loads",
            "Plugin files loaded or failed to load",
            self.loads.clone(),
        );
        r.register(
            "wasmctrl_plugin_missing_permissions",
            "Requests a plugin implies that the host's identity may not make (the permission preflight)",
            self.missing_permissions.clone(),
        );
        r.register(
            "wasmctrl_sandbox_failures",
            "Reconciles the sandbox ended in failure, by kind",
            self.failures.clone(),
        );
        r.register(
            "wasmctrl_events_failed",
            "Events the API server refused (recorded best effort: the reconcile stands)",
            self.events_failed.clone(),
        );
        r.register(
            "wasmctrl_sandbox_call_seconds",
            "Time of one sandboxed call: fresh instance, reconcile and checks",
            self.sandbox_call.clone(),
        );
        r.register(
            "wasmctrl_guest_memory_peak_bytes",
            "Largest linear memory a plugin's instance has grown to",
            self.guest_memory.clone(),
        );
        r.register(
            "wasmctrl_reconciles_held",
            "Times a key was held back because the caches did not show its last reconcile's writes yet",
            self.held.clone(),
        );
        r.register(
            "wasmctrl_cached_objects",
            "Objects held in the informer caches, by kind",
            self.cached.clone(),
        );
    }

    /// Registers the sharding series (`wasmctrl_shard_*`).
    fn register_replicas(&mut self) {
        let r = &mut self.registry;
        r.register(
            "wasmctrl_shard_members",
            "Live members of this replica's shard group (--sharding)",
            self.shard_members.clone(),
        );
        r.register(
            "wasmctrl_shard_owned_keys",
            "Cached keys of the reconciled kind in the slots this replica reconciles now",
            self.shard_owned_keys.clone(),
        );
        r.register(
            "wasmctrl_shard_server_side",
            "Whether the API server applies shardSelector (1) or the host filters its caches itself (0)",
            self.shard_server_side.clone(),
        );
    }

    /// Records one reconcile of `controller` that took `took`.
    pub fn reconciled(&self, controller: &str, took: Duration) {
        self.reconcile_time
            .get_or_create(&label(controller))
            .observe(took.as_secs_f64());
    }

    /// Records one sandboxed call of `controller` that took `took`.
    pub fn sandbox_call(&self, controller: &str, took: Duration) {
        self.sandbox_call
            .get_or_create(&label(controller))
            .observe(took.as_secs_f64());
    }

    /// Records whether this replica leads for the Lease `name` (client-go's
    /// `leader_election_master_status`).
    pub fn leading(&self, name: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaseLabel { name: name.into() })
            .set(i64::from(leading));
    }

    /// Records a failure the sandbox reported for `controller`.
    pub fn sandbox_failure(&self, controller: &str, kind: &str) {
        self.failures
            .get_or_create(&FailureLabels {
                controller: controller.into(),
                kind: kind.into(),
            })
            .inc();
    }

    /// Records an Event of `controller` the API server refused.
    pub fn event_failed(&self, controller: &str) {
        self.events_failed.get_or_create(&label(controller)).inc();
    }

    /// Records a plugin file that loaded (`true`) or failed to.
    /// Records what the permission preflight found missing for `plugin` (0: nothing).
    pub fn missing_permissions(&self, plugin: &str, missing: usize) {
        (self.missing_permissions.get_or_create(&label(plugin))).set(missing as i64);
    }

    /// Counts a plugin load or failed load.
    pub fn plugin_load(&self, loaded: bool) {
        let result = if loaded { "loaded" } else { "failed" };
        self.loads
            .get_or_create(&LoadLabel {
                result: result.into(),
            })
            .inc();
    }

    /// Sets the SQL call counters from the databases' own tallies.
    pub fn sql_calls(&self, calls: Vec<(String, &'static str, u64)>) {
        for (database, outcome, n) in calls {
            let labels = SqlLabels {
                database,
                outcome: outcome.into(),
            };
            set_counter(&self.sql_calls.get_or_create(&labels), n);
        }
    }

    /// A layer for the host's Kubernetes client that feeds the `rest_client_*` metrics;
    /// `host` names the API server (`host:port`).
    pub fn rest_client_layer(&self, host: &str) -> RestClientLayer {
        RestClientLayer {
            requests: self.rest_requests.clone(),
            latency: self.rest_latency.clone(),
            host: host.to_string(),
        }
    }

    /// The queue observer that feeds `controller`'s workqueue histograms.
    pub fn queue_observer(&self, controller: &str) -> QueueObserver {
        let name = QueueLabel {
            name: controller.into(),
        };
        QueueObserver {
            queue_duration: self.queue_duration.get_or_create_owned(&name),
            work_duration: self.work_duration.get_or_create_owned(&name),
        }
    }

    /// The registry in the Prometheus text format (0.0.4), or OpenMetrics when asked.
    pub fn encode(&self, openmetrics: bool) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        if openmetrics {
            out
        } else {
            prometheus_text(&out)
        }
    }
}

fn label(controller: &str) -> ControllerLabel {
    ControllerLabel {
        controller: controller.into(),
    }
}

/// Sets a counter read from its owner (the queue, the controller's tallies).
pub(crate) fn set_counter(counter: &Counter, value: u64) {
    counter.inner().store(value, Ordering::Relaxed);
}

/// A workqueue's histograms of hand-out and completion times (fed by the queue, through its
/// `Observer`).
pub struct QueueObserver {
    pub(crate) queue_duration: Histogram,
    pub(crate) work_duration: Histogram,
}

/// OpenMetrics text as the Prometheus text format: a counter family is named with its `_total`
/// suffix, and there is no `# EOF`. (prometheus-client writes only OpenMetrics; Prometheus and
/// most scrapers read both, but `promtool` and older parsers want the classic form.)
pub fn prometheus_text(openmetrics: &str) -> String {
    let mut counters = std::collections::HashSet::new();
    for line in openmetrics.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.strip_suffix(" counter"))
        {
            counters.insert(name.to_string());
        }
    }
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let renamed = ["# TYPE ", "# HELP "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match renamed {
            Some(line) => out.push_str(&line),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_read_as_prometheus_text_with_their_total_suffix() {
        let m = Metrics::new();
        m.plugin_load(true);
        m.sandbox_failure("p", "timeout");
        m.reconciled("p", Duration::from_millis(3));
        let text = m.encode(false);
        assert!(
            text.contains("# TYPE wasmctrl_plugin_loads_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("wasmctrl_plugin_loads_total{result=\"loaded\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("wasmctrl_sandbox_failures_total{controller=\"p\",kind=\"timeout\"} 1\n")
        );
        assert!(text.contains("# TYPE controller_runtime_reconcile_time_seconds histogram\n"));
        assert!(!text.contains("# EOF"));
        let open = m.encode(true);
        assert!(
            open.contains("# TYPE wasmctrl_plugin_loads counter\n") && open.ends_with("# EOF\n")
        );
    }
}
