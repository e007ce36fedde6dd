//! A plugin's declaration as its manifest states it (kinds, namespaces, label selectors in their
//! string form, capabilities), and the one reading of it into a [`Scope`]: the host reads a
//! loaded plugin's manifest with it, and the SDK's test harness reads the plugin's own, so the
//! two cannot disagree about what a manifest grants or refuses.

use crate::{Gvk, LabelSelector, Namespaces, ParseError, Scope};

/// What a manifest declares about the objects a plugin touches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declaration {
    /// The reconciled kind.
    pub watched: Gvk,
    /// Namespaces it is reconciled in; empty for all.
    pub namespaces: Vec<String>,
    /// Label selector on the reconciled kind, in its string form (empty selects all).
    pub labels: String,
    /// Kinds of the children it owns.
    pub owns: Vec<Gvk>,
    /// Kinds it reads from the cache.
    pub reads: Vec<DeclaredRead>,
    /// Kinds it writes without owning them.
    pub writes: Vec<Gvk>,
    /// Capabilities of the host it uses (`sql:<database>`).
    pub capabilities: Vec<String>,
}

/// A kind read from the cache (`reads` in the manifest).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeclaredRead {
    /// The kind.
    pub kind: Gvk,
    /// Namespaces it is read in; empty for the plugin's own.
    pub namespaces: Vec<String>,
    /// Label selector, in its string form.
    pub labels: String,
}

/// Why a declaration grants nothing: the manifest field at fault and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclarationError {
    /// A kind lacks its version or kind.
    #[error("{field}: group/version/kind {given:?} needs a version and a kind")]
    Kind {
        /// Where in the manifest.
        field: &'static str,
        /// What was given.
        given: String,
    },
    /// A label selector does not parse.
    #[error("{field}: {source}")]
    LabelSelector {
        /// Where in the manifest.
        field: &'static str,
        /// The parse failure.
        source: ParseError,
    },
    /// A capability the host does not offer, or a malformed one.
    #[error(
        "capabilities: {0:?} is not a capability this host offers (`sql:<database>`, the database name in lowercase letters, digits, '-' or '_')"
    )]
    Capability(String),
}

impl Declaration {
    /// Checks every kind, selector and capability, and says what the plugin may touch, its
    /// namespaces narrowed to `narrowed` when the operator gave any (a narrowing cannot widen:
    /// the two lists intersect).
    pub fn scope(&self, narrowed: Option<&[String]>) -> Result<Scope, DeclarationError> {
        let mut namespaces = Namespaces::declared(&self.namespaces);
        if let Some(narrowed) = narrowed {
            namespaces = namespaces.intersect(&Namespaces::declared(narrowed));
        }
        let watched = checked_kind("watches.kind", &self.watched)?;
        let labels = selector("watches.selector.labels", &self.labels)?;
        let mut scope = Scope::new(watched, namespaces, labels);
        for owned in &self.owns {
            scope = scope.owns(checked_kind("owns", owned)?);
        }
        for read in &self.reads {
            let labels = selector("reads.selector.labels", &read.labels)?;
            let kind = checked_kind("reads.kind", &read.kind)?;
            scope = scope.reads(kind, &read.namespaces, labels);
        }
        for written in &self.writes {
            scope = scope.writes(checked_kind("writes", written)?);
        }
        for capability in &self.capabilities {
            scope = scope.capability(offered(capability)?);
        }
        Ok(scope)
    }
}

fn checked_kind(field: &'static str, kind: &Gvk) -> Result<Gvk, DeclarationError> {
    if kind.version.is_empty() || kind.kind.is_empty() {
        let given = format!("{}/{}/{}", kind.group, kind.version, kind.kind);
        return Err(DeclarationError::Kind { field, given });
    }
    Ok(kind.clone())
}

fn selector(field: &'static str, labels: &str) -> Result<LabelSelector, DeclarationError> {
    LabelSelector::parse(labels).map_err(|source| DeclarationError::LabelSelector { field, source })
}

/// The capabilities a host offers: `sql:<database>` (names as `--sql` accepts them).
fn offered(capability: &str) -> Result<&str, DeclarationError> {
    let valid = capability.strip_prefix("sql:").is_some_and(|db| {
        !db.is_empty()
            && db.len() <= 63
            && db
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    });
    if valid {
        Ok(capability)
    } else {
        Err(DeclarationError::Capability(capability.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Verb;

    fn sample() -> Declaration {
        Declaration {
            watched: Gvk::new("example.com", "v1", "Thing"),
            labels: "app=x".into(),
            owns: vec![Gvk::new("", "v1", "Pod")],
            reads: vec![DeclaredRead {
                kind: Gvk::new("", "v1", "ConfigMap"),
                ..Default::default()
            }],
            writes: vec![Gvk::new("apps", "v1", "Deployment")],
            ..Default::default()
        }
    }

    #[test]
    fn grants_follow_the_declaration_and_the_operator_only_narrows() {
        let scope = sample().scope(None).unwrap();
        let thing = Gvk::new("example.com", "v1", "Thing");
        let pod = Gvk::new("", "v1", "Pod");
        let cm = Gvk::new("", "v1", "ConfigMap");
        let deploy = Gvk::new("apps", "v1", "Deployment");
        let secret = Gvk::new("", "v1", "Secret");
        let read = |k: &Gvk| scope.check_read(Verb::Get, k, "ns", "x").is_ok();
        let write = |k: &Gvk| scope.check_write(Verb::Patch, k, "ns", "x", "ns").is_ok();
        assert!(read(&thing) && read(&pod) && read(&cm));
        assert!(!read(&deploy) && !read(&secret));
        assert!(write(&thing) && write(&pod) && write(&deploy));
        assert!(!write(&cm) && !write(&secret));
        let narrowed = sample().scope(Some(&["team-a".to_string()])).unwrap();
        assert!(narrowed.check_read(Verb::Get, &cm, "team-b", "x").is_err());
        let patch = |ns: &str| narrowed.check_write(Verb::Patch, &deploy, ns, "x", "team-a");
        assert!(patch("team-b").is_err() && patch("team-a").is_ok());
        let mut declared = sample();
        declared.namespaces = vec!["team-b".into()];
        let nothing = declared.scope(Some(&["team-a".to_string()])).unwrap();
        assert!(!nothing.reconciles_in("team-a") && !nothing.reconciles_in("team-b"));
    }

    #[test]
    fn refusals_name_the_field() {
        let refused = |change: fn(&mut Declaration)| {
            let mut declared = sample();
            change(&mut declared);
            declared.scope(None).unwrap_err().to_string()
        };
        assert!(refused(|d| d.owns[0].kind.clear()).starts_with("owns:"));
        assert!(refused(|d| d.watched.version.clear()).starts_with("watches.kind:"));
        assert!(refused(|d| d.writes[0].kind.clear()).starts_with("writes:"));
        assert!(refused(|d| d.labels = "a in (b".into()).starts_with("watches.selector.labels:"));
        assert!(refused(|d| d.reads[0].labels = "=".into()).starts_with("reads.selector.labels:"));
        for nonsense in ["network", "sql:", "sql:Students", "sql:a b"] {
            let mut declared = sample();
            declared.capabilities = vec![nonsense.into()];
            let error = declared.scope(None).unwrap_err().to_string();
            assert!(error.starts_with("capabilities"), "{nonsense}: {error}");
        }
        let mut declared = sample();
        declared.capabilities = vec!["sql:students".into(), "sql:audit_log-2".into()];
        let scope = declared.scope(None).unwrap();
        assert!(scope.has_capability("sql:audit_log-2"));
    }
}
