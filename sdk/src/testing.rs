//! A native stand-in for the host, so `cargo test -p <plugin>` tests a plugin without wasm.
//!
//! SQL goes to a stand-in function given with [`Harness::sql`]; every statement is recorded for
//! [`Harness::statements`], and a database the manifest did not declare is refused as the host
//! refuses it.
//!
//! ```ignore
//! let h = Harness::new().now("2026-01-01T00:00:00Z").object(json!({ /* a cached Pod */ }));
//! let outcome = h.reconcile::<MyPlugin>(&json!({ /* the object */ })).unwrap();
//! assert_eq!(outcome.actions.len(), 1);
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

use crate::sql::{Rows, SqlError, Statement};
use crate::{Context, Error, Gvk, Host, Level, Manifest, Outcome, Reconciler, Request, Settings};

/// Answers the plugin's SQL in tests: `(database, statements) -> one Rows per statement`.
pub type SqlStandIn = Box<dyn Fn(&str, &[Statement]) -> Result<Vec<Rows>, SqlError>>;

/// One line a plugin logged.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// The level it was logged at.
    pub level: Level,
    /// The message.
    pub message: String,
    /// Its key/value fields.
    pub fields: Vec<(String, String)>,
}

/// A stand-in host: an in-memory cache, captured logs, fixed settings and clock, and SQL
/// answered by a function.
#[derive(Default)]
pub struct Harness {
    // (apiVersion, kind) -> (namespace, name) -> JSON
    objects: BTreeMap<(String, String), BTreeMap<(String, String), serde_json::Value>>,
    logs: RefCell<Vec<LogLine>>,
    settings: serde_json::Value,
    now: Option<String>,
    sql: Option<SqlStandIn>,
    statements: RefCell<Vec<(String, Statement)>>,
    // The capabilities of the plugin being run, for the same check the host makes.
    capabilities: RefCell<Vec<String>>,
}

impl fmt::Debug for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Harness")
            .field("objects", &self.objects)
            .field("settings", &self.settings)
            .field("now", &self.now)
            .field("statements", &self.statements)
            .finish_non_exhaustive()
    }
}

impl Harness {
    /// An empty cache, no settings, the clock at the Unix epoch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Operator settings handed to `manifest` and `reconcile`.
    pub fn settings(mut self, settings: serde_json::Value) -> Self {
        self.settings = settings;
        self
    }

    /// The time the host reports (RFC 3339).
    pub fn now(mut self, now: &str) -> Self {
        self.now = Some(now.into());
        self
    }

    /// Answers SQL with `stand_in` (for example from an in-memory table the test keeps).
    pub fn sql(
        mut self,
        stand_in: impl Fn(&str, &[Statement]) -> Result<Vec<Rows>, SqlError> + 'static,
    ) -> Self {
        self.sql = Some(Box::new(stand_in));
        self
    }

    /// Every statement the plugin ran, with its database, in order.
    pub fn statements(&self) -> Vec<(String, Statement)> {
        self.statements.borrow().clone()
    }

    /// Puts an object (with apiVersion, kind, metadata.name) in the stand-in cache.
    pub fn object(mut self, object: serde_json::Value) -> Self {
        let type_key = (
            object["apiVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            object["kind"].as_str().unwrap_or_default().to_string(),
        );
        let meta = &object["metadata"];
        let key = (
            meta["namespace"].as_str().unwrap_or_default().to_string(),
            meta["name"].as_str().unwrap_or_default().to_string(),
        );
        self.objects
            .entry(type_key)
            .or_default()
            .insert(key, object);
        self
    }

    /// The plugin's manifest for the configured settings.
    pub fn manifest<R: Reconciler>(&self) -> Result<Manifest, String> {
        R::manifest(&Settings::parse(&self.settings.to_string())?)
    }

    /// Reconciles an existing object, as the host would on a watch event.
    pub fn reconcile<R: Reconciler>(&self, object: &serde_json::Value) -> Result<Outcome, Error> {
        self.run::<R>(Request::for_object(object))
    }

    /// Reconciles the key of an object that no longer exists.
    pub fn reconcile_deleted<R: Reconciler>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Outcome, Error> {
        self.run::<R>(Request::for_deleted(namespace, name))
    }

    /// Reconciles a hand-built request; settings and clock are filled in from the harness.
    pub fn run<R: Reconciler>(&self, mut request: Request) -> Result<Outcome, Error> {
        request.settings = self.settings.to_string();
        if let Some(now) = &self.now {
            request.now = now.clone();
        }
        let manifest = self.manifest::<R>().map_err(Error::terminal)?;
        *self.capabilities.borrow_mut() = manifest.capabilities;
        R::reconcile(&request, &Context::new(self))
    }

    /// Everything logged so far.
    pub fn logs(&self) -> Vec<LogLine> {
        self.logs.borrow().clone()
    }

    fn kind_objects(
        &self,
        kind: &Gvk,
    ) -> impl Iterator<Item = (&(String, String), &serde_json::Value)> {
        self.objects
            .get(&(kind.api_version(), kind.kind.clone()))
            .into_iter()
            .flatten()
    }
}

impl Host for Harness {
    fn log(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        let fields = fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.logs.borrow_mut().push(LogLine {
            level,
            message: message.into(),
            fields,
        });
    }

    fn get(&self, kind: &Gvk, namespace: &str, name: &str) -> Result<Option<String>, String> {
        Ok(self
            .kind_objects(kind)
            .find(|((ns, n), _)| ns == namespace && n == name)
            .map(|(_, o)| o.to_string()))
    }

    fn list(&self, kind: &Gvk, namespace: &str, labels: &str) -> Result<Vec<String>, String> {
        let requirements = parse_equality_selector(labels)?;
        Ok(self
            .kind_objects(kind)
            .filter(|((ns, _), _)| namespace.is_empty() || ns == namespace)
            .filter(|(_, o)| {
                requirements
                    .iter()
                    .all(|r| r.matches(&o["metadata"]["labels"]))
            })
            .map(|(_, o)| o.to_string())
            .collect())
    }

    fn sql(&self, database: &str, statements: &[Statement]) -> Result<Vec<Rows>, SqlError> {
        let refuse = |message: String| SqlError {
            message,
            sqlstate: None,
            transient: false,
        };
        if !self
            .capabilities
            .borrow()
            .iter()
            .any(|c| c.strip_prefix("sql:") == Some(database))
        {
            return Err(refuse(format!(
                "the manifest does not declare the capability sql:{database}"
            )));
        }
        self.statements
            .borrow_mut()
            .extend(statements.iter().map(|s| (database.to_string(), s.clone())));
        match &self.sql {
            Some(stand_in) => stand_in(database, statements),
            None => Err(refuse(
                "test harness: no SQL stand-in; give one with Harness::sql".into(),
            )),
        }
    }
}

/// One term of an equality-based label selector.
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    Absent(String),
}

impl Requirement {
    fn matches(&self, labels: &serde_json::Value) -> bool {
        match self {
            Requirement::Equals(k, v) => labels[k].as_str() == Some(v),
            Requirement::NotEquals(k, v) => labels[k].as_str() != Some(v),
            Requirement::Exists(k) => labels.get(k).is_some(),
            Requirement::Absent(k) => labels.get(k).is_none(),
        }
    }
}

/// The stand-in understands equality-based selectors; set-based ones (`in`, `notin`) are refused
/// with a clear message rather than silently matched wrong.
fn parse_equality_selector(selector: &str) -> Result<Vec<Requirement>, String> {
    let mut out = Vec::new();
    for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        if term.contains(" in ") || term.contains(" notin ") {
            return Err(format!(
                "test harness: set-based selector `{term}` is not supported"
            ));
        }
        let req = if let Some((k, v)) = term.split_once("!=") {
            Requirement::NotEquals(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            Requirement::Equals(k.trim().into(), v.trim().into())
        } else if let Some(k) = term.strip_prefix('!') {
            Requirement::Absent(k.trim().into())
        } else {
            Requirement::Exists(term.into())
        };
        out.push(req);
    }
    Ok(out)
}
