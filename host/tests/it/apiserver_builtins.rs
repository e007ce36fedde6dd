//! The embedded API server serves every resource kube-apiserver serves by default, as kube
//! describes them: `kubectl api-resources` matches what kube-apiserver v1.32 lists (checked in,
//! `tests/data/api-resources-1.32.tsv`), each resource with all the verbs goes through a create,
//! get, list, watch, patch and delete round trip, verbs kube does not serve answer 405, and the
//! create-only APIs answer as kube's do (`kubectl auth whoami`, `kubectl auth can-i --list`,
//! LocalSubjectAccessReview, a scheduler's Binding).

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeSet;

use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use common::process::Cluster;

/// The rows kube-apiserver v1.32 lists, without its header.
fn expected_rows() -> BTreeSet<Vec<String>> {
    let text =
        std::fs::read_to_string(common::repo_root().join("host/tests/data/api-resources-1.32.tsv"))
            .unwrap();
    (text.lines())
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// `kubectl api-resources -o wide` parsed into the same rows (columns found by the header's
/// offsets, as kubectl aligns them).
fn served_rows(cluster: &Cluster) -> BTreeSet<Vec<String>> {
    let out = cluster.kubectl_ok(&["api-resources", "-o", "wide"]);
    let mut lines = out.lines();
    let header = lines.next().unwrap();
    let names = [
        "NAME",
        "SHORTNAMES",
        "APIVERSION",
        "NAMESPACED",
        "KIND",
        "VERBS",
        "CATEGORIES",
    ];
    let starts: Vec<usize> = names.iter().map(|n| header.find(n).unwrap()).collect();
    lines
        .map(|line| {
            (0..names.len())
                .map(|i| {
                    let end = starts
                        .get(i + 1)
                        .copied()
                        .unwrap_or(line.len())
                        .min(line.len());
                    let cell = line.get(starts[i]..end).unwrap_or_default().trim();
                    let cell = cell.trim_start_matches('[').trim_end_matches(']');
                    if i == 5 {
                        // Verbs print as `[create delete ...]`.
                        let mut verbs: Vec<&str> =
                            cell.split([' ', ',']).filter(|v| !v.is_empty()).collect();
                        verbs.sort();
                        verbs.join(",")
                    } else {
                        cell.replace(' ', ",")
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn kubectl_api_resources_lists_what_kube_serves() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    let served = served_rows(&cluster);
    let expected = expected_rows();
    let missing: Vec<_> = expected.difference(&served).collect();
    let extra: Vec<_> = served.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "not as kube lists them:\nmissing {missing:#?}\nextra {extra:#?}"
    );
}

/// An object of `kind` the server accepts: kube's minimal valid object for the kinds it
/// validates, a bare one for the rest.
fn object(kind: &str, api_version: &str, name: &str, namespace: Option<&str>) -> Value {
    let containers = json!([{"name": "c", "image": "busybox"}]);
    let template =
        json!({"metadata": {"labels": {"app": name}}, "spec": {"containers": containers}});
    let selector = json!({"matchLabels": {"app": name}});
    let body = match kind {
        "Pod" => json!({"spec": {"containers": containers}}),
        "Service" => json!({"spec": {"ports": [{"port": 80}]}}),
        "Deployment" | "ReplicaSet" | "DaemonSet" => {
            json!({"spec": {"selector": selector, "template": template}})
        }
        "StatefulSet" => {
            json!({"spec": {"selector": selector, "template": template, "serviceName": name}})
        }
        "ReplicationController" => {
            json!({"spec": {"selector": {"app": name}, "template": template}})
        }
        "Event" if api_version == "v1" => {
            json!({"involvedObject": {"kind": "Pod", "name": "p", "namespace": namespace}, "reason": "Test", "message": "m"})
        }
        "Event" => {
            json!({"eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "test", "reportingInstance": "test",
            "action": "Test", "reason": "Test", "regarding": {"kind": "Pod", "name": "p", "namespace": namespace}, "type": "Normal"})
        }
        "Job" => {
            json!({"spec": {"template": {"spec": {"containers": containers, "restartPolicy": "Never"}}}})
        }
        "CronJob" => {
            json!({"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": containers, "restartPolicy": "OnFailure"}}}}}})
        }
        "PodTemplate" => json!({"template": template}),
        "ControllerRevision" => json!({"data": {"spec": {}}, "revision": 1}),
        "PersistentVolumeClaim" => {
            json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
        }
        "PersistentVolume" => {
            json!({"spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/data"}}})
        }
        "Ingress" => {
            json!({"spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}})
        }
        "Lease" => json!({"spec": {"holderIdentity": "x"}}),
        "ValidatingAdmissionPolicy" => json!({"spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["example.com"],
                "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["things"]}]},
            "validations": [{"expression": "true"}]}}),
        "ValidatingAdmissionPolicyBinding" => json!({"spec": {
            "policyName": "nothing.example.com", "validationActions": ["Deny"]}}),
        "Role" | "ClusterRole" => json!({"rules": []}),
        "RoleBinding" | "ClusterRoleBinding" => {
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}, "subjects": []})
        }
        "CustomResourceDefinition" => {
            json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": format!("{name}s"), "singular": name, "kind": "Thing", "listKind": "ThingList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
        }
        _ => json!({}),
    };
    let mut object = body;
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    // A CRD is named after what it defines.
    let name = if kind == "CustomResourceDefinition" {
        format!("{name}s.example.com")
    } else {
        name.to_string()
    };
    object["metadata"] = json!({"name": name});
    if let Some(ns) = namespace {
        object["metadata"]["namespace"] = json!(ns);
    }
    object
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_resource_with_all_verbs_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    let client = cluster.client().await;
    let all = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    let mut tried = 0;
    for row in expected_rows() {
        let [plural, _, api_version, namespaced, kind, verbs, _] = row.as_slice() else {
            panic!("{row:?}");
        };
        let verbs: BTreeSet<&str> = verbs.split(',').collect();
        if !all.iter().all(|v| verbs.contains(v)) || plural == "namespaces" {
            continue;
        }
        tried += 1;
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
        let namespace = (namespaced == "true").then_some("default");
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let name = format!("rt-{}", kind.to_lowercase());
        let what = format!("{plural}.{group}");
        let mut watch = api
            .watch(&WatchParams::default(), "0")
            .await
            .unwrap_or_else(|e| panic!("{what}: watch: {e}"))
            .boxed();
        let created: DynamicObject =
            serde_json::from_value(object(kind, api_version, &name, namespace)).unwrap();
        let name = created.metadata.name.clone().unwrap();
        api.create(&PostParams::default(), &created)
            .await
            .unwrap_or_else(|e| panic!("{what}: create: {e}"));
        // From "0": what exists first (the bootstrap RBAC), then ours.
        loop {
            let event = watch.try_next().await;
            match event.unwrap_or_else(|e| panic!("{what}: watch: {e}")) {
                Some(WatchEvent::Added(o)) if o.metadata.name.as_deref() == Some(&name) => break,
                Some(_) => continue,
                None => panic!("{what}: the watch ended"),
            }
        }
        let got = api
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("{what}: get: {e}"));
        assert_eq!(got.types.as_ref().unwrap().kind, *kind, "{what}");
        let listed = api
            .list(&Default::default())
            .await
            .unwrap_or_else(|e| panic!("{what}: list: {e}"));
        assert!(
            listed
                .items
                .iter()
                .any(|o| o.metadata.name.as_deref() == Some(&name)),
            "{what}"
        );
        let patch = json!({"metadata": {"labels": {"round": "trip"}}});
        let patched = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("{what}: patch: {e}"));
        assert_eq!(patched.metadata.labels.unwrap()["round"], "trip", "{what}");
        api.delete(&name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("{what}: delete: {e}"));
    }
    assert!(tried >= 40, "{tried} resources tried");
}

#[test]
fn verbs_kube_does_not_serve_answer_405_and_the_create_only_apis_answer() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    // No create of ComponentStatuses, no deletecollection of Namespaces: 405, as kube.
    let cs = dir.path().join("cs.yaml");
    std::fs::write(
        &cs,
        "apiVersion: v1\nkind: ComponentStatus\nmetadata:\n  name: x\nconditions: []\n",
    )
    .unwrap();
    let (ok, out) = cluster.kubectl(&["create", "-f", cs.to_str().unwrap()]);
    assert!(
        !ok && out.contains("the server does not allow this method on the requested resource"),
        "{out}"
    );

    // Who am I, and what may I do.
    let whoami = cluster.kubectl_ok(&["auth", "whoami", "-o", "json"]);
    let whoami: Value = serde_json::from_str(&whoami).unwrap();
    assert!(
        whoami["status"]["userInfo"]["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:masters")),
        "{whoami}"
    );
    cluster.kubectl_ok(&["create", "namespace", "team-a"]);
    cluster.kubectl_ok(&["create", "serviceaccount", "reader", "-n", "team-a"]);
    cluster.kubectl_ok(&[
        "create",
        "role",
        "reader",
        "-n",
        "team-a",
        "--verb=get,list",
        "--resource=configmaps",
    ]);
    cluster.kubectl_ok(&[
        "create",
        "rolebinding",
        "reader",
        "-n",
        "team-a",
        "--role=reader",
        "--serviceaccount=team-a:reader",
    ]);
    let list = cluster.kubectl_ok(&[
        "auth",
        "can-i",
        "--list",
        "-n",
        "team-a",
        "--as=system:serviceaccount:team-a:reader",
    ]);
    let configmaps = list
        .lines()
        .find(|l| l.starts_with("configmaps"))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(configmaps.contains("[get list]"), "{list}");
    assert!(
        list.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "system:basic-user's rules too: {list}"
    );

    // A LocalSubjectAccessReview is about its own namespace only.
    let lsar = |namespace: &str| {
        let file = dir.path().join(format!("lsar-{namespace}.json"));
        let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
            "metadata": {"namespace": "team-a"},
            "spec": {"user": "system:serviceaccount:team-a:reader", "groups": ["system:serviceaccounts"],
                "resourceAttributes": {"verb": "list", "resource": "configmaps", "namespace": namespace}}});
        std::fs::write(&file, review.to_string()).unwrap();
        cluster.kubectl(&["create", "-f", file.to_str().unwrap(), "-o", "json"])
    };
    let (ok, out) = lsar("team-a");
    assert!(ok, "{out}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["status"]["allowed"],
        true,
        "{out}"
    );
    let (ok, out) = lsar("team-b");
    assert!(!ok && out.contains("must match namespace: team-a"), "{out}");

    // A scheduler's Binding assigns the Pod to its Node, once.
    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: team-a\nspec:\n  containers:\n  - name: c\n    image: busybox\n").unwrap();
    cluster.kubectl_ok(&["create", "-f", pod.to_str().unwrap()]);
    let binding = dir.path().join("binding.json");
    let body = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": "team-a"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
    std::fs::write(&binding, body.to_string()).unwrap();
    cluster.kubectl_ok(&["create", "-f", binding.to_str().unwrap()]);
    let bound = cluster.get_json(&["pod", "p", "-n", "team-a"]).unwrap();
    assert_eq!(bound["spec"]["nodeName"], "node-1");
    let scheduled = bound["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .cloned();
    assert_eq!(scheduled.unwrap()["status"], "True");
    let (ok, out) = cluster.kubectl(&["create", "-f", binding.to_str().unwrap()]);
    assert!(
        !ok && out.contains("is already assigned to node \"node-1\""),
        "{out}"
    );
}

/// `POST` of `object` to `path` with `?fieldValidation=<directive>`: status, `Warning` headers
/// and body.
/// Installs the `Widget` CRD (example.com/v1): a spec of a size and named parts.
async fn install_widgets(client: &kube::Client) {
    common::install_crd(client, json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"},
                        "parts": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}}}}}}]}
    }))
    .await;
}

async fn post(
    client: &kube::Client,
    path: &str,
    directive: Option<&str>,
    object: &Value,
) -> (u16, Vec<String>, Value) {
    let uri = match directive {
        Some(d) => format!("{path}?fieldValidation={d}"),
        None => path.to_string(),
    };
    common::http::send(client, "POST", &uri, object).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_duplicate_fields_of_custom_resources_and_builtin_kinds_are_refused_warned_about_or_dropped()
 {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    let client = cluster.client().await;
    install_widgets(&client).await;
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let widget = |name: &str| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": 3, "color": "red", "parts": [{"name": "a", "weight": 2}]}})
    };
    let unknown = [
        r#"unknown field "spec.color""#,
        r#"unknown field "spec.parts[0].weight""#,
    ];

    // Strict: 400, every unknown field named as kube's strict decoding names them.
    let (status, _, body) = post(&client, path, Some("Strict"), &widget("strict")).await;
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            r#"Widget in version "v1" cannot be handled as a Widget: strict decoding error: "#
        ),
        "{message}"
    );
    for field in unknown {
        assert!(message.contains(field), "{field} in {message}");
    }
    // Warn (and no directive, kube's default): stored without them, one Warning each.
    for (name, directive) in [("warn", Some("Warn")), ("default", None)] {
        let (status, warnings, body) = post(&client, path, directive, &widget(name)).await;
        assert_eq!(status, 201, "{body}");
        for field in unknown {
            let header = format!("299 - {:?}", field);
            assert!(warnings.contains(&header), "{header} in {warnings:?}");
        }
        assert!(body["spec"].get("color").is_none(), "{body}");
        assert_eq!(body["spec"]["parts"][0], json!({"name": "a"}));
    }
    // Ignore: dropped, quietly.
    let (status, warnings, body) = post(&client, path, Some("Ignore"), &widget("ignore")).await;
    assert_eq!((status, warnings.len()), (201, 0), "{body}");
    assert!(body["spec"].get("color").is_none(), "{body}");
    // A built-in kind alike, its fields those of its type.
    let deployment = |name: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "colour": "red"},
            "spec": {"selector": {"matchLabels": {"app": name}}, "replica": 3,
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "busybox", "sidecar": true}]}}}})
    };
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let (status, _, body) = post(&client, deployments, Some("Strict"), &deployment("strict")).await;
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.starts_with(r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: "#), "{message}");
    for field in [
        "metadata.colour",
        "spec.replica",
        "spec.template.spec.containers[0].sidecar",
    ] {
        assert!(
            message.contains(&format!("unknown field {field:?}")),
            "{field} in {message}"
        );
    }
    let (status, warnings, body) = post(&client, deployments, None, &deployment("warn")).await;
    assert_eq!((status, warnings.len()), (201, 3), "{body} {warnings:?}");
    assert!(
        body["spec"].get("replica").is_none() && body["metadata"].get("colour").is_none(),
        "{body}"
    );
    // kubectl sends Strict and prints kube's error.
    let file = dir.path().join("widget.json");
    std::fs::write(&file, widget("kubectl").to_string()).unwrap();
    let (ok, out) = cluster.kubectl(&["create", "-f", file.to_str().unwrap(), "--validate=strict"]);
    assert!(
        !ok && out.contains(r#"strict decoding error: unknown field "spec.color""#),
        "{out}"
    );
    let (ok, out) = cluster.kubectl(&["create", "-f", file.to_str().unwrap(), "--validate=warn"]);
    assert!(
        ok && out.contains(r#"Warning: unknown field "spec.color""#),
        "{out}"
    );

    // Fields named twice, alike: named with the unknown ones, the last value kept (objects
    // merged, as Go decodes them). Read off kube-apiserver 1.32.
    let config_map = |name: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","labels":{{"a":"1","a":"2"}}}},"data":{{"k":"1","k":"2"}},"data":{{"z":"3"}}}}"#
        )
    };
    let raw = |path: &'static str, directive: &str, body: String| {
        let client = client.clone();
        let uri = format!("{path}?fieldValidation={directive}");
        async move { common::http::send_raw(&client, "POST", &uri, body.into_bytes()).await }
    };
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let (status, _, body) = raw(configmaps, "Strict", config_map("strict")).await;
    assert_eq!(
        (status, body["message"].as_str().unwrap()),
        (
            400,
            r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "metadata.labels.a", duplicate field "data.k", duplicate field "data""#
        )
    );
    let (status, warnings, body) = raw(configmaps, "Warn", config_map("warn")).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        warnings,
        [
            r#"299 - "duplicate field \"metadata.labels.a\"""#,
            r#"299 - "duplicate field \"data.k\"""#,
            r#"299 - "duplicate field \"data\"""#
        ]
    );
    assert_eq!(
        (&body["data"], &body["metadata"]["labels"]),
        (&json!({"k": "2", "z": "3"}), &json!({"a": "2"}))
    );
    let (status, warnings, _) = raw(configmaps, "Ignore", config_map("ignore")).await;
    assert_eq!((status, warnings.len()), (201, 0));
    let widget = r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"dup"},"spec":{"size":1,"size":2,"color":"x"}}"#;
    let (status, _, body) = raw(path, "Strict", widget.to_string()).await;
    assert_eq!(
        (status, body["message"].as_str().unwrap()),
        (
            400,
            r#"Widget in version "v1" cannot be handled as a Widget: strict decoding error: duplicate field "spec.size", unknown field "spec.color""#
        )
    );
    let (status, warnings, body) = raw(path, "Warn", widget.to_string()).await;
    assert_eq!(
        (status, warnings.len(), &body["spec"]),
        (201, 2, &json!({"size": 2})),
        "{warnings:?}"
    );
}

#[test]
fn kubectl_explain_reads_kubes_schemas_of_builtin_kinds_and_crds() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    cluster.kubectl_ok(&["apply", "-f", "examples/virtualmachine/crd.yaml"]);
    for (what, field, words) in [
        (
            "deployment.spec.strategy",
            "FIELD: strategy <DeploymentStrategy>",
            "The deployment strategy to use to replace existing pods with new ones.",
        ),
        (
            "statefulset.spec.volumeClaimTemplates",
            "FIELD: volumeClaimTemplates <[]PersistentVolumeClaim>",
            "volumeClaimTemplates is a list of claims that pods are allowed to reference.",
        ),
        (
            "virtualmachine.spec",
            "FIELD: spec <Object>",
            "The requested resources and power action.",
        ),
    ] {
        let out = cluster.kubectl_ok(&["explain", what]);
        assert!(out.contains(field) && out.contains(words), "{what}: {out}");
    }
}

/// A `List` is not a resource, so kubectl validates its items itself, against the OpenAPI v2
/// document (`/openapi/v2`, protobuf): one written by `kubectl get -o yaml` creates again with
/// validation on, and a wrong type or an unknown field in an item is refused before anything
/// is sent, in kubectl's words for kube-apiserver 1.32 (read off it).
#[test]
fn kubectl_creates_a_list_it_wrote_with_validation_on_and_refuses_a_wrong_one() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    cluster.kubectl_ok(&["apply", "-f", "examples/virtualmachine/crd.yaml"]);
    cluster.kubectl_ok(&["create", "deployment", "web", "--image=nginx"]);
    cluster.kubectl_ok(&["create", "configmap", "settings", "--from-literal=a=b"]);
    cluster.kubectl_ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    cluster.kubectl_ok(&["apply", "-f", "examples/virtualmachine/test-vm.yaml"]);
    let objects = [
        "deployment/web",
        "configmap/settings",
        "service/web",
        "virtualmachine/test-vm",
    ];
    let list = cluster.kubectl_ok(&[&["get", "-o", "yaml"][..], &objects[..]].concat());
    let file = dir.path().join("list.yaml");
    std::fs::write(&file, &list).unwrap();
    cluster.kubectl_ok(&["delete", "-f", file.to_str().unwrap(), "--wait=false"]);
    wait_for_gone(&cluster, &objects);
    let out = cluster.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    for created in [
        "deployment.apps/web created",
        "configmap/settings created",
        "service/web created",
        "virtualmachine.cloudnative.tw/test-vm created",
    ] {
        assert!(out.contains(created), "{out}");
    }

    for (change, error) in [
        (
            ("  replicas: 1\n", "  replicas: \"three\"\n"),
            "ValidationError(Deployment.spec.replicas): invalid type for io.k8s.api.apps.v1.DeploymentSpec.replicas: got \"string\", expected \"integer\"",
        ),
        (
            ("  replicas: 1\n", "  replicas: 1\n    foo: bar\n"),
            "ValidationError(Deployment.spec): unknown field \"foo\" in io.k8s.api.apps.v1.DeploymentSpec",
        ),
    ] {
        assert!(list.contains(change.0), "{list}");
        let wrong = dir.path().join("wrong.yaml");
        std::fs::write(&wrong, list.replacen(change.0, change.1, 1)).unwrap();
        let (ok, out) = cluster.kubectl(&["create", "-f", wrong.to_str().unwrap()]);
        assert!(
            !ok && out.contains("error validating data") && out.contains(error),
            "{out}"
        );
    }
}

/// Waits until each of `objects` is gone.
fn wait_for_gone(cluster: &Cluster, objects: &[&str]) {
    common::process::wait_for(30, "the objects to be deleted", || {
        objects.iter().all(|o| !cluster.kubectl(&["get", o]).0)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_and_services_read_back_with_kubes_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    let client = cluster.client().await;
    let create = |path: &'static str, object: Value| {
        let client = client.clone();
        async move {
            let (status, _, body) = post(&client, path, Some("Strict"), &object).await;
            assert_eq!(status, 201, "{body}");
            body
        }
    };
    let labels = json!({"app": "web"});
    let pod = json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
        "ports": [{"containerPort": 80}], "readinessProbe": {"httpGet": {"port": 80}}}]}});
    // What kube-apiserver 1.32 stores for these (kubectl get -o json), field by field.
    let template_spec = json!({"containers": [{"name": "web", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
        "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"}, "timeoutSeconds": 1,
            "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
        "resources": {}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "securityContext": {}, "schedulerName": "default-scheduler"});

    let deployment = create(
        "/apis/apps/v1/namespaces/default/deployments",
        json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": labels}, "template": pod}}),
    )
    .await;
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(spec["template"]["spec"], template_spec);

    let statefulset = create("/apis/apps/v1/namespaces/default/statefulsets", json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"selector": {"matchLabels": labels}, "serviceName": "db", "template": pod,
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}]}})).await;
    let spec = &statefulset["spec"];
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(
        spec["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    assert_eq!(
        spec["volumeClaimTemplates"][0]["spec"]["volumeMode"],
        "Filesystem"
    );
    assert_eq!(
        spec["volumeClaimTemplates"][0]["kind"],
        "PersistentVolumeClaim"
    );
    assert_eq!(spec["template"]["spec"], template_spec);

    let job = create("/apis/batch/v1/namespaces/default/jobs", json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl"}]}}}})).await;
    let uid = job["metadata"]["uid"].as_str().unwrap();
    let spec = &job["spec"];
    assert_eq!(
        (
            spec["completions"].clone(),
            spec["parallelism"].clone(),
            spec["backoffLimit"].clone()
        ),
        (json!(1), json!(1), json!(6))
    );
    assert_eq!(
        (spec["completionMode"].clone(), spec["suspend"].clone()),
        (json!("NonIndexed"), json!(false))
    );
    assert_eq!(
        spec["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    );
    assert_eq!(
        spec["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"],
        "pi"
    );
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );

    let service = create(
        "/api/v1/namespaces/default/services",
        json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": labels, "ports": [{"port": 80}]}}),
    )
    .await;
    let spec = &service["spec"];
    let ip = spec["clusterIP"].as_str().unwrap();
    assert!(ip.parse::<std::net::Ipv4Addr>().is_ok(), "{ip}");
    assert_eq!(spec["clusterIPs"], json!([ip]));
    assert_eq!(
        spec["ports"],
        json!([{"port": 80, "protocol": "TCP", "targetPort": 80}])
    );
    for (field, value) in [
        ("type", "ClusterIP"),
        ("sessionAffinity", "None"),
        ("ipFamilyPolicy", "SingleStack"),
        ("internalTrafficPolicy", "Cluster"),
    ] {
        assert_eq!(spec[field], value, "{field}");
    }
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    // Another Service gets another address, and an update keeps its own.
    let other = create("/api/v1/namespaces/default/services", json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "other"}, "spec": {"ports": [{"port": 81}]}})).await;
    assert_ne!(other["spec"]["clusterIP"], ip);
    let services: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Service"), "services"),
    );
    let patch = json!({"metadata": {"labels": {"tier": "front"}}});
    let patched = services
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["clusterIP"], ip);
}

/// A Pod's `binding` and `eviction` subresources answer as kube-apiserver 1.32 does (read off
/// it): an eviction deletes a Pod unless its PodDisruptionBudget, once processed, allows no
/// disruption (429, the budget named); a pending or unready Pod goes while the budget holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_bound_and_evicted_through_their_subresources() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    // Without kube-rs's retries: a refused eviction's 429 comes with a Retry-After.
    let mut config = cluster.client_config().await;
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let pods = "/api/v1/namespaces/default/pods";
    let send = |method: &'static str, path: String, body: Value| {
        let client = client.clone();
        async move { common::http::send(&client, method, &path, &body).await }
    };
    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "ev"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    };
    let evict = |name: &str| {
        let body =
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
        send("POST", format!("{pods}/{name}/eviction"), body)
    };
    let success = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
    let budgets = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    let budget = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "evpdb"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "ev"}}}});
    assert_eq!(send("POST", budgets.into(), budget).await.0, 201);

    // Pending: evicted whatever the budget says.
    assert_eq!(send("POST", pods.into(), pod("pending")).await.0, 201);
    let (status, _, body) = evict("pending").await;
    assert_eq!((status, body), (201, success.clone()));
    assert_eq!(
        send("GET", format!("{pods}/pending"), Value::Null).await.0,
        404
    );

    // Running, the budget not yet processed (no disruption controller here, as without one).
    assert_eq!(send("POST", pods.into(), pod("web")).await.0, 201);
    let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    cluster.kubectl_ok(&[
        "patch",
        "pod",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        &running.to_string(),
    ]);
    let (status, _, body) = evict("web").await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(
        body["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(
        body["details"]["causes"],
        json!([{"reason": "DisruptionBudget", "message": "The disruption budget evpdb is still being processed by the server."}])
    );
    assert_eq!(body["details"]["retryAfterSeconds"], 10);
    // Processed, allowing none: refused, naming what it needs; allowing one: evicted, counted.
    let set_budget = |allowed: i64| {
        let status = json!({"status": {"observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}});
        cluster.kubectl_ok(&[
            "patch",
            "pdb",
            "evpdb",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ]);
    };
    set_budget(0);
    let (status, _, body) = evict("web").await;
    assert_eq!(
        (status, &body["details"]["causes"][0]["message"]),
        (
            429,
            &json!("The disruption budget evpdb needs 1 healthy pods and has 1 currently")
        )
    );
    set_budget(1);
    let (status, _, body) = evict("web").await;
    assert_eq!((status, body), (201, success));
    let (_, _, after) = send("GET", format!("{budgets}/evpdb"), Value::Null).await;
    assert_eq!(after["status"]["disruptionsAllowed"], 0);
    let (status, _, body) = evict("web").await;
    assert_eq!((status, body["reason"].as_str()), (404, Some("NotFound")));

    // A scheduler's Binding through the Pod's own subresource: its name must be the Pod's.
    assert_eq!(send("POST", pods.into(), pod("bound")).await.0, 201);
    let binding = |name: &str| json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": "n1"}});
    let (status, _, body) = send("POST", format!("{pods}/bound/binding"), binding("other")).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (
            400,
            Some("name in URL does not match name in Binding object")
        )
    );
    let (status, _, _) = send("POST", format!("{pods}/bound/binding"), binding("bound")).await;
    assert_eq!(status, 201);
    let (_, _, bound) = send("GET", format!("{pods}/bound"), Value::Null).await;
    assert_eq!(bound["spec"]["nodeName"], "n1");
}

/// One request with `headers`: the status, the Content-Type and the body as bytes.
async fn exchange(
    client: &kube::Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, String, Vec<u8>) {
    let (status, headers, body) = common::http::request(client, method, path, headers, body).await;
    let content_type = (headers.get("content-type"))
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, content_type, body)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Clients that prefer protobuf (client-go's for built-in kinds, as kube's controllers use)
/// get it for objects, lists, metadata-only lists, errors and watch streams (length-prefixed
/// `WatchEvent`s, each object in its own envelope), laid out as kube-apiserver 1.32 writes them;
/// custom resources, which have no protobuf form, answer JSON to a client that takes it, 406 to
/// one that does not, and 415 to a protobuf body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_clients_get_objects_lists_errors_and_watches_in_protobuf() {
    const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::in_memory(dir.path());
    let client = cluster.client().await;
    let configmaps: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap")),
    );
    let cm: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings"}, "data": {"mode": "fast"}}))
    .unwrap();
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let prefer = [(
        "accept",
        "application/vnd.kubernetes.protobuf, application/json",
    )];

    let (status, ct, body) = exchange(&client, "GET", path, &prefer, vec![]).await;
    assert_eq!((status, ct.as_str()), (200, PROTOBUF));
    assert!(body.starts_with(b"k8s\0"), "{body:?}");
    for part in [&b"ConfigMapList"[..], b"settings", b"mode", b"fast"] {
        assert!(contains(&body, part), "{}", String::from_utf8_lossy(&body));
    }

    let meta = [(
        "accept",
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json",
    )];
    let (status, ct, body) = exchange(&client, "GET", path, &meta, vec![]).await;
    assert_eq!((status, ct.as_str()), (200, PROTOBUF));
    assert!(contains(&body, b"PartialObjectMetadataList") && !contains(&body, b"fast"));

    let (status, ct, body) =
        exchange(&client, "GET", &format!("{path}/nope"), &prefer, vec![]).await;
    assert_eq!((status, ct.as_str()), (404, PROTOBUF));
    assert!(contains(&body, b"Status") && contains(&body, b"NotFound"));

    let watch = format!(
        "{path}?watch=1&resourceVersion=0&timeoutSeconds=1&fieldSelector=metadata.name%3Dsettings"
    );
    let (status, ct, body) = exchange(&client, "GET", &watch, &prefer, vec![]).await;
    assert_eq!(
        (status, ct.as_str()),
        (200, "application/vnd.kubernetes.protobuf;stream=watch")
    );
    let mut frames = Vec::new();
    let mut rest = &body[..];
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let len = u32::from_be_bytes(*len) as usize;
        assert!(tail.len() >= len, "a frame cut short: {body:?}");
        frames.push(&tail[..len]);
        rest = &tail[len..];
    }
    assert!(rest.is_empty() && !frames.is_empty(), "{body:?}");
    // `type = 1` "ADDED", `object = 2` a RawExtension holding the ConfigMap in its envelope.
    assert!(
        frames[0].starts_with(b"\x0a\x05ADDED\x12"),
        "{:?}",
        frames[0]
    );
    assert!(contains(frames[0], b"k8s\0") && contains(frames[0], b"settings"));

    install_widgets(&client).await;
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let (status, ct, _) = exchange(&client, "GET", widgets, &prefer, vec![]).await;
    assert_eq!((status, ct.as_str()), (200, "application/json"));
    let only = [("accept", PROTOBUF)];
    let (status, ct, body) = exchange(&client, "GET", widgets, &only, vec![]).await;
    assert_eq!((status, ct.as_str()), (406, PROTOBUF));
    assert!(contains(&body, b"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"));
    let mut envelope = b"k8s\0\x0a\x18\x0a\x0eexample.com/v1\x12\x06Widget".to_vec();
    envelope.extend(b"\x12\x00");
    let send = [("content-type", PROTOBUF)];
    let (status, _, body) = exchange(&client, "POST", widgets, &send, envelope).await;
    assert_eq!(status, 415, "{}", String::from_utf8_lossy(&body));
}
