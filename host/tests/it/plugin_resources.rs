//! Plugins as cluster resources (`run --plugin-resources`), through the real binaries: a real
//! registry (Debian's CNCF distribution registry on loopback), the embedded API server with RBAC
//! on, and the host running as its ServiceAccount under the RBAC `wasmctrl rbac` generates.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::process::{Cluster, Process};
use common::registry::Registry;
use serde_json::Value;

/// Runs `wasmctrl <args>` from the repository root; it must succeed. Its stdout.
fn wasmctrl(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(args)
        .current_dir(common::repo_root())
        .output()
        .expect("run wasmctrl");
    assert!(
        out.status.success(),
        "wasmctrl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `component` with a custom section appended: another artifact (another digest) that
/// behaves the same, as a rebuild with a new version string would.
fn variant(component: &[u8], label: &str) -> Vec<u8> {
    common::with_custom_section(component, "wasmctrl-test-variant", label.as_bytes())
}

/// Pushes `component` to `reference` (plain HTTP); returns the digest the registry recorded.
fn push(registry: &Registry, component: &[u8], repository: &str, tag: &str) -> String {
    let file = registry.dir().join(format!("{tag}.wasm"));
    std::fs::write(&file, component).unwrap();
    let reference = format!("oci://{}/{repository}:{tag}", registry.addr);
    wasmctrl(&[
        "push",
        file.to_str().unwrap(),
        &reference,
        "--insecure-registry",
        &registry.addr,
    ]);
    registry.tag_digest(repository, tag)
}

/// Writes `yaml` to a file under `dir`.
fn manifest(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The RBAC `wasmctrl rbac` prints for host `wasmctrl/wasmctrl`, serving plugin resources and
/// granting the plugins of the resources in `resources`, if any.
fn rbac(registry: &Registry, resources: Option<&Path>) -> String {
    let empty = registry.dir().join("no-plugins");
    std::fs::create_dir_all(&empty).unwrap();
    let mut args = vec![
        "rbac",
        "--plugins",
        empty.to_str().unwrap(),
        "--crds",
        "examples",
        "--namespace",
        "wasmctrl",
        "--plugin-resources",
        "--insecure-registry",
        &registry.addr,
    ];
    if let Some(path) = resources {
        args.extend(["--resources", path.to_str().unwrap()]);
    }
    wasmctrl(&args)
}

/// A registry and a cluster with the plugin resources' CRDs, the CRD file `crd` and the
/// `namespaces`.
fn registry_and_cluster(dir: &Path, crd: &str, namespaces: &[&str]) -> (Registry, Cluster) {
    let registry = Registry::start();
    let cluster = Cluster::start(dir);
    cluster.kubectl_ok(&["apply", "-f", "examples/deploy/crds.yaml"]);
    cluster.kubectl_ok(&["apply", "-f", crd]);
    for namespace in namespaces {
        cluster.kubectl_ok(&["create", "namespace", namespace]);
    }
    (registry, cluster)
}

/// Waits until the resource's condition `type_` has `status` (and `reason`, if given).
async fn wait_condition(
    cluster: &Cluster,
    args: &[&str],
    type_: &str,
    status: &str,
    reason: Option<&str>,
) -> (String, String, String) {
    let what = format!("{args:?} {type_}={status} {reason:?}");
    common::eventually(90, &what, || async {
        let found = cluster.condition(args, type_)?;
        (found.0 == status && reason.is_none_or(|r| r == found.1)).then_some(found)
    })
    .await
}

/// The VirtualMachine `name` in `default`, with its phase once the plugin reconciled it.
async fn vm_reconciled(cluster: &Cluster, name: &str) -> Value {
    common::eventually(60, &format!("VirtualMachine {name} reconciled"), || async {
        let vm = cluster.get_json(&["virtualmachine", name, "-n", "default"])?;
        (vm["status"]["phase"] == "Active").then_some(vm)
    })
    .await
}

fn create_vm(cluster: &Cluster, name: &str) {
    let yaml = format!(
        "apiVersion: cloudnative.tw/v1alpha1\nkind: VirtualMachine\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  resource:\n    cpu: 2\n    memory: 4Gi\n    rootDisk: 40Gi\n"
    );
    cluster.apply_yaml(&yaml);
}

/// Starts the host as `wasmctrl/wasmctrl`, serving only plugin resources.
fn start_host(cluster: &Cluster, registry_addr: &str, cache: &Path, dir: &Path) -> Process {
    let kubeconfig = cluster.service_account_kubeconfig("wasmctrl", "wasmctrl");
    let no_directory = dir.join("absent");
    cluster.run_host_with(
        &kubeconfig,
        &no_directory,
        &[
            "--plugin-resources",
            "--insecure-registry",
            registry_addr,
            "--cache-dir",
            cache.to_str().unwrap(),
        ],
        &[],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_plugin_by_tag_is_granted_refreshed_pinned_and_served_from_cache() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = Registry::start();
    let cluster = Cluster::start(dir.path());
    cluster.kubectl_ok(&["apply", "-f", "examples/deploy/crds.yaml"]);
    cluster.kubectl_ok(&["apply", "-f", "examples/virtualmachine/crd.yaml"]);
    let cache = dir.path().join("cache");

    let original = common::plugin_bytes("virtualmachine");
    let first = push(&registry, &original, "plugins/vm", "stable");
    let resource = manifest(
        dir.path(),
        "vm.yaml",
        &format!(
            "apiVersion: wasmctrl.io/v1alpha1\nkind: ClusterWasmPlugin\nmetadata:\n  name: vm\nspec:\n  module: oci://{}/plugins/vm:stable\n  refreshInterval: 1s\n",
            registry.addr
        ),
    );

    // The host may serve plugin resources, but not yet what this plugin needs.
    cluster.apply_yaml(&rbac(&registry, None));
    let mut host = start_host(&cluster, &registry.addr, &cache, dir.path());
    cluster.kubectl_ok(&["apply", "-f", resource.to_str().unwrap()]);
    let cwp = ["clusterwasmplugin", "vm"];
    let (_, _, missing) = wait_condition(
        &cluster,
        &cwp,
        "PermissionsGranted",
        "False",
        Some("MissingPermissions"),
    )
    .await;
    for rule in [
        "list virtualmachines.cloudnative.tw cluster-wide",
        "watch virtualmachines.cloudnative.tw cluster-wide",
        "patch virtualmachines.cloudnative.tw/status cluster-wide",
        "delete virtualmachines.cloudnative.tw cluster-wide",
    ] {
        assert!(missing.contains(rule), "{rule} in: {missing}");
    }
    let (ready, _, _) = cluster.condition(&cwp, "Ready").unwrap();
    assert_eq!(ready, "False");
    let events = cluster.kubectl_ok(&[
        "get",
        "events",
        "-A",
        "--field-selector",
        "reason=MissingPermissions",
    ]);
    assert!(
        events.contains("ClusterWasmPlugin/vm") || events.contains("clusterwasmplugin/vm"),
        "{events}"
    );

    // Granted, it starts without a restart: Ready, running the digest the tag names.
    cluster.apply_yaml(&rbac(&registry, Some(&resource)));
    wait_condition(&cluster, &cwp, "Ready", "True", None).await;
    assert!(host.running(), "the host restarted");
    let status = cluster.get_json(&cwp).unwrap()["status"].clone();
    assert_eq!(status["digest"], first.as_str());
    assert_eq!(status["version"], "0.1.0");
    assert!(
        status["permissions"]
            .as_array()
            .is_some_and(|p| !p.is_empty()),
        "{status}"
    );
    create_vm(&cluster, "vm-1");
    vm_reconciled(&cluster, "vm-1").await;

    // A new version pushed to the tag serves after the refresh, without a failed reconcile.
    for n in 2..=6 {
        create_vm(&cluster, &format!("vm-{n}"));
    }
    let second = push(&registry, &variant(&original, "2"), "plugins/vm", "stable");
    assert_ne!(first, second);
    common::eventually(60, "the new digest serving", || async {
        let status = cluster.get_json(&cwp)?["status"].clone();
        (status["digest"] == second.as_str()).then_some(())
    })
    .await;
    create_vm(&cluster, "vm-7");
    for n in 1..=7 {
        vm_reconciled(&cluster, &format!("vm-{n}")).await;
    }
    let errors = r#"controller_runtime_reconcile_errors_total{controller="vm"}"#;
    assert_eq!(host.sample(errors).unwrap_or(0.0), 0.0, "{}", host.log());

    // Pinned to a digest whose blob was altered in the registry: refused, the last keeps serving.
    let third_component = variant(&original, "3");
    let third = push(&registry, &third_component, "plugins/vm", "three");
    let layer = wasmctrl::plugins::oci::digest_of(&third_component);
    let blob = registry.blob_path(&layer);
    let mut altered = std::fs::read(&blob).unwrap();
    let last = altered.len() - 1;
    altered[last] ^= 0xff;
    std::fs::write(&blob, &altered).unwrap();
    let pinned = format!("oci://{}/plugins/vm@{third}", registry.addr);
    let patch = serde_json::json!({"spec": {"module": pinned}}).to_string();
    merge_patch(&cluster, "vm", &patch);
    let (_, _, message) =
        wait_condition(&cluster, &cwp, "Pulled", "False", Some("DigestMismatch")).await;
    assert!(message.to_lowercase().contains("digest"), "{message}");
    let status = cluster.get_json(&cwp).unwrap()["status"].clone();
    assert_eq!(
        status["digest"],
        second.as_str(),
        "the running version keeps serving"
    );
    assert_eq!(cluster.condition(&cwp, "Ready").unwrap().0, "True");
    create_vm(&cluster, "vm-8");
    vm_reconciled(&cluster, "vm-8").await;
    // Its only complaints are the refusals the test provoked.
    let unexpected: Vec<String> = (host.complaints().into_iter())
        .filter(|l| {
            !["MissingPermissions", "DigestMismatch"]
                .iter()
                .any(|r| l.contains(r))
        })
        .collect();
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
    host.terminate();

    // Restarted with the registry down and a warm cache: the last digest serves from it.
    registry.stop();
    let host = start_host(&cluster, &registry.addr, &cache, dir.path());
    let (_, _, message) =
        wait_condition(&cluster, &cwp, "Pulled", "False", Some("FromCache")).await;
    assert!(message.contains(&second), "{message}");
    wait_condition(&cluster, &cwp, "Ready", "True", None).await;
    create_vm(&cluster, "vm-9");
    vm_reconciled(&cluster, "vm-9").await;

    // Deleted, the plugin stops (after the grace period) while the host runs on.
    cluster.kubectl_ok(&["delete", "clusterwasmplugin", "vm"]);
    common::eventually(60, "the plugin stopped", || async {
        host.log()
            .contains("ClusterWasmPlugin vm deleted; its plugin stopped")
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_plugin_pulls_over_tls_with_image_pull_secrets_and_wrong_ones_show_the_401() {
    use base64::Engine as _;
    use common::registry::{PASSWORD, USER};
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start_secure();
    let ca = registry.dir().join("ca.pem");
    std::fs::write(&ca, registry.ca.as_deref().unwrap()).unwrap();
    let docker_config = |password: &str| {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
        serde_json::json!({"auths": {registry.addr.clone(): {"auth": auth}}}).to_string()
    };
    let config_file = manifest(dir.path(), "config.json", &docker_config(PASSWORD));
    let large = common::plugin_path("large");
    assert!(
        std::fs::metadata(&large).unwrap().len() > 5 << 20,
        "the large plugin is over 5 MiB"
    );
    let reference = format!("oci://{}/plugins/large:1", registry.addr);
    let ca_arg = ca.to_str().unwrap();
    wasmctrl(&[
        "push",
        large.to_str().unwrap(),
        &reference,
        "--registry-ca",
        ca_arg,
        "--docker-config",
        config_file.to_str().unwrap(),
    ]);

    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    common::things::install(&client).await;
    cluster.kubectl_ok(&["apply", "-f", "examples/deploy/crds.yaml"]);
    // A ClusterWasmPlugin's imagePullSecrets are in the host's namespace: outside a Pod, `default`.
    for (name, password) in [("registry", PASSWORD), ("registry-wrong", "wrong")] {
        let config = manifest(
            dir.path(),
            &format!("{name}.json"),
            &docker_config(password),
        );
        let from = format!("--from-file=.dockerconfigjson={}", config.display());
        let secret = ["create", "secret", "generic", name, "-n", "default"];
        cluster.kubectl_ok(
            &[
                &secret[..],
                &[&from, "--type=kubernetes.io/dockerconfigjson"],
            ]
            .concat(),
        );
    }
    let resource = |name: &str, secret: &str| {
        format!(
            "apiVersion: wasmctrl.io/v1alpha1\nkind: ClusterWasmPlugin\nmetadata:\n  name: {name}\nspec:\n  module: {reference}\n  imagePullSecrets:\n  - name: {secret}\n"
        )
    };
    cluster.apply_yaml(&resource("large", "registry"));
    cluster.apply_yaml(&resource("large-wrong", "registry-wrong"));
    let absent = dir.path().join("absent");
    let _host = cluster.run_host(
        &absent,
        &["--plugin-resources", "--registry-ca", ca_arg],
        // No docker config of its own: only the Secrets' credentials.
        &[("DOCKER_CONFIG", dir.path().join("none").to_str().unwrap())],
    );

    let large = ["clusterwasmplugin", "large"];
    wait_condition(&cluster, &large, "Ready", "True", None).await;
    let status = cluster.get_json(&large).unwrap()["status"].clone();
    assert_eq!(
        status["digest"],
        registry.tag_digest("plugins/large", "1").as_str()
    );
    let thing =
        "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: big\n  namespace: default\n";
    cluster.apply_yaml(thing);
    let reconciled = common::eventually(60, "the Thing reconciled by the large plugin", || async {
        let thing = cluster.get_json(&["thing", "big", "-n", "default"])?;
        (thing["status"]["phase"] == "Ready").then_some(thing)
    })
    .await;
    assert_eq!(reconciled["status"]["bytes"], 6 << 20);

    let wrong = ["clusterwasmplugin", "large-wrong"];
    let (_, _, message) =
        wait_condition(&cluster, &wrong, "Pulled", "False", Some("Unauthorized")).await;
    // The registry's own answer: its status and the code of its error envelope.
    assert!(
        message.contains("HTTP 401") && message.contains("UNAUTHORIZED: "),
        "the registry's answer: {message}"
    );
    assert_eq!(cluster.condition(&wrong, "Ready").unwrap().0, "False");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_asking_for_more_waits_for_approval_while_the_old_one_serves() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start();
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    common::things::install(&client).await;
    cluster.kubectl_ok(&["apply", "-f", "examples/deploy/crds.yaml"]);
    // Version 1 only reconciles Things; version 2 (another build under the same tag) also
    // owns ConfigMaps.
    let first = push(
        &registry,
        &common::plugin_bytes("trivial"),
        "plugins/thing",
        "v",
    );
    cluster.apply_yaml(&format!(
        "apiVersion: wasmctrl.io/v1alpha1\nkind: ClusterWasmPlugin\nmetadata:\n  name: thing\nspec:\n  module: oci://{}/plugins/thing:v\n  refreshInterval: 1s\n  concurrency: 1000\n  settings:\n    mode: own\n",
        registry.addr
    ));
    // Past the CRD's bound, the API server refuses the resource outright.
    let (refused, answer) = cluster.kubectl(&[
        "patch",
        "clusterwasmplugin",
        "thing",
        "--type=merge",
        "-p",
        r#"{"spec": {"concurrency": 2000000000}}"#,
    ]);
    assert!(!refused, "concurrency 2000000000 was stored: {answer}");
    assert!(answer.contains("1024"), "{answer}");
    let absent = dir.path().join("absent");
    let host = cluster.run_host(
        &absent,
        &["--plugin-resources", "--insecure-registry", &registry.addr],
        &[],
    );
    let cwp = ["clusterwasmplugin", "thing"];
    wait_condition(&cluster, &cwp, "Ready", "True", None).await;
    // Within the CRD's bound but past the host's ceiling: served at the ceiling, and said.
    let (_, _, loaded) = cluster.condition(&cwp, "Loaded").unwrap();
    assert!(
        loaded.contains("concurrency 1000 lowered to 16 (--max-plugin-concurrency)"),
        "{loaded}"
    );

    let second = push(
        &registry,
        &common::plugin_bytes("hostile"),
        "plugins/thing",
        "v",
    );
    let message = not_approved(&cluster, &cwp).await;
    let listed = message.split("spec.approve: ").nth(1).unwrap();
    let unapproved: Vec<String> = serde_json::from_str(listed).unwrap();
    assert!(
        unapproved.contains(&"apply v1/ConfigMap in all namespaces (beside the owner)".to_string()),
        "{unapproved:?}"
    );
    // Meanwhile the first version serves.
    let status = cluster.get_json(&cwp).unwrap()["status"].clone();
    assert_eq!(status["digest"], first.as_str());
    assert_eq!(cluster.condition(&cwp, "Ready").unwrap().0, "True");
    common::things::create_reconciled(&cluster, "before").await;

    // Approved, the second version serves and owns its ConfigMaps.
    let patch = serde_json::json!({"spec": {"approve": unapproved}}).to_string();
    merge_patch(&cluster, "thing", &patch);
    common::eventually(60, "the approved version serving", || async {
        let status = cluster.get_json(&cwp)?["status"].clone();
        (status["digest"] == second.as_str()).then_some(())
    })
    .await;
    wait_condition(&cluster, &cwp, "PermissionsGranted", "True", None).await;
    cluster.apply_yaml(
        "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: after\n  namespace: default\n",
    );
    common::eventually(60, "the second version's child", || async {
        cluster.get_json(&["configmap", "after-child", "-n", "default"])
    })
    .await;

    // New settings that ask for less reload the same digest without approval, and the plugin
    // now declares what those settings make it declare.
    let patch = serde_json::json!({"spec": {"settings": {"mode": "ok"}}}).to_string();
    merge_patch(&cluster, "thing", &patch);
    let status = common::eventually(60, "the new settings serving", || async {
        let object = cluster.get_json(&cwp)?;
        let permissions = object["status"]["permissions"].as_array()?.clone();
        let generation = object["metadata"]["generation"].clone();
        let owns = permissions
            .iter()
            .any(|p| p.as_str().unwrap_or_default().contains("ConfigMap"));
        (!owns && object["status"]["observedGeneration"] == generation)
            .then_some(object["status"].clone())
    })
    .await;
    assert_eq!(status["digest"], second.as_str());
    assert_eq!(cluster.condition(&cwp, "Ready").unwrap().0, "True");

    // Settings that make the same bytes ask for more need approval as new bytes do.
    let patch = serde_json::json!({"spec": {"approve": null, "settings": {"mode": "own"}}});
    merge_patch(&cluster, "thing", &patch.to_string());
    let message = not_approved(&cluster, &cwp).await;
    assert!(message.contains("ConfigMap"), "{message}");
    let status = cluster.get_json(&cwp).unwrap()["status"].clone();
    let permissions = status["permissions"].to_string();
    assert!(
        !permissions.contains("ConfigMap"),
        "the narrower settings keep serving: {permissions}"
    );
    assert_eq!(cluster.condition(&cwp, "Ready").unwrap().0, "True");
    drop(host);
}

/// Capabilities (`sql:`) are the operator's: a tenant's plugin declaring one is refused unless
/// `--tenant-capabilities` grants it to the plugin's namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_plugin_has_only_the_capabilities_granted_to_its_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, cluster) = registry_and_cluster(
        dir.path(),
        "examples/postgres-writer/crd.yaml",
        &["team-a", "team-b"],
    );
    push(
        &registry,
        &common::plugin_bytes("postgres-writer"),
        "plugins/pg",
        "1",
    );
    let absent = dir.path().join("absent");
    let _host = cluster.run_host(
        &absent,
        &[
            "--plugin-resources",
            "--insecure-registry",
            &registry.addr,
            "--tenant-registries",
            &registry.addr,
            "--tenant-capabilities",
            "team-b=sql:students",
        ],
        &[],
    );
    for namespace in ["team-a", "team-b"] {
        let resource = format!(
            "apiVersion: wasmctrl.io/v1alpha1\nkind: WasmPlugin\nmetadata:\n  name: pg\n  namespace: {namespace}\nspec:\n  module: oci://{}/plugins/pg:1\n",
            registry.addr
        );
        // team-b's account gets what the plugin declares; team-a's gets nothing.
        if namespace == "team-b" {
            let file = manifest(dir.path(), "team-b.yaml", &resource);
            cluster.apply_yaml(&rbac(&registry, Some(&file)));
        }
        cluster.apply_yaml(&resource);
    }
    let team_a = ["wasmplugin", "pg", "-n", "team-a"];
    let (_, _, message) = wait_condition(
        &cluster,
        &team_a,
        "PermissionsGranted",
        "False",
        Some("CapabilityNotGranted"),
    )
    .await;
    assert!(
        message.contains("sql:students") && message.contains("team-a"),
        "{message}"
    );
    assert_eq!(cluster.condition(&team_a, "Ready").unwrap().0, "False");
    let team_b = ["wasmplugin", "pg", "-n", "team-b"];
    wait_condition(&cluster, &team_b, "PermissionsGranted", "True", None).await;
}

/// Waits until the resource's `PermissionsGranted` is False for want of approval; the message.
async fn not_approved(cluster: &Cluster, args: &[&str]) -> String {
    let reason = Some("NotApproved");
    let found = wait_condition(cluster, args, "PermissionsGranted", "False", reason).await;
    found.2
}

/// `kubectl patch clusterwasmplugin <name> --type=merge -p <patch>`.
fn merge_patch(cluster: &Cluster, name: &str, patch: &str) {
    let args = [
        "patch",
        "clusterwasmplugin",
        name,
        "--type=merge",
        "-p",
        patch,
    ];
    cluster.kubectl_ok(&args);
}

/// A tenant's plugin acts as its namespace's ServiceAccount, never with the host's rights:
/// the host (ServiceAccount `wasmctrl/wasmctrl`, whose `--plugin-resources` role lets it read
/// every Secret) serves a `WasmPlugin` whose manifest reads Secrets in `team-a`, with the RBAC
/// `wasmctrl rbac --resources` prints for it but the tenant's own binding held back. The
/// account lacks the rights, and the status lists them; a read as that account is refused by
/// the API server; the binding applied, the same host serves the plugin, which reads the
/// Secret, and every request it implies reaches the API server as the tenant's account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_plugin_acts_as_its_service_account_and_never_with_the_hosts_rights() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start();
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    cluster.kubectl_ok(&["apply", "-f", "examples/deploy/crds.yaml"]);
    common::things::install(&client).await;
    for namespace in ["team-a", "team-b"] {
        cluster.kubectl_ok(&["create", "namespace", namespace]);
        cluster.kubectl_ok(&["create", "serviceaccount", "reconciler", "-n", namespace]);
    }
    cluster.apply_yaml(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: data\n  namespace: team-a\n  labels:\n    visible: \"yes\"\nstringData:\n  password: hunter2\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: tools\n  namespace: team-a\nspec:\n  selector:\n    matchLabels:\n      app: tools\n  template:\n    metadata:\n      labels:\n        app: tools\n    spec:\n      containers:\n      - name: tools\n        image: busybox\n",
    );
    push(
        &registry,
        &common::plugin_bytes("hostile"),
        "plugins/hostile",
        "1",
    );
    let resource = format!(
        "apiVersion: wasmctrl.io/v1alpha1\nkind: WasmPlugin\nmetadata:\n  name: hostile\n  namespace: team-a\nspec:\n  module: oci://{}/plugins/hostile:1\n  serviceAccountName: reconciler\n  settings:\n    mode: scope\n",
        registry.addr
    );
    let file = manifest(dir.path(), "tenant.yaml", &resource);

    // What `wasmctrl rbac --resources` grants: the plugin's rights to the tenant's account,
    // and to the host only the right to impersonate that account, in that namespace.
    let generated = rbac(&registry, Some(&file));
    let documents: Vec<&str> = generated.split("---\n").collect();
    let is = |doc: &str, kind: &str, name: &str| {
        doc.contains(&format!("kind: {kind}\n")) && doc.contains(&format!("name: {name}\n"))
    };
    let tenant_binding = *(documents.iter())
        .find(|d| is(d, "RoleBinding", "wasmctrl:team-a-hostile"))
        .unwrap();
    assert!(
        tenant_binding.contains("name: reconciler") && tenant_binding.contains("namespace: team-a"),
        "{tenant_binding}"
    );
    let impersonation = *(documents.iter())
        .find(|d| is(d, "Role", "wasmctrl:impersonate"))
        .unwrap();
    assert!(
        impersonation.contains("namespace: team-a")
            && impersonation.contains("- reconciler")
            && impersonation.contains("- impersonate"),
        "{impersonation}"
    );
    let held_back: Vec<&str> = (documents.iter().copied())
        .filter(|d| !std::ptr::eq(*d, tenant_binding))
        .collect();
    cluster.apply_yaml(&held_back.join("---\n"));

    let kubeconfig = cluster.service_account_kubeconfig("wasmctrl", "wasmctrl");
    let host = cluster.run_host_with(
        &kubeconfig,
        &dir.path().join("absent"),
        &[
            "--plugin-resources",
            "--insecure-registry",
            &registry.addr,
            "--tenant-registries",
            &registry.addr,
        ],
        &[],
    );
    let host_pid = host.pid();
    cluster.apply_yaml(&resource);
    let args = ["wasmplugin", "hostile", "-n", "team-a"];
    let (_, _, message) = wait_condition(
        &cluster,
        &args,
        "PermissionsGranted",
        "False",
        Some("MissingPermissions"),
    )
    .await;
    assert!(
        message.contains("ServiceAccount team-a/reconciler")
            && message.contains("list secrets in namespace team-a"),
        "{message}"
    );
    assert_eq!(cluster.condition(&args, "Ready").unwrap().0, "False");

    // The host may read the Secret; as the tenant's account, which is how it would read it for
    // the plugin, the API server refuses. Nor may it act as an account of another namespace.
    let as_host = common::process::kubectl(&kubeconfig, &["get", "secret", "data", "-n", "team-a"]);
    assert!(as_host.0, "{}", as_host.1);
    let refused = |args: &[&str], needle: &str| {
        let (ok, out) = common::process::kubectl(&kubeconfig, args);
        assert!(!ok && out.contains(needle), "{args:?}: {out}");
    };
    let tenant_user = "--as=system:serviceaccount:team-a:reconciler";
    refused(
        &["get", "secret", "data", "-n", "team-a", tenant_user],
        "Forbidden",
    );
    let other_user = "--as=system:serviceaccount:team-b:reconciler";
    refused(
        &["get", "configmaps", "-n", "team-b", other_user],
        "cannot impersonate",
    );

    // The tenant's binding: the same host serves the plugin, which reads as its account.
    cluster.apply_yaml(tenant_binding);
    let (_, _, granted) = wait_condition(&cluster, &args, "PermissionsGranted", "True", None).await;
    assert!(
        granted.contains("ServiceAccount team-a/reconciler"),
        "{granted}"
    );
    wait_condition(&cluster, &args, "Ready", "True", None).await;
    assert_eq!(host.pid(), host_pid, "served without a restart");
    cluster.apply_yaml(
        "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: legit\n  namespace: team-a\n  labels:\n    try: legit\n",
    );
    let status = common::eventually(60, "the Thing reconciled", || async {
        let thing = cluster.get_json(&["thing", "legit", "-n", "team-a"])?;
        (thing["status"]["phase"] == "Done").then(|| thing["status"].clone())
    })
    .await;
    assert_eq!(status["visible"], true, "{status}");

    // Every request the plugin implies was made as the tenant's account: its caches, its
    // writes, its events.
    let tenant = "system:serviceaccount:team-a:reconciler";
    let requests = cluster.requests().await;
    let made = |resource: &str, verbs: &[&str]| -> Vec<String> {
        (requests.iter())
            .filter(|r| r["resource"] == resource && r["namespace"] == "team-a")
            .filter(|r| verbs.iter().any(|v| r["verb"] == *v))
            .map(|r| r["user"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    for (resource, verbs) in [
        ("secrets", &["list", "watch"][..]),
        ("things", &["list", "watch", "patch"][..]),
        ("configmaps", &["list", "watch", "patch", "create"][..]),
        ("deployments", &["patch"][..]),
    ] {
        let users = made(resource, verbs);
        assert!(!users.is_empty(), "no {verbs:?} of {resource} in team-a");
        assert!(
            users.iter().all(|u| u == tenant),
            "{resource} {verbs:?} as {users:?}"
        );
    }
    // Events in team-a come from both: the plugin's about the Thing, as the tenant, and the
    // host's about the WasmPlugin (its own resource), as the host.
    let events = made("events", &["create"]);
    assert!(events.iter().any(|u| u == tenant), "{events:?}");
    let host_user = "system:serviceaccount:wasmctrl:wasmctrl";
    assert!(
        events.iter().all(|u| u == tenant || u == host_user),
        "{events:?}"
    );
}

/// A certificate for 127.0.0.1 in `dir` (`tls.crt`, `tls.key`, as `--webhook-cert-path`
/// reads them): a client that trusts its CA, and the CA's PEM.
fn webhook_certificate(dir: &Path) -> (reqwest::Client, String) {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let pem = common::certificates(dir);
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()
        .unwrap();
    (client, pem)
}

/// A validating webhook configuration for VirtualMachines at the host's `base`, trusted by
/// `pem`, with `policy` as its failure policy.
fn vm_webhook(base: &str, pem: &str, policy: &str) -> String {
    use base64::Engine as _;
    let bundle = base64::engine::general_purpose::STANDARD.encode(pem);
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: vm\nwebhooks:\n- name: vvirtualmachine.cloudnative.tw\n  clientConfig:\n    url: {base}/validate-cloudnative-tw-v1alpha1-virtualmachine\n    caBundle: {bundle}\n  rules:\n  - operations: [CREATE, UPDATE]\n    apiGroups: [cloudnative.tw]\n    apiVersions: [v1alpha1]\n    resources: [virtualmachines]\n  failurePolicy: {policy}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n"
    )
}

/// `kubectl apply` of a VirtualMachine in team-a with `cpu` CPUs: whether it was stored, and
/// what kubectl said.
fn apply_vm(cluster: &Cluster, dir: &Path, name: &str, cpu: i64) -> (bool, String) {
    let yaml = format!(
        "apiVersion: cloudnative.tw/v1alpha1\nkind: VirtualMachine\nmetadata:\n  name: {name}\n  namespace: team-a\nspec:\n  resource:\n    cpu: {cpu}\n    memory: 4Gi\n    rootDisk: 40Gi\n"
    );
    let file = manifest(dir, &format!("{name}.yaml"), &yaml);
    cluster.kubectl(&["apply", "-f", file.to_str().unwrap()])
}

/// Sends the VirtualMachine validator's path an AdmissionReview of a create with `cpu`: the
/// HTTP status and the body.
async fn review_vm(client: &reqwest::Client, base: &str, cpu: i64) -> (u16, Value) {
    let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": "CREATE",
            "kind": {"group": "cloudnative.tw", "version": "v1alpha1", "kind": "VirtualMachine"},
            "resource": {"group": "cloudnative.tw", "version": "v1alpha1", "resource": "virtualmachines"},
            "name": "vm", "namespace": "team-a", "userInfo": {"username": "alice"},
            "object": {"apiVersion": "cloudnative.tw/v1alpha1", "kind": "VirtualMachine",
                "metadata": {"name": "vm", "namespace": "team-a"},
                "spec": {"resource": {"cpu": cpu, "memory": "4Gi", "rootDisk": "40Gi"}}}}});
    let response = client
        .post(format!(
            "{base}/validate-cloudnative-tw-v1alpha1-virtualmachine"
        ))
        .json(&review)
        .send()
        .await
        .unwrap();
    let code = response.status().as_u16();
    let body = response.bytes().await.unwrap();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_plugin_serves_no_webhooks_and_a_cluster_plugin_does() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, cluster) =
        registry_and_cluster(dir.path(), "examples/virtualmachine/crd.yaml", &["team-a"]);
    push(
        &registry,
        &common::plugin_bytes("virtualmachine"),
        "plugins/vm",
        "1",
    );
    let module = format!("oci://{}/plugins/vm:1", registry.addr);
    let tenant = format!(
        "apiVersion: wasmctrl.io/v1alpha1\nkind: WasmPlugin\nmetadata:\n  name: vm\n  namespace: team-a\nspec:\n  module: {module}\n"
    );
    let file = manifest(dir.path(), "tenant.yaml", &tenant);
    cluster.apply_yaml(&rbac(&registry, Some(&file)));
    let (https, pem) = webhook_certificate(&dir.path().join("certs"));
    let bind = common::free_address();
    let certs = dir.path().join("certs");
    let _host = cluster.run_host(
        &dir.path().join("absent"),
        &[
            "--plugin-resources",
            "--insecure-registry",
            &registry.addr,
            "--tenant-registries",
            &registry.addr,
            "--webhook-bind-address",
            &bind,
            "--webhook-cert-path",
            certs.to_str().unwrap(),
        ],
        &[],
    );
    let base = format!("https://{bind}");

    // The tenant's plugin runs, and its validator is not served: a webhook would see every
    // VirtualMachine of the cluster, beyond the tenant's namespace and rights.
    cluster.apply_yaml(&tenant);
    wait_condition(
        &cluster,
        &["wasmplugin", "vm", "-n", "team-a"],
        "Ready",
        "True",
        None,
    )
    .await;
    let (code, _) = review_vm(&https, &base, 0).await;
    assert_eq!(code, 404, "a tenant's plugin serves no webhook");

    // A configuration pointing at a webhook no loaded plugin serves: its failure policy decides.
    cluster.apply_yaml(&vm_webhook(&base, &pem, "Fail"));
    let (stored, out) = apply_vm(&cluster, dir.path(), "refused", 2);
    assert!(
        !stored && out.contains("failed calling webhook") && out.contains("404"),
        "{out}"
    );
    cluster.apply_yaml(&vm_webhook(&base, &pem, "Ignore"));
    let (stored, out) = apply_vm(&cluster, dir.path(), "admitted", 2);
    assert!(stored, "{out}");

    // The same module as a ClusterWasmPlugin serves it.
    cluster.apply_yaml(&format!(
        "apiVersion: wasmctrl.io/v1alpha1\nkind: ClusterWasmPlugin\nmetadata:\n  name: vm-cluster\nspec:\n  module: {module}\n"
    ));
    wait_condition(
        &cluster,
        &["clusterwasmplugin", "vm-cluster"],
        "Ready",
        "True",
        None,
    )
    .await;
    let (code, answer) = review_vm(&https, &base, 0).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(
        answer["response"]["status"]["message"],
        "spec.resource.cpu must be positive, got 0"
    );
    // ... and the API server hears it, through what `wasmctrl webhooks` prints for the plugin
    // (the configuration above removed). The CRD's schema refuses a CPU below 1 before any
    // webhook, so the plugin is shown a memory that is no quantity.
    cluster.kubectl_ok(&["delete", "validatingwebhookconfiguration", "vm"]);
    let plugins = common::process::plugin_dir(dir.path(), &[("virtualmachine", None)]);
    let bundle = manifest(dir.path(), "ca.pem", &pem);
    let printed = wasmctrl(&[
        "webhooks",
        "--plugins",
        plugins.to_str().unwrap(),
        "--crds",
        "examples",
        "--url",
        &base,
        "--ca-bundle",
        bundle.to_str().unwrap(),
    ]);
    cluster.apply_yaml(&printed);
    let yaml = "apiVersion: cloudnative.tw/v1alpha1\nkind: VirtualMachine\nmetadata:\n  name: lots\n  namespace: team-a\nspec:\n  resource:\n    cpu: 2\n    memory: lots\n    rootDisk: 40Gi\n";
    let file = manifest(dir.path(), "lots.yaml", yaml);
    let (stored, out) = cluster.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    assert!(
        !stored
            && out.contains("admission webhook \"vvirtualmachine-v1alpha1.virtualmachine.wasmctrl.io\" denied the request: spec.resource.memory is not a quantity: \"lots\""),
        "{out}"
    );
}

/// A plugin written in Python is an artifact like any other: `wasmctrl push` sends it, a
/// `ClusterWasmPlugin` names it, the host pulls, checks and serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_plugin_is_pushed_and_served_as_a_cluster_plugin_like_any_other() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, cluster) =
        registry_and_cluster(dir.path(), "examples/virtualmachine/crd.yaml", &[]);
    let digest = push(
        &registry,
        &common::plugin_bytes("virtualmachine-py"),
        "plugins/vm-py",
        "v1",
    );
    let resource = manifest(
        dir.path(),
        "vm-py.yaml",
        &format!(
            "apiVersion: wasmctrl.io/v1alpha1\nkind: ClusterWasmPlugin\nmetadata:\n  name: vm-py\nspec:\n  module: oci://{}/plugins/vm-py:v1\n",
            registry.addr
        ),
    );
    cluster.apply_yaml(&rbac(&registry, Some(&resource)));
    let cache = dir.path().join("cache");
    let _host = start_host(&cluster, &registry.addr, &cache, dir.path());
    cluster.kubectl_ok(&["apply", "-f", resource.to_str().unwrap()]);
    let cwp = ["clusterwasmplugin", "vm-py"];
    wait_condition(&cluster, &cwp, "Ready", "True", None).await;
    let status = cluster.get_json(&cwp).unwrap()["status"].clone();
    assert_eq!(status["digest"], digest.as_str(), "{status}");
    create_vm(&cluster, "vm-1");
    let vm = vm_reconciled(&cluster, "vm-1").await;
    assert_eq!(vm["status"]["server"]["cpu"], 2, "{vm}");
}
