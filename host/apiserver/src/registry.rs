//! The resource registry: built-in kinds and the resources CustomResourceDefinitions add.
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
    /// A custom resource's `additionalPrinterColumns` (built-in kinds print through
    /// `super::printers`).
    pub columns: Vec<PrinterColumn>,
    /// A custom resource's `selectableFields`: `(field label, JSON pointer)`, e.g.
    /// `("spec.color", "/spec/color")` (built-in kinds' are in `super::selector`).
    pub selectable: Vec<(String, String)>,
    /// Structural schema per served version (custom resources whose CRD has one).
    pub schemas: BTreeMap<String, Arc<Schema>>,
    /// Only `create`, and nothing is stored: access reviews, answered at once.
    pub create_only: bool,
}

impl Resource {
    /// Whether it is `events.k8s.io`'s view of the core Events.
    pub fn is_events_v1(&self) -> bool {
        self.group == "events.k8s.io" && self.plural == "events"
    }

    /// Whether it has a `scale` subresource.
    pub fn has_scale(&self) -> bool {
        self.group == "apps" && self.plural == "deployments"
    }

    /// Whether its objects carry `metadata.generation`. kube-apiserver sets and bumps it only
    /// where a kind's strategy does: custom resources, CRDs and the workload kinds (here
    /// Deployments); ConfigMaps, Secrets, Namespaces, Services, Events, Pods (before 1.33) and
    /// the rest have none, so a `generation-changed` predicate passes every change of theirs.
    pub fn has_generation(&self) -> bool {
        self.custom
            || matches!(
                (self.group.as_str(), self.kind.as_str()),
                ("apps", "Deployment") | ("apiextensions.k8s.io", "CustomResourceDefinition")
            )
    }

    /// Whether a PUT without a resourceVersion overwrites whatever is stored (kube's
    /// `AllowUnconditionalUpdate`): true for most built-in kinds; custom resources, CRDs and
    /// Leases (of what is served here) insist on one, so no write blindly replaces another's.
    pub fn allows_unconditional_update(&self) -> bool {
        !(self.custom
            || matches!(
                (self.group.as_str(), self.plural.as_str()),
                ("coordination.k8s.io", "leases")
                    | ("apiextensions.k8s.io", "customresourcedefinitions")
            ))
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

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    all: bool,
    status: bool,
) -> Resource {
    Resource {
        group: group.into(),
        versions: vec![version.into()],
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: if all { vec!["all".into()] } else { vec![] },
        status,
        custom: false,
        columns: vec![],
        selectable: vec![],
        schemas: BTreeMap::new(),
        create_only: false,
    }
}

/// A kind of `rbac.authorization.k8s.io/v1`.
fn rbac(plural: &str, kind: &str, namespaced: bool) -> Resource {
    builtin(RBAC, "v1", plural, kind, namespaced, &[], false, false)
}

/// A create-only, never stored resource of `group`/v1: an access review
/// (`authorization.k8s.io`) or a token review (`authentication.k8s.io`).
fn review(group: &str, plural: &str, kind: &str) -> Resource {
    Resource {
        create_only: true,
        ..builtin(group, "v1", plural, kind, false, &[], false, false)
    }
}

const RBAC: &str = "rbac.authorization.k8s.io";
const AUTHORIZATION: &str = "authorization.k8s.io";

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
pub struct Registry {
    resources: BTreeMap<ResKey, Arc<Resource>>,
}

impl Default for Registry {
    fn default() -> Self {
        let list = [
            builtin(
                "",
                "v1",
                "namespaces",
                "Namespace",
                false,
                &["ns"],
                false,
                true,
            ),
            builtin("", "v1", "pods", "Pod", true, &["po"], true, true),
            builtin(
                "",
                "v1",
                "configmaps",
                "ConfigMap",
                true,
                &["cm"],
                false,
                false,
            ),
            builtin("", "v1", "secrets", "Secret", true, &[], false, false),
            builtin("", "v1", "services", "Service", true, &["svc"], true, true),
            builtin("", "v1", "events", "Event", true, &["ev"], false, false),
            builtin(
                "events.k8s.io",
                "v1",
                "events",
                "Event",
                true,
                &["ev"],
                false,
                false,
            ),
            builtin(
                "apps",
                "v1",
                "deployments",
                "Deployment",
                true,
                &["deploy"],
                true,
                true,
            ),
            builtin(
                "coordination.k8s.io",
                "v1",
                "leases",
                "Lease",
                true,
                &[],
                false,
                false,
            ),
            builtin(
                "",
                "v1",
                "serviceaccounts",
                "ServiceAccount",
                true,
                &["sa"],
                false,
                false,
            ),
            rbac("roles", "Role", true),
            rbac("rolebindings", "RoleBinding", true),
            rbac("clusterroles", "ClusterRole", false),
            rbac("clusterrolebindings", "ClusterRoleBinding", false),
            review(
                AUTHORIZATION,
                "selfsubjectaccessreviews",
                "SelfSubjectAccessReview",
            ),
            review(AUTHORIZATION, "subjectaccessreviews", "SubjectAccessReview"),
            review("authentication.k8s.io", "tokenreviews", "TokenReview"),
            builtin(
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
                &["crd", "crds"],
                false,
                true,
            ),
        ];
        let resources = list
            .into_iter()
            .map(|r| ((r.group.clone(), r.plural.clone()), Arc::new(r)))
            .collect();
        Self { resources }
    }
}

impl Registry {
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
    let mut versions = Vec::new();
    let mut columns = Vec::new();
    let mut selectable = Vec::new();
    let mut status = false;
    let mut storage_first = None;
    for v in spec.get("versions")?.as_array()? {
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let name = v.get("name")?.as_str()?.to_string();
        if columns.is_empty() {
            for c in v
                .get("additionalPrinterColumns")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                columns.push(PrinterColumn {
                    name: s("name"),
                    ty: s("type"),
                    json_path: s("jsonPath"),
                    priority: c.get("priority").and_then(Value::as_u64).unwrap_or(0),
                });
            }
        }
        if selectable.is_empty() {
            selectable = v
                .get("selectableFields")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|f| f.get("jsonPath")?.as_str())
                .map(|path| {
                    let label = path.trim_start_matches('.');
                    let pointer: String = label.split('.').map(|p| format!("/{p}")).collect();
                    (label.to_string(), pointer)
                })
                .collect();
        }
        if v.pointer("/subresources/status").is_some() {
            status = true;
        }
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            storage_first = Some(name.clone());
        }
        versions.push(name);
    }
    if versions.is_empty() {
        return None;
    }
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
    if let Some(s) = storage_first {
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
    })
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
