//! A native stand-in for the host, so `cargo test -p <plugin>` tests a plugin without wasm.
//!
//! It makes the host's own scope checks (the shared `wasmctrl-core` crate): a cache read or an
//! action outside the kinds, namespaces and labels the manifest declares (narrowed by
//! [`Harness::namespaces`], as an operator's config would) fails the reconcile with a terminal
//! error naming what was refused, as it fails on the host.
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

use wasmctrl_core::{
    Act, ActionError, Declaration, DeclaredRead, LabelSelector, Reconciled, Refusal, Scope, Target,
    Verb,
};

use crate::context::{Host, Level};
use crate::request::Request;
use crate::sql::{Rows, SqlError, Statement};
use crate::{Action, Context, Error, Gvk, Manifest, Outcome, Reconciler};
use jiff::Timestamp;

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
    now: Option<Timestamp>,
    sql: Option<SqlStandIn>,
    statements: RefCell<Vec<(String, Statement)>>,
    // The operator's narrowing of the plugin's namespaces.
    namespaces: Option<Vec<String>>,
    // The scope of the plugin being run, and the first read it refused.
    scope: RefCell<Option<Scope>>,
    refused: RefCell<Option<Refusal>>,
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

    /// The time the host reports, RFC 3339 (`2026-01-01T00:00:00Z`).
    ///
    /// # Panics
    ///
    /// When `now` is not an RFC 3339 time: a mistake in the test itself.
    pub fn now(self, now: &str) -> Self {
        match now.parse() {
            Ok(now) => self.now_at(now),
            Err(e) => panic!("Harness::now({now:?}): not an RFC 3339 time: {e}"),
        }
    }

    /// The time the host reports.
    pub fn now_at(mut self, now: Timestamp) -> Self {
        self.now = Some(now);
        self
    }

    /// Narrows the plugin's namespaces to these, as an operator's config does.
    pub fn namespaces<S: AsRef<str>>(mut self, namespaces: &[S]) -> Self {
        self.namespaces = Some(namespaces.iter().map(|n| n.as_ref().to_string()).collect());
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

    /// The plugin's manifest for the configured settings; settings that do not parse are
    /// refused with the message the host would print.
    pub fn manifest<R: Reconciler>(&self) -> Result<Manifest, String> {
        R::manifest(&self.parsed_settings::<R>()?)
    }

    fn parsed_settings<R: Reconciler>(&self) -> Result<R::Settings, String> {
        crate::__private::settings::<R::Settings>(&self.settings.to_string())
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
    /// Fails as the host would when the plugin reads or asks for anything outside its scope.
    pub fn run<R: Reconciler>(&self, mut request: Request) -> Result<Outcome, Error> {
        if let Some(now) = self.now {
            request.now = now;
        }
        let settings = self.parsed_settings::<R>().map_err(Error::terminal)?;
        let manifest = R::manifest(&settings).map_err(Error::terminal)?;
        let scope = scope_of(&manifest, self.namespaces.as_deref()).map_err(Error::terminal)?;
        if !scope.reconciles_in(&request.namespace) {
            return Err(Error::terminal(format!(
                "test harness: {} is outside the plugin's namespaces {}; the host never queues it",
                request.key(),
                scope.namespaces()
            )));
        }
        *self.scope.borrow_mut() = Some(scope);
        self.refused.borrow_mut().take();
        // The plugin's `tracing` events, as the host's log import would receive them.
        let logged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = logged.clone();
        let forward = crate::logging::Forward::new(move |level, message, fields| {
            if let Ok(mut lines) = sink.lock() {
                lines.push(LogLine {
                    level,
                    message,
                    fields,
                });
            }
        });
        let outcome = tracing::subscriber::with_default(forward, || {
            crate::reconcile::run::<R>(&request, &Context::new(self, &settings, &request))
        });
        if let Ok(mut lines) = logged.lock() {
            self.logs.borrow_mut().append(&mut lines);
        }
        if let Some(refusal) = self.refused.borrow_mut().take() {
            return Err(Error::terminal(format!("cache read {refusal}")));
        }
        let outcome = outcome?;
        wasmctrl_core::best_effort(outcome.best_effort.iter().copied(), outcome.actions.len())
            .map_err(Error::terminal)?;
        if let Some(scope) = self.scope.borrow().as_ref() {
            for (index, action) in outcome.actions.iter().enumerate() {
                check_action(scope, &request, action)
                    .map_err(|refused| Error::terminal(format!("action {index}: {refused}")))?;
            }
        }
        Ok(outcome)
    }

    /// Runs the plugin's validating webhook natively, as the host would: `object` the object
    /// written (none for a delete), `old` the one stored (none for a create). Fails as the host
    /// would when the manifest does not declare the operation or the plugin reads outside its
    /// scope.
    pub fn validate<R: crate::webhooks::Validator>(
        &self,
        operation: crate::webhooks::Operation,
        object: Option<&serde_json::Value>,
        old: Option<&serde_json::Value>,
    ) -> Result<crate::webhooks::Verdict, String> {
        let settings = self.parsed_settings::<R>()?;
        let manifest = R::manifest(&settings)?;
        if !manifest.webhooks.validates.contains(&operation) {
            return Err(format!(
                "test harness: the manifest does not validate {operation:?}"
            ));
        }
        let (object, old) = (object.map(|o| o.to_string()), old.map(|o| o.to_string()));
        let request = Request::for_admission(object.as_ref().or(old.as_ref()));
        self.admitting::<R, _>(&manifest, &settings, &request, operation, |admission| {
            Ok(crate::webhooks::validate_json::<R>(
                admission,
                object.as_deref(),
                old.as_deref(),
            ))
        })
    }

    /// Runs the plugin's defaulting webhook natively on a create of `object`: the object as
    /// the host's patch would leave it, with the warnings, or the refusal.
    pub fn defaulted<R: crate::webhooks::Defaulter>(
        &self,
        object: &serde_json::Value,
    ) -> Result<
        Result<(serde_json::Value, crate::webhooks::Warnings), crate::webhooks::Denied>,
        String,
    > {
        let settings = self.parsed_settings::<R>()?;
        let manifest = R::manifest(&settings)?;
        if !manifest.webhooks.defaults {
            return Err("test harness: the manifest does not declare a defaulter".into());
        }
        let json = object.to_string();
        let request = Request::for_admission(Some(&json));
        let operation = crate::webhooks::Operation::Create;
        self.admitting::<R, _>(&manifest, &settings, &request, operation, |admission| {
            let defaulted = crate::webhooks::default_json::<R>(admission, &json)?;
            Ok(defaulted
                .map(|(patched, warnings)| (patched.unwrap_or_else(|| object.clone()), warnings)))
        })
    }

    /// Converts `objects` to `api_version` natively, as the conversion webhook would.
    pub fn convert<R: crate::webhooks::Converter>(
        &self,
        objects: &[serde_json::Value],
        api_version: &str,
    ) -> Result<Vec<serde_json::Value>, String> {
        let settings = self.parsed_settings::<R>()?;
        let manifest = R::manifest(&settings)?;
        let version = api_version.rsplit_once('/').map_or(api_version, |(_, v)| v);
        if !manifest.webhooks.converts.iter().any(|v| v == version) {
            return Err(format!(
                "test harness: the manifest does not convert to {version}"
            ));
        }
        (objects.iter())
            .map(|o| R::convert(o.clone(), api_version, &settings))
            .collect()
    }

    /// Runs `decide` with an admission context over this harness, under the plugin's scope.
    fn admitting<R: Reconciler, T>(
        &self,
        manifest: &Manifest,
        settings: &R::Settings,
        request: &Request,
        operation: crate::webhooks::Operation,
        decide: impl FnOnce(&crate::webhooks::Admission<'_, R::Settings>) -> Result<T, String>,
    ) -> Result<T, String> {
        let scope = scope_of(manifest, self.namespaces.as_deref())?;
        *self.scope.borrow_mut() = Some(scope);
        self.refused.borrow_mut().take();
        let mut request = request.clone();
        if let Some(now) = self.now {
            request.now = now;
        }
        let admission = crate::webhooks::Admission::new(
            operation,
            "",
            crate::webhooks::UserInfo::default(),
            false,
            Context::new(self, settings, &request),
        );
        let decided = decide(&admission);
        if let Some(refusal) = self.refused.borrow_mut().take() {
            return Err(format!("cache read {refusal}"));
        }
        decided
    }

    /// Checks a read against the running plugin's scope, recording a refusal.
    fn check_read<T>(
        &self,
        verb: Verb,
        kind: &Gvk,
        namespace: &str,
        name: &str,
        read: impl FnOnce(&wasmctrl_core::Reads<'_>) -> Result<T, Refusal>,
    ) -> Result<T, String> {
        let scope = self.scope.borrow();
        let Some(scope) = scope.as_ref() else {
            return Err("test harness: the cache is read only during reconcile".into());
        };
        let result = scope
            .check_read(verb, kind, namespace, name)
            .and_then(|reads| read(&reads));
        result.map_err(|refusal| {
            let message = refusal.to_string();
            self.refused.borrow_mut().get_or_insert(refusal);
            message
        })
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
        self.check_read(Verb::Get, kind, namespace, name, |reads| {
            // The host's caches only hold what the plugin declared (namespaces and labels go to
            // the API server): an object outside its selector is not found, as on the host.
            Ok(self
                .kind_objects(kind)
                .find(|((ns, n), _)| ns == namespace && n == name)
                .filter(|(_, o)| reads.admits(namespace, &o["metadata"]["labels"]))
                .map(|(_, o)| o.to_string()))
        })
    }

    fn list(&self, kind: &Gvk, namespace: &str, labels: &str) -> Result<Vec<String>, String> {
        let selector = LabelSelector::parse(labels).map_err(|e| e.to_string())?;
        self.check_read(Verb::List, kind, namespace, "", |reads| {
            reads
                .check_selector(&selector)
                .map_err(|reason| Refusal::new(Verb::List, kind, namespace, "", reason))?;
            Ok(self
                .kind_objects(kind)
                .filter(|((ns, _), _)| namespace.is_empty() || ns == namespace)
                .filter(|((ns, _), o)| {
                    let labels = &o["metadata"]["labels"];
                    selector.matches(labels) && reads.admits(ns, labels)
                })
                .map(|(_, o)| o.to_string())
                .collect())
        })
    }

    fn children(
        &self,
        kind: &Gvk,
        namespace: &str,
        owner_uid: &str,
    ) -> Result<Vec<String>, String> {
        self.check_read(Verb::List, kind, namespace, "", |reads| {
            Ok(self
                .kind_objects(kind)
                .filter(|((ns, _), _)| namespace.is_empty() || ns == namespace)
                .filter(|((ns, _), o)| {
                    wasmctrl_core::controlled_by(o, owner_uid)
                        && reads.admits(ns, &o["metadata"]["labels"])
                })
                .map(|(_, o)| o.to_string())
                .collect())
        })
    }

    fn sql(&self, database: &str, statements: &[Statement]) -> Result<Vec<Rows>, SqlError> {
        let refuse = |message: String| SqlError {
            message,
            sqlstate: None,
            transient: false,
        };
        let capability = format!("sql:{database}");
        if !self
            .scope
            .borrow()
            .as_ref()
            .is_some_and(|s| s.has_capability(&capability))
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

/// The plugin's scope as the host derives it from the manifest, narrowed to the operator's
/// namespaces: the same `wasmctrl-core` reading the host makes.
fn scope_of(manifest: &Manifest, narrowed: Option<&[String]>) -> Result<Scope, String> {
    let declaration = Declaration {
        watched: manifest.watches.kind.clone(),
        namespaces: manifest.watches.selector.namespaces.clone(),
        labels: manifest.watches.selector.labels.clone(),
        owns: manifest.owns.clone(),
        reads: (manifest.reads.iter())
            .map(|r| DeclaredRead {
                kind: r.kind.clone(),
                namespaces: r.selector.namespaces.clone(),
                labels: r.selector.labels.clone(),
            })
            .collect(),
        writes: manifest.writes.clone(),
        capabilities: manifest.capabilities.clone(),
    };
    declaration.scope(narrowed).map_err(|e| e.to_string())
}

fn target(r: &crate::ObjectRef) -> Target<'_> {
    Target {
        api_version: &r.api_version,
        kind: &r.kind,
        namespace: &r.namespace,
        name: &r.name,
    }
}

/// The host's check of one action, on the same rules (`Scope::check_action`). The JSON is
/// parsed here as the host parses it; the owner reference the host adds to owned children is
/// not (the harness does not invent the reconciled object's uid).
fn check_action(scope: &Scope, request: &Request, action: &Action) -> Result<(), ActionError> {
    let reconciled = Reconciled {
        namespace: &request.namespace,
        name: &request.name,
        exists: request.object.is_some(),
    };
    let parse = |json: &str| {
        serde_json::from_str::<serde_json::Value>(json)
            .map_err(|e| ActionError::Malformed(format!("invalid JSON: {e}")))
    };
    // The parsed object or status the action refers to (it must outlive `act`).
    let parsed;
    let objects: Vec<serde_json::Value>;
    let act = match action {
        Action::Apply(json) => {
            parsed = parse(json)?;
            Act::Apply(&parsed)
        }
        Action::Children(set) => {
            objects = set
                .objects
                .iter()
                .map(|o| parse(o))
                .collect::<Result<_, _>>()?;
            Act::Children {
                kind: &set.kind,
                objects: &objects,
            }
        }
        Action::Patch(p) => Act::Patch(target(&p.target)),
        Action::Delete(d) => Act::Delete(target(&d.target)),
        Action::UpdateStatus(json) => {
            parsed = if reconciled.exists {
                parse(json)?
            } else {
                serde_json::Value::Null
            };
            Act::UpdateStatus(&parsed)
        }
        Action::AddFinalizer(f) => Act::AddFinalizer(f),
        Action::RemoveFinalizer(f) => Act::RemoveFinalizer(f),
        Action::EmitEvent(e) => Act::EmitEvent {
            reason: &e.reason,
            action: &e.action,
        },
    };
    scope.check_action(&reconciled, &act)
}

#[cfg(not(target_arch = "wasm32"))]
mod crd;
#[cfg(not(target_arch = "wasm32"))]
pub use crd::{check_crd, check_crd_trimmed, check_crd_versions};
