//! The catalog of resources: the built-in kinds and the resources CustomResourceDefinitions
//! add (what discovery lists; what each kind's objects go through is its strategy's, `registry`).
//!
//! The built-in kinds are every resource kube-apiserver serves by default, read from one list
//! kept as data, `data/builtin-resources.json` (taken from kube-apiserver's own discovery; see
//! `data/README.md`), never from a hand list: group, versions, names, scope, verbs, short
//! names, categories and subresources are kube's.
//!
//! One [`Resource`] per served group/resource with the discovery facts clients rely on
//! (kind, plural, singular, short names, scope, verbs, status subresource) and, for custom
//! resources, the parsed schema of each served version (parsed here, once per registration).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::schema::{self, Schema};

/// Verbs of a normal resource, as discovery lists them.
pub const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// One served resource (`group`/`plural`), possibly in several versions.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// API group (`""` for core).
    pub group: String,
    /// Served versions; the first is the preferred one.
    pub versions: Vec<String>,
    /// Plural resource name (`configmaps`).
    pub plural: String,
    /// Singular name (`configmap`).
    pub singular: String,
    /// Kind (`ConfigMap`).
    pub kind: String,
    /// List kind (`ConfigMapList`).
    pub list_kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`cm`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Has a `/status` subresource.
    pub status: bool,
    /// Defined by a CustomResourceDefinition (no strategic merge patch).
    pub custom: bool,
    /// A custom resource's `additionalPrinterColumns` by served version (built-in kinds print
    /// through `super::printers`).
    pub columns: BTreeMap<String, Vec<PrinterColumn>>,
    /// A custom resource's `selectableFields`: `(field label, JSON pointer)`, e.g.
    /// `("spec.color", "/spec/color")` (built-in kinds' are in `super::selector`).
    pub selectable: Vec<(String, String)>,
    /// Structural schema per served version (custom resources whose CRD has one).
    pub schemas: BTreeMap<String, Arc<Schema>>,
    /// Only `create`, and nothing is stored: access reviews, answered at once.
    pub create_only: bool,
    /// The verbs it serves, as discovery lists them.
    pub verbs: Vec<String>,
    /// The subresources this server implements for it ([`SERVED_SUBRESOURCES`]), of those
    /// kube has.
    pub subresources: Vec<String>,
    /// A custom resource's conversion webhook (its CRD's `spec.conversion.webhook`) when its
    /// strategy is `Webhook`; `None` converts between versions by rewriting `apiVersion`.
    pub conversion: Option<Arc<Value>>,
    /// A custom resource's `openAPIV3Schema` per served version, as its CRD gives it (for the
    /// OpenAPI documents).
    pub openapi: BTreeMap<String, Arc<Value>>,
}

/// The subresources this server implements, of those kube's discovery lists.
pub const SERVED_SUBRESOURCES: &[&str] = &[
    "status",
    "scale",
    "token",
    "binding",
    "eviction",
    "ephemeralcontainers",
    "approval",
];

/// One entry of `data/builtin-resources.json`.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Builtin {
    group: String,
    versions: Vec<String>,
    resource: String,
    singular: String,
    kind: String,
    namespaced: bool,
    verbs: Vec<String>,
    #[serde(default)]
    short_names: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
    #[serde(default)]
    subresources: Vec<BuiltinSubresource>,
}

#[derive(Debug, serde::Deserialize)]
struct BuiltinSubresource {
    name: String,
}

/// The list itself.
const BUILTIN: &str = include_str!("../data/builtin-resources.json");

/// Every built-in resource, from [`BUILTIN`].
fn builtins() -> Vec<Resource> {
    // The file is part of the crate, checked by its tests: it always parses.
    let list: Vec<Builtin> = serde_json::from_str(BUILTIN).unwrap_or_default();
    list.into_iter()
        .map(|b| {
            let subresources: Vec<String> = (b.subresources.into_iter())
                .map(|s| s.name)
                .filter(|s| SERVED_SUBRESOURCES.contains(&s.as_str()))
                .collect();
            Resource {
                list_kind: format!("{}List", b.kind),
                status: subresources.iter().any(|s| s == "status"),
                create_only: b.verbs == ["create"],
                group: b.group,
                versions: b.versions,
                plural: b.resource,
                singular: b.singular,
                kind: b.kind,
                namespaced: b.namespaced,
                short_names: b.short_names,
                categories: b.categories,
                custom: false,
                columns: BTreeMap::new(),
                selectable: vec![],
                schemas: BTreeMap::new(),
                verbs: b.verbs,
                subresources,
                openapi: BTreeMap::new(),
                conversion: None,
            }
        })
        .collect()
}

impl Resource {
    /// Whether it is `events.k8s.io`'s view of the core Events.
    pub fn is_events_v1(&self) -> bool {
        self.group == "events.k8s.io" && self.plural == "events"
    }

    /// Whether it has a `scale` subresource.
    pub fn has_scale(&self) -> bool {
        self.subresources.iter().any(|s| s == "scale")
    }

    /// Whether it serves `verb`.
    pub fn serves_verb(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// `group/version` or `version` for core.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// Whether `version` is served.
    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }

    /// A custom resource's printer columns at `version` (none for a built-in kind).
    pub fn columns_at(&self, version: &str) -> &[PrinterColumn] {
        self.columns
            .get(version)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The version objects are written in: a CRD's storage version (served first), a built-in
    /// kind's preferred one.
    pub fn storage_version(&self) -> &str {
        self.versions
            .first()
            .map(String::as_str)
            .unwrap_or_default()
    }
}

/// Storage key of a resource: group and plural (versions share storage).
pub type ResKey = (String, String);

/// Where the objects of `res` are stored: under its own group and plural, except that
/// `events.k8s.io` Events are the core Events.
pub fn storage_key(res: &Resource) -> ResKey {
    if res.is_events_v1() {
        (String::new(), res.plural.clone())
    } else {
        (res.group.clone(), res.plural.clone())
    }
}

/// One of a CRD's `additionalPrinterColumns`.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub ty: String,
    pub json_path: String,
    /// 0 shows always, more only with `kubectl get -o wide`.
    pub priority: u64,
}

/// All served resources.
#[derive(Debug, Clone)]
pub struct Catalog {
    resources: BTreeMap<ResKey, Arc<Resource>>,
}

impl Default for Catalog {
    fn default() -> Self {
        let resources = builtins()
            .into_iter()
            .map(|r| ((r.group.clone(), r.plural.clone()), Arc::new(r)))
            .collect();
        Self { resources }
    }
}

impl Catalog {
    /// The resource at `group/version/plural`, if served.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Resource>> {
        self.resources
            .get(&(group.to_string(), plural.to_string()))
            .filter(|r| r.serves(version))
            .cloned()
    }

    /// The resource by storage key regardless of version.
    pub fn by_key(&self, key: &ResKey) -> Option<Arc<Resource>> {
        self.resources.get(key).cloned()
    }

    /// Every resource.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Resource>> {
        self.resources.values()
    }

    /// Groups with their served versions (core group first, then sorted).
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in self.resources.values() {
            let vs = out.entry(r.group.clone()).or_default();
            for v in &r.versions {
                if !vs.contains(v) {
                    vs.push(v.clone());
                }
            }
        }
        out
    }

    /// Resources served at `group/version`.
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<Resource>> {
        self.resources
            .values()
            .filter(|r| r.group == group && r.serves(version))
            .cloned()
            .collect()
    }

    /// Adds or replaces the resource a CRD defines. Returns false if the CRD spec is unusable.
    pub fn register_crd(&mut self, crd: &Value) -> bool {
        match crd_resource(crd) {
            Some(r) => {
                self.resources
                    .insert((r.group.clone(), r.plural.clone()), Arc::new(r));
                true
            }
            None => false,
        }
    }

    /// Removes the resource a CRD defined.
    pub fn unregister_crd(&mut self, crd: &Value) {
        if let Some(r) = crd_resource(crd) {
            self.resources.remove(&(r.group, r.plural));
        }
    }
}

/// The resource a CRD object describes (served versions only), or `None` if malformed.
pub fn crd_resource(crd: &Value) -> Option<Resource> {
    let spec = crd.get("spec")?;
    let names = spec.get("names")?;
    let group = spec.get("group")?.as_str()?.to_string();
    let plural = names.get("plural")?.as_str()?.to_string();
    let kind = names.get("kind")?.as_str()?.to_string();
    let strs = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let Served {
        mut versions,
        columns,
        selectable,
        status,
        storage,
        openapi,
    } = Served::of(spec.get("versions")?.as_array()?)?;
    let schemas = match schema::crd_schemas(crd) {
        Ok(all) => all
            .into_iter()
            .filter(|(v, _)| versions.contains(v))
            .map(|(v, s)| (v, Arc::new(s)))
            .collect(),
        Err(causes) => {
            // Writes refuse such CRDs (admission); only an older data directory can hold one,
            // and its resources stay served, unvalidated, rather than vanish.
            tracing::warn!(crd = %str_of(crd), ?causes, "unusable CRD schema; not enforcing it");
            BTreeMap::new()
        }
    };
    // Preferred version: kube sorts by version priority; the storage version is a fair stand-in.
    if let Some(s) = storage {
        versions.retain(|v| *v != s);
        versions.insert(0, s);
    }
    Some(Resource {
        group,
        versions,
        singular: names
            .get("singular")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| kind.to_lowercase()),
        list_kind: names
            .get("listKind")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| format!("{kind}List")),
        plural,
        kind,
        namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
        short_names: strs(names.get("shortNames")),
        categories: strs(names.get("categories")),
        status,
        custom: true,
        columns,
        selectable,
        schemas,
        create_only: false,
        verbs: VERBS.iter().map(|v| v.to_string()).collect(),
        subresources: if status {
            vec!["status".into()]
        } else {
            vec![]
        },
        openapi,
        conversion: conversion_webhook(spec),
    })
}

/// A CRD's conversion webhook: `spec.conversion.webhook` when the strategy is `Webhook`.
fn conversion_webhook(spec: &Value) -> Option<Arc<Value>> {
    let conversion = spec.get("conversion")?;
    if conversion.get("strategy").and_then(Value::as_str) != Some("Webhook") {
        return None;
    }
    conversion.get("webhook").cloned().map(Arc::new)
}

/// What a CRD's served versions say: their names, each one's printer columns, the selectable
/// fields (of the first that has any), whether they have a status subresource, which one is stored,
/// and each one's OpenAPI schema.
struct Served {
    versions: Vec<String>,
    columns: BTreeMap<String, Vec<PrinterColumn>>,
    selectable: Vec<(String, String)>,
    status: bool,
    storage: Option<String>,
    openapi: BTreeMap<String, Arc<Value>>,
}

impl Served {
    /// `None` when no version is served or one has no name.
    fn of(versions: &[Value]) -> Option<Self> {
        let mut served = Served {
            versions: Vec::new(),
            columns: BTreeMap::new(),
            selectable: Vec::new(),
            status: false,
            storage: None,
            openapi: BTreeMap::new(),
        };
        for v in versions {
            if v.get("served").and_then(Value::as_bool) != Some(true) {
                continue;
            }
            let name = v.get("name")?.as_str()?.to_string();
            (served.columns).insert(name.clone(), printer_columns(v));
            if served.selectable.is_empty() {
                served.selectable = selectable_fields(v);
            }
            served.status |= v.pointer("/subresources/status").is_some();
            if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
                (served.openapi).insert(name.clone(), Arc::new(schema.clone()));
            }
            if v.get("storage").and_then(Value::as_bool) == Some(true) {
                served.storage = Some(name.clone());
            }
            served.versions.push(name);
        }
        (!served.versions.is_empty()).then_some(served)
    }
}

/// A CRD version's `additionalPrinterColumns`.
fn printer_columns(version: &Value) -> Vec<PrinterColumn> {
    (version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array))
    .into_iter()
    .flatten()
    .map(|c| {
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        PrinterColumn {
            name: s("name"),
            ty: s("type"),
            json_path: s("jsonPath"),
            priority: c.get("priority").and_then(Value::as_u64).unwrap_or(0),
        }
    })
    .collect()
}

/// A CRD version's `selectableFields`: each as its field label and the JSON pointer to it.
fn selectable_fields(version: &Value) -> Vec<(String, String)> {
    (version.get("selectableFields").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(|f| f.get("jsonPath")?.as_str())
        .map(|path| {
            let label = path.trim_start_matches('.');
            let pointer: String = label.split('.').map(|p| format!("/{p}")).collect();
            (label.to_string(), pointer)
        })
        .collect()
}

fn str_of(crd: &Value) -> &str {
    crd.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The `status` a CRD gets once its names are accepted and it is served.
pub fn crd_status(crd: &Value, now: &str) -> Value {
    let names = crd
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut accepted = names.clone();
    if accepted.get("singular").is_none()
        && let Some(k) = names.get("kind").and_then(Value::as_str)
    {
        accepted["singular"] = json!(k.to_lowercase());
    }
    if accepted.get("listKind").is_none()
        && let Some(k) = names.get("kind").and_then(Value::as_str)
    {
        accepted["listKind"] = json!(format!("{k}List"));
    }
    let stored: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    json!({
        "acceptedNames": accepted,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": stored,
    })
}
