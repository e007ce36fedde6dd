//! The rules wasmctrl's host, its embedded API server and the plugin SDK share, written once
//! (`wasmctrl-core`): what a plugin may touch ([`Scope`]), label selectors ([`selector`]) and
//! shard selectors ([`shard`]), Kubernetes' name, metadata and Event rules ([`validation`]),
//! a kind's group, version and kind ([`Gvk`]), poison-tolerant locking ([`sync`]), and the list of built-in Kubernetes types (`k8s_resource_types!`). The SDK's
//! native test harness uses the same rules as the host, so `cargo test` of a plugin fails
//! exactly where the host would refuse.
//!
//! A [`Scope`] is built from a plugin's manifest, narrowed by the operator's config. It answers
//! two questions, each about kind **and** namespace (and, for reads, labels):
//!
//! - may the plugin read objects of this kind in this namespace ([`Scope::check_read`]), and
//!   which of them ([`Reads::admits`])?
//! - may it write ([`Verb`]) this object ([`Scope::check_write`])?
//!
//! The rules:
//!
//! - The watched kind is readable and writable in the plugin's effective namespaces (the
//!   manifest's, narrowed by the operator), reads limited to the watched label selector.
//! - Owned kinds are readable in the effective namespaces; they are written only in the
//!   namespace of the object being reconciled (owner references cannot cross namespaces).
//! - `reads` kinds are readable in the namespaces their declaration names, or the effective
//!   namespaces when it names none, limited to their label selector. They are never writable.
//! - `writes` kinds are writable in the effective namespaces.
//! - An empty namespace on an object means a cluster-scoped object; it is in scope for every
//!   declared kind (a namespaced kind has no such objects). On a write target it means "the
//!   reconciled object's namespace", which is in scope by construction. On a list it means
//!   "every namespace the plugin may read", and results are filtered to those.

pub mod action;
pub mod declaration;
pub mod duration;
pub mod selector;
pub mod shard;
pub mod sync;
mod types;
pub mod validation;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub use action::{Act, ActionError, BestEffortError, Reconciled, Target, best_effort};
pub use declaration::{Declaration, DeclarationError, DeclaredRead};
pub use selector::{LabelSelector, Labels, ParseError};

/// A Kubernetes group/version/kind; `group` is empty for the core group. The one kind type of
/// wasmctrl, from a plugin's manifest to the host's caches and applier: it becomes kube's
/// `GroupVersionKind` only where a kube API takes one (`From<&Gvk>`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    /// API group, empty for core.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl Gvk {
    /// A kind from its parts.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// The kind of `K`, a k8s-openapi type or a derived custom resource: `Kind::of::<Pod>()`.
    pub fn of<K: kube_core::Resource<DynamicType = ()>>() -> Self {
        Self::new(&K::group(&()), &K::version(&()), &K::kind(&()))
    }

    /// The kind of objects whose `apiVersion` is `api_version` (`v1`, `apps/v1`).
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        match api_version.split_once('/') {
            Some((group, version)) => Self::new(group, version, kind),
            None => Self::new("", api_version, kind),
        }
    }

    /// The `apiVersion` objects of this kind carry.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl From<&Gvk> for kube_core::GroupVersionKind {
    fn from(kind: &Gvk) -> Self {
        kube_core::GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind)
    }
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.kind)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.kind)
        }
    }
}

/// Which object an applied object (a full desired object as JSON) names: its kind from
/// `apiVersion` and `kind`, its namespace (empty when it has none) and `metadata.name`.
pub fn object_id(object: &serde_json::Value) -> Result<(Gvk, String, String), String> {
    fn field<'a>(v: &'a serde_json::Value, name: &str) -> Result<&'a str, String> {
        v.as_str()
            .filter(|s| !s.is_empty())
            .ok_or(format!("object has no {name}"))
    }
    let api_version = field(&object["apiVersion"], "apiVersion")?;
    let kind = field(&object["kind"], "kind")?;
    let name = field(&object["metadata"]["name"], "metadata.name")?;
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    Ok((
        Gvk::from_api_version(api_version, kind),
        namespace.into(),
        name.into(),
    ))
}

/// Whether `owner_uid` controls `object`: an `ownerReferences` entry with `controller: true`
/// and that uid, as kube's garbage collector and controller-runtime's owner index read it.
pub fn controlled_by(object: &serde_json::Value, owner_uid: &str) -> bool {
    let references = object["metadata"]["ownerReferences"].as_array();
    references.into_iter().flatten().any(|reference| {
        reference["controller"] == true && reference["uid"].as_str() == Some(owner_uid)
    })
}

/// A set of namespaces: every namespace, or only some. Never "an empty list that means all",
/// which is how narrowing to nothing turns into access to everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Namespaces {
    /// Every namespace.
    #[default]
    All,
    /// Only these (possibly none).
    Only(BTreeSet<String>),
}

impl Namespaces {
    /// A manifest's list: empty means every namespace.
    pub fn declared<S: AsRef<str>>(list: &[S]) -> Self {
        if list.is_empty() {
            Self::All
        } else {
            Self::Only(list.iter().map(|s| s.as_ref().to_string()).collect())
        }
    }

    /// Whether objects in `namespace` are in the set; the empty namespace (cluster-scoped
    /// objects) always is.
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(set) => namespace.is_empty() || set.contains(namespace),
        }
    }

    /// The namespaces in both sets.
    pub fn intersect(&self, other: &Namespaces) -> Namespaces {
        match (self, other) {
            (Self::All, x) | (x, Self::All) => x.clone(),
            (Self::Only(a), Self::Only(b)) => Self::Only(a.intersection(b).cloned().collect()),
        }
    }

    /// Whether every namespace of `other` is in this set.
    pub fn covers(&self, other: &Namespaces) -> bool {
        match (self, other) {
            (Self::All, _) => true,
            (Self::Only(_), Self::All) => false,
            (Self::Only(a), Self::Only(b)) => b.is_subset(a),
        }
    }

    /// The namespaces, or `None` for all.
    pub fn names(&self) -> Option<&BTreeSet<String>> {
        match self {
            Self::All => None,
            Self::Only(set) => Some(set),
        }
    }
}

impl fmt::Display for Namespaces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::All => f.write_str("all namespaces"),
            Self::Only(set) => {
                let names: Vec<&str> = set.iter().map(String::as_str).collect();
                write!(f, "[{}]", names.join(", "))
            }
        }
    }
}

/// What a plugin asks to do with an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// Read one object from the cache.
    Get,
    /// List objects from the cache.
    List,
    /// Server-side apply.
    Apply,
    /// Merge or JSON patch.
    Patch,
    /// Delete.
    Delete,
    /// Replace the reconciled object's status.
    UpdateStatus,
    /// Add a finalizer to the reconciled object.
    AddFinalizer,
    /// Remove a finalizer from the reconciled object.
    RemoveFinalizer,
    /// Record an Event about the reconciled object.
    EmitEvent,
}

impl Verb {
    /// The verb's name in the plugin contract.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Apply => "apply",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::UpdateStatus => "update-status",
            Verb::AddFinalizer => "add-finalizer",
            Verb::RemoveFinalizer => "remove-finalizer",
            Verb::EmitEvent => "emit-event",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something a plugin asked for that its declaration does not allow. Names the verb, kind,
/// namespace and object; the host adds the plugin and the key being reconciled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{verb} {kind} {} refused: {reason}", object_label(.namespace, .name))]
pub struct Refusal {
    /// What was asked.
    pub verb: Verb,
    /// Of which kind.
    pub kind: Gvk,
    /// In which namespace (empty: cluster-scoped, or every namespace for a list).
    pub namespace: String,
    /// Which object (empty for a list).
    pub name: String,
    /// Why it is outside the declaration.
    pub reason: String,
}

impl Refusal {
    /// A refusal of `verb` on `namespace/name` of `kind`, for `reason`.
    pub fn new(verb: Verb, kind: &Gvk, namespace: &str, name: &str, reason: String) -> Self {
        Self {
            verb,
            kind: kind.clone(),
            namespace: namespace.into(),
            name: name.into(),
            reason,
        }
    }
}

fn object_label(namespace: &str, name: &str) -> String {
    match (namespace.is_empty(), name.is_empty()) {
        (true, true) => "in every namespace".into(),
        (false, true) => format!("in namespace {namespace}"),
        (true, false) => name.into(),
        (false, false) => format!("{namespace}/{name}"),
    }
}

/// One declared way to read a kind: which namespaces, which labels.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    namespaces: Namespaces,
    selector: LabelSelector,
}

/// How a kind may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    /// In the effective namespaces (the watched kind, `writes`).
    Namespaces,
    /// Only beside the reconciled object (owned children).
    Owned,
}

/// Everything a plugin may touch. Build it with [`Scope::new`] and the `owns`/`reads`/`writes`
/// methods in the order the manifest declares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    watched: Gvk,
    namespaces: Namespaces,
    reads: BTreeMap<Gvk, Vec<Grant>>,
    writes: BTreeMap<Gvk, Write>,
    capabilities: BTreeSet<String>,
}

impl Scope {
    /// A plugin reconciling `watched` objects in `namespaces` (the manifest's, already narrowed
    /// by the operator) that match `selector`.
    pub fn new(watched: Gvk, namespaces: Namespaces, selector: LabelSelector) -> Self {
        let mut scope = Self {
            watched: watched.clone(),
            namespaces: namespaces.clone(),
            reads: BTreeMap::new(),
            writes: BTreeMap::new(),
            capabilities: BTreeSet::new(),
        };
        scope.grant_read(watched.clone(), namespaces, selector);
        scope.writes.insert(watched, Write::Namespaces);
        scope
    }

    /// Children of `kind` are created beside the reconciled object.
    pub fn owns(mut self, kind: Gvk) -> Self {
        self.grant_read(
            kind.clone(),
            self.namespaces.clone(),
            LabelSelector::default(),
        );
        self.writes.entry(kind).or_insert(Write::Owned);
        self
    }

    /// `kind` is read from the cache in `namespaces` (empty: the plugin's own) where labels
    /// match `selector`.
    pub fn reads<S: AsRef<str>>(
        mut self,
        kind: Gvk,
        namespaces: &[S],
        selector: LabelSelector,
    ) -> Self {
        let namespaces = if namespaces.is_empty() {
            self.namespaces.clone()
        } else {
            Namespaces::declared(namespaces)
        };
        self.grant_read(kind, namespaces, selector);
        self
    }

    /// `kind` may be patched, applied and deleted in the plugin's namespaces without owning it.
    pub fn writes(mut self, kind: Gvk) -> Self {
        self.writes.insert(kind, Write::Namespaces);
        self
    }

    /// The scope of a tenant's plugin (a namespaced `WasmPlugin`): everything it reconciles,
    /// reads and writes confined to `namespace`, whatever namespaces its manifest declared for
    /// the watched kind or for a read. Cluster-scoped kinds are not confined by namespaces; the
    /// host refuses a tenant's plugin that declares any.
    pub fn confine(mut self, namespace: &str) -> Self {
        let only = Namespaces::Only(BTreeSet::from([namespace.to_string()]));
        self.namespaces = self.namespaces.intersect(&only);
        for grants in self.reads.values_mut() {
            let mut confined: Vec<Grant> = Vec::new();
            for grant in grants.drain(..) {
                let grant = Grant {
                    namespaces: grant.namespaces.intersect(&only),
                    selector: grant.selector,
                };
                if !confined.contains(&grant) {
                    confined.push(grant);
                }
            }
            *grants = confined;
        }
        self
    }

    /// Every kind the scope names (watched, read, written).
    pub fn kinds(&self) -> BTreeSet<&Gvk> {
        (self.reads.keys()).chain(self.writes.keys()).collect()
    }

    /// The plugin uses a named capability of the host (`sql:<database>`).
    pub fn capability(mut self, name: &str) -> Self {
        self.capabilities.insert(name.into());
        self
    }

    /// Whether the plugin declared capability `name`.
    pub fn has_capability(&self, name: &str) -> bool {
        self.capabilities.contains(name)
    }

    fn grant_read(&mut self, kind: Gvk, namespaces: Namespaces, selector: LabelSelector) {
        let grant = Grant {
            namespaces,
            selector,
        };
        let grants = self.reads.entry(kind).or_default();
        if !grants.contains(&grant) {
            grants.push(grant);
        }
    }

    /// The reconciled kind.
    pub fn watched(&self) -> &Gvk {
        &self.watched
    }

    /// The effective namespaces of the reconciled kind.
    pub fn namespaces(&self) -> &Namespaces {
        &self.namespaces
    }

    /// Whether a key of the reconciled kind in `namespace` is the plugin's to reconcile.
    pub fn reconciles_in(&self, namespace: &str) -> bool {
        self.namespaces.contains(namespace)
    }

    /// May the plugin `verb` (get or list) objects of `kind` in `namespace`? For a list, an
    /// empty namespace asks for every namespace the plugin may read. On success, the returned
    /// [`Reads`] tells which objects it may see.
    pub fn check_read(
        &self,
        verb: Verb,
        kind: &Gvk,
        namespace: &str,
        name: &str,
    ) -> Result<Reads<'_>, Refusal> {
        let refuse = |reason: String| Refusal::new(verb, kind, namespace, name, reason);
        let Some(grants) = self.reads.get(kind) else {
            return Err(refuse(
                "the kind is not declared in the manifest (watches, owns or reads)".into(),
            ));
        };
        let listing_all = verb == Verb::List && namespace.is_empty();
        let grants: Vec<&Grant> = grants
            .iter()
            .filter(|g| listing_all || g.namespaces.contains(namespace))
            .collect();
        if grants.is_empty() {
            let declared: Vec<String> = self.reads[kind]
                .iter()
                .map(|g| g.namespaces.to_string())
                .collect();
            return Err(refuse(format!(
                "namespace {namespace} is outside the namespaces declared for this kind ({})",
                declared.join(", ")
            )));
        }
        Ok(Reads { grants })
    }

    /// May the plugin `verb` the object `namespace/name` of `kind` while reconciling an object
    /// in `reconciled`? An empty `namespace` means the reconciled object's namespace (or a
    /// cluster-scoped object).
    pub fn check_write(
        &self,
        verb: Verb,
        kind: &Gvk,
        namespace: &str,
        name: &str,
        reconciled: &str,
    ) -> Result<(), Refusal> {
        let refuse = |reason: String| Refusal::new(verb, kind, namespace, name, reason);
        let Some(write) = self.writes.get(kind) else {
            return Err(refuse(
                "the kind is not declared in the manifest as watched, owned or writable".into(),
            ));
        };
        if namespace.is_empty() || namespace == reconciled {
            return Ok(());
        }
        match write {
            Write::Owned if !reconciled.is_empty() => Err(refuse(format!(
                "owned objects live in their owner's namespace ({reconciled})"
            ))),
            _ if self.namespaces.contains(namespace) => Ok(()),
            _ => Err(refuse(format!(
                "namespace {namespace} is outside the plugin's namespaces {}",
                self.namespaces
            ))),
        }
    }

    /// May the plugin `verb` (update status, add or remove a finalizer, emit an event) the
    /// object it reconciles, `namespace/name`? Only when that object is in its namespaces.
    pub fn check_reconciled(&self, verb: Verb, namespace: &str, name: &str) -> Result<(), Refusal> {
        let watched = self.watched.clone();
        self.check_write(verb, &watched, namespace, name, "")
    }

    /// Whether `kind` is owned: its objects are children of the reconciled object.
    pub fn is_owned(&self, kind: &Gvk) -> bool {
        self.writes.get(kind) == Some(&Write::Owned)
    }

    /// Each readable kind with every set of namespaces it may be read in (label selectors
    /// aside: they narrow what is seen, not what must be listed).
    pub fn readable(&self) -> impl Iterator<Item = (&Gvk, Vec<&Namespaces>)> {
        (self.reads.iter())
            .map(|(kind, grants)| (kind, grants.iter().map(|g| &g.namespaces).collect()))
    }

    /// Each writable kind and whether it is owned (written only beside the reconciled object,
    /// with an owner reference to it); both are written in the plugin's namespaces.
    pub fn writable(&self) -> impl Iterator<Item = (&Gvk, bool)> {
        (self.writes.iter()).map(|(kind, write)| (kind, *write == Write::Owned))
    }

    /// Every permission the scope implies, for `wasmctrl inspect` and for comparing a new
    /// version with the one it replaces.
    pub fn permissions(&self) -> BTreeSet<Permission> {
        let mut out = BTreeSet::new();
        for (kind, grants) in &self.reads {
            // A read confined to no namespace at all grants nothing.
            let grants = grants
                .iter()
                .filter(|g| g.namespaces.names().is_none_or(|n| !n.is_empty()));
            for grant in grants {
                for verb in [Verb::Get, Verb::List] {
                    out.insert(Permission::Object {
                        verb,
                        kind: kind.clone(),
                        namespaces: grant.namespaces.to_string(),
                        selector: grant.selector.to_string(),
                    });
                }
            }
        }
        for (kind, write) in &self.writes {
            let mut verbs = vec![Verb::Apply, Verb::Patch, Verb::Delete];
            if *kind == self.watched {
                verbs.extend([
                    Verb::UpdateStatus,
                    Verb::AddFinalizer,
                    Verb::RemoveFinalizer,
                    Verb::EmitEvent,
                ]);
            }
            let namespaces = match write {
                Write::Owned => format!("{} (beside the owner)", self.namespaces),
                Write::Namespaces => self.namespaces.to_string(),
            };
            for verb in verbs {
                out.insert(Permission::Object {
                    verb,
                    kind: kind.clone(),
                    namespaces: namespaces.clone(),
                    selector: String::new(),
                });
            }
        }
        out.extend(
            self.capabilities
                .iter()
                .cloned()
                .map(Permission::Capability),
        );
        out
    }
}

/// One thing a plugin may do, as `wasmctrl inspect` lists it and an operator approves it. Its
/// string form is what an operator writes in a plugin config's `approve` list.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    /// A verb on objects of a kind.
    Object {
        /// The verb.
        verb: Verb,
        /// The kind.
        kind: Gvk,
        /// Where (`all namespaces` or `[a, b]`).
        namespaces: String,
        /// Which labels, for reads (empty: every object).
        selector: String,
    },
    /// A host capability (`sql:<database>`).
    Capability(String),
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Permission::Object {
                verb,
                kind,
                namespaces,
                selector,
            } => {
                write!(f, "{verb} {kind} in {namespaces}")?;
                if !selector.is_empty() {
                    write!(f, " where {selector}")?;
                }
                Ok(())
            }
            Permission::Capability(name) => write!(f, "use {name}"),
        }
    }
}

/// Which objects of one kind a read may see; from [`Scope::check_read`].
#[derive(Debug, Clone)]
pub struct Reads<'a> {
    grants: Vec<&'a Grant>,
}

impl Reads<'_> {
    /// Whether an object in `namespace` with these labels is visible.
    pub fn admits<L: Labels + ?Sized>(&self, namespace: &str, labels: &L) -> bool {
        self.grants
            .iter()
            .any(|g| g.namespaces.contains(namespace) && g.selector.matches(labels))
    }

    /// Refuses a list whose label selector no object the plugin may see could match: it asks
    /// for labels outside what was declared. (Any other selector is simply combined with the
    /// declared one.)
    pub fn check_selector(&self, requested: &LabelSelector) -> Result<(), String> {
        if self.grants.iter().all(|g| g.selector.disjoint(requested)) {
            return Err(format!(
                "the selector {requested} asks for labels outside the declared selector ({})",
                self.selectors()
            ));
        }
        Ok(())
    }

    /// The declared label selectors, for an error message.
    pub fn selectors(&self) -> String {
        let selectors: Vec<String> = self.grants.iter().map(|g| g.selector.to_string()).collect();
        selectors.join(" or ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap()
    }

    fn thing() -> Gvk {
        Gvk::new("example.com", "v1", "Thing")
    }

    fn scope() -> Scope {
        Scope::new(thing(), Namespaces::declared(&["team-a"]), sel("tier=web"))
            .owns(Gvk::new("", "v1", "Pod"))
            .reads(
                Gvk::new("", "v1", "ConfigMap"),
                &[] as &[&str],
                sel("app=x"),
            )
            .reads(
                Gvk::new("", "v1", "Secret"),
                &["shared"],
                LabelSelector::default(),
            )
            .reads(
                Gvk::new("", "v1", "Node"),
                &[] as &[&str],
                LabelSelector::default(),
            )
            .writes(Gvk::new("apps", "v1", "Deployment"))
    }

    #[test]
    fn reads_are_limited_to_declared_kinds_namespaces_and_labels() {
        let s = scope();
        let cm = Gvk::new("", "v1", "ConfigMap");
        let labels = |app: &str| BTreeMap::from([("app".to_string(), app.to_string())]);
        let reads = s.check_read(Verb::Get, &cm, "team-a", "c").unwrap();
        assert!(reads.admits("team-a", &labels("x")));
        assert!(
            !reads.admits("team-a", &labels("y")),
            "outside the selector"
        );
        let refused = s.check_read(Verb::Get, &cm, "team-b", "c").unwrap_err();
        assert_eq!(refused.verb, Verb::Get);
        assert_eq!(refused.namespace, "team-b");
        assert!(refused.to_string().contains("team-b/c"), "{refused}");
        assert!(s.check_read(Verb::List, &cm, "team-b", "").is_err());
        // A list over every namespace is allowed and filtered.
        let all = s.check_read(Verb::List, &cm, "", "").unwrap();
        assert!(!all.admits("team-b", &labels("x")));
        // Undeclared kinds are refused whatever the namespace.
        let deploy = Gvk::new("apps", "v1", "Deployment");
        assert!(s.check_read(Verb::Get, &deploy, "team-a", "d").is_err());
        // Explicit namespaces on a read stand as declared.
        let secret = Gvk::new("", "v1", "Secret");
        assert!(s.check_read(Verb::Get, &secret, "shared", "s").is_ok());
        assert!(s.check_read(Verb::Get, &secret, "team-a", "s").is_err());
        // Cluster-scoped objects of a declared kind are readable.
        let node = Gvk::new("", "v1", "Node");
        assert!(s.check_read(Verb::Get, &node, "", "n1").is_ok());
        // The watched kind's reads follow its selector.
        let watched = s.check_read(Verb::List, &thing(), "team-a", "").unwrap();
        let web = BTreeMap::from([("tier".to_string(), "web".to_string())]);
        assert!(watched.admits("team-a", &web) && !watched.admits("team-a", &labels("x")));
    }

    #[test]
    fn a_confined_scope_reaches_only_its_namespace_whatever_was_declared() {
        let all = Scope::new(thing(), Namespaces::All, LabelSelector::default())
            .owns(Gvk::new("", "v1", "ConfigMap"))
            .reads(Gvk::new("", "v1", "Secret"), &["shared"], sel("app=x"))
            .writes(Gvk::new("apps", "v1", "Deployment"));
        let s = all.confine("team-a");
        assert!(s.reconciles_in("team-a") && !s.reconciles_in("team-b"));
        let secret = Gvk::new("", "v1", "Secret");
        let refused = s.check_read(Verb::Get, &secret, "shared", "s").unwrap_err();
        assert!(refused.to_string().contains("shared/s"), "{refused}");
        assert!(s.check_read(Verb::List, &secret, "team-b", "").is_err());
        let listed = s.check_read(Verb::List, &thing(), "", "").unwrap();
        assert!(!listed.admits("team-b", &BTreeMap::new()));
        assert!(listed.admits("team-a", &BTreeMap::new()));
        let deploy = Gvk::new("apps", "v1", "Deployment");
        assert!((s.check_write(Verb::Patch, &deploy, "team-b", "d", "team-a")).is_err());
        assert!((s.check_write(Verb::Patch, &deploy, "team-a", "d", "team-a")).is_ok());
        assert!(
            s.check_reconciled(Verb::UpdateStatus, "team-b", "t")
                .is_err()
        );
        // Only narrower: what it may do is a subset of what it declared.
        assert!(
            s.permissions()
                .iter()
                .all(|p| p.to_string().contains("[team-a]")
                    || matches!(p, Permission::Capability(_)))
        );
        assert_eq!(s.kinds().len(), 4);
    }

    #[test]
    fn writes_are_limited_to_declared_kinds_and_namespaces() {
        let s = scope();
        let pod = Gvk::new("", "v1", "Pod");
        let deploy = Gvk::new("apps", "v1", "Deployment");
        let cm = Gvk::new("", "v1", "ConfigMap");
        assert!(
            s.check_write(Verb::Apply, &pod, "team-a", "p", "team-a")
                .is_ok()
        );
        assert!(s.check_write(Verb::Apply, &pod, "", "p", "team-a").is_ok());
        let e = s
            .check_write(Verb::Apply, &pod, "team-b", "p", "team-a")
            .unwrap_err();
        assert!(e.reason.contains("owner's namespace"), "{e}");
        assert!(
            s.check_write(Verb::Patch, &deploy, "team-a", "d", "team-a")
                .is_ok()
        );
        let e = s
            .check_write(Verb::Delete, &deploy, "team-b", "d", "team-a")
            .unwrap_err();
        assert_eq!((e.verb, e.namespace.as_str()), (Verb::Delete, "team-b"));
        assert!(
            e.to_string()
                .starts_with("delete apps/v1/Deployment team-b/d refused"),
            "{e}"
        );
        let e = s
            .check_write(Verb::Patch, &cm, "team-a", "c", "team-a")
            .unwrap_err();
        assert!(e.reason.contains("not declared"), "{e}");
        assert!(
            s.check_write(Verb::Patch, &thing(), "team-b", "t", "team-a")
                .is_err()
        );
    }

    #[test]
    fn namespaces_never_read_empty_as_all() {
        let only_a = Namespaces::declared(&["a"]);
        let only_b = Namespaces::declared(&["b"]);
        let none = only_a.intersect(&only_b);
        assert!(!none.contains("a") && !none.contains("b"));
        assert_eq!(Namespaces::All.intersect(&only_a), only_a);
        assert!(Namespaces::All.covers(&only_a) && !only_a.covers(&Namespaces::All));
        assert!(
            only_a.contains(""),
            "cluster-scoped objects are not in a namespace"
        );
    }

    #[test]
    fn permissions_list_what_the_scope_allows() {
        let narrow = Scope::new(
            thing(),
            Namespaces::declared(&["a"]),
            LabelSelector::default(),
        );
        let wide = narrow.clone().writes(Gvk::new("apps", "v1", "Deployment"));
        let (n, w) = (narrow.permissions(), wide.permissions());
        assert!(n.is_subset(&w));
        let added: Vec<String> = w.difference(&n).map(|p| p.to_string()).collect();
        assert!(
            added.contains(&"patch apps/v1/Deployment in [a]".to_string()),
            "{added:?}"
        );
    }
}
