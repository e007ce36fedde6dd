//! A plugin's validated manifest: what it watches, owns, reads and writes.

use wasmctrl_core::{Declaration, DeclarationError, DeclaredRead, Gvk, Namespaces, Scope};

use super::wit;
use crate::selector::LabelSelector;

/// A manifest that was checked when the plugin loaded: its kinds and namespaces as its
/// [`Declaration`] holds them, selectors parsed, so nothing downstream re-validates them.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Plugin name (field manager `wasmctrl/<name>`).
    pub name: String,
    /// Plugin version string.
    pub version: String,
    /// Label selector on the reconciled kind.
    pub selector: LabelSelector,
    /// Event filters.
    pub predicates: Vec<wit::Predicate>,
    /// Related kinds read from the cache, with their selectors and triggers.
    pub reads: Vec<Read>,
    /// The kinds, namespaces and capabilities declared (see the accessors).
    declaration: Declaration,
    /// What the declaration grants, before an operator narrows it.
    scope: Scope,
}

/// A kind the plugin reads from the cache (`reads` in the manifest).
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    /// The kind.
    pub kind: Gvk,
    /// Namespaces it is read in; empty for the plugin's own.
    pub namespaces: Vec<String>,
    /// Which objects.
    pub selector: LabelSelector,
    /// How its events map to keys of the watched kind; `None`: read only.
    pub trigger: Option<wit::Mapping>,
}

/// Why a manifest was refused.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The name is not a DNS-1123 label.
    #[error(
        "plugin name {0:?} must be a DNS-1123 label (lowercase alphanumerics and '-', at most 63)"
    )]
    Name(String),
    /// A kind, selector or capability that grants nothing (the rules are `wasmctrl-core`'s,
    /// shared with the SDK's test harness).
    #[error(transparent)]
    Declaration(#[from] DeclarationError),
}

/// The manifest's declaration, as `wasmctrl-core` reads it.
fn declaration(m: &wit::Manifest) -> Declaration {
    let watches = &m.watches;
    Declaration {
        watched: Gvk::from(&watches.kind),
        namespaces: watches.selector.namespaces.clone(),
        labels: watches.selector.labels.clone(),
        owns: m.owns.iter().map(Gvk::from).collect(),
        reads: (m.reads.iter())
            .map(|r| DeclaredRead {
                kind: Gvk::from(&r.kind),
                namespaces: r.selector.namespaces.clone(),
                labels: r.selector.labels.clone(),
            })
            .collect(),
        writes: m.writes.iter().map(Gvk::from).collect(),
        capabilities: m.capabilities.clone(),
    }
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

impl Manifest {
    /// The same declaration under another name (the operator's `name` override).
    pub fn renamed(mut self, name: &str) -> Result<Self, ManifestError> {
        if !is_dns_label(name) {
            return Err(ManifestError::Name(name.to_string()));
        }
        self.name = name.to_string();
        Ok(self)
    }

    /// Validates what the plugin's `manifest()` returned.
    pub fn from_wit(m: &wit::Manifest) -> Result<Self, ManifestError> {
        if !is_dns_label(&m.name) {
            return Err(ManifestError::Name(m.name.clone()));
        }
        let declaration = declaration(m);
        let scope = declaration.scope(None)?;
        // Checked by `scope` above: the selectors parse.
        let parsed = |labels: &str| LabelSelector::parse(labels).unwrap_or_default();
        Ok(Self {
            name: m.name.clone(),
            version: m.version.clone(),
            selector: parsed(&declaration.labels),
            predicates: m.watches.predicates.clone(),
            reads: (declaration.reads.iter().zip(&m.reads))
                .map(|(read, declared)| Read {
                    kind: read.kind.clone(),
                    namespaces: read.namespaces.clone(),
                    selector: parsed(&read.labels),
                    trigger: declared.trigger.clone(),
                })
                .collect(),
            declaration,
            scope,
        })
    }

    /// Stands in until the plugin's `manifest()` has answered (while it loads): declares
    /// nothing and grants nothing.
    pub fn placeholder() -> Self {
        let declaration = Declaration::default();
        let scope = Scope::new(Gvk::default(), Namespaces::All, LabelSelector::default());
        Self {
            name: String::new(),
            version: String::new(),
            selector: LabelSelector::default(),
            predicates: Vec::new(),
            reads: Vec::new(),
            declaration,
            scope,
        }
    }

    /// The field manager used for this plugin's server-side applies.
    pub fn field_manager(&self) -> String {
        format!("wasmctrl/{}", self.name)
    }

    /// The reconciled kind.
    pub fn kind(&self) -> &Gvk {
        &self.declaration.watched
    }

    /// The namespaces watched; empty for all.
    pub fn namespaces(&self) -> &[String] {
        &self.declaration.namespaces
    }

    /// The kinds of the children it owns.
    pub fn owns(&self) -> &[Gvk] {
        &self.declaration.owns
    }

    /// The kinds it may write without owning them.
    pub fn writes(&self) -> &[Gvk] {
        &self.declaration.writes
    }

    /// The capabilities it asks for (`sql:<db>`).
    pub fn capabilities(&self) -> &[String] {
        &self.declaration.capabilities
    }

    /// What the plugin may touch, its namespaces narrowed to `narrowed` when the operator
    /// gave any (a config can only narrow: see `loader::PluginConfig::check_narrows`).
    pub fn scope(&self, narrowed: Option<&[String]>) -> Result<Scope, DeclarationError> {
        match narrowed {
            None => Ok(self.scope.clone()),
            Some(_) => self.declaration.scope(narrowed),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn wit_gvk(group: &str, version: &str, kind: &str) -> wit::Gvk {
        wit::Gvk {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    pub(crate) fn sample() -> wit::Manifest {
        wit::Manifest {
            name: "sample".into(),
            version: "1".into(),
            watches: wit::Watch {
                kind: wit_gvk("example.com", "v1", "Thing"),
                selector: wit::Selector {
                    namespaces: vec![],
                    labels: "app=x".into(),
                },
                predicates: vec![],
            },
            owns: vec![wit_gvk("", "v1", "Pod")],
            reads: vec![wit::Related {
                kind: wit_gvk("", "v1", "ConfigMap"),
                selector: wit::Selector {
                    namespaces: vec![],
                    labels: String::new(),
                },
                trigger: None,
            }],
            writes: vec![wit_gvk("apps", "v1", "Deployment")],
            capabilities: vec![],
        }
    }

    /// The rules are `wasmctrl-core`'s (tested there); this is the reading of the WIT manifest.
    #[test]
    fn the_wit_manifest_is_read_into_the_shared_declaration() {
        use wasmctrl_core::Verb;
        let m = Manifest::from_wit(&sample()).unwrap();
        let scope = m.scope(None).unwrap();
        assert_eq!(m.kind().clone(), Gvk::new("example.com", "v1", "Thing"));
        let deploy = Gvk::new("apps", "v1", "Deployment");
        let cm = Gvk::new("", "v1", "ConfigMap");
        assert!(
            scope
                .check_write(Verb::Patch, &deploy, "ns", "x", "ns")
                .is_ok()
        );
        assert!(scope.check_read(Verb::Get, &cm, "ns", "x").is_ok());
        assert!(scope.check_read(Verb::Get, m.kind(), "ns", "x").is_ok());
        assert_eq!(m.reads[0].kind, Gvk::new("", "v1", "ConfigMap"));
        assert_eq!(m.selector.to_string(), "app=x");
        assert_eq!(m.field_manager(), "wasmctrl/sample");
        let narrowed = m.scope(Some(&["team-a".to_string()])).unwrap();
        assert!(narrowed.reconciles_in("team-a") && !narrowed.reconciles_in("team-b"));
    }

    #[test]
    fn bad_manifests_say_what_is_wrong() {
        let refused = |bad: wit::Manifest| Manifest::from_wit(&bad).unwrap_err().to_string();
        let mut bad = sample();
        bad.name = "Not_A_Label".into();
        assert!(refused(bad).contains("DNS-1123"));
        let mut bad = sample();
        bad.owns[0].kind.clear();
        assert!(refused(bad).starts_with("owns"));
        let mut bad = sample();
        bad.capabilities = vec!["network".into()];
        assert!(refused(bad).starts_with("capabilities"));
        let mut bad = sample();
        bad.watches.selector.labels = "a in (b".into();
        assert!(refused(bad).contains("watches.selector"));
    }
}
