//! Shared helpers for the host's integration tests.

#![allow(dead_code)]

pub mod http;
pub mod postgres;
pub mod process;
pub mod reconciles;
pub mod registry;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Where `make plugins` and `make test-plugins` put built components.
pub fn plugin_dirs() -> [PathBuf; 2] {
    let dir = |var: &str, default: &str| {
        std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../target")
                .join(default)
        })
    };
    [
        dir("WASMCTRL_PLUGIN_DIR", "dev-plugins"),
        dir("WASMCTRL_TEST_PLUGIN_DIR", "test-plugins"),
    ]
}

/// A built plugin's path; panics with the command to run when it has not been built.
pub fn plugin_path(name: &str) -> PathBuf {
    let dirs = plugin_dirs();
    dirs.iter()
        .map(|d| d.join(format!("{name}.wasm")))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "{name}.wasm is in none of {dirs:?}: build the plugins first with \
             `make plugins test-plugins` (make test does)"
            )
        })
}

/// controller-runtime's Lease proportions (15 : 10 : 2 s), short enough for a test: a Lease
/// `name` in `default` running out after 3 s, renewed every 0.5 s, given up after 2 s.
pub fn short_lease(name: &str) -> wasmctrl::replicas::leader::Config {
    use std::time::Duration;
    let config = wasmctrl::replicas::leader::Config {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
        ..wasmctrl::replicas::leader::Config::new(
            name,
            "default",
            wasmctrl::replicas::leader::identity(),
        )
    };
    config.check().expect("consistent timings");
    config
}

/// Where tests keep compiled components for the whole test run (`Config::cache_dir`): beside
/// the built test plugins, so a fresh build directory starts empty. A language runtime's
/// component (CPython's) takes tens of seconds to compile; each test process would otherwise
/// compile it again.
pub fn artifact_cache() -> PathBuf {
    let [_, test_plugins] = plugin_dirs();
    test_plugins.with_file_name("test-artifacts")
}

/// A built plugin's bytes.
pub fn plugin_bytes(name: &str) -> Vec<u8> {
    std::fs::read(plugin_path(name)).expect("read plugin")
}

/// The built plugin `name` loaded into `runtime` with `settings`, as the host loads
/// `<name>.wasm` beside a config holding them.
pub fn load_plugin(
    runtime: &wasmctrl::runtime::Runtime,
    name: &str,
    settings: &serde_json::Value,
) -> wasmctrl::runtime::Plugin {
    runtime
        .load(
            &format!("{name}.wasm"),
            &plugin_bytes(name),
            &settings.to_string(),
        )
        .expect("the plugin loads")
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Reads every object in a YAML file of the repository (multi-document).
pub fn yaml_objects(relative: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(repo_root().join(relative)).expect("read yaml");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("valid yaml"))
        .filter(|v: &serde_json::Value| !v.is_null())
        .collect()
}

/// Polls `check` every 20 ms until it returns `Some`, failing the test after `secs` seconds with
/// `what` in the message.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Creates a CustomResourceDefinition from its JSON form.
pub async fn install_crd(client: &kube::Client, crd: serde_json::Value) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let crd = serde_json::from_value(crd).expect("a CRD");
    crds.create(&Default::default(), &crd)
        .await
        .expect("create CRD");
}

/// The events.k8s.io/v1 Events of `namespace` (where the host records what it did).
pub fn events(client: &kube::Client, namespace: &str) -> kube::Api<kube::api::DynamicObject> {
    let gvk = kube::core::GroupVersionKind::gvk("events.k8s.io", "v1", "Event");
    kube::Api::namespaced_with(
        client.clone(),
        namespace,
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, "events"),
    )
}

/// The VirtualMachine example's kind (`examples/virtualmachine`), as the sharding test and
/// benchmark drive it.
pub mod vms {
    use futures::StreamExt as _;
    use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
    use kube::core::GroupVersionKind;
    use serde_json::json;

    /// The VirtualMachine resource.
    pub fn resource() -> ApiResource {
        let gvk = GroupVersionKind::gvk("cloudnative.tw", "v1alpha1", "VirtualMachine");
        ApiResource::from_gvk_with_plural(&gvk, "virtualmachines")
    }

    /// VirtualMachines in `namespace`.
    pub fn api(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, &resource())
    }

    /// Sets the CPUs of every VM `which` names (`(namespace, name)`), 32 patches at a time.
    pub async fn set_cpu(client: &kube::Client, which: &[(String, String)], cpu: i64) {
        merge_spec(client, which, json!({"resource": {"cpu": cpu}})).await;
    }

    /// Merges `spec` into the spec of every VM `which` names, 32 patches at a time.
    pub async fn merge_spec(
        client: &kube::Client,
        which: &[(String, String)],
        spec: serde_json::Value,
    ) {
        let patch = json!({ "spec": spec });
        futures::stream::iter(which.iter().cloned())
            .map(|(ns, name)| {
                let api = api(client, &ns);
                let patch = &patch;
                async move {
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                        .expect("patch a VirtualMachine");
                }
            })
            .buffer_unordered(32)
            .collect::<()>()
            .await;
    }
}

/// `Thing` (example.com/v1), the kind the hostile test plugin reconciles.
pub mod things {
    use kube::api::{Api, ApiResource, DynamicObject};
    use kube::core::GroupVersionKind;
    use serde_json::json;

    /// Installs the Thing CRD (status subresource, any fields).
    pub async fn install(client: &kube::Client) {
        super::install_crd(client, json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Thing", "plural": "things", "singular": "thing", "listKind": "ThingList"},
                "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))
        .await;
    }

    /// Creates Thing `default/<name>` with kubectl and waits until a plugin reconciled it
    /// (`status.phase: Ready`, as the trivial plugin writes).
    pub async fn create_reconciled(cluster: &super::process::Cluster, name: &str) {
        cluster.apply_yaml(&format!(
            "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: {name}\n  namespace: default\n"
        ));
        super::eventually(60, &format!("Thing {name} reconciled"), || async {
            let thing = cluster.get_json(&["thing", name, "-n", "default"])?;
            (thing["status"]["phase"] == "Ready").then_some(())
        })
        .await;
    }

    /// Things in `default`.
    pub fn api(client: &kube::Client) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk("example.com", "v1", "Thing");
        Api::namespaced_with(
            client.clone(),
            "default",
            &ApiResource::from_gvk_with_plural(&gvk, "things"),
        )
    }

    /// The request the host sends for Thing `default/t1` at `generation`, at time `now`.
    pub fn request(generation: i64, now: &str) -> wasmctrl::plugin::wit::Request {
        let object = json!({"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"namespace": "default", "name": "t1", "uid": "u1", "generation": generation}});
        wasmctrl::plugin::wit::Request {
            namespace: "default".into(),
            name: "t1".into(),
            object: Some(object.to_string()),
            deleting: false,
            settings: String::new(),
            now: wasmctrl::plugin::wit::Timestamp::parse(now).expect("RFC 3339"),
            previous: Vec::new(),
        }
    }

    /// Creates a Thing in `default`.
    pub async fn create(api: &Api<DynamicObject>, name: &str, labels: serde_json::Value) {
        let thing = json!({"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": {"name": name}});
        let thing = serde_json::from_value(thing).expect("a Thing");
        api.create(&Default::default(), &thing)
            .await
            .expect("create Thing");
    }
}

/// The `status` of object `name`, `None` while it or its status is missing.
pub async fn status_of(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
) -> Option<serde_json::Value> {
    let obj = api.get_opt(name).await.ok()??;
    obj.data.get("status").cloned()
}

/// A host running the built plugin `name` (with `settings`) against the in-process `server`,
/// holding only the RBAC its manifest implies, as a deployment's host does.
pub async fn host_of(
    server: &wasmctrl::apiserver::ApiServer,
    name: &str,
    settings: &serde_json::Value,
) -> wasmctrl::reconcile::controller::Manager {
    let config = wasmctrl::runtime::Config {
        cache_dir: Some(artifact_cache()),
        ..Default::default()
    };
    let runtime = wasmctrl::runtime::Runtime::new(config).expect("a runtime");
    let plugin = load_plugin(&runtime, name, settings);
    let host = wasmctrl::reconcile::controller::Manager::new(rbac_client(server, &[&plugin]).await);
    host.upsert(
        Arc::new(plugin),
        wasmctrl::reconcile::controller::Tuning::default(),
    )
    .await;
    host
}

/// A client of the in-process `server` as ServiceAccount `wasmctrl/wasmctrl`, holding only the
/// RBAC `wasmctrl rbac` generates for `plugins` (CRDs from `examples/`), applied first.
pub async fn rbac_client(
    server: &wasmctrl::apiserver::ApiServer,
    plugins: &[&wasmctrl::runtime::Plugin],
) -> kube::Client {
    use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
    let mut resolver = wasmctrl::rbac::Resolver::default();
    for example in ["postgres-writer", "virtualmachine", "workspace"] {
        for crd in yaml_objects(&format!("examples/{example}/crd.yaml")) {
            resolver
                .add_crd(&crd)
                .unwrap_or_else(|e| panic!("{example}'s CRD: {e}"));
        }
    }
    let scopes: Vec<_> = (plugins.iter())
        .map(|p| wasmctrl::rbac::Grantee::host(p.manifest().name.clone(), p.scope().clone()))
        .collect();
    let options = wasmctrl::rbac::Options::default();
    let (mut objects, _) = wasmctrl::rbac::generate(&scopes, &resolver, &options);
    objects.insert(
        0,
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": options.namespace}}),
    );
    let admin = server.client();
    for object in objects {
        let text = |field: &serde_json::Value| field.as_str().expect("generated").to_string();
        let (kind, name) = (text(&object["kind"]), text(&object["metadata"]["name"]));
        let api_version = text(&object["apiVersion"]);
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        let gvk = kube::core::GroupVersionKind::gvk(group, version, &kind);
        let resource = ApiResource::from_gvk(&gvk);
        let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(admin.clone(), ns, &resource),
            None => Api::all_with(admin.clone(), &resource),
        };
        api.patch(
            &name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {name}: {e}"));
    }
    let token = server
        .token(
            &options.namespace,
            &options.service_account,
            std::time::Duration::from_secs(3600),
        )
        .expect("the ServiceAccount exists");
    server.client_with_token(&token)
}

/// What the code under test logs, kept for assertions: a `tracing` writer (`with_writer`).
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Captured {
    /// Everything logged at `level` or above by the whole test binary, from its first call on
    /// (the global subscriber is installed once; later calls share it, whatever their level).
    pub fn global(level: tracing::Level) -> Self {
        static GLOBAL: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                let captured = Captured::default();
                tracing_subscriber::fmt()
                    .with_writer(captured.clone())
                    .with_max_level(level)
                    .with_ansi(false)
                    .init();
                captured
            })
            .clone()
    }

    /// What was logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}

/// A loopback address with a port free now, for a server the test starts in another process.
pub fn free_address() -> String {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    format!("{}", probe.local_addr().expect("its address"))
}

/// A CA and a serving certificate it signed for 127.0.0.1, written as `tls.crt` and `tls.key`
/// into `dir` (as cert-manager writes a Secret); the CA's PEM.
pub fn certificates(dir: &std::path::Path) -> String {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("a key");
    let mut ca = CertificateParams::new(Vec::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca.self_signed(&ca_key).expect("a CA certificate").pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("a key");
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .expect("serving parameters")
        .signed_by(&key, &issuer)
        .expect("a serving certificate");
    std::fs::create_dir_all(dir).expect("certificate directory");
    std::fs::write(dir.join("tls.crt"), cert.pem()).expect("write tls.crt");
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).expect("write tls.key");
    ca_pem
}

/// `component` with a custom section `name` holding `payload` appended: another artifact
/// (another digest) that behaves the same, since a component may carry custom sections anywhere
/// and they are not compiled.
pub fn with_custom_section(component: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut section = Vec::new();
    leb(name.len(), &mut section);
    section.extend_from_slice(name.as_bytes());
    section.extend_from_slice(payload);
    let mut out = component.to_vec();
    out.push(0); // the custom section id
    leb(section.len(), &mut out);
    out.extend_from_slice(&section);
    out
}
