//! The server's own `/metrics`: kube-apiserver's main series, with its names, labels, label
//! values and buckets (`endpoints/metrics`, `storage/etcd3/metrics`), as OpenMetrics text
//! (prometheus-client writes no other form; Prometheus reads it).
//!
//! - `apiserver_request_total{verb,dry_run,group,version,resource,subresource,scope,component,code}`
//!   and `apiserver_request_duration_seconds{verb,dry_run,group,version,resource,subresource,scope,component}`:
//!   every resource request that passed authorization, once it is answered (as kube's route
//!   instrumentation; 401/403/405 answered before a route are not counted, as in kube). A watch
//!   is counted and timed when its stream starts, where kube does it when the stream ends.
//! - `apiserver_storage_objects{resource}`: the objects stored per resource, counted at scrape
//!   time (kube polls them every minute).
//! - `etcd_request_duration_seconds{operation,type}`: this server keeps no etcd; these are its
//!   store's operations, timed as kube times its etcd calls: `create`, `update`, `delete` of
//!   every write, `get` and `list` of what requests read. `type` is the group-resource
//!   (`configmaps`, `deployments.apps`), which kube 1.32 puts there too (earlier releases put
//!   the Go type name).

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The `Content-Type` of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// kube's buckets for request and etcd latencies, in seconds.
const LATENCY_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// kube's `validRequestMethods`: other verbs are reported as `other`.
const VERBS: [&str; 14] = [
    "APPLY",
    "CONNECT",
    "CREATE",
    "DELETE",
    "DELETECOLLECTION",
    "GET",
    "LIST",
    "PATCH",
    "POST",
    "PROXY",
    "PUT",
    "UPDATE",
    "WATCH",
    "WATCHLIST",
];

/// What kube labels one resource request with (all but `code`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Request {
    /// `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `APPLY`, `DELETE`, ...
    pub verb: String,
    /// The request's `dryRun` values, sorted and joined (`All`), or `invalid`.
    pub dry_run: String,
    /// API group (`""` for core).
    pub group: String,
    /// Version in the URL.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource, if any.
    pub subresource: String,
    /// `resource` (one object, or a create), `namespace`, or `cluster`.
    pub scope: String,
    /// Always `apiserver`.
    pub component: String,
}

impl Request {
    /// The labels of a request, by kube's rules (`CleanScope`, `CanonicalVerb`, `cleanVerb`,
    /// `cleanDryRun`). `target` is `(group, version, resource, subresource, namespace, name)`;
    /// `query` the raw query string; `content_type` the request's.
    pub fn new(
        method: &str,
        target: [&str; 6],
        query: &str,
        content_type: &str,
        create: bool,
    ) -> Self {
        let [group, version, resource, subresource, namespace, name] = target;
        let scope = if !name.is_empty() || create {
            "resource"
        } else if !namespace.is_empty() {
            "namespace"
        } else {
            "cluster"
        };
        Self {
            verb: verb(method, scope, query, content_type),
            dry_run: dry_run(query),
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            scope: scope.into(),
            component: "apiserver".into(),
        }
    }
}

fn verb(method: &str, scope: &str, query: &str, content_type: &str) -> String {
    let method = method.to_ascii_uppercase();
    let pairs = || url::form_urlencoded::parse(query.as_bytes());
    let watch = pairs()
        .find(|(k, _)| k == "watch")
        .is_some_and(|(_, v)| !matches!(v.to_ascii_lowercase().as_str(), "0" | "false"));
    let verb = match method.as_str() {
        "GET" | "HEAD" if watch => "WATCH".to_string(),
        "GET" | "HEAD" if scope != "resource" => "LIST".to_string(),
        "GET" | "HEAD" => "GET".to_string(),
        "PATCH" if content_type == "application/apply-patch+yaml" => "APPLY".to_string(),
        _ => method,
    };
    if VERBS.contains(&verb.as_str()) {
        verb
    } else {
        "other".to_string()
    }
}

fn dry_run(query: &str) -> String {
    if !query.contains("dryRun") {
        return String::new();
    }
    let mut values: Vec<String> = url::form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.into_owned())
        .collect();
    if values.iter().any(|v| v != "All") {
        return "invalid".into();
    }
    values.sort();
    values.dedup();
    values.join(",")
}

/// `apiserver_request_total`'s labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Answered {
    #[prometheus(flatten)]
    request: Request,
    code: String,
}

/// `etcd_request_duration_seconds`'s labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StorageOperation {
    operation: String,
    // The derive writes a raw identifier's name without its `r#`.
    r#type: String,
}

/// `apiserver_storage_objects`'s label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Stored {
    resource: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// The server's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<Answered, Counter>,
    durations: Histograms<Request>,
    storage: Histograms<StorageOperation>,
    objects: Family<Stored, Gauge>,
    /// Held while a scrape sets the object counts and encodes them, so two scrapes do not
    /// interleave.
    scraping: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        let requests = Family::<Answered, Counter>::default();
        let durations: Histograms<Request> = Family::new_with_constructor(latency_histogram);
        let storage: Histograms<StorageOperation> = Family::new_with_constructor(latency_histogram);
        let objects = Family::<Stored, Gauge>::default();
        let mut registry = Registry::default();
        registry.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
            durations.clone(),
        );
        registry.register(
            "apiserver_storage_objects",
            "Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
            objects.clone(),
        );
        registry.register(
            "etcd_request_duration_seconds",
            "Etcd request latency in seconds for each operation and object type.",
            storage.clone(),
        );
        Self {
            registry,
            requests,
            durations,
            storage,
            objects,
            scraping: Mutex::new(()),
        }
    }
}

impl Metrics {
    /// Records an answered request: its code and how long it took.
    pub fn answered(&self, request: Request, code: u16, took: Duration) {
        self.durations
            .get_or_create(&request)
            .observe(took.as_secs_f64());
        let answered = Answered {
            request,
            code: code.to_string(),
        };
        self.requests.get_or_create(&answered).inc();
    }

    /// Records one store operation (`get`, `list`, `create`, `update`, `delete`) on a resource
    /// (`group`, `plural`), and how long it took.
    pub fn stored(&self, operation: &str, group: &str, plural: &str, took: Duration) {
        let labels = StorageOperation {
            operation: operation.into(),
            r#type: group_resource(group, plural),
        };
        self.storage
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// The exposition, with `objects` (the count of stored objects per group-resource, as
    /// kube labels them: `configmaps`, `deployments.apps`) as `apiserver_storage_objects`.
    pub fn encode(&self, objects: impl IntoIterator<Item = (String, i64)>) -> String {
        let _scrape = self
            .scraping
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.objects.clear();
        for (resource, n) in objects {
            self.objects.get_or_create(&Stored { resource }).set(n);
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// kube's `GroupResource.String()`: `plural.group`, or `plural` in the core group.
pub fn group_resource(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(method: &str, target: [&str; 6], query: &str, ct: &str) -> (String, String) {
        let r = Request::new(method, target, query, ct, method == "POST");
        (r.verb, r.scope)
    }

    fn pair(verb: &str, scope: &str) -> (String, String) {
        (verb.into(), scope.into())
    }

    #[test]
    fn verbs_and_scopes_are_kubes() {
        let pods = |ns: &'static str, name: &'static str| ["", "v1", "pods", "", ns, name];
        assert_eq!(labels("GET", pods("", ""), "", ""), pair("LIST", "cluster"));
        assert_eq!(
            labels("GET", pods("d", ""), "", ""),
            pair("LIST", "namespace")
        );
        assert_eq!(
            labels("GET", pods("d", "p"), "", ""),
            pair("GET", "resource")
        );
        assert_eq!(
            labels("GET", pods("d", ""), "watch=true", ""),
            pair("WATCH", "namespace")
        );
        assert_eq!(
            labels("GET", pods("d", ""), "watch=false", ""),
            pair("LIST", "namespace")
        );
        assert_eq!(
            labels("POST", pods("d", ""), "", ""),
            pair("POST", "resource")
        );
        let apply = "application/apply-patch+yaml";
        assert_eq!(
            labels("PATCH", pods("d", "p"), "", apply),
            pair("APPLY", "resource")
        );
        assert_eq!(
            labels("DELETE", pods("d", ""), "", ""),
            pair("DELETE", "namespace")
        );
        assert_eq!(
            labels("TRACE", pods("d", "p"), "", ""),
            pair("other", "resource")
        );
    }

    #[test]
    fn dry_run_values_are_sorted_and_checked() {
        assert_eq!(dry_run(""), "");
        assert_eq!(dry_run("dryRun=All&dryRun=All"), "All");
        assert_eq!(dry_run("dryRun=Some"), "invalid");
    }

    #[test]
    fn the_exposition_names_kubes_series() {
        let m = Metrics::default();
        let r = Request::new("POST", ["", "v1", "configmaps", "", "d", ""], "", "", true);
        m.answered(r, 201, Duration::from_millis(3));
        m.stored("create", "", "configmaps", Duration::from_micros(5));
        let text = m.encode([("configmaps".to_string(), 4)]);
        assert!(text.contains(r#"apiserver_request_total{verb="POST",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver",code="201"} 1"#), "{text}");
        assert!(
            text.contains(r#"apiserver_request_duration_seconds_bucket{le="0.005",verb="POST""#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"etcd_request_duration_seconds_count{operation="create",type="configmaps"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"apiserver_storage_objects{resource="configmaps"} 4"#),
            "{text}"
        );
    }
}
