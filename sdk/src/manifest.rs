//! Building a plugin's [`Manifest`] and reading the operator's [`Settings`].

use serde::de::DeserializeOwned;

use crate::{Gvk, Manifest, Mapping, Predicate, Related, Selector, Watch};

impl Gvk {
    /// A group/version/kind; `group` is empty for the core group.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// The `apiVersion` string objects of this kind carry (`v1`, `apps/v1`, ...).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl Selector {
    /// Every object in every namespace.
    pub fn all() -> Self {
        Self {
            namespaces: Vec::new(),
            labels: String::new(),
        }
    }
}

impl Manifest {
    /// A plugin named `name` reconciling every object of `kind`, reacting to every change.
    pub fn new(name: &str, kind: Gvk) -> Self {
        Self {
            name: name.into(),
            version: "0.0.0".into(),
            watches: Watch {
                kind,
                selector: Selector::all(),
                predicates: Vec::new(),
            },
            owns: Vec::new(),
            reads: Vec::new(),
            writes: Vec::new(),
            capabilities: Vec::new(),
        }
    }

    /// Sets the plugin's version string.
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

    /// Declares a kind of child object this plugin creates and owns.
    pub fn owns(mut self, kind: Gvk) -> Self {
        self.owns.push(kind);
        self
    }

    /// Declares a kind this plugin reads from the cache, optionally triggering on its events.
    pub fn reads(mut self, kind: Gvk, selector: Selector, trigger: Option<Mapping>) -> Self {
        self.reads.push(Related {
            kind,
            selector,
            trigger,
        });
        self
    }

    /// Declares a kind this plugin patches, applies or deletes without owning it.
    pub fn writes(mut self, kind: Gvk) -> Self {
        self.writes.push(kind);
        self
    }

    /// Declares a capability the operator must grant, such as `sql:students`.
    pub fn capability(mut self, name: &str) -> Self {
        self.capabilities.push(name.into());
        self
    }
}

/// The operator's settings for a plugin: the JSON form of the config file beside the `.wasm`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings(serde_json::Value);

impl Settings {
    /// Parses settings JSON; empty input means no settings.
    pub fn parse(json: &str) -> Result<Self, String> {
        if json.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_json::from_str(json)
            .map(Self)
            .map_err(|e| format!("settings are not JSON: {e}"))
    }

    /// The settings as a typed struct; missing fields take their serde defaults.
    pub fn get<T: DeserializeOwned + Default>(&self) -> Result<T, String> {
        if self.0.is_null() {
            return Ok(T::default());
        }
        T::deserialize(&self.0).map_err(|e| format!("invalid settings: {e}"))
    }

    /// The raw JSON value.
    pub fn value(&self) -> &serde_json::Value {
        &self.0
    }
}
