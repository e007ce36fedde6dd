//! Discovery documents: legacy (`/api`, `/apis`, `/api/v1`, `/apis/{g}/{v}`), aggregated
//! (`as=APIGroupDiscoveryList`, apidiscovery.k8s.io/v2), `/version`, and the OpenAPI v3 index
//! and per-group-version documents kubectl reads to learn that the server validates fields
//! itself (`fieldValidation`) and which patch types each kind accepts.

use std::sync::Arc;

use serde_json::{Value, json};

use super::catalog::{Catalog, Resource};
use super::typed;

/// Whether the Accept header asks for aggregated discovery v2.
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|p| {
        p.contains("as=APIGroupDiscoveryList")
            && p.contains("g=apidiscovery.k8s.io")
            && p.contains("v=v2")
            && !p.contains("v=v2beta1")
    })
}

/// Content-Type of an aggregated discovery answer.
pub const AGGREGATED_CT: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// `/api` (legacy).
pub fn api_versions(addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}],
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({ "name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null) })
}

/// `/apis` (legacy).
pub fn api_groups(reg: &Catalog) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `/apis/{g}`.
pub fn api_group(reg: &Catalog, group: &str) -> Option<Value> {
    let groups = reg.groups();
    let vs = groups.get(group).filter(|_| !group.is_empty())?;
    let mut g = group_json(group, vs);
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

/// The verbs a resource serves.
fn verbs(r: &Resource) -> Value {
    json!(r.verbs)
}

/// Each subresource served, with its verbs and kind: `(name, group, version, kind, verbs)`;
/// an empty group and version mean the resource's own.
fn subresources(r: &Resource) -> Vec<(&'static str, &'static str, &'static str, String, Value)> {
    let mut out = Vec::new();
    for sub in &r.subresources {
        match sub.as_str() {
            "status" => out.push((
                "status",
                "",
                "",
                r.kind.clone(),
                json!(["get", "patch", "update"]),
            )),
            "scale" => out.push((
                "scale",
                "autoscaling",
                "v1",
                "Scale".into(),
                json!(["get", "patch", "update"]),
            )),
            "token" => out.push((
                "token",
                "authentication.k8s.io",
                "v1",
                "TokenRequest".into(),
                json!(["create"]),
            )),
            _ => {}
        }
    }
    out
}

/// `/api/v1` or `/apis/{g}/{v}` (legacy APIResourceList).
pub fn resource_list(reg: &Catalog, group: &str, version: &str) -> Option<Value> {
    let rs = reg.in_group_version(group, version);
    if rs.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for r in &rs {
        let mut e = json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": verbs(r),
        });
        if !r.short_names.is_empty() {
            e["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            e["categories"] = json!(r.categories);
        }
        out.push(e);
        for (sub, group, version, kind, verbs) in subresources(r) {
            let mut e = json!({
                "name": format!("{}/{sub}", r.plural), "singularName": "", "namespaced": r.namespaced,
                "kind": kind, "verbs": verbs,
            });
            if !group.is_empty() {
                e["group"] = json!(group);
                e["version"] = json!(version);
            }
            out.push(e);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out }),
    )
}

fn aggregated_resource(r: &Resource, version: &str) -> Value {
    let rk = json!({"group": r.group, "version": version, "kind": r.kind});
    let mut e = json!({
        "resource": r.plural, "responseKind": rk, "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular, "verbs": verbs(r),
    });
    if !r.short_names.is_empty() {
        e["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        e["categories"] = json!(r.categories);
    }
    let subs: Vec<Value> = subresources(r)
        .into_iter()
        .map(|(sub, group, version, kind, verbs)| {
            let kind = if group.is_empty() {
                rk.clone()
            } else {
                json!({"group": group, "version": version, "kind": kind})
            };
            json!({ "subresource": sub, "responseKind": kind, "verbs": verbs })
        })
        .collect();
    if !subs.is_empty() {
        e["subresources"] = Value::Array(subs);
    }
    e
}

/// Aggregated discovery for `/api` (`core = true`) or `/apis`.
pub fn aggregated(reg: &Catalog, core: bool) -> Value {
    let mut items = Vec::new();
    for (g, vs) in reg.groups() {
        if g.is_empty() != core {
            continue;
        }
        let versions: Vec<Value> = vs
            .iter()
            .map(|v| {
                let rs: Vec<Value> = reg
                    .in_group_version(&g, v)
                    .iter()
                    .map(|r| aggregated_resource(r, v))
                    .collect();
                json!({ "version": v, "resources": rs, "freshness": "Current" })
            })
            .collect();
        items.push(json!({ "metadata": { "name": g }, "versions": versions }));
    }
    json!({ "kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items })
}

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "32", "gitVersion": "v1.32.0-wasmctrl", "gitCommit": "", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "n/a", "compiler": "rustc", "platform": "linux/amd64",
    })
}

/// A short hash of the registry, so OpenAPI URLs change when CRDs do (clients cache by URL).
fn hash(reg: &Catalog, gv: &str) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for r in reg.all() {
        h.update(format!("{r:?}"));
    }
    h.update(gv);
    hex::encode(&h.finalize()[..8])
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the index of per-group-version documents.
pub fn openapi_index(reg: &Catalog) -> Value {
    let mut paths = serde_json::Map::new();
    for (g, vs) in reg.groups() {
        for v in vs {
            let p = gv_path(&g, &v);
            let url = format!("/openapi/v3/{p}?hash={}", hash(reg, &p));
            paths.insert(p, json!({ "serverRelativeURL": url }));
        }
    }
    json!({ "paths": paths })
}

fn op(r: &Resource, version: &str, action: &str, patch: bool) -> Value {
    let mut o = json!({
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": version, "kind": r.kind},
        "parameters": [
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        ],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}},
    });
    // Only non-strategic patch types are advertised: kubectl then computes strategic patches for
    // built-in kinds from its compiled-in types and uses merge patches for custom resources.
    let types: &[&str] = if patch {
        &[
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ]
    } else {
        &["application/json"]
    };
    let content: serde_json::Map<String, Value> = types
        .iter()
        .map(|t| (t.to_string(), json!({"schema": {"type": "object"}})))
        .collect();
    o["requestBody"] = json!({ "content": content });
    o
}

/// `/openapi/v3/{api/v1|apis/g/v}`: paths with the operations and parameters kubectl checks.
pub fn openapi_gv(reg: &Catalog, group: &str, version: &str) -> Option<Value> {
    let rs: Vec<Arc<Resource>> = reg.in_group_version(group, version);
    if rs.is_empty() {
        return None;
    }
    let base = format!("/{}", gv_path(group, version));
    let mut paths = serde_json::Map::new();
    for r in &rs {
        let (coll, item) = if r.namespaced {
            (
                format!("{base}/namespaces/{{namespace}}/{}", r.plural),
                format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural),
            )
        } else {
            (
                format!("{base}/{}", r.plural),
                format!("{base}/{}/{{name}}", r.plural),
            )
        };
        paths.insert(
            coll,
            json!({ "post": op(r, version, "post", false), "get": op(r, version, "list", false) }),
        );
        paths.insert(
            item.clone(),
            json!({ "get": op(r, version, "get", false), "put": op(r, version, "put", false),
                    "patch": op(r, version, "patch", true), "delete": op(r, version, "delete", false) }),
        );
        if r.status {
            paths.insert(format!("{item}/status"), json!({ "get": op(r, version, "get", false), "put": op(r, version, "put", false), "patch": op(r, version, "patch", true) }));
        }
    }
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut schemas = typed::schemas(&api_version);
    for r in rs.iter().filter(|r| r.custom) {
        if let Some(schema) = r.openapi.get(version) {
            let (name, schema) = custom_schema(r, version, schema);
            schemas.insert(name, schema);
            if !schemas.contains_key(OBJECT_META) {
                schemas.extend(typed::object_meta_schemas());
            }
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The name kube gives ObjectMeta's schema.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// A custom resource's schema as kube publishes it: named by its reversed group, version and
/// kind (`com.example.v1.Widget`), its CRD's `openAPIV3Schema` with `apiVersion`, `kind` and
/// `metadata` described as on every object, marked with its group, version and kind.
pub(crate) fn custom_schema(r: &Resource, version: &str, schema: &Value) -> (String, Value) {
    let reversed: Vec<&str> = r.group.split('.').rev().collect();
    let name = format!("{}.{version}.{}", reversed.join("."), r.kind);
    let mut schema = schema.clone();
    let properties = &mut schema["properties"];
    if !properties.is_object() {
        *properties = json!({});
    }
    properties["apiVersion"] = json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."});
    properties["kind"] = json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."});
    properties["metadata"] = json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}],
        "description": "Standard object's metadata."});
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": r.group, "version": version, "kind": r.kind}]);
    (name, schema)
}
