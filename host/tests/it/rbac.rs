//! Least-privilege RBAC: what `wasmctrl rbac` generates is what `examples/deploy` ships, the
//! embedded API server enforces it (kubectl's `auth can-i` answers as the roles say), the
//! example kustomization applies, and a rule taken away fails exactly the reconcile that needs
//! it, with a 403 reported on the object, until it is given back.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use base64::Engine as _;
use common::process::{Cluster, plugin_dir, rbac_yaml, wait_for};
use serde_json::Value;

/// The built example plugins (`make plugins`): what `make deploy-manifests` generates from.
/// The plugins `examples/deploy` ships, one ConfigMap each: every crate under `plugins/`.
const EXAMPLE_PLUGINS: [&str; 6] = [
    "cronjob",
    "memcached",
    "pod-restarter",
    "postgres-writer",
    "virtualmachine",
    "workspace",
];

fn example_plugins() -> std::path::PathBuf {
    common::plugin_dirs()[0].clone()
}

#[test]
fn the_checked_in_rbac_is_what_the_example_plugins_need() {
    let checked_in =
        std::fs::read_to_string(common::repo_root().join("examples/deploy/rbac.yaml")).unwrap();
    let checked_in: String = checked_in
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        checked_in == rbac_yaml(&example_plugins()),
        "examples/deploy/rbac.yaml is not what the example plugins need: run make deploy-manifests"
    );
}

/// `kubectl auth can-i <args> --as=<the host's ServiceAccount>`: whether it said yes.
fn can_i(cluster: &Cluster, args: &[&str]) -> bool {
    let mut all = vec![
        "auth",
        "can-i",
        "--as=system:serviceaccount:wasmctrl:wasmctrl",
    ];
    all.extend_from_slice(args);
    let (allowed, out) = cluster.kubectl(&all);
    assert!(
        out.trim() == "yes" || out.trim() == "no",
        "kubectl auth can-i {args:?}: {out}"
    );
    allowed
}

/// `examples/deploy` and its overlays copied under `dir` as `make
/// deploy-manifests` leaves them: the built plugins, compressed, beside the kustomization. Returns `dir`.
fn deploy_manifests(dir: &Path) -> &Path {
    for example in ["deploy", "deploy-registry", "deploy-sharded"] {
        let to = dir.join(example);
        std::fs::create_dir_all(&to).unwrap();
        let from = common::repo_root().join("examples").join(example);
        for entry in std::fs::read_dir(from).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
            }
        }
    }
    let plugins = dir.join("deploy/plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    for name in EXAMPLE_PLUGINS {
        // Compressed, as `make deploy-manifests` writes them (kube refuses a ConfigMap of
        // more than 1 MiB).
        let to = std::fs::File::create(plugins.join(format!("{name}.wasm.gz"))).unwrap();
        let mut gz = flate2::write::GzEncoder::new(to, flate2::Compression::best());
        std::io::copy(
            &mut std::fs::File::open(common::plugin_path(name)).unwrap(),
            &mut gz,
        )
        .unwrap();
        gz.finish().unwrap();
    }
    dir
}

#[test]
fn the_checked_in_overlay_rbac_is_what_wasmctrl_rbac_prints() {
    for (file, only) in [
        (
            "examples/deploy-registry/plugin-resources-rbac.yaml",
            "--plugin-resources-only",
        ),
        (
            "examples/deploy-sharded/sharding-rbac.yaml",
            "--sharding-only",
        ),
    ] {
        let path = common::repo_root().join(file);
        let checked_in: String = (std::fs::read_to_string(path).unwrap().lines())
            .skip_while(|l| l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
            .args(["rbac", "--plugins"])
            .arg(example_plugins())
            .args(["--crds", "examples", "--namespace", "wasmctrl", only])
            .current_dir(common::repo_root())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            checked_in == String::from_utf8(out.stdout).unwrap(),
            "{file} is stale: run make deploy-manifests"
        );
    }
}

#[test]
fn the_sharded_overlay_runs_three_members_with_the_rbac_they_take() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    cluster.kubectl_ok(&["apply", "-f", "examples/virtualmachine/crd.yaml"]);
    cluster.kubectl_ok(&["apply", "--server-side", "-f", "examples/deploy/crds.yaml"]);
    let overlay = deploy_manifests(dir.path()).join("deploy-sharded");
    cluster.kubectl_ok(&["apply", "--server-side", "-k", overlay.to_str().unwrap()]);
    let deployment = cluster
        .get_json(&["deployment", "wasmctrl", "-n", "wasmctrl"])
        .unwrap();
    assert_eq!(deployment["spec"]["replicas"], 3);
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap();
    assert!(args.contains(&"--sharding".into()), "{args:?}");
    assert!(!args.contains(&"--leader-elect".into()), "{args:?}");
    for verb in ["create", "get", "list", "watch", "update", "delete"] {
        assert!(
            can_i(&cluster, &[verb, "leases", "-n", "wasmctrl"]),
            "{verb} leases"
        );
    }
    assert!(!can_i(&cluster, &["list", "leases", "-n", "default"]));
}

#[test]
fn the_registry_overlay_serves_plugin_resources_instead_of_config_maps() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    cluster.kubectl_ok(&["apply", "-f", "examples/virtualmachine/crd.yaml"]);
    let overlay = deploy_manifests(dir.path()).join("deploy-registry");
    // The CRDs first, as on any cluster: objects of a kind are refused until it is served.
    cluster.kubectl_ok(&["apply", "--server-side", "-f", "examples/deploy/crds.yaml"]);
    let overlay = overlay.to_str().unwrap();
    cluster.kubectl_ok(&["apply", "--server-side", "-k", overlay]);

    let deployment = cluster
        .get_json(&["deployment", "wasmctrl", "-n", "wasmctrl"])
        .unwrap();
    let spec = &deployment["spec"]["template"]["spec"];
    let args = spec["containers"][0]["args"].as_array().unwrap();
    assert!(args.contains(&"--plugin-resources".into()), "{args:?}");
    assert!(
        spec["volumes"][0]["emptyDir"].is_object(),
        "{}",
        spec["volumes"]
    );
    let (found, _) = cluster.kubectl(&[
        "get",
        "configmap",
        "plugin-virtualmachine",
        "-n",
        "wasmctrl",
    ]);
    assert!(!found, "the ConfigMaps are gone");
    let plugin = cluster
        .get_json(&["clusterwasmplugin", "virtualmachine"])
        .unwrap();
    assert!(
        plugin["spec"]["module"]
            .as_str()
            .unwrap()
            .starts_with("oci://")
    );
    for (args, allowed) in [
        (&["list", "clusterwasmplugins.wasmctrl.io", "-A"][..], true),
        (
            &["watch", "wasmplugins.wasmctrl.io", "-n", "team-a"][..],
            true,
        ),
        (
            &[
                "patch",
                "clusterwasmplugins.wasmctrl.io",
                "--subresource=status",
                "-A",
            ][..],
            true,
        ),
        (&["get", "secrets", "-n", "team-a"][..], true),
        (
            &["update", "clusterwasmplugins.wasmctrl.io", "-A"][..],
            false,
        ),
        (&["list", "secrets", "-n", "team-a"][..], false),
        // The tenant (tenant.yaml): the host may act as its ServiceAccount, in its
        // namespace, and as no other account.
        (
            &["impersonate", "serviceaccounts/reconciler", "-n", "team-a"][..],
            true,
        ),
        (
            &["impersonate", "serviceaccounts/default", "-n", "team-a"][..],
            false,
        ),
        (
            &["impersonate", "serviceaccounts/reconciler", "-n", "team-b"][..],
            false,
        ),
        (&["impersonate", "serviceaccounts", "-A"][..], false),
    ] {
        assert_eq!(can_i(&cluster, args), allowed, "{args:?}");
    }
    // The plugin's rights are the tenant account's, not the host's.
    let tenant = "--as=system:serviceaccount:team-a:reconciler";
    for (args, allowed) in [
        (
            &["list", "virtualmachines.cloudnative.tw", "-n", "team-a"][..],
            true,
        ),
        (
            &[
                "patch",
                "virtualmachines.cloudnative.tw/status",
                "-n",
                "team-a",
            ][..],
            true,
        ),
        (
            &["list", "virtualmachines.cloudnative.tw", "-n", "team-b"][..],
            false,
        ),
        (&["get", "secrets", "-n", "team-a"][..], false),
    ] {
        let mut all = vec!["auth", "can-i", tenant];
        all.extend_from_slice(args);
        let (_, out) = cluster.kubectl(&all);
        assert_eq!(out.trim() == "yes", allowed, "{args:?}: {out}");
    }
    let plugin = cluster
        .get_json(&["wasmplugin", "vm", "-n", "team-a"])
        .unwrap();
    assert_eq!(plugin["spec"]["serviceAccountName"], "reconciler");
}

#[test]
fn the_example_kustomization_applies_and_can_i_answers_as_its_roles_say() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    cluster.kubectl_ok(&["apply", "-f", "examples/virtualmachine/crd.yaml"]);
    let deploy = deploy_manifests(dir.path()).join("deploy");
    let out = cluster.kubectl_ok(&["apply", "--server-side", "-k", deploy.to_str().unwrap()]);
    assert!(
        out.contains("deployment.apps/wasmctrl serverside-applied"),
        "{out}"
    );

    let deployment = cluster
        .get_json(&["deployment", "wasmctrl", "-n", "wasmctrl"])
        .unwrap();
    let spec = &deployment["spec"]["template"]["spec"];
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(spec["serviceAccountName"], "wasmctrl");
    let args = spec["containers"][0]["args"].as_array().unwrap();
    assert!(args.contains(&"--leader-elect".into()));
    assert!(args.contains(&"--metrics-bind-address=:8443".into()));
    assert_eq!(spec["containers"][0]["ports"][0]["containerPort"], 8443);
    // Every plugin's ConfigMap was accepted (kube's 1 MiB limit holds: compressed), and what
    // the host will read from it is the plugin.
    for name in EXAMPLE_PLUGINS {
        let config_map = cluster
            .get_json(&["configmap", &format!("plugin-{name}"), "-n", "wasmctrl"])
            .unwrap_or_else(|| panic!("the ConfigMap of {name}"));
        let key = format!("{name}.wasm.gz");
        let packed = base64::engine::general_purpose::STANDARD
            .decode(config_map["binaryData"][&key].as_str().unwrap())
            .unwrap();
        let file = dir.path().join(&key);
        std::fs::write(&file, &packed).unwrap();
        assert_eq!(
            wasmctrl::plugins::loader::files::read(&file).unwrap(),
            std::fs::read(common::plugin_path(name)).unwrap(),
            "{name}: the plugin in binaryData"
        );
    }

    // The roles as generated: reads and writes of the kinds declared, nothing else.
    let vms = "virtualmachines.cloudnative.tw";
    assert!(can_i(&cluster, &["list", vms, "-A"]));
    assert!(can_i(&cluster, &["watch", vms, "-n", "default"]));
    assert!(can_i(
        &cluster,
        &["patch", vms, "--subresource=status", "-n", "default"]
    ));
    assert!(!can_i(&cluster, &["update", vms, "-n", "default"]));
    assert!(!can_i(&cluster, &["get", "secrets", "-n", "default"]));
    assert!(!can_i(&cluster, &["list", "configmaps", "-A"]));
    assert!(
        can_i(&cluster, &["create", "pods", "-n", "default"]),
        "workspace owns Pods"
    );
    assert!(can_i(
        &cluster,
        &["create", "events.events.k8s.io", "-n", "default"]
    ));
    assert!(can_i(&cluster, &["create", "leases", "-n", "wasmctrl"]));
    assert!(can_i(
        &cluster,
        &["update", "leases/wasmctrl", "-n", "wasmctrl"]
    ));
    assert!(!can_i(
        &cluster,
        &["update", "leases/another", "-n", "wasmctrl"]
    ));
    assert!(!can_i(&cluster, &["create", "leases", "-n", "default"]));

    // The secure metrics endpoint: the host asks the API server about its scrapers' tokens
    // and access, and may not read metrics itself; a ServiceAccount bound to the
    // metrics-reader ClusterRole may.
    assert!(can_i(
        &cluster,
        &["create", "tokenreviews.authentication.k8s.io", "-A"]
    ));
    assert!(can_i(
        &cluster,
        &["create", "subjectaccessreviews.authorization.k8s.io", "-A"]
    ));
    assert!(!can_i(&cluster, &["get", "/metrics"]));
    let prometheus = "--as=system:serviceaccount:monitoring:prometheus";
    let scrape = ["auth", "can-i", "get", "/metrics", prometheus];
    assert!(!cluster.kubectl(&scrape).0);
    cluster.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "scrape",
        "--clusterrole=wasmctrl-metrics-reader",
        "--serviceaccount=monitoring:prometheus",
    ]);
    let (allowed, out) = cluster.kubectl(&scrape);
    assert!(allowed, "{out}");
}

/// The generated RBAC for `plugins` with the rule granting `resource` taken out.
fn without_rule(plugins: &Path, resource: &str) -> String {
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&rbac_yaml(plugins))
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let mut removed = 0;
    let docs: Vec<String> = docs
        .into_iter()
        .map(|mut doc| {
            if let Some(rules) = doc["rules"].as_array_mut() {
                let before = rules.len();
                rules.retain(|r| {
                    !(r["resources"].as_array()).is_some_and(|rs| rs.contains(&resource.into()))
                });
                removed += before - rules.len();
            }
            serde_yaml::to_string(&doc).unwrap()
        })
        .collect();
    assert_eq!(removed, 1, "one rule grants {resource}");
    docs.join("---\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_rule_fails_the_reconcile_with_a_named_403_until_it_is_granted() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    cluster.kubectl_ok(&["apply", "-f", "examples/virtualmachine/crd.yaml"]);
    let plugins = plugin_dir(dir.path(), &[("virtualmachine", None)]);
    cluster.apply_yaml(&without_rule(&plugins, "virtualmachines/status"));
    let kubeconfig = cluster.service_account_kubeconfig("wasmctrl", "wasmctrl");
    let host = cluster.run_host_with(&kubeconfig, &plugins, &[], &[]);
    cluster.kubectl_ok(&["apply", "-f", "examples/virtualmachine/test-vm.yaml"]);

    let client = cluster.client().await;
    let events = common::events(&client, "default");
    let warning = common::eventually(30, "a Forbidden warning on the VirtualMachine", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.data["regarding"]["name"] == "test-vm" && e.data["reason"] == "Forbidden")
    })
    .await;
    assert_eq!(warning.data["type"], "Warning");
    let note = warning.data["note"].as_str().unwrap();
    assert!(
        note.contains(r#"User "system:serviceaccount:wasmctrl:wasmctrl" cannot patch resource "virtualmachines/status" in API group "cloudnative.tw" in the namespace "default""#),
        "{note}"
    );
    let status = |cluster: &Cluster| {
        let vm = cluster.get_json(&["virtualmachine", "test-vm"]).unwrap();
        vm["status"]["phase"].clone()
    };
    assert_eq!(
        status(&cluster),
        Value::Null,
        "not reconciled without the rule"
    );

    // Granted again, the same host (no restart) reconciles it on its next retry.
    let pid = host.pid();
    cluster.apply_yaml(&rbac_yaml(&plugins));
    wait_for(60, "the VirtualMachine to be reconciled", || {
        status(&cluster) == "Active"
    });
    assert_eq!(host.pid(), pid);
    let status = host.terminate();
    assert!(status.success(), "exit {status}");
}
