//! The kubelet's probes, as a controller-runtime manager serves them on
//! `--health-probe-bind-address`: `/healthz` (and `/livez`) answer while the process serves;
//! `/readyz` answers 200 once every plugin in the directory has been loaded (or reported
//! failed) and every cache its controllers read has synced, 503 before. `?verbose` lists each
//! check as kube-apiserver does (`[+]name ok`, `[-]name failed: reason`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::get;

/// One named check and its result.
pub type Check = (&'static str, Result<(), String>);

/// What the readiness probe asks, on each request.
pub trait Readiness: Send + Sync + 'static {
    /// Every readiness check, in a stable order.
    fn checks(&self) -> Vec<Check>;
}

/// Parses a bind address as kubebuilder's flags spell it: `:8081` (every interface),
/// `127.0.0.1:8081`, or `0` to serve nothing.
pub fn bind_address(flag: &str) -> Result<Option<SocketAddr>, String> {
    if flag == "0" {
        return Ok(None);
    }
    let full = if flag.starts_with(':') {
        format!("0.0.0.0{flag}")
    } else {
        flag.to_string()
    };
    full.parse()
        .map(Some)
        .map_err(|e| format!("{flag:?} is not an address (`:8081`, `127.0.0.1:8081` or `0`): {e}"))
}

/// Serves the probes on `addr` until the process ends; returns the bound address.
pub async fn serve(addr: SocketAddr, readiness: Arc<dyn Readiness>) -> std::io::Result<SocketAddr> {
    let app = axum::Router::new()
        .route("/healthz", get(live))
        .route("/livez", get(live))
        .route("/readyz", get(ready))
        .with_state(readiness);
    serve_router(addr, app, "health probe", None).await
}

/// Serves `app` on `addr` in the background for the life of the process, over HTTPS when given
/// `tls`; returns the bound address. (The probes' and the metrics' endpoints.)
pub async fn serve_router(
    addr: SocketAddr,
    app: axum::Router,
    what: &'static str,
    tls: Option<&crate::tls::Server>,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let stopped = move |e: std::io::Error| tracing::error!(error = %e, "{what} server stopped");
    match tls {
        None => tokio::spawn(async move { axum::serve(listener, app).await.map_err(stopped) }),
        Some(tls) => {
            let listener = tls.listener(listener)?;
            tokio::spawn(async move { axum::serve(listener, app).await.map_err(stopped) })
        }
    };
    Ok(bound)
}

#[derive(serde::Deserialize)]
struct Params {
    verbose: Option<String>,
}

async fn live(Query(params): Query<Params>) -> (StatusCode, String) {
    report("healthz", vec![("ping", Ok(()))], params.verbose.is_some())
}

async fn ready(
    State(readiness): State<Arc<dyn Readiness>>,
    Query(params): Query<Params>,
) -> (StatusCode, String) {
    let mut checks = vec![("ping", Ok(()))];
    checks.extend(readiness.checks());
    report("readyz", checks, params.verbose.is_some())
}

/// kube-apiserver's wording: `ok` alone, or every check and a verdict when verbose or failing.
fn report(probe: &str, checks: Vec<Check>, verbose: bool) -> (StatusCode, String) {
    let passed = checks.iter().all(|(_, r)| r.is_ok());
    let code = if passed {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    if passed && !verbose {
        return (code, "ok".into());
    }
    let mut body = String::new();
    for (name, result) in &checks {
        match result {
            Ok(()) => body.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => body.push_str(&format!("[-]{name} failed: {reason}\n")),
        }
    }
    let verdict = if passed { "passed" } else { "failed" };
    body.push_str(&format!("{probe} check {verdict}\n"));
    (code, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_spelled_as_kubebuilder_spells_them() {
        assert_eq!(bind_address("0"), Ok(None));
        assert_eq!(
            bind_address(":8081").unwrap().unwrap().to_string(),
            "0.0.0.0:8081"
        );
        assert_eq!(bind_address("127.0.0.1:0").unwrap().unwrap().port(), 0);
        assert!(bind_address("8081").is_err());
    }

    #[test]
    fn reports_read_like_kube_apiservers() {
        let ok = vec![("ping", Ok(())), ("informer-sync", Ok(()))];
        assert_eq!(
            report("readyz", ok.clone(), false),
            (StatusCode::OK, "ok".into())
        );
        let (code, body) = report("readyz", ok, true);
        assert_eq!(code, StatusCode::OK);
        assert_eq!(
            body,
            "[+]ping ok\n[+]informer-sync ok\nreadyz check passed\n"
        );
        let failing = vec![
            ("ping", Ok(())),
            ("informer-sync", Err("waiting for x".into())),
        ];
        let (code, body) = report("readyz", failing, false);
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("[-]informer-sync failed: waiting for x\nreadyz check failed"));
    }
}
