//! The sandbox's scope promise through the real binaries: a plugin declared for namespace
//! `team-a` tries to read, list, patch, apply and delete in `team-b`, and to list outside its
//! label selector (a get finds nothing there: the host never even caches it). Each attempt is
//! refused with an error naming verb, kind and namespace, left
//! as a Warning event on the object, and never reaches the API server (its request log says so);
//! the same plugin's legitimate work in `team-a` succeeds in the same run, and an object in
//! `team-b` is never reconciled at all.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use common::process::{Cluster, plugin_dir};

/// One worker, so keys are reconciled in the order they were queued: once a later key is done,
/// an earlier one would have been too.
const CONFIG: &str = "concurrency = 1\n[settings]\nmode = \"scope\"\n";

/// Each attempt the plugin makes (the Thing's `try` label) and what its refusal must name.
const ESCAPES: [(&str, &str, &str); 6] = [
    (
        "get-other",
        "ReadRefused",
        "get v1/Secret team-b/data refused",
    ),
    (
        "list-other",
        "ReadRefused",
        "list v1/Secret in namespace team-b refused",
    ),
    (
        "list-hidden",
        "ReadRefused",
        "list v1/Secret in namespace team-a refused: the selector visible=no asks for labels outside",
    ),
    (
        "patch-other",
        "ActionRejected",
        "patch apps/v1/Deployment team-b/tools refused",
    ),
    (
        "apply-other",
        "ActionRejected",
        "apply v1/ConfigMap team-b/apply-other-child refused",
    ),
    (
        "delete-other",
        "ActionRejected",
        "delete apps/v1/Deployment team-b/tools refused",
    ),
];

fn api(
    client: &kube::Client,
    namespace: &str,
    gvk: (&str, &str, &str),
    plural: &str,
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(gvk.0, gvk.1, gvk.2);
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

async fn create(api: &Api<DynamicObject>, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

fn thing(namespace: &str, name: &str, attempt: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": name, "namespace": namespace, "labels": {"try": attempt}}})
}

async fn setup_namespace(client: &kube::Client, namespace: &str) {
    let namespaces: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("", "v1", "Namespace"),
            "namespaces",
        ),
    );
    create(
        &namespaces,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
    )
    .await;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "tools", "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": "tools"}},
            "template": {"metadata": {"labels": {"app": "tools"}},
                "spec": {"containers": [{"name": "tools", "image": "busybox"}]}}}});
    create(
        &api(
            client,
            namespace,
            ("apps", "v1", "Deployment"),
            "deployments",
        ),
        deployment,
    )
    .await;
    let secrets = api(client, namespace, ("", "v1", "Secret"), "secrets");
    for (name, visible) in [("data", "yes"), ("hidden", "no")] {
        create(
            &secrets,
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": {"visible": visible}},
            "stringData": {"password": "hunter2"}}),
        )
        .await;
    }
}

/// The Warning events about Thing `name` in `team-a`, by reason.
async fn warnings(client: &kube::Client, name: &str) -> Vec<(String, String)> {
    let events = common::events(client, "team-a");
    events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.data["regarding"]["name"] == name && e.data["type"] == "Warning")
        .map(|e| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (text(&e.data["reason"]), text(&e.data["note"]))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_reaches_nothing_outside_its_declared_namespace_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    let setup_done = setup(&cluster, &client).await;
    let plugins = plugin_dir(dir.path(), &[("hostile", Some(CONFIG))]);
    let host = cluster.run_host(&plugins, &[], &[]);
    escapes_are_refused(&cluster, &client, setup_done, host, "hostile-scope").await;
}

/// A namespaced `WasmPlugin` is a tenant's: the same plugin, declared for every namespace and
/// pulled from a registry, is confined by the host to the resource's namespace, and every
/// attempt beyond it is refused exactly as for a plugin that declared only that namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_plugin_declared_for_all_namespaces_acts_in_its_own_only() {
    let dir = tempfile::tempdir().unwrap();
    let registry = common::registry::Registry::start();
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    cluster.kubectl_ok(&["apply", "-f", "examples/deploy/crds.yaml"]);
    let pushed = std::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(["push", common::plugin_path("hostile").to_str().unwrap()])
        .arg(format!("{}/plugins/hostile:1", registry.addr))
        .args(["--insecure-registry", &registry.addr])
        .output()
        .unwrap();
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    let setup_done = setup(&cluster, &client).await;
    let absent = dir.path().join("no-plugin-directory");
    let serve = [
        "--plugin-resources",
        "--insecure-registry",
        &registry.addr,
        "--tenant-registries",
        &registry.addr,
    ];
    let host = cluster.run_host(&absent, &serve, &[]);
    let resource = format!(
        "apiVersion: wasmctrl.io/v1alpha1\nkind: WasmPlugin\nmetadata:\n  name: hostile\n  namespace: team-a\nspec:\n  module: oci://{}/plugins/hostile:1\n  concurrency: 1\n  settings:\n    mode: scope\n    allNamespaces: true\n",
        registry.addr
    );
    // It acts as team-a's `default` ServiceAccount, which gets what `wasmctrl rbac` grants
    // the plugin there.
    let file = dir.path().join("tenant.yaml");
    std::fs::write(&file, &resource).unwrap();
    let resources = ["--resources", file.to_str().unwrap()];
    let pull = ["--insecure-registry", registry.addr.as_str()];
    cluster.apply_yaml(&common::process::rbac_yaml_with(
        &absent,
        &[&resources[..], &pull[..]].concat(),
    ));
    cluster.apply_yaml(&resource);
    common::eventually(60, "the WasmPlugin Ready", || async {
        let object = cluster.get_json(&["wasmplugin", "hostile", "-n", "team-a"])?;
        let conditions = object["status"]["conditions"].as_array()?.clone();
        let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
        (ready["status"] == "True").then_some(())
    })
    .await;
    let permissions = cluster
        .get_json(&["wasmplugin", "hostile", "-n", "team-a"])
        .unwrap()["status"]["permissions"]
        .clone();
    let permissions: Vec<&str> = permissions
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!permissions.is_empty());
    assert!(
        permissions.iter().all(|p| p.contains("[team-a]")),
        "only in team-a: {permissions:?}"
    );
    escapes_are_refused(&cluster, &client, setup_done, host, "team-a-hostile").await;
}

/// Namespaces `team-a` and `team-b` with a Deployment and Secrets each, Things in team-b the
/// plugin must never touch; returns the length of the request log once done.
async fn setup(cluster: &Cluster, client: &kube::Client) -> usize {
    let client = client.clone();
    common::things::install(&client).await;
    setup_namespace(&client, "team-a").await;
    setup_namespace(&client, "team-b").await;
    let things_b = api(&client, "team-b", ("example.com", "v1", "Thing"), "things");
    // Things in team-b: one the plugin must never reconcile, and one whose name matches a
    // team-a Thing, owning a ConfigMap there (an owned-kind event that names a team-b key).
    create(&things_b, thing("team-b", "intruder", "legit")).await;
    let cms_b = api(&client, "team-b", ("", "v1", "ConfigMap"), "configmaps");
    create(
        &cms_b,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "bait", "namespace": "team-b", "ownerReferences": [{
            "apiVersion": "example.com/v1", "kind": "Thing", "name": "intruder",
            "uid": "00000000-0000-0000-0000-000000000000", "controller": true}]}}),
    )
    .await;
    cluster.requests().await.len()
}

/// Drives the plugin `plugin` (the hostile one in `scope` mode, one worker, served by `host`)
/// through every escape, and checks that each is refused and nothing reached team-b.
async fn escapes_are_refused(
    cluster: &Cluster,
    client: &kube::Client,
    setup_done: usize,
    host: common::process::Process,
    plugin: &str,
) {
    let client = client.clone();
    let things_a = api(&client, "team-a", ("example.com", "v1", "Thing"), "things");
    let things_b = api(&client, "team-b", ("example.com", "v1", "Thing"), "things");
    let cms_b = api(&client, "team-b", ("", "v1", "ConfigMap"), "configmaps");
    for (attempt, _, _) in ESCAPES {
        create(&things_a, thing("team-a", attempt, attempt)).await;
    }
    create(&things_a, thing("team-a", "get-hidden", "get-hidden")).await;
    create(&things_a, thing("team-a", "legit", "legit")).await;

    // Every escape is refused, named, and reported on its object.
    for (attempt, reason, needle) in ESCAPES {
        let found = common::eventually(30, &format!("the {attempt} refusal"), || async {
            let warnings = warnings(&client, attempt).await;
            warnings.into_iter().find(|(r, _)| r == reason)
        })
        .await;
        assert!(found.1.contains(needle), "{attempt}: {}", found.1);
        assert!(found.1.contains(plugin), "names the plugin: {}", found.1);
        assert!(
            found.1.contains(&format!("team-a/{attempt}")),
            "names the key: {}",
            found.1
        );
    }
    // One refused action refuses the whole result: the status update before it was not sent.
    let escaping = things_a.get("patch-other").await.unwrap();
    assert!(escaping.data.get("status").is_none(), "{:?}", escaping.data);
    // The legitimate work of the same plugin lands.
    let status = common::eventually(30, "the legitimate reconcile", || async {
        let thing = things_a.get("legit").await.ok()?;
        (thing.data["status"]["phase"] == "Done").then(|| thing.data["status"].clone())
    })
    .await;
    assert_eq!(
        status,
        json!({"phase": "Done", "visible": true, "listed": 1})
    );
    // A Secret outside the plugin's label selector is not even in its cache: not found.
    let hidden = common::eventually(30, "the get-hidden reconcile", || async {
        let thing = things_a.get("get-hidden").await.ok()?;
        thing.data.get("status").cloned()
    })
    .await;
    assert_eq!(hidden, json!({"phase": "Hidden", "found": false}));
    let cms_a = api(&client, "team-a", ("", "v1", "ConfigMap"), "configmaps");
    assert!(cms_a.get_opt("legit-child").await.unwrap().is_some());
    let deployments_a = api(
        &client,
        "team-a",
        ("apps", "v1", "Deployment"),
        "deployments",
    );
    let tools_a = deployments_a.get("tools").await.unwrap();
    assert_eq!(
        tools_a.data["spec"]["template"]["metadata"]["annotations"]["restartedBy"],
        "legit"
    );

    // One more key, queued after every event above: once it is done, the team-b objects' events
    // have been through the host too (one worker, keys in order).
    create(&things_a, thing("team-a", "last", "legit")).await;
    common::eventually(30, "the last reconcile", || async {
        let thing = things_a.get("last").await.ok()?;
        (thing.data["status"]["phase"] == "Done").then_some(())
    })
    .await;
    let log = cluster.requests().await;
    let host_requests = &log[setup_done..];
    let into_team_b: Vec<&Value> = host_requests
        .iter()
        .filter(|r| r["namespace"] == "team-b")
        .collect();
    assert!(
        into_team_b.is_empty(),
        "requests into team-b: {into_team_b:#?}"
    );
    // Least data: every list and watch the host made is limited to what the plugin declared,
    // by namespace and label selector, on the server.
    let reads: Vec<(String, String, String)> = host_requests
        .iter()
        // The host's lists and watches for the plugin; events are only ever listed by this
        // test, and plugin resources are the host's own.
        .filter(|r| r["verb"] == "list" || r["verb"] == "watch")
        .filter(|r| {
            !["events", "wasmplugins", "clusterwasmplugins"]
                .contains(&r["resource"].as_str().unwrap_or_default())
        })
        .map(|r| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                text(&r["resource"]),
                text(&r["namespace"]),
                text(&r["labelSelector"]),
            )
        })
        .collect();
    for (resource, namespace, labels) in &reads {
        assert_eq!(
            namespace, "team-a",
            "{resource} read beyond team-a: {reads:?}"
        );
        let declared = if resource == "secrets" {
            "visible=yes"
        } else {
            ""
        };
        assert_eq!(
            labels, declared,
            "{resource} read beyond its selector: {reads:?}"
        );
    }
    let resources: std::collections::BTreeSet<&str> =
        reads.iter().map(|(r, _, _)| r.as_str()).collect();
    assert_eq!(
        resources.into_iter().collect::<Vec<_>>(),
        ["configmaps", "secrets", "things"]
    );
    drop(host);

    // Nothing in team-b changed, and its Thing was never reconciled.
    let intruder = things_b.get("intruder").await.unwrap();
    assert!(intruder.data.get("status").is_none(), "{:?}", intruder.data);
    let deployments_b = api(
        &client,
        "team-b",
        ("apps", "v1", "Deployment"),
        "deployments",
    );
    let tools_b = deployments_b.get("tools").await.unwrap();
    assert!(
        tools_b.data["spec"]["template"]["metadata"]["annotations"].is_null(),
        "{:?}",
        tools_b.data
    );
    assert!(cms_b.get_opt("apply-other-child").await.unwrap().is_none());
    assert!(cms_b.get_opt("bait-child").await.unwrap().is_none());
    let events_b = api(
        &client,
        "team-b",
        ("events.k8s.io", "v1", "Event"),
        "events",
    );
    // The cluster's own controllers record Events there too (the Deployment's ReplicaSet); none
    // may come from a plugin.
    let mut about_team_b = events_b.list(&Default::default()).await.unwrap().items;
    about_team_b.retain(|e| {
        (e.data["reportingController"].as_str()).is_some_and(|c| c.starts_with("wasmctrl"))
    });
    assert!(
        about_team_b.is_empty(),
        "plugin events in team-b: {about_team_b:?}"
    );
}
