//! A tenant names a hostile registry: one that declares an 8 GiB layer, streams more than it
//! declares, sends an endless manifest, redirects the credentialed retry to an internal
//! address, names an internal token realm, trickles its answer, or wraps internal text in its
//! error bodies. The host must stay within its memory, read nothing internal, echo nothing but
//! the registry's error codes and messages, and fetch nothing from a registry the operator
//! does not allow tenants.
//!
//! The hostile registry and the "internal" server are small axum servers in the test process,
//! on loopback, recording every request they get.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use common::process::Cluster;
use sha2::{Digest as _, Sha256};

/// Text that must never reach a status, an event or a log line.
const MARKER: &str = "INTERNAL-ONLY-7f3a9c";

/// One request a server got: its path and its `Authorization` header.
type Request = (String, Option<String>);

/// What a server was asked, in order.
#[derive(Clone, Default)]
struct Requests(Arc<Mutex<Vec<Request>>>);

impl Requests {
    fn record(&self, path: &str, headers: &HeaderMap) {
        let auth = (headers.get("authorization")).map(|v| v.to_str().unwrap_or("?").to_string());
        self.0.lock().unwrap().push((path.to_string(), auth));
    }

    fn all(&self) -> Vec<Request> {
        self.0.lock().unwrap().clone()
    }
}

/// Serves `app` on a loopback port; its address.
async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A server that answers everything with [`MARKER`]: a cloud metadata endpoint, a kubelet.
async fn internal() -> (String, Requests) {
    let requests = Requests::default();
    let seen = requests.clone();
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        let seen = seen.clone();
        async move {
            seen.record(uri.path(), &headers);
            format!("{MARKER} secret credentials")
        }
    });
    (serve(app).await, requests)
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A wasm artifact's manifest whose one layer declares `size` bytes.
fn manifest(size: u64) -> Vec<u8> {
    serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json",
                   "digest": sha256(b"{}"), "size": 2},
        "layers": [{"mediaType": "application/wasm",
                    "digest": sha256(b"whatever"), "size": size}],
    })
    .to_string()
    .into_bytes()
}

/// `total` bytes of zeros in 64 KiB chunks, however slowly the client reads (it ends when
/// the client hangs up).
fn endless(total: u64) -> Body {
    let chunk = bytes::Bytes::from(vec![b' '; 64 << 10]);
    let chunks = total / chunk.len() as u64;
    Body::from_stream(futures::stream::iter(
        (0..chunks).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
    ))
}

/// The hostile registry, by repository:
/// - `huge`: a layer declaring 8 GiB (and 8 GiB behind it);
/// - `liar`: a layer declaring 1 KiB, and 8 GiB behind it;
/// - `endless`: a manifest of 2 GiB, without a length;
/// - `redirect`: asks for credentials, and redirects the retry that carries them to `internal`;
/// - `realm`: names a token realm on `internal`;
/// - `echo`: refuses with a JSON error envelope whose detail, and a trailer, carry [`MARKER`];
/// - `trickle`: sends one byte of its manifest a second.
async fn hostile(internal: &str) -> (String, Requests) {
    let requests = Requests::default();
    let seen = requests.clone();
    let internal = internal.to_string();
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap| {
        let (seen, internal) = (seen.clone(), internal.clone());
        async move {
            seen.record(uri.path(), &headers);
            answer(&method, uri.path(), &headers, &internal)
        }
    });
    (serve(app).await, requests)
}

fn answer(method: &Method, path: &str, headers: &HeaderMap, internal: &str) -> Response {
    let response = |status: StatusCode| Response::builder().status(status);
    if path == "/v2/" {
        return response(StatusCode::OK).body(Body::from("{}")).unwrap();
    }
    let parts: Vec<&str> = path.trim_start_matches("/v2/").split('/').collect();
    let [repository, kind, _reference] = parts[..] else {
        return response(StatusCode::NOT_FOUND).body(Body::empty()).unwrap();
    };
    let with_digest = |body: Vec<u8>| {
        let builder = response(StatusCode::OK)
            .header("content-type", "application/vnd.oci.image.manifest.v1+json")
            .header("docker-content-digest", sha256(&body));
        if method == Method::HEAD {
            builder.body(Body::empty()).unwrap()
        } else {
            builder.body(Body::from(body)).unwrap()
        }
    };
    match (repository, kind) {
        ("huge", "manifests") => with_digest(manifest(8 << 30)),
        ("liar", "manifests") => with_digest(manifest(1024)),
        ("huge" | "liar", "blobs") => response(StatusCode::OK).body(endless(8 << 30)).unwrap(),
        ("endless", "manifests") if method == Method::HEAD => response(StatusCode::OK)
            .header("content-type", "application/vnd.oci.image.manifest.v1+json")
            .body(Body::empty())
            .unwrap(),
        ("endless", "manifests") => response(StatusCode::OK)
            .header("content-type", "application/vnd.oci.image.manifest.v1+json")
            .body(endless(2 << 30))
            .unwrap(),
        ("redirect", "manifests") if headers.get("authorization").is_none() => {
            response(StatusCode::UNAUTHORIZED)
                .header("www-authenticate", r#"Basic realm="hostile""#)
                .body(Body::from(format!("<html>{MARKER}</html>")))
                .unwrap()
        }
        ("redirect", "manifests") => response(StatusCode::TEMPORARY_REDIRECT)
            .header("location", format!("http://{internal}/latest/meta-data/"))
            .body(Body::empty())
            .unwrap(),
        ("realm", "manifests") => response(StatusCode::UNAUTHORIZED)
            .header(
                "www-authenticate",
                format!(r#"Bearer realm="http://{internal}/token",service="hostile""#),
            )
            .body(Body::empty())
            .unwrap(),
        ("echo", "manifests") => response(StatusCode::NOT_FOUND)
            .header("content-type", "application/json")
            .body(Body::from(
                serde_json::json!({"errors": [{"code": "MANIFEST_UNKNOWN",
                    "message": "manifest unknown", "detail": MARKER}], "extra": MARKER})
                .to_string(),
            ))
            .unwrap(),
        ("trickle", "manifests") => {
            let body = futures::stream::unfold(0u32, |n| async move {
                (n < 600).then_some(())?;
                tokio::time::sleep(Duration::from_secs(1)).await;
                Some((
                    Ok::<_, std::io::Error>(bytes::Bytes::from_static(b" ")),
                    n + 1,
                ))
            });
            response(StatusCode::OK)
                .header("docker-content-digest", sha256(b"x"))
                .body(Body::from_stream(body))
                .unwrap()
        }
        _ => response(StatusCode::NOT_FOUND).body(Body::empty()).unwrap(),
    }
}

/// The host's peak resident memory so far (`VmHWM`), in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib / 1024.0
}

/// The `Pulled` condition of WasmPlugin `team-a/<name>` once it is False: reason and message.
async fn pulled_false(cluster: &Cluster, name: &str) -> (String, String) {
    common::eventually(90, &format!("WasmPlugin {name} Pulled=False"), || async {
        let (status, reason, message) =
            cluster.condition(&["wasmplugin", name, "-n", "team-a"], "Pulled")?;
        (status == "False").then_some((reason, message))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_registry_cannot_grow_the_hosts_memory_read_internal_endpoints_or_be_echoed() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let (internal, internal_requests) = internal().await;
    let (registry, _) = hostile(&internal).await;
    // A second registry, as hostile, that the operator does not allow tenants.
    let (elsewhere, elsewhere_requests) = hostile(&internal).await;

    let cluster = Cluster::start(dir.path());
    cluster.kubectl_ok(&["apply", "-f", "examples/deploy/crds.yaml"]);
    cluster.kubectl_ok(&["create", "namespace", "team-a"]);
    // Credentials for the hostile registry, which must never reach the internal server.
    let auth = base64::engine::general_purpose::STANDARD.encode("tenant:s3cret-password");
    let config = serde_json::json!({"auths": {registry.clone(): {"auth": auth}}}).to_string();
    let config_file = dir.path().join("config.json");
    std::fs::write(&config_file, config).unwrap();
    let from = format!("--from-file=.dockerconfigjson={}", config_file.display());
    cluster.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "pull",
        "-n",
        "team-a",
        &from,
        "--type=kubernetes.io/dockerconfigjson",
    ]);

    let absent = dir.path().join("absent");
    let host = cluster.run_host(
        &absent,
        &[
            "--plugin-resources",
            "--insecure-registry",
            &registry,
            "--insecure-registry",
            &elsewhere,
            "--tenant-registries",
            &registry,
            "--cache-dir",
            dir.path().join("cache").to_str().unwrap(),
        ],
        &[],
    );
    let pid = host.pid().unwrap();
    common::eventually(60, "the host watching plugin resources", || async {
        host.log().contains("plugin resources only").then_some(())
    })
    .await;
    let before = peak_rss_mib(pid);

    let plugin = |name: &str, at: &str, repository: &str| {
        format!(
            "apiVersion: wasmctrl.io/v1alpha1\nkind: WasmPlugin\nmetadata:\n  name: {name}\n  namespace: team-a\nspec:\n  module: oci://{at}/{repository}:1\n  imagePullSecrets:\n  - name: pull\n"
        )
    };
    for name in ["huge", "liar", "endless", "redirect", "realm", "echo"] {
        cluster.apply_yaml(&plugin(name, &registry, name));
    }
    cluster.apply_yaml(&plugin("elsewhere", &elsewhere, "huge"));

    // Each refused, the reason naming what was exceeded or refused.
    let (reason, message) = pulled_false(&cluster, "huge").await;
    assert_eq!(reason, "PluginTooLarge", "{message}");
    assert!(
        message.contains("--max-plugin-size") && message.contains("8589934592"),
        "{message}"
    );
    let (reason, message) = pulled_false(&cluster, "liar").await;
    assert_eq!(reason, "PluginTooLarge", "{message}");
    assert!(
        message.contains("the size its manifest declares"),
        "{message}"
    );
    let (reason, message) = pulled_false(&cluster, "endless").await;
    assert_eq!(reason, "ManifestTooLarge", "{message}");
    assert!(message.contains("4194304"), "{message}");
    for name in ["redirect", "realm"] {
        let (reason, message) = pulled_false(&cluster, name).await;
        assert_eq!(reason, "RedirectRefused", "{name}: {message}");
    }
    let (reason, message) = pulled_false(&cluster, "echo").await;
    assert_eq!(reason, "PullFailed", "{message}");
    assert!(
        message.contains("HTTP 404: MANIFEST_UNKNOWN: manifest unknown"),
        "the registry's code and message: {message}"
    );
    let (reason, message) = pulled_false(&cluster, "elsewhere").await;
    assert_eq!(reason, "RegistryNotAllowed", "{message}");

    // Memory: the peak stayed within 100 MiB of what it was before (8 GiB were offered).
    let after = peak_rss_mib(pid);
    assert!(
        after - before < 100.0,
        "peak RSS grew from {before:.1} MiB to {after:.1} MiB"
    );
    eprintln!("peak RSS {before:.1} MiB before, {after:.1} MiB after the hostile pulls");

    // Nothing reached the internal server; nothing was fetched from the registry not allowed.
    assert!(
        internal_requests.all().is_empty(),
        "{:?}",
        internal_requests.all()
    );
    assert!(
        elsewhere_requests.all().is_empty(),
        "{:?}",
        elsewhere_requests.all()
    );
    // The marker is in no status, no event and no log line.
    let statuses = cluster.kubectl_ok(&["get", "wasmplugins", "-A", "-o", "json"]);
    let events = cluster.kubectl_ok(&["get", "events", "-A", "-o", "json"]);
    for (what, text) in [
        ("status", statuses.as_str()),
        ("events", events.as_str()),
        ("log", host.log().as_str()),
    ] {
        assert!(!text.contains(MARKER), "{what} carries the internal text");
    }
    assert!(
        events.contains("RedirectRefused") && events.contains("PluginTooLarge"),
        "the refusals are events: {events}"
    );
}

/// The same hostile registry, through the library: a trickling registry is cut off at the
/// timeout; an operator who allows private redirects still never sends credentials to the
/// other address, nor repeats what it said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_end_at_the_timeout_and_never_carry_credentials_across_a_redirect() {
    use wasmctrl::plugins::oci::{Error, Limits, Options, Registry};
    let (internal, internal_requests) = internal().await;
    let (registry, _) = hostile(&internal).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    let auth = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode("tenant:s3cret-password")
    };
    std::fs::write(
        &config,
        serde_json::json!({"auths": {registry.clone(): {"auth": auth}}}).to_string(),
    )
    .unwrap();
    let client = |limits: Limits| {
        Registry::new(&Options {
            insecure: vec![registry.clone()],
            docker_config: Some(config.clone()),
            limits,
            ..Options::default()
        })
        .unwrap()
    };

    let quick = client(Limits {
        timeout: Duration::from_secs(2),
        ..Limits::default()
    });
    let started = std::time::Instant::now();
    let reference = format!("{registry}/trickle:1");
    let error = quick.pull(&reference, dir.path()).await.unwrap_err();
    assert!(matches!(error, Error::Timeout { .. }), "{error}");
    assert!(error.to_string().contains("--registry-timeout"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10));

    let trusting = client(Limits {
        private_redirects: true,
        ..Limits::default()
    });
    let reference = format!("{registry}/redirect:1");
    let error = trusting.pull(&reference, dir.path()).await.unwrap_err();
    assert!(!error.to_string().contains(MARKER), "{error}");
    let reached = internal_requests.all();
    assert!(!reached.is_empty(), "the redirect was followed");
    assert!(
        reached.iter().all(|(_, auth)| auth.is_none()),
        "credentials crossed the redirect: {reached:?}"
    );
    // Nothing is left behind in the directory pulls write to.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path() != config)
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
