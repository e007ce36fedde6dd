//! Least-privilege RBAC derived from what plugins declare: a ServiceAccount for the host, one
//! Role (or ClusterRole, only where it must be) per plugin granting exactly the requests the
//! host makes for it, and a Role for the host's own needs (leader election, events on its Pod).
//!
//! Beside them, what the secure `/metrics` endpoint needs, as kubebuilder's scaffold ships it:
//! the host's ClusterRole (`<sa>:host`, kubebuilder's `metrics-auth-role`) lets it create
//! TokenReviews and SubjectAccessReviews to check its scrapers, and ClusterRole
//! `<sa>-metrics-reader` (kubebuilder's `metrics-reader`) grants `get` on `/metrics`: bind it
//! to Prometheus's ServiceAccount. It is not bound here: who scrapes is the cluster's choice.
//!
//! The requests the host makes, and so the verbs granted:
//! - informers list and watch every watched, owned and read kind (`get` too, for tools that
//!   inspect the same objects);
//! - the applier server-side applies (`patch`, and `create` when the object is new), merge- or
//!   JSON-patches (`patch`) and deletes (`delete`) owned and writable kinds and the watched
//!   kind; status goes through `<plural>/status` (`patch`); finalizers are JSON Patches of the
//!   object itself, and children carry `blockOwnerDeletion`, which clusters enforcing owner
//!   references check as `update` on the owner's `<plural>/finalizers`;
//! - events.k8s.io Events are created beside the reconciled objects.
//!
//! Namespaces: a plugin declared for some namespaces gets a Role in each; one declared for all
//! namespaces gets a ClusterRole and a ClusterRoleBinding, as do cluster-scoped kinds. The output
//! is sorted and has no wildcards, so it diffs cleanly when plugins change.

pub mod preflight;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use wasmctrl_core::{Gvk, Namespaces, Scope};

use crate::identity::Account;
use crate::kinds::{CrdError, KindInfo, Kinds};

/// Who the RBAC is for.
#[derive(Debug, Clone)]
pub struct Options {
    /// The host's namespace: its ServiceAccount, its Lease and its Pod's events.
    pub namespace: String,
    /// The host's ServiceAccount.
    pub service_account: String,
    /// The leader-election Lease's name (`--leader-election-id`).
    pub lease: String,
    /// The host serves plugin resources (`run --plugin-resources`).
    pub plugin_resources: bool,
    /// The host runs in a shard group (`run --sharding`): each replica creates, renews and
    /// deletes a membership Lease of its own, and lists and watches the others'.
    pub sharding: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            namespace: "wasmctrl".into(),
            service_account: "wasmctrl".into(),
            lease: "wasmctrl".into(),
            plugin_resources: false,
            sharding: false,
        }
    }
}

/// Knows each kind's plural resource and scope: the built-in kinds (from `k8s-openapi`), plus
/// the CRDs it is given.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    kinds: Kinds,
}

impl Resolver {
    /// Learns the kind a CRD (as JSON) defines, or says why it is not a usable CRD.
    pub fn add_crd(&mut self, crd: &Value) -> Result<(), CrdError> {
        self.kinds.add_crd(crd).map(drop)
    }

    /// Learns a kind the API server described (discovery).
    pub fn add(&mut self, info: KindInfo) {
        self.kinds.add(info);
    }

    /// The kind's plural and scope, if known (built in, or learnt).
    pub fn get(&self, kind: &Gvk) -> Option<&KindInfo> {
        self.kinds.get(&kind.group, &kind.kind)
    }

    /// The kind's plural and scope; for a kind it does not know, kube's plural rule and
    /// "namespaced", with a note saying so.
    fn resolve(&self, kind: &Gvk, notes: &mut BTreeSet<String>) -> KindInfo {
        if let Some(info) = self.kinds.get(&kind.group, &kind.kind) {
            return info.clone();
        }
        let plural = kube::core::ApiResource::from_gvk(&kind.into()).plural;
        notes.insert(format!(
            "{kind}: no CRD known for it; assuming it is namespaced with plural {plural:?} (pass --crds, or install the CRD first)"
        ));
        KindInfo {
            group: kind.group.clone(),
            kind: kind.kind.clone(),
            plural,
            namespaced: true,
        }
    }
}

/// RBAC verbs in the order Kubernetes documents them, which is the order rules list them in.
const VERBS: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "impersonate",
];
const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "patch", "delete"];

/// Where a role applies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Cluster,
    Namespace(String),
}

/// (apiGroup, resource, resourceName) -> verbs, for one role.
type Grants = BTreeMap<(String, String, Option<String>), BTreeSet<usize>>;

fn grant(grants: &mut Grants, group: &str, resource: &str, name: Option<&str>, verbs: &[&str]) {
    let set = grants
        .entry((group.into(), resource.into(), name.map(String::from)))
        .or_default();
    set.extend(
        verbs
            .iter()
            .filter_map(|v| VERBS.iter().position(|x| x == v)),
    );
}

/// The places a kind's objects are reached in by a plugin whose objects are in `namespaces`.
fn places(info: &KindInfo, namespaces: &Namespaces) -> Vec<Place> {
    match (info.namespaced, namespaces.names()) {
        (false, _) | (true, None) => vec![Place::Cluster],
        (true, Some(names)) => names.iter().cloned().map(Place::Namespace).collect(),
    }
}

/// Rules in RBAC's shape: resources sharing a group, verbs and resource name go in one rule.
fn rules(grants: &Grants) -> Vec<Value> {
    let mut merged: BTreeMap<(String, Option<String>, Vec<usize>), Vec<String>> = BTreeMap::new();
    for ((group, resource, name), verbs) in grants {
        let key = (group.clone(), name.clone(), verbs.iter().copied().collect());
        merged.entry(key).or_default().push(resource.clone());
    }
    let mut out: Vec<Value> = merged
        .into_iter()
        .map(|((group, name, verbs), resources)| {
            let verbs: Vec<&str> = verbs.iter().map(|&i| VERBS[i]).collect();
            let mut rule = json!({"apiGroups": [group], "resources": resources, "verbs": verbs});
            if let Some(name) = name {
                rule["resourceNames"] = json!([name]);
            }
            rule
        })
        .collect();
    out.sort_by_key(|r| (r["apiGroups"].to_string(), r["resources"].to_string()));
    out
}

/// What one plugin needs, by place.
fn plugin_grants(
    scope: &Scope,
    resolver: &Resolver,
    notes: &mut BTreeSet<String>,
) -> BTreeMap<Place, Grants> {
    let mut by_place: BTreeMap<Place, Grants> = BTreeMap::new();
    let own = scope.namespaces();
    for (kind, all_namespaces) in scope.readable() {
        let info = resolver.resolve(kind, notes);
        for namespaces in all_namespaces {
            for place in places(&info, namespaces) {
                let grants = by_place.entry(place).or_default();
                grant(grants, &info.group, &info.plural, None, READ);
            }
        }
    }
    let mut owns_any = false;
    for (kind, owned) in scope.writable() {
        owns_any |= owned;
        let info = resolver.resolve(kind, notes);
        for place in places(&info, own) {
            let grants = by_place.entry(place).or_default();
            grant(grants, &info.group, &info.plural, None, WRITE);
        }
    }
    let watched = resolver.resolve(scope.watched(), notes);
    for place in places(&watched, own) {
        let grants = by_place.entry(place).or_default();
        let status = format!("{}/status", watched.plural);
        grant(grants, &watched.group, &status, None, &["patch"]);
        if owns_any {
            let finalizers = format!("{}/finalizers", watched.plural);
            grant(grants, &watched.group, &finalizers, None, &["update"]);
        }
    }
    // Events go beside the reconciled object, which is namespaced unless the kind is not.
    let event_places = if watched.namespaced {
        places(&watched, own)
    } else {
        vec![Place::Cluster]
    };
    // `patch`: a repeated event updates its series (`events::Recorders`).
    for place in event_places {
        grant_events(by_place.entry(place).or_default());
    }
    by_place
}

/// One request the host must be allowed to make for a plugin, as a SelfSubjectAccessReview
/// asks it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Requirement {
    /// The verb (`list`, `patch`, ...).
    pub verb: String,
    /// The API group (`""` for core).
    pub group: String,
    /// The resource, with its subresource (`deployments`, `things/status`).
    pub resource: String,
    /// Where: a namespace, or `None` for cluster-wide.
    pub namespace: Option<String>,
}

impl std::fmt::Display for Requirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let resource = match self.group.as_str() {
            "" => self.resource.clone(),
            group => match self.resource.split_once('/') {
                Some((plural, sub)) => format!("{plural}.{group}/{sub}"),
                None => format!("{}.{group}", self.resource),
            },
        };
        match &self.namespace {
            Some(ns) => write!(f, "{} {resource} in namespace {ns}", self.verb),
            None => write!(f, "{} {resource} cluster-wide", self.verb),
        }
    }
}

/// Every request the host makes for a plugin of this scope: what [`generate`] grants it.
pub fn requirements(scope: &Scope, resolver: &Resolver) -> Vec<Requirement> {
    let mut notes = BTreeSet::new();
    let mut out = BTreeSet::new();
    for (place, grants) in plugin_grants(scope, resolver, &mut notes) {
        let namespace = match place {
            Place::Cluster => None,
            Place::Namespace(ns) => Some(ns),
        };
        for ((group, resource, _), verbs) in grants {
            for verb in verbs {
                out.insert(Requirement {
                    verb: VERBS[verb].to_string(),
                    group: group.clone(),
                    resource: resource.clone(),
                    namespace: namespace.clone(),
                });
            }
        }
    }
    out.into_iter().collect()
}

/// What serving `WasmPlugin` and `ClusterWasmPlugin` resources takes (`run
/// --plugin-resources`), everywhere: reading them and writing their status, the
/// `imagePullSecrets` they name (in any namespace: a tenant's are in its own) and events about
/// them. Asking the API server what the host itself may do (the permission preflight's
/// SelfSubjectAccessReviews) every authenticated user may, by kube's `system:basic-user`;
/// asking what a tenant's ServiceAccount may do (SubjectAccessReviews) takes the host's
/// cluster role (`<sa>:host`), which the secure metrics endpoint needs anyway. The right to act
/// as a tenant's account is granted per namespace ([`impersonation_role`]).
fn plugin_resources_grants() -> Grants {
    let mut grants = Grants::new();
    let group = crate::kinds::WASMCTRL_GROUP;
    for plural in ["wasmplugins", "clusterwasmplugins"] {
        grant(&mut grants, group, plural, None, READ);
        grant(
            &mut grants,
            group,
            &format!("{plural}/status"),
            None,
            &["patch"],
        );
    }
    grant(&mut grants, "", "secrets", None, &["get"]);
    grant_events(&mut grants);
    grants
}

/// Recording events (`patch`: a repeated event updates its series, see `events::Recorders`).
fn grant_events(grants: &mut Grants) {
    grant(
        grants,
        "events.k8s.io",
        "events",
        None,
        &["create", "patch"],
    );
}

/// The name of the Role (and its binding) that membership in a shard group takes.
pub fn sharding_role(options: &Options) -> String {
    format!("{}:sharding", options.service_account)
}

/// What a member of a shard group takes (`run --sharding`), in the host's namespace: its own
/// Lease, named after its identity (unknown in advance, so by no name), created, renewed and
/// deleted; the others' listed and watched.
fn sharding_grants() -> Grants {
    let mut grants = Grants::new();
    grant(
        &mut grants,
        "coordination.k8s.io",
        "leases",
        None,
        &["create", "get", "list", "watch", "update", "delete"],
    );
    grants
}

/// The name of the ClusterRole (and its binding) that serving plugin resources takes.
pub fn plugin_resources_role(options: &Options) -> String {
    format!("{}:plugin-resources", options.service_account)
}

/// The host's own needs in its namespace: its leader-election Lease, its Pod (for the events
/// about plugins it records there).
fn host_grants(options: &Options) -> Grants {
    let mut grants = Grants::new();
    grant(
        &mut grants,
        "coordination.k8s.io",
        "leases",
        None,
        &["create"],
    );
    let lease = Some(options.lease.as_str());
    grant(
        &mut grants,
        "coordination.k8s.io",
        "leases",
        lease,
        &["get", "update"],
    );
    grant(&mut grants, "", "pods", None, &["get"]);
    grant_events(&mut grants);
    grants
}

/// What the host needs everywhere: to ask the API server who a scraper's token belongs to and
/// whether it may get `/metrics` (the secure metrics endpoint's TokenReview and
/// SubjectAccessReview).
fn host_cluster_grants() -> Grants {
    let mut grants = Grants::new();
    grant(
        &mut grants,
        "authentication.k8s.io",
        "tokenreviews",
        None,
        &["create"],
    );
    grant(
        &mut grants,
        "authorization.k8s.io",
        "subjectaccessreviews",
        None,
        &["create"],
    );
    grants
}

/// The ClusterRole a scraper of the secure `/metrics` endpoint is bound to.
fn metrics_reader(options: &Options, labels: &Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("{}-metrics-reader", options.service_account), "labels": labels},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    })
}

/// A plugin to grant rights to.
#[derive(Debug, Clone)]
pub struct Grantee {
    /// The name it is served under.
    pub name: String,
    /// What it declares (its config's narrowing applied).
    pub scope: Scope,
    /// The account it acts as (a tenant's ServiceAccount), which its rights go to, the host
    /// being granted only to impersonate it in its namespace; `None`: the host, which its
    /// rights go to.
    pub account: Option<Account>,
}

impl Grantee {
    /// A plugin that acts as the host (a file's, a `ClusterWasmPlugin`'s).
    pub fn host(name: impl Into<String>, scope: Scope) -> Self {
        Self {
            name: name.into(),
            scope,
            account: None,
        }
    }
}

/// The role granting the host the right to act as tenants' ServiceAccounts, in each tenant's
/// namespace (`impersonate` on those accounts by name, never cluster-wide).
pub fn impersonation_role(options: &Options) -> String {
    format!("{}:impersonate", options.service_account)
}

/// The RBAC objects, and notes about guesses made (kinds whose CRD was not given).
pub fn generate(
    plugins: &[Grantee],
    resolver: &Resolver,
    options: &Options,
) -> (Vec<Value>, Vec<String>) {
    let labels =
        json!({"app.kubernetes.io/name": "wasmctrl", "app.kubernetes.io/component": "rbac"});
    let sa = &options.service_account;
    let mut notes = BTreeSet::new();
    let roles = roles(plugins, resolver, options, &mut notes);
    let mut objects = vec![
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": sa, "namespace": options.namespace, "labels": labels},
        }),
        metrics_reader(options, &labels),
    ];
    let mut bindings = Vec::new();
    for ((place, name), (grants, account)) in &roles {
        let (role, binding) =
            role_and_binding(place, name, grants, account.as_ref(), options, &labels);
        objects.push(role);
        bindings.push(binding);
    }
    // Cluster-wide objects first, then by namespace and name, each role before its binding's
    // kind: the order `kubectl apply` needs nothing of, but people read top to bottom.
    objects.extend(bindings);
    objects.sort_by_key(reading_order);
    (objects, notes.into_iter().collect())
}

/// Each role, by where it is and its name: what it grants, and to whom (`None`: the host).
type Roles = BTreeMap<(Place, String), (Grants, Option<Account>)>;

/// The host's roles (its own needs, serving plugin resources, sharding) and each plugin's
/// (bound to the account it acts as, which the host may then impersonate).
fn roles(
    plugins: &[Grantee],
    resolver: &Resolver,
    options: &Options,
    notes: &mut BTreeSet<String>,
) -> Roles {
    let sa = &options.service_account;
    let mut roles = Roles::new();
    let host_namespace = Place::Namespace(options.namespace.clone());
    let host_role = format!("{sa}:host");
    roles.insert(
        (host_namespace.clone(), host_role.clone()),
        (host_grants(options), None),
    );
    roles.insert((Place::Cluster, host_role), (host_cluster_grants(), None));
    if options.plugin_resources {
        roles.insert(
            (Place::Cluster, plugin_resources_role(options)),
            (plugin_resources_grants(), None),
        );
    }
    if options.sharding {
        roles.insert(
            (host_namespace, sharding_role(options)),
            (sharding_grants(), None),
        );
    }
    for plugin in plugins {
        for (place, grants) in plugin_grants(&plugin.scope, resolver, notes) {
            let role = format!("{sa}:{}", plugin.name);
            roles.insert((place, role), (grants, plugin.account.clone()));
        }
        if let Some(account) = &plugin.account {
            let place = Place::Namespace(account.namespace().to_owned());
            let (grants, _) = roles
                .entry((place, impersonation_role(options)))
                .or_default();
            let name = Some(account.name());
            grant(grants, "", "serviceaccounts", name, &["impersonate"]);
        }
    }
    roles
}

/// A Role (or ClusterRole) named `name` at `place` granting `grants`, and its binding to
/// `account` (the host's ServiceAccount when `None`).
fn role_and_binding(
    place: &Place,
    name: &str,
    grants: &Grants,
    account: Option<&Account>,
    options: &Options,
    labels: &Value,
) -> (Value, Value) {
    let subject = match account {
        Some(account) => {
            json!([{"kind": "ServiceAccount", "name": account.name(), "namespace": account.namespace()}])
        }
        None => {
            json!([{"kind": "ServiceAccount", "name": options.service_account, "namespace": options.namespace}])
        }
    };
    let (role_kind, binding_kind, mut metadata) = match place {
        Place::Cluster => (
            "ClusterRole",
            "ClusterRoleBinding",
            json!({"name": name, "labels": labels}),
        ),
        Place::Namespace(ns) => (
            "Role",
            "RoleBinding",
            json!({"name": name, "namespace": ns, "labels": labels}),
        ),
    };
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": role_kind,
        "metadata": metadata, "rules": rules(grants),
    });
    metadata["labels"] = labels.clone();
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": binding_kind,
        "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": subject,
    });
    (role, binding)
}

/// Where an object goes in the printed RBAC: by kind (the ServiceAccount, cluster-wide
/// objects, then namespaced ones), then namespace and name.
fn reading_order(o: &Value) -> (usize, String, String) {
    let kind_rank = [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ]
    .iter()
    .position(|k| o["kind"] == *k)
    .unwrap_or(usize::MAX);
    let ns = o["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
    (kind_rank, ns, name)
}

/// The objects as one multi-document YAML stream.
pub fn to_yaml(objects: &[Value]) -> String {
    let docs: Vec<String> = objects
        .iter()
        .map(|o| serde_yaml::to_string(o).unwrap_or_default())
        .collect();
    docs.join("---\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmctrl_core::LabelSelector;

    fn role<'a>(objects: &'a [Value], kind: &str, ns: Option<&str>, name: &str) -> &'a Value {
        objects
            .iter()
            .find(|o| {
                o["kind"] == kind
                    && o["metadata"]["name"] == name
                    && o["metadata"]["namespace"].as_str() == ns
            })
            .unwrap_or_else(|| panic!("no {kind} {ns:?}/{name} in {objects:#?}"))
    }

    #[test]
    fn a_namespaced_plugin_gets_roles_in_its_namespaces_and_exact_verbs() {
        let scope = Scope::new(
            Gvk::new("example.com", "v1", "Thing"),
            Namespaces::declared(&["team-a", "team-b"]),
            LabelSelector::default(),
        )
        .owns(Gvk::new("", "v1", "ConfigMap"))
        .reads(
            Gvk::new("", "v1", "Secret"),
            &["vault"],
            LabelSelector::default(),
        );
        let mut resolver = Resolver::default();
        resolver
            .add_crd(
                &json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Thing", "plural": "things"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}}),
            )
            .unwrap();
        let (objects, notes) = generate(
            &[Grantee::host("things", scope)],
            &resolver,
            &Options::default(),
        );
        assert!(notes.is_empty(), "{notes:?}");
        let cluster_wide: Vec<_> = (objects.iter())
            .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "ClusterRoleBinding")
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            cluster_wide,
            ["wasmctrl-metrics-reader", "wasmctrl:host", "wasmctrl:host"],
            "nothing cluster-wide for the plugin"
        );
        let team_a = role(&objects, "Role", Some("team-a"), "wasmctrl:things");
        assert_eq!(
            team_a["rules"],
            json!([
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
                {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
                {"apiGroups": ["example.com"], "resources": ["things"], "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
                {"apiGroups": ["example.com"], "resources": ["things/finalizers"], "verbs": ["update"]},
                {"apiGroups": ["example.com"], "resources": ["things/status"], "verbs": ["patch"]},
            ])
        );
        role(&objects, "Role", Some("team-b"), "wasmctrl:things");
        let vault = role(&objects, "Role", Some("vault"), "wasmctrl:things");
        assert_eq!(
            vault["rules"],
            json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}])
        );
        let binding = role(&objects, "RoleBinding", Some("vault"), "wasmctrl:things");
        assert_eq!(binding["roleRef"]["kind"], "Role");
        assert_eq!(binding["subjects"][0]["name"], "wasmctrl");
        let host = role(&objects, "Role", Some("wasmctrl"), "wasmctrl:host");
        assert!(
            host["rules"]
                .to_string()
                .contains("\"resourceNames\":[\"wasmctrl\"]")
        );
        let text = to_yaml(&objects);
        assert!(!text.contains('*'), "no wildcards:\n{text}");
    }

    #[test]
    fn the_host_may_review_scrapers_and_a_metrics_reader_role_is_there_to_bind() {
        let options = Options {
            service_account: "ctl".into(),
            ..Options::default()
        };
        let (objects, _) = generate(&[], &Resolver::default(), &options);
        let host = role(&objects, "ClusterRole", None, "ctl:host");
        assert_eq!(
            host["rules"],
            json!([
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
            ])
        );
        let binding = role(&objects, "ClusterRoleBinding", None, "ctl:host");
        assert_eq!(binding["roleRef"]["name"], "ctl:host");
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "ctl", "namespace": "wasmctrl"}])
        );
        let reader = role(&objects, "ClusterRole", None, "ctl-metrics-reader");
        assert_eq!(
            reader["rules"],
            json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
        );
        assert!(
            !(objects.iter()).any(|o| o["roleRef"]["name"] == "ctl-metrics-reader"),
            "scrapers are bound by whoever runs Prometheus"
        );
    }

    /// A plugin of Widgets in all namespaces that reads Namespaces.
    /// Plurals and scopes come from Kubernetes' types and the CRDs given, not from what the
    /// embedded API server happens to serve: neither geese, nor CronJobs, nor CSIStorageCapacities
    /// follow a rule that could guess them, and none of these is served by it.
    #[test]
    fn plurals_come_from_kubes_types_and_the_crds_given() {
        let goose = Gvk::new("birds.example.com", "v1", "Goose");
        let scope = Scope::new(
            goose,
            Namespaces::declared(&["farm"]),
            LabelSelector::default(),
        )
        .owns(Gvk::new("batch", "v1", "CronJob"))
        .reads(
            Gvk::new("storage.k8s.io", "v1", "CSIStorageCapacity"),
            &["farm"],
            LabelSelector::default(),
        )
        .reads(
            Gvk::new("networking.k8s.io", "v1", "IngressClass"),
            &[] as &[&str],
            LabelSelector::default(),
        );
        let mut resolver = Resolver::default();
        resolver
            .add_crd(
                &json!({"spec": {"group": "birds.example.com", "scope": "Namespaced",
            "names": {"kind": "Goose", "plural": "geese"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}}),
            )
            .unwrap();
        let (objects, notes) = generate(
            &[Grantee::host("geese", scope)],
            &resolver,
            &Options::default(),
        );
        assert!(notes.is_empty(), "{notes:?}");
        let farm = role(&objects, "Role", Some("farm"), "wasmctrl:geese");
        let text = farm["rules"].to_string();
        for resource in ["geese", "geese/status", "cronjobs", "csistoragecapacities"] {
            assert!(
                text.contains(&format!("\"{resource}\"")),
                "{resource}: {text}"
            );
        }
        let cluster = role(&objects, "ClusterRole", None, "wasmctrl:geese");
        assert_eq!(
            cluster["rules"],
            json!([{"apiGroups": ["networking.k8s.io"], "resources": ["ingressclasses"], "verbs": ["get", "list", "watch"]}])
        );
    }

    fn widgets() -> Scope {
        let widget = Gvk::new("example.com", "v1", "Widget");
        Scope::new(widget, Namespaces::All, LabelSelector::default()).reads(
            Gvk::new("", "v1", "Namespace"),
            &["x"],
            LabelSelector::default(),
        )
    }

    #[test]
    fn all_namespaces_and_cluster_scoped_kinds_get_cluster_roles_and_guesses_are_named() {
        let generated = || {
            let plugins = [Grantee::host("widgets", widgets())];
            generate(&plugins, &Resolver::default(), &Options::default())
        };
        let (objects, notes) = generated();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("example.com/v1/Widget") && notes[0].contains("\"widgets\""));
        let cluster = role(&objects, "ClusterRole", None, "wasmctrl:widgets");
        let text = cluster["rules"].to_string();
        assert!(text.contains("\"namespaces\""), "{text}");
        assert!(text.contains("\"widgets/status\""), "{text}");
        role(&objects, "ClusterRoleBinding", None, "wasmctrl:widgets");
        assert_eq!(to_yaml(&objects), to_yaml(&generated().0), "deterministic");
    }

    #[test]
    fn a_tenants_rights_go_to_its_service_account_and_the_host_may_only_impersonate_it() {
        let thing = Gvk::new("example.com", "v1", "Thing");
        let scope = Scope::new(
            thing,
            Namespaces::declared(&["team-a"]),
            LabelSelector::default(),
        );
        let account = Account::new("team-a", "deployer").unwrap();
        let plugins = [Grantee {
            name: "team-a-things".into(),
            scope,
            account: Some(account),
        }];
        let (objects, _) = generate(&plugins, &Resolver::default(), &Options::default());
        let binding = role(
            &objects,
            "RoleBinding",
            Some("team-a"),
            "wasmctrl:team-a-things",
        );
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "deployer", "namespace": "team-a"}])
        );
        let impersonate = role(&objects, "Role", Some("team-a"), "wasmctrl:impersonate");
        assert_eq!(
            impersonate["rules"],
            json!([{"apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": ["deployer"], "verbs": ["impersonate"]}])
        );
        let binding = role(
            &objects,
            "RoleBinding",
            Some("team-a"),
            "wasmctrl:impersonate",
        );
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "wasmctrl", "namespace": "wasmctrl"}])
        );
        // Nowhere else, and nothing cluster-wide, may the host impersonate.
        let anywhere = objects
            .iter()
            .filter(|o| o["rules"].to_string().contains("impersonate"))
            .count();
        assert_eq!(anywhere, 1);
    }
}
