//! Support for [`export!`](crate::export): the bindings generated from the SDK's copy of the
//! contract (`wit/plugin.wit`, `wasmctrl:plugin@0.3.1`, the world with webhooks), the real [`Host`] behind a
//! [`Context`] (the component's imports) and the conversions between the bindings and the SDK's
//! own types. Not part of the API: plugin authors never see a binding type.

use serde::de::DeserializeOwned;

pub use wit_bindgen;

use crate::context::{Host, Level};
use crate::sql::{Rows, SqlError, Statement};
use crate::{Context, Gvk, Reconciler};

/// The generated bindings.
#[allow(missing_docs, clippy::all, unsafe_code)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "plugin-with-webhooks",
        pub_export_macro: true,
        export_macro_name: "__export_plugin",
        default_bindings_module: "wasmctrl_sdk::__private::bindings",
        runtime_path: "wasmctrl_sdk::__private::wit_bindgen::rt",
    });
}

pub use bindings::exports::wasmctrl::plugin::reconciler::{
    Error as WireError, Guest, Outcome as WireOutcome, PluginManifest as WireManifest,
    Request as WireRequest,
};
use bindings::exports::wasmctrl::plugin::webhooks as wh;
pub use bindings::exports::wasmctrl::plugin::webhooks::{
    AdmissionRequest as WireAdmissionRequest, AdmissionResponse as WireAdmissionResponse,
    Declaration as WireDeclaration, Guest as WebhooksGuest,
};
use bindings::wasmctrl::plugin::{cache, log, sql as wsql, types as w};

/// The settings as the reconciler's type: none (empty, `null` or absent) is its default;
/// anything else must deserialize, and the serde message says why not.
pub fn settings<S: DeserializeOwned + Default>(json: &str) -> Result<S, String> {
    let json = json.trim();
    if json.is_empty() || json == "null" {
        return Ok(S::default());
    }
    serde_json::from_str(json).map_err(|e| format!("invalid settings: {e}"))
}

/// The `manifest` export.
pub fn manifest<R: Reconciler>(json: &str) -> Result<WireManifest, String> {
    report_panics();
    forward_logs();
    let settings = settings::<R::Settings>(json)?;
    R::manifest(&settings).map(Into::into)
}

/// The `reconcile` export.
pub fn reconcile<R: Reconciler>(request: WireRequest) -> Result<WireOutcome, WireError> {
    report_panics();
    forward_logs();
    // The host loaded the plugin with these settings, so they parsed then; they still may not
    // if the plugin changed its mind, which is terminal for this version.
    let settings = settings::<R::Settings>(&request.settings).map_err(|message| WireError {
        message,
        retryable: false,
    })?;
    let request = crate::request::Request {
        namespace: request.namespace,
        name: request.name,
        object: request.object,
        deleting: request.deleting,
        now: timestamp(request.now),
        previous: all(request.previous),
    };
    let context = Context::new(&Imports, &settings, &request);
    crate::reconcile::run::<R>(&request, &context)
        .map(Into::into)
        .map_err(Into::into)
}

/// The `webhooks` export's `declare`: what the manifest declares, checked against the webhooks
/// `export!` names (`exported`).
pub fn declare<R: Reconciler>(
    settings: &str,
    exported: &[&str],
) -> Result<WireDeclaration, String> {
    report_panics();
    forward_logs();
    let settings = self::settings::<R::Settings>(settings)?;
    let declared = R::manifest(&settings)?.webhooks;
    let missing = [
        ("validate", !declared.validates.is_empty()),
        ("default", declared.defaults),
        ("convert", !declared.converts.is_empty()),
    ];
    for (name, wanted) in missing {
        if wanted && !exported.contains(&name) {
            return Err(format!(
                "the manifest declares a `{name}` webhook that export! does not name"
            ));
        }
    }
    Ok(WireDeclaration {
        validates: declared.validates.iter().map(|o| (*o).into()).collect(),
        defaults: declared.defaults,
        converts: declared.converts,
    })
}

/// A webhook `export!` does not name.
pub fn unserved(webhook: &str) -> String {
    format!("this plugin does not serve a `{webhook}` webhook")
}

/// What a validator or defaulter sees of a request, and its context.
struct Admitting<S> {
    request: crate::request::Request,
    settings: S,
    operation: crate::webhooks::Operation,
    subresource: String,
    user: crate::webhooks::UserInfo,
    dry_run: bool,
}

impl<S: DeserializeOwned + Default> Admitting<S> {
    fn new(r: &WireAdmissionRequest) -> Result<Self, String> {
        Ok(Self {
            request: crate::request::Request {
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                object: r.object.clone().or_else(|| r.old_object.clone()),
                deleting: false,
                now: timestamp(r.now),
                previous: Vec::new(),
            },
            settings: settings::<S>(&r.settings)?,
            operation: r.operation.into(),
            subresource: r.subresource.clone(),
            user: crate::webhooks::UserInfo {
                username: r.user_info.username.clone(),
                uid: r.user_info.uid.clone(),
                groups: r.user_info.groups.clone(),
            },
            dry_run: r.dry_run,
        })
    }

    fn admission(&self) -> crate::webhooks::Admission<'_, S> {
        let context = Context::new(&Imports, &self.settings, &self.request);
        crate::webhooks::Admission::new(
            self.operation,
            &self.subresource,
            self.user.clone(),
            self.dry_run,
            context,
        )
    }
}

fn answer(verdict: crate::webhooks::Verdict, patched: Option<String>) -> WireAdmissionResponse {
    match verdict {
        Ok(warnings) => WireAdmissionResponse {
            allowed: true,
            message: String::new(),
            code: 200,
            warnings,
            patched,
        },
        Err(denied) => WireAdmissionResponse {
            allowed: false,
            message: denied.message,
            code: denied.code,
            warnings: denied.warnings,
            patched: None,
        },
    }
}

/// The `webhooks` export's `validate`, for a [`Validator`](crate::webhooks::Validator).
pub fn validate<R: crate::webhooks::Validator>(
    request: WireAdmissionRequest,
) -> Result<WireAdmissionResponse, String> {
    report_panics();
    forward_logs();
    let admitting = Admitting::<R::Settings>::new(&request)?;
    let (object, old) = (request.object.as_deref(), request.old_object.as_deref());
    let verdict = crate::webhooks::validate_json::<R>(&admitting.admission(), object, old);
    Ok(answer(verdict, None))
}

/// The `webhooks` export's `mutate`, for a [`Defaulter`](crate::webhooks::Defaulter).
pub fn default<R: crate::webhooks::Defaulter>(
    request: WireAdmissionRequest,
) -> Result<WireAdmissionResponse, String> {
    report_panics();
    forward_logs();
    let admitting = Admitting::<R::Settings>::new(&request)?;
    let Some(json) = request.object.as_deref() else {
        return Ok(answer(Ok(Vec::new()), None));
    };
    Ok(
        match crate::webhooks::default_json::<R>(&admitting.admission(), json)? {
            Ok((patched, warnings)) => answer(Ok(warnings), patched.map(|p| p.to_string())),
            Err(denied) => answer(Err(denied), None),
        },
    )
}

/// The `webhooks` export's `convert`, for a [`Converter`](crate::webhooks::Converter).
pub fn convert<R: crate::webhooks::Converter>(
    settings: &str,
    api_version: &str,
    objects: Vec<String>,
) -> Result<Vec<String>, String> {
    report_panics();
    forward_logs();
    let settings = self::settings::<R::Settings>(settings)?;
    objects
        .iter()
        .map(|json| {
            let object: serde_json::Value =
                serde_json::from_str(json).map_err(|e| e.to_string())?;
            R::convert(object, api_version, &settings).map(|o| o.to_string())
        })
        .collect()
}

impl From<crate::webhooks::Operation> for wh::Operation {
    fn from(o: crate::webhooks::Operation) -> Self {
        use crate::webhooks::Operation as O;
        match o {
            O::Create => Self::Create,
            O::Update => Self::Update,
            O::Delete => Self::Delete,
            O::Connect => Self::Connect,
        }
    }
}

impl From<wh::Operation> for crate::webhooks::Operation {
    fn from(o: wh::Operation) -> Self {
        match o {
            wh::Operation::Create => Self::Create,
            wh::Operation::Update => Self::Update,
            wh::Operation::Delete => Self::Delete,
            wh::Operation::Connect => Self::Connect,
        }
    }
}

/// The real host: the component's imports.
struct Imports;

impl Host for Imports {
    fn log(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        let fields: Vec<(String, String)> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        log::log(level.into(), message, &fields);
    }

    fn get(&self, kind: &Gvk, namespace: &str, name: &str) -> Result<Option<String>, String> {
        cache::get(&kind.into(), namespace, name)
    }

    fn list(&self, kind: &Gvk, namespace: &str, labels: &str) -> Result<Vec<String>, String> {
        cache::list(&kind.into(), namespace, labels)
    }

    fn children(
        &self,
        kind: &Gvk,
        namespace: &str,
        owner_uid: &str,
    ) -> Result<Vec<String>, String> {
        cache::children(&kind.into(), namespace, owner_uid)
    }

    fn sql(&self, database: &str, statements: &[Statement]) -> Result<Vec<Rows>, SqlError> {
        let statements: Vec<wsql::Statement> = statements.iter().map(Into::into).collect();
        match wsql::execute(database, &statements) {
            Ok(rows) => Ok(rows.into_iter().map(Into::into).collect()),
            Err(e) => Err(e.into()),
        }
    }
}

fn timestamp(t: w::Timestamp) -> jiff::Timestamp {
    jiff::Timestamp::new(t.seconds, t.nanoseconds as i32).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// `tracing` events go to the host's `log` import.
fn forward_logs() {
    crate::logging::Forward::new(|level, message, fields| {
        let fields: Vec<(&str, &str)> = (fields.iter())
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Imports.log(level, &message, &fields);
    })
    .install();
}

/// wasm32-unknown-unknown has nowhere to print a panic; hand the message to the host, which
/// puts it in the trap error it reports.
fn report_panics() {
    #[cfg(target_arch = "wasm32")]
    std::panic::set_hook(Box::new(|info| {
        let message = info.to_string();
        bindings::wasmctrl::plugin::log::log(
            w::Level::Error,
            &message,
            &[("panic".to_string(), "true".to_string())],
        );
    }));
}

impl From<&crate::Gvk> for w::Gvk {
    fn from(g: &crate::Gvk) -> Self {
        Self {
            group: g.group.clone(),
            version: g.version.clone(),
            kind: g.kind.clone(),
        }
    }
}

impl From<crate::Gvk> for w::Gvk {
    fn from(g: crate::Gvk) -> Self {
        Self {
            group: g.group,
            version: g.version,
            kind: g.kind,
        }
    }
}

impl From<crate::context::Level> for w::Level {
    fn from(l: crate::context::Level) -> Self {
        match l {
            crate::context::Level::Trace => w::Level::Trace,
            crate::context::Level::Debug => w::Level::Debug,
            crate::context::Level::Info => w::Level::Info,
            crate::context::Level::Warn => w::Level::Warn,
            crate::context::Level::Error => w::Level::Error,
        }
    }
}

impl From<crate::manifest::Selector> for w::Selector {
    fn from(s: crate::manifest::Selector) -> Self {
        Self {
            namespaces: s.namespaces,
            labels: s.labels,
        }
    }
}

impl From<crate::manifest::Predicate> for w::Predicate {
    fn from(p: crate::manifest::Predicate) -> Self {
        match p {
            crate::manifest::Predicate::GenerationChanged => w::Predicate::GenerationChanged,
            crate::manifest::Predicate::LabelsChanged => w::Predicate::LabelsChanged,
            crate::manifest::Predicate::AnnotationsChanged => w::Predicate::AnnotationsChanged,
            crate::manifest::Predicate::FinalizersChanged => w::Predicate::FinalizersChanged,
        }
    }
}

impl From<crate::manifest::Mapping> for w::Mapping {
    fn from(m: crate::manifest::Mapping) -> Self {
        match m {
            crate::manifest::Mapping::Owner => w::Mapping::Owner,
            crate::manifest::Mapping::SameName => w::Mapping::SameName,
            crate::manifest::Mapping::Label(l) => w::Mapping::Label(l),
            crate::manifest::Mapping::Annotation(a) => w::Mapping::Annotation(a),
            crate::manifest::Mapping::Namespace => w::Mapping::Namespace,
        }
    }
}

fn all<A, B: From<A>>(items: Vec<A>) -> Vec<B> {
    items.into_iter().map(B::from).collect()
}

impl From<crate::Manifest> for w::Manifest {
    fn from(m: crate::Manifest) -> Self {
        Self {
            name: m.name,
            version: m.version,
            watches: w::Watch {
                kind: m.watches.kind.into(),
                selector: m.watches.selector.into(),
                predicates: all(m.watches.predicates),
            },
            owns: all(m.owns),
            reads: m
                .reads
                .into_iter()
                .map(|r| w::Related {
                    kind: r.kind.into(),
                    selector: r.selector.into(),
                    trigger: r.trigger.map(Into::into),
                })
                .collect(),
            writes: all(m.writes),
            capabilities: m.capabilities,
        }
    }
}

impl From<crate::ObjectRef> for w::ObjectRef {
    fn from(r: crate::ObjectRef) -> Self {
        Self {
            api_version: r.api_version,
            kind: r.kind,
            namespace: r.namespace,
            name: r.name,
        }
    }
}

impl From<crate::Action> for w::Action {
    fn from(a: crate::Action) -> Self {
        use crate::action::{EventType, PatchBody};
        match a {
            crate::Action::Apply(json) => w::Action::Apply(json),
            crate::Action::Patch(p) => w::Action::Patch(w::Patch {
                target: p.target.into(),
                body: match p.body {
                    PatchBody::Merge(json) => w::PatchBody::Merge(json),
                    PatchBody::Json(json) => w::PatchBody::Json(json),
                },
            }),
            crate::Action::Delete(d) => w::Action::Delete(w::Deletion {
                target: d.target.into(),
                propagation: match d.propagation {
                    crate::Propagation::Background => w::Propagation::Background,
                    crate::Propagation::Foreground => w::Propagation::Foreground,
                    crate::Propagation::Orphan => w::Propagation::Orphan,
                },
            }),
            crate::Action::UpdateStatus(json) => w::Action::UpdateStatus(json),
            crate::Action::AddFinalizer(f) => w::Action::AddFinalizer(f),
            crate::Action::RemoveFinalizer(f) => w::Action::RemoveFinalizer(f),
            crate::Action::EmitEvent(e) => w::Action::EmitEvent(w::Event {
                type_: match e.type_ {
                    EventType::Normal => w::EventType::Normal,
                    EventType::Warning => w::EventType::Warning,
                },
                reason: e.reason,
                note: e.note,
                action: e.action,
            }),
            crate::Action::Children(c) => w::Action::Children(w::Children {
                kind: c.kind.into(),
                objects: c.objects,
            }),
        }
    }
}

impl From<crate::Outcome> for w::Outcome {
    fn from(o: crate::Outcome) -> Self {
        Self {
            actions: all(o.actions),
            best_effort: (o.best_effort.into_iter())
                .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
                .collect(),
            requeue_after_ms: o
                .requeue_after
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }
    }
}

impl From<w::ActionResult> for crate::ActionResult {
    fn from(r: w::ActionResult) -> Self {
        use crate::ActionStatus;
        Self {
            index: r.index as usize,
            status: match r.status {
                w::ActionStatus::Applied => ActionStatus::Applied,
                w::ActionStatus::Unchanged => ActionStatus::Unchanged,
                w::ActionStatus::Skipped => ActionStatus::Skipped,
                w::ActionStatus::Failed(f) => ActionStatus::Failed(crate::ActionFailure {
                    target: crate::ObjectRef {
                        api_version: f.target.api_version,
                        kind: f.target.kind,
                        namespace: f.target.namespace,
                        name: f.target.name,
                    },
                    code: f.code,
                    reason: f.reason,
                    message: f.message,
                }),
            },
        }
    }
}

impl From<crate::Error> for w::Error {
    fn from(e: crate::Error) -> Self {
        Self {
            message: e.message,
            retryable: e.retryable,
        }
    }
}

impl From<&crate::sql::Value> for wsql::Value {
    fn from(v: &crate::sql::Value) -> Self {
        use crate::sql::Value;
        match v {
            Value::Null => wsql::Value::Null,
            Value::Boolean(b) => wsql::Value::Boolean(*b),
            Value::Integer(i) => wsql::Value::Integer(*i),
            Value::Float(f) => wsql::Value::Float(*f),
            Value::Text(t) => wsql::Value::Text(t.clone()),
        }
    }
}

impl From<wsql::Value> for crate::sql::Value {
    fn from(v: wsql::Value) -> Self {
        use crate::sql::Value;
        match v {
            wsql::Value::Null => Value::Null,
            wsql::Value::Boolean(b) => Value::Boolean(b),
            wsql::Value::Integer(i) => Value::Integer(i),
            wsql::Value::Float(f) => Value::Float(f),
            wsql::Value::Text(t) => Value::Text(t),
        }
    }
}

impl From<&crate::sql::Statement> for wsql::Statement {
    fn from(s: &crate::sql::Statement) -> Self {
        Self {
            query: s.query.clone(),
            identifiers: s.identifiers.clone(),
            params: s.params.iter().map(Into::into).collect(),
        }
    }
}

impl From<wsql::Rows> for crate::sql::Rows {
    fn from(r: wsql::Rows) -> Self {
        Self {
            columns: r.columns,
            rows: r.rows.into_iter().map(all).collect(),
            affected: r.affected,
        }
    }
}

impl From<wsql::SqlError> for crate::sql::SqlError {
    fn from(e: wsql::SqlError) -> Self {
        Self {
            message: e.message,
            sqlstate: e.sqlstate,
            transient: e.transient,
        }
    }
}
