//! The plugins' webhooks, served as controller-runtime serves a kubebuilder project's: HTTPS on
//! `--webhook-bind-address` (`:9443`), a certificate from `--webhook-cert-path` (cert-manager's
//! Secret, read again when renewed) or self-signed, kubebuilder's paths
//! (`/validate-<group>-<version>-<kind>`, `/mutate-...`, [`CONVERT`]), AdmissionReview v1 and
//! ConversionReview v1, and controller-runtime's metrics
//! (`controller_runtime_webhook_requests_total`, `..._latency_seconds`,
//! `..._requests_in_flight`).
//!
//! Each request goes to the plugin serving the kind now: a hot reload swaps it in place, so the
//! next request meets the new version. No plugin serving the path (not loaded yet, or failed to
//! load) answers 404, and the API server then does as the webhook's `failurePolicy` says. A
//! plugin that fails while deciding answers a refusal with code 500, as controller-runtime's
//! `admission.Errored`. Tenants' plugins (`WasmPlugin`s) serve no webhooks: a webhook sees every
//! write of its kind in the cluster, beyond the tenant's namespace and rights.

mod configuration;
pub(crate) mod review;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::observe::metrics::{Metrics, WebhookLabel};
use crate::reconcile::controller::Manager;
use crate::runtime::plugin::bindings::hooks;
use crate::runtime::{Plugin, view::View};
use crate::tls;
pub use configuration::{Configurations, Exposure, Served, Trust, generate};

/// The path of the conversion webhook (kubebuilder's).
pub const CONVERT: &str = "/convert";

/// The largest review read: kube-apiserver's own request limit.
const MAX_REVIEW: usize = 3 * 1024 * 1024;

/// The path kubebuilder gives a kind's validating (`mutating` false) or defaulting webhook:
/// `/validate-<group, dots as dashes>-<version>-<kind, lower case>`.
pub fn path(mutating: bool, gvk: &wasmctrl_core::Gvk) -> String {
    let verb = if mutating { "mutate" } else { "validate" };
    format!(
        "/{verb}-{}-{}-{}",
        gvk.group.replace('.', "-"),
        gvk.version,
        gvk.kind.to_lowercase()
    )
}

/// Who answers the webhook requests.
#[derive(Clone)]
struct Answering {
    manager: Arc<Manager>,
    metrics: Arc<Metrics>,
}

/// Serves the plugins' webhooks on `addr` over `tls` until the process ends; the bound address.
pub async fn serve(
    addr: SocketAddr,
    tls: &tls::Server,
    manager: Arc<Manager>,
) -> std::io::Result<SocketAddr> {
    let metrics = manager.metrics().clone();
    let app = axum::Router::new()
        .route("/{path}", axum::routing::post(answer))
        .layer(DefaultBodyLimit::max(MAX_REVIEW))
        .with_state(Answering { manager, metrics });
    crate::observe::probes::serve_router(addr, app, "webhook", Some(tls)).await
}

async fn answer(
    State(served): State<Answering>,
    Path(path): Path<String>,
    body: Bytes,
) -> Response {
    let path = format!("/{path}");
    // Only the paths of the webhooks served are answered (and measured: a path is a metric
    // label, and anyone who reaches the port could make up paths).
    if !known(&served.manager, &path) {
        let (code, body) = not_served(&path);
        return (code, axum::Json(body)).into_response();
    }
    let label = WebhookLabel {
        webhook: path.clone(),
    };
    let in_flight = served
        .metrics
        .webhook_in_flight
        .get_or_create(&label)
        .clone();
    in_flight.inc();
    let started = Instant::now();
    let (code, body) = match serde_json::from_slice::<Value>(&body) {
        Err(e) => (
            StatusCode::BAD_REQUEST,
            json!({"error": format!("not JSON: {e}")}),
        ),
        Ok(review) if path == CONVERT => convert(&served.manager, review).await,
        Ok(review) => admit(&served.manager, &path, review).await,
    };
    in_flight.dec();
    served
        .metrics
        .webhook_answered(&path, code.as_u16(), started.elapsed());
    (code, axum::Json(body)).into_response()
}

/// Whether `path` is the conversion webhook's or one of a served plugin's webhooks.
fn known(manager: &Manager, path: &str) -> bool {
    path == CONVERT
        || manager.serving().iter().any(|(plugin, _, tenant)| {
            let (kind, declared) = (plugin.manifest().kind(), plugin.webhooks());
            !tenant
                && declared.is_some_and(|d| {
                    (!d.validates.is_empty() && self::path(false, kind) == path)
                        || (d.defaults && self::path(true, kind) == path)
                })
        })
}

/// The plugin serving webhooks for the kind of `group` named `kind_lower` (lower case), with
/// the caches its reads go to; tenants' plugins serve none.
fn serving(
    manager: &Manager,
    group: &str,
    kind_lower: &str,
) -> Option<(Arc<Plugin>, Arc<dyn View>)> {
    manager
        .serving()
        .into_iter()
        .find_map(|(plugin, caches, tenant)| {
            let kind = plugin.manifest().kind();
            let serves = plugin
                .webhooks()
                .is_some_and(|d| !d.validates.is_empty() || d.defaults || !d.converts.is_empty());
            (serves && !tenant && kind.group == group && kind.kind.to_lowercase() == kind_lower)
                .then_some((plugin, caches as Arc<dyn View>))
        })
}

/// An AdmissionReview to `/validate-...` or `/mutate-...`.
async fn admit(manager: &Manager, path: &str, review: Value) -> (StatusCode, Value) {
    let mutating = if path.starts_with("/mutate-") {
        true
    } else if path.starts_with("/validate-") {
        false
    } else {
        return not_served(path);
    };
    // The review names the object's kind; the path only picked the webhook.
    let request = match review::admission_request(&review) {
        Ok(r) => r,
        Err(why) => return (StatusCode::BAD_REQUEST, json!({"error": why})),
    };
    let Some((plugin, view)) = serving(
        manager,
        &request.kind.group,
        &request.kind.kind.to_lowercase(),
    ) else {
        return not_served(path);
    };
    let uid = request.uid.clone();
    let object = request.object.clone();
    let decided = tokio::task::spawn_blocking(move || {
        if mutating {
            plugin.mutate(request, view)
        } else {
            plugin.validate(request, view)
        }
    })
    .await;
    let response = match decided {
        Ok(Ok(response)) => review::admission_response(&uid, &response, object.as_deref()),
        Ok(Err(e)) => {
            tracing::warn!(path, error = %e, "the plugin failed to decide an admission request");
            review::errored(&uid, 500, &e.to_string())
        }
        Err(e) => review::errored(&uid, 500, &format!("the plugin's call ended: {e}")),
    };
    (StatusCode::OK, response)
}

/// A ConversionReview to [`CONVERT`].
async fn convert(manager: &Manager, review: Value) -> (StatusCode, Value) {
    let request = &review["request"];
    let uid = request["uid"].as_str().unwrap_or_default().to_string();
    let desired = request["desiredAPIVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let objects: Vec<&Value> = request["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let Some(first) = objects.first() else {
        return (StatusCode::OK, review::converted(&uid, Ok(Vec::new())));
    };
    let group = first["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(g, _)| g)
        .to_string();
    let kind = first["kind"].as_str().unwrap_or_default().to_lowercase();
    let Some((plugin, view)) = serving(manager, &group, &kind) else {
        return not_served(CONVERT);
    };
    let objects: Vec<String> = objects.iter().map(|o| o.to_string()).collect();
    let converted =
        tokio::task::spawn_blocking(move || plugin.convert(&desired, objects, view)).await;
    let converted = match converted {
        Ok(Ok(objects)) => Ok(objects),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("the plugin's call ended: {e}")),
    };
    (StatusCode::OK, review::converted(&uid, converted))
}

/// No plugin serves this path (now): a 404, which the API server treats as a failed call.
fn not_served(path: &str) -> (StatusCode, Value) {
    (
        StatusCode::NOT_FOUND,
        json!({"error": format!("no plugin serves {path}")}),
    )
}

/// The operations a declaration validates, as the webhook configuration's rules name them.
pub(crate) fn operation_name(op: hooks::Operation) -> &'static str {
    match op {
        hooks::Operation::Create => "CREATE",
        hooks::Operation::Update => "UPDATE",
        hooks::Operation::Delete => "DELETE",
        hooks::Operation::Connect => "CONNECT",
    }
}
