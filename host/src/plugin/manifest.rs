//! A plugin's validated manifest: what it watches, owns, reads and writes.

use kube::core::GroupVersionKind;
use wasmctrl_scope::{Kind, Namespaces, Scope};

use super::wit;
use crate::selector::{ParseError, Selector};

/// A manifest that was checked when the plugin loaded. Kinds are kube `GroupVersionKind`s and
/// selectors are parsed, so nothing downstream re-validates them.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Plugin name (field manager `wasmctrl/<name>`).
    pub name: String,
    /// Plugin version string.
    pub version: String,
    /// The reconciled kind.
    pub kind: GroupVersionKind,
    /// Namespaces watched; empty for all.
    pub namespaces: Vec<String>,
    /// Label selector on the reconciled kind.
    pub selector: Selector,
    /// Event filters.
    pub predicates: Vec<wit::Predicate>,
    /// Owned child kinds.
    pub owns: Vec<GroupVersionKind>,
    /// Related kinds read from the cache, with their selectors and triggers.
    pub reads: Vec<Read>,
    /// Kinds writable without owning them.
    pub writes: Vec<GroupVersionKind>,
    /// Requested capabilities (`sql:<db>`).
    pub capabilities: Vec<String>,
}

/// A kind the plugin reads from the cache (`reads` in the manifest).
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    /// The kind.
    pub kind: GroupVersionKind,
    /// Namespaces it is read in; empty for the plugin's own.
    pub namespaces: Vec<String>,
    /// Which objects.
    pub selector: Selector,
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
    /// A kind lacks version or kind.
    #[error("{field}: group/version/kind {gvk:?} needs a version and a kind")]
    Kind {
        /// Where in the manifest.
        field: &'static str,
        /// What was given.
        gvk: String,
    },
    /// A capability this host does not offer, or a malformed one.
    #[error(
        "capabilities: {0:?} is not a capability this host offers (`sql:<database>`, the database name in lowercase letters, digits, '-' or '_')"
    )]
    Capability(String),
    /// A label selector does not parse.
    #[error("{field}: {source}")]
    Selector {
        /// Where in the manifest.
        field: &'static str,
        /// The parse failure.
        source: ParseError,
    },
}

fn gvk(field: &'static str, g: &wit::Gvk) -> Result<GroupVersionKind, ManifestError> {
    if g.version.is_empty() || g.kind.is_empty() {
        let gvk = format!("{}/{}/{}", g.group, g.version, g.kind);
        return Err(ManifestError::Kind { field, gvk });
    }
    Ok(GroupVersionKind::gvk(&g.group, &g.version, &g.kind))
}

fn selector(field: &'static str, s: &str) -> Result<Selector, ManifestError> {
    Selector::parse(s).map_err(|source| ManifestError::Selector { field, source })
}

/// The capabilities a host offers: `sql:<database>` (names as `--sql` accepts them).
fn capability(c: &str) -> Result<String, ManifestError> {
    let valid = c.strip_prefix("sql:").is_some_and(|db| {
        !db.is_empty()
            && db.len() <= 63
            && db
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    });
    if valid {
        Ok(c.to_string())
    } else {
        Err(ManifestError::Capability(c.to_string()))
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
        Ok(Self {
            name: m.name.clone(),
            version: m.version.clone(),
            kind: gvk("watches.kind", &m.watches.kind)?,
            namespaces: m.watches.selector.namespaces.clone(),
            selector: selector("watches.selector.labels", &m.watches.selector.labels)?,
            predicates: m.watches.predicates.clone(),
            owns: m
                .owns
                .iter()
                .map(|g| gvk("owns", g))
                .collect::<Result<_, _>>()?,
            reads: m
                .reads
                .iter()
                .map(|r| {
                    Ok(Read {
                        kind: gvk("reads.kind", &r.kind)?,
                        namespaces: r.selector.namespaces.clone(),
                        selector: selector("reads.selector.labels", &r.selector.labels)?,
                        trigger: r.trigger.clone(),
                    })
                })
                .collect::<Result<_, ManifestError>>()?,
            writes: m
                .writes
                .iter()
                .map(|g| gvk("writes", g))
                .collect::<Result<_, _>>()?,
            capabilities: m
                .capabilities
                .iter()
                .map(|c| capability(c))
                .collect::<Result<_, _>>()?,
        })
    }

    /// The field manager used for this plugin's server-side applies.
    pub fn field_manager(&self) -> String {
        format!("wasmctrl/{}", self.name)
    }

    /// Whether `kind` is owned by this plugin.
    pub fn owns(&self, kind: &GroupVersionKind) -> bool {
        self.owns.contains(kind)
    }

    /// What the plugin may touch, its namespaces narrowed to `narrowed` when the operator
    /// gave any (a config can only narrow: see `loader::PluginConfig::check_narrows`).
    pub fn scope(&self, narrowed: Option<&[String]>) -> Scope {
        let mut namespaces = Namespaces::declared(&self.namespaces);
        if let Some(narrowed) = narrowed {
            namespaces = namespaces.intersect(&Namespaces::declared(narrowed));
        }
        let mut scope = Scope::new(kind(&self.kind), namespaces, self.selector.clone());
        for owned in &self.owns {
            scope = scope.owns(kind(owned));
        }
        for read in &self.reads {
            scope = scope.reads(kind(&read.kind), &read.namespaces, read.selector.clone());
        }
        for written in &self.writes {
            scope = scope.writes(kind(written));
        }
        for capability in &self.capabilities {
            scope = scope.capability(capability);
        }
        scope
    }
}

/// The scope crate's kind for a kube one.
pub fn kind(gvk: &GroupVersionKind) -> Kind {
    Kind::new(&gvk.group, &gvk.version, &gvk.kind)
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

    #[test]
    fn grants_follow_the_declaration() {
        use wasmctrl_scope::Verb;
        let m = Manifest::from_wit(&sample()).unwrap();
        let scope = m.scope(None);
        let thing = kind(&m.kind);
        let pod = Kind::new("", "v1", "Pod");
        let cm = Kind::new("", "v1", "ConfigMap");
        let deploy = Kind::new("apps", "v1", "Deployment");
        let secret = Kind::new("", "v1", "Secret");
        let read = |k: &Kind| scope.check_read(Verb::Get, k, "ns", "x").is_ok();
        let write = |k: &Kind| scope.check_write(Verb::Patch, k, "ns", "x", "ns").is_ok();
        assert!(read(&thing) && read(&pod) && read(&cm));
        assert!(!read(&deploy) && !read(&secret));
        assert!(write(&thing) && write(&pod) && write(&deploy));
        assert!(!write(&cm) && !write(&secret));
        assert_eq!(m.field_manager(), "wasmctrl/sample");
        // The operator's namespaces narrow every path.
        let narrowed = m.scope(Some(&["team-a".to_string()]));
        assert!(narrowed.check_read(Verb::Get, &cm, "team-b", "x").is_err());
        assert!(
            narrowed
                .check_write(Verb::Patch, &deploy, "team-b", "x", "team-a")
                .is_err()
        );
        assert!(
            narrowed
                .check_write(Verb::Patch, &deploy, "team-a", "x", "team-a")
                .is_ok()
        );
    }

    #[test]
    fn bad_manifests_say_what_is_wrong() {
        let mut bad = sample();
        bad.name = "Not_A_Label".into();
        assert!(
            Manifest::from_wit(&bad)
                .unwrap_err()
                .to_string()
                .contains("DNS-1123")
        );
        let mut bad = sample();
        bad.owns[0].kind.clear();
        assert!(
            Manifest::from_wit(&bad)
                .unwrap_err()
                .to_string()
                .starts_with("owns")
        );
        for nonsense in ["network", "sql:", "sql:Students", "sql:a b"] {
            let mut bad = sample();
            bad.capabilities = vec![nonsense.into()];
            assert!(
                Manifest::from_wit(&bad)
                    .unwrap_err()
                    .to_string()
                    .starts_with("capabilities"),
                "{nonsense}"
            );
        }
        let mut good = sample();
        good.capabilities = vec!["sql:students".into(), "sql:audit_log-2".into()];
        assert!(Manifest::from_wit(&good).is_ok());
        let mut bad = sample();
        bad.watches.selector.labels = "a in (b".into();
        assert!(
            Manifest::from_wit(&bad)
                .unwrap_err()
                .to_string()
                .contains("watches.selector")
        );
    }
}
