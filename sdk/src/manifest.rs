//! The plugin's own description of itself: [`Manifest`] and the kinds, selectors, predicates and
//! mappings it is built from.

/// A Kubernetes group/version/kind (`Gvk::new("apps", "v1", "Deployment")`); `group` is empty
/// for the core group (Pods, ConfigMaps, ...). The same type the host checks scopes with.
pub use wasmctrl_core::Gvk;

/// Which objects of a kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    /// Namespaces to consider; empty means every namespace (or the kind is cluster-scoped).
    pub namespaces: Vec<String>,
    /// A label selector in its string form (`app=nginx,tier in (web,api)`); empty selects all.
    pub labels: String,
}

impl Selector {
    /// Every object in every namespace.
    pub fn all() -> Self {
        Self::default()
    }
}

/// A filter the host applies to watch events before it queues a key. With none, every change
/// queues it; with several, any one passing is enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Predicate {
    /// Creates, deletes, and updates that change `metadata.generation` (spec changes).
    GenerationChanged,
    /// Creates, deletes, and updates that change `metadata.labels`.
    LabelsChanged,
    /// Creates, deletes, and updates that change `metadata.annotations`.
    AnnotationsChanged,
    /// Creates, deletes, and updates that start deletion or change `metadata.finalizers`.
    FinalizersChanged,
}

/// The primary kind a plugin reconciles: one key per object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watch {
    /// The kind.
    pub kind: Gvk,
    /// Which of its objects.
    pub selector: Selector,
    /// Event filters.
    pub predicates: Vec<Predicate>,
}

/// How an event on a related kind maps to keys of the watched kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    /// Through the object's controller owner reference to the watched kind.
    Owner,
    /// The watched object with the same namespace and name.
    SameName,
    /// The watched object in the same namespace named by the value of this label.
    Label(String),
    /// The watched object in the same namespace named by the value of this annotation.
    Annotation(String),
    /// Every cached watched object in the same namespace (use sparingly).
    Namespace,
}

/// Another kind the plugin reads from the host's cache and may be triggered by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Related {
    /// The kind.
    pub kind: Gvk,
    /// Which of its objects the plugin may read.
    pub selector: Selector,
    /// Events on it queue the keys this mapping names; `None` means read-only.
    pub trigger: Option<Mapping>,
}

/// What a plugin declares about itself; the host derives informers, queues and permissions from
/// it. Build one with [`Manifest::new`] and its builder methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Stable plugin name: the field manager is `wasmctrl/<name>`; metrics and logs carry it.
    pub name: String,
    /// The plugin's own version string.
    pub version: String,
    /// The kind reconciled.
    pub watches: Watch,
    /// Kinds of the children it creates; the host adds a controller owner reference to them and
    /// maps their events to the owner's key.
    pub owns: Vec<Gvk>,
    /// Other kinds it reads from the cache (and maybe is triggered by).
    pub reads: Vec<Related>,
    /// Kinds it patches, applies or deletes without owning them.
    pub writes: Vec<Gvk>,
    /// Capabilities the operator must grant, such as `sql:students`.
    pub capabilities: Vec<String>,
    /// The finalizer the SDK keeps on reconciled objects so that a deleted one waits for its
    /// [`Reconcile::Cleanup`](crate::Reconcile::Cleanup) (see [`finalizer`](Self::finalizer)).
    /// The SDK's own: the host sees only the actions adding and removing it.
    pub finalizer: Option<String>,
    /// The webhooks it serves for the kind it reconciles ([`crate::webhooks`]).
    pub webhooks: Webhooks,
}

impl Manifest {
    /// A plugin named `name` reconciling every object of `kind`, reacting to every change.
    pub fn new(name: &str, kind: Gvk) -> Self {
        Self {
            name: name.into(),
            version: "0.0.0".into(),
            watches: Watch {
                kind,
                ..Watch::default()
            },
            owns: Vec::new(),
            reads: Vec::new(),
            writes: Vec::new(),
            capabilities: Vec::new(),
            finalizer: None,
            webhooks: Webhooks::default(),
        }
    }

    /// Sets the plugin's version string (usually `env!("CARGO_PKG_VERSION")`).
    pub fn version(mut self, version: &str) -> Self {
        self.version = version.into();
        self
    }

    /// Restricts the watched objects to these namespaces.
    pub fn namespaces<S: AsRef<str>>(mut self, namespaces: &[S]) -> Self {
        self.watches.selector.namespaces = namespaces.iter().map(|n| n.as_ref().into()).collect();
        self
    }

    /// Restricts the watched objects to those matching a label selector (`app=nginx`).
    pub fn labels(mut self, selector: &str) -> Self {
        self.watches.selector.labels = selector.into();
        self
    }

    /// Adds an event filter; with several, any one passing queues the key.
    pub fn predicate(mut self, predicate: Predicate) -> Self {
        self.watches.predicates.push(predicate);
        self
    }

    /// Declares a kind of child object this plugin creates and owns, by its group, version and
    /// kind (for a kind with no Rust type; [`owns`](Self::owns) takes the type).
    pub fn owns_kind(mut self, kind: Gvk) -> Self {
        self.owns.push(kind);
        self
    }

    /// Declares a kind this plugin reads from the cache, optionally triggering on its events,
    /// by its group, version and kind ([`reads`](Self::reads) takes the type).
    pub fn reads_kind(mut self, kind: Gvk, selector: Selector, trigger: Option<Mapping>) -> Self {
        self.reads.push(Related {
            kind,
            selector,
            trigger,
        });
        self
    }

    /// Declares a kind this plugin patches, applies or deletes without owning it, by its group,
    /// version and kind ([`writes`](Self::writes) takes the type).
    pub fn writes_kind(mut self, kind: Gvk) -> Self {
        self.writes.push(kind);
        self
    }

    /// Declares a capability the operator must grant, such as `sql:students`.
    pub fn capability(mut self, name: &str) -> Self {
        self.capabilities.push(name.into());
        self
    }

    /// Guards reconciled objects with the finalizer `name` (`example.com/cleanup`), as
    /// kube-runtime's `finalizer()` does: the SDK adds it to a live object before its first
    /// [`Reconcile::Apply`](crate::Reconcile::Apply), and once the object is being deleted
    /// calls [`Reconcile::Cleanup`](crate::Reconcile::Cleanup) and removes the finalizer when
    /// that cleanup succeeded, so the object goes only after it. Without one, nothing waits for
    /// the plugin: a deleted object is cleaned up if other finalizers hold it, and is otherwise
    /// simply [`Gone`](crate::Reconcile::Gone).
    pub fn finalizer(mut self, name: &str) -> Self {
        self.finalizer = Some(name.into());
        self
    }

    /// Serves a validating webhook for the reconciled kind on `operations`: the plugin's
    /// [`Validator`](crate::webhooks::Validator) judges them (name `validate` in
    /// [`export!`](crate::export)).
    pub fn validating(mut self, operations: &[Operation]) -> Self {
        self.webhooks.validates = operations.to_vec();
        self
    }

    /// Serves a defaulting (mutating) webhook for the reconciled kind on creates and updates:
    /// the plugin's [`Defaulter`](crate::webhooks::Defaulter) fills in what objects leave out
    /// (name `default` in [`export!`](crate::export)).
    pub fn defaulting(mut self) -> Self {
        self.webhooks.defaults = true;
        self
    }

    /// Serves the conversion webhook of the reconciled kind (a CRD with these `versions`):
    /// the plugin's [`Converter`](crate::webhooks::Converter) converts between them (name
    /// `convert` in [`export!`](crate::export)).
    pub fn converting(mut self, versions: &[&str]) -> Self {
        self.webhooks.converts = versions.iter().map(|v| v.to_string()).collect();
        self
    }
}

/// The manifest typed by the kinds' Rust types, as controller-runtime's builder reads
/// (`For(&Website{}).Owns(&ConfigMap{})`): k8s-openapi's types and custom resources derived with
/// `#[derive(CustomResource)]`.
///
/// ```
/// use wasmctrl_sdk::Manifest;
/// use wasmctrl_sdk::k8s_openapi::api::apps::v1::Deployment;
/// use wasmctrl_sdk::k8s_openapi::api::core::v1::{ConfigMap, Pod};
///
/// let manifest = Manifest::for_::<Deployment>("restarter")
///     .owns::<ConfigMap>()
///     .reads::<Pod>(Default::default(), None);
/// assert_eq!(manifest.watches.kind.kind, "Deployment");
/// assert_eq!(manifest.owns[0].api_version(), "v1");
/// ```
impl Manifest {
    /// A plugin named `name` reconciling every object of kind `K`, reacting to every change.
    pub fn for_<K: kube_core::Resource<DynamicType = ()>>(name: &str) -> Self {
        Self::new(name, crate::Gvk::of::<K>())
    }

    /// Declares `K` a kind of child object this plugin creates and owns.
    pub fn owns<K: kube_core::Resource<DynamicType = ()>>(self) -> Self {
        self.owns_kind(crate::Gvk::of::<K>())
    }

    /// Declares `K` a kind this plugin reads from the cache, optionally triggering on its
    /// events.
    pub fn reads<K: kube_core::Resource<DynamicType = ()>>(
        self,
        selector: Selector,
        trigger: Option<Mapping>,
    ) -> Self {
        self.reads_kind(crate::Gvk::of::<K>(), selector, trigger)
    }

    /// Declares `K` a kind this plugin patches, applies or deletes without owning it.
    pub fn writes<K: kube_core::Resource<DynamicType = ()>>(self) -> Self {
        self.writes_kind(crate::Gvk::of::<K>())
    }
}

/// Settings of a plugin that takes none: any object's fields are ignored (an operator may
/// configure settings a later version of the plugin reads); a value that is not an object is
/// rejected at load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
pub struct NoSettings {}

/// An admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// An object is created.
    Create,
    /// An object (or its status) is updated.
    Update,
    /// An object is deleted.
    Delete,
    /// A connect (exec, attach, port-forward): never sent for the kinds plugins reconcile.
    Connect,
}

/// What a plugin serves as webhooks for the kind it reconciles, in its manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Webhooks {
    /// The operations its [`Validator`](crate::webhooks::Validator) judges; none: no validating webhook.
    pub validates: Vec<Operation>,
    /// Whether its [`Defaulter`](crate::webhooks::Defaulter) defaults created and updated objects.
    pub defaults: bool,
    /// The versions of its kind its [`Converter`](crate::webhooks::Converter) converts between; none: no conversion.
    pub converts: Vec<String>,
}

impl Webhooks {
    /// Whether it serves any webhook.
    pub fn any(&self) -> bool {
        !self.validates.is_empty() || self.defaults || !self.converts.is_empty()
    }
}
