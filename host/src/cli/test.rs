//! `wasmctrl test`: one reconcile of a plugin, offline, printed as the JSON the host would act on.
//! The plugin author's inner loop, like `kwctl run` for Kubewarden policies.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use crate::plugin::{Intent, wit};
use crate::runtime::{Config, Error as ReconcileError, Plugin, Reconciled, Runtime};
use crate::view::StaticView;

/// Arguments of `wasmctrl test`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin component (`target/plugins/<name>.wasm`).
    plugin: PathBuf,
    /// The object to reconcile (YAML or JSON).
    #[arg(long, required_unless_present = "admission")]
    object: Option<PathBuf>,
    /// Instead of a reconcile, an AdmissionReview (YAML or JSON) for the plugin's webhooks:
    /// its defaulter (on a create or update) and then its validator run as the host would run
    /// them, and the AdmissionReview it would answer is printed.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["object", "deleting", "deleted", "previous"])]
    admission: Option<PathBuf>,
    /// Objects the plugin may read from the cache (YAML or JSON; several documents or a List
    /// per file). Repeatable.
    #[arg(long = "cache")]
    cache: Vec<PathBuf>,
    /// Operator settings for the plugin (YAML or JSON).
    #[arg(long)]
    settings: Option<PathBuf>,
    /// Reconcile as if the object were being deleted: deletionTimestamp set and, when the
    /// sample has no finalizers, those the plugin adds to a live object (found by reconciling it
    /// once first), as the host would have left them.
    #[arg(long, conflicts_with = "deleted")]
    deleting: bool,
    /// Reconcile as if the object no longer existed (only its namespace and name are sent).
    #[arg(long)]
    deleted: bool,
    /// The time the host reports to the plugin (RFC 3339); defaults to now.
    #[arg(long)]
    now: Option<String>,
    /// What each action of the key's previous reconcile did, in order (YAML or JSON list):
    /// `applied`, `unchanged`, `skipped`, or `{failed: {code, reason, message, target}}` with
    /// `target` the object it was about (apiVersion, kind, namespace, name; default the
    /// reconciled object). The plugin reads it as the host's next reconcile would pass it.
    #[arg(long)]
    previous: Option<PathBuf>,
    /// Per-call deadline in milliseconds.
    #[arg(long, default_value_t = 2000)]
    deadline_ms: u64,
    /// Databases for plugins that use SQL; statements run for real against them.
    #[command(flatten)]
    sql: super::run::SqlArgs,
}

/// Loads the plugin, runs one reconcile and prints the result. Exit 0 when the reconcile
/// succeeded, 1 when it failed (the JSON says why), 2 is left to clap for usage errors.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let bytes = crate::plugins::loader::files::read(&args.plugin)
        .with_context(|| format!("cannot read plugin {}", args.plugin.display()))?;
    if let Some(review) = &args.admission {
        return admission(&args, &bytes, review);
    }
    let (mut object, settings, mut view) = inputs(&args)?;
    let object_path = args.object.clone().unwrap_or_default();
    let (namespace, name) = as_the_host_sees_it(&mut object, &object_path)?;
    let now = match &args.now {
        Some(now) => wit::Timestamp::parse(now)
            .map_err(|e| anyhow::anyhow!("--now {now:?} is not an RFC 3339 time: {e}"))?,
        None => wit::Timestamp::now(),
    };
    // The SQL runtime must outlive the reconcile.
    let (_io, runtime) = sandbox(&args)?;
    let source = args.plugin.display().to_string();
    let plugin = runtime.load(&source, &bytes, &settings.to_string())?;
    for database in runtime.ungranted_databases(&plugin) {
        tracing::warn!(capability = %format!("sql:{database}"),
            "the plugin declares a database not granted here (--sql {database}=<connection>); its sql calls will fail");
    }
    let previous = match &args.previous {
        Some(path) => previous_results(path, &object)?,
        None => Vec::new(),
    };
    let request = |object: &Value, deleting: bool| wit::Request {
        namespace: namespace.clone(),
        name: name.clone(),
        object: (!args.deleted).then(|| object.to_string()),
        deleting: deleting && !args.deleted,
        settings: String::new(),
        now,
        previous: previous.clone(),
    };
    // The cache holds the object too, as the host's informer would.
    if !args.deleted {
        view.insert(object.clone()).ok();
    }
    let mut simulated = Vec::new();
    if args.deleting && object["metadata"]["deletionTimestamp"].is_null() {
        let holding = object["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if !holding {
            let live = Arc::new(view.clone());
            simulated = finalizers_added(&plugin, request(&object, false), live)?;
            object["metadata"]["finalizers"] = json!(simulated);
        }
        object["metadata"]["deletionTimestamp"] = json!(now.to_rfc3339());
        view.insert(object.clone()).ok();
    }
    let deleting = !object["metadata"]["deletionTimestamp"].is_null();
    let key = if namespace.is_empty() {
        name.clone()
    } else {
        format!("{namespace}/{name}")
    };
    let outcome = plugin.reconcile(request(&object, deleting), Arc::new(view));
    let (report, code) = report(&plugin, &key, &simulated, outcome)?;
    super::say(serde_json::to_string_pretty(&report)?);
    Ok(code)
}

/// Runs the plugin's webhooks on the AdmissionReview in `review` as the host would: the
/// defaulter first (its patch applied), then the validator; prints the AdmissionReview the
/// host would answer. Exit 0 when allowed, 1 when refused.
fn admission(args: &Args, bytes: &[u8], review: &Path) -> anyhow::Result<ExitCode> {
    use crate::runtime::plugin::bindings::hooks::Operation;
    let review = super::read_documents(review)?
        .into_iter()
        .next()
        .with_context(|| format!("{}: no AdmissionReview in file", review.display()))?;
    let mut request =
        crate::webhooks::review::admission_request(&review).map_err(anyhow::Error::msg)?;
    let settings = settings(args)?;
    let (_io, runtime) = sandbox(args)?;
    let plugin = runtime.load(
        &args.plugin.display().to_string(),
        bytes,
        &settings.to_string(),
    )?;
    let Some(declared) = plugin.webhooks().cloned() else {
        bail!("{}: the plugin serves no webhooks", args.plugin.display());
    };
    let view = Arc::new(cache(args)?);
    let original = request.object.clone();
    let mut warnings = Vec::new();
    let mut decided = None;
    let writes = matches!(request.operation, Operation::Create | Operation::Update);
    if declared.defaults && writes {
        let response = plugin.mutate(request.clone(), view.clone())?;
        warnings.extend(response.warnings.iter().cloned());
        if let Some(patched) = &response.patched {
            request.object = Some(patched.clone());
        }
        if !response.allowed {
            decided = Some(response);
        }
    }
    if decided.is_none() && declared.validates.contains(&request.operation) {
        let response = plugin.validate(request.clone(), view)?;
        warnings.extend(response.warnings.iter().cloned());
        if !response.allowed {
            decided = Some(response);
        }
    }
    let response = crate::runtime::plugin::bindings::hooks::AdmissionResponse {
        allowed: decided.is_none(),
        message: decided
            .as_ref()
            .map(|d| d.message.clone())
            .unwrap_or_default(),
        code: decided.as_ref().map_or(200, |d| d.code),
        warnings,
        patched: request.object.filter(|o| Some(o) != original.as_ref()),
    };
    let uid = review["request"]["uid"].as_str().unwrap_or_default();
    let answer = crate::webhooks::review::admission_response(uid, &response, original.as_deref());
    super::say(serde_json::to_string_pretty(&answer)?);
    Ok(if response.allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The operator settings for the plugin, from `--settings` (none: `{}`).
fn settings(args: &Args) -> anyhow::Result<Value> {
    Ok(match &args.settings {
        Some(path) => super::read_documents(path)?
            .into_iter()
            .next()
            .unwrap_or(json!({})),
        None => json!({}),
    })
}

/// The object, the plugin's settings and the cache's other objects, as the files give them.
fn inputs(args: &Args) -> anyhow::Result<(Value, Value, StaticView)> {
    let path = args.object.clone().unwrap_or_default();
    let object = super::read_documents(&path)?
        .into_iter()
        .next()
        .with_context(|| format!("{}: no object in file", path.display()))?;
    Ok((object, settings(args)?, cache(args)?))
}

/// The cache's objects, as `--cache` gives them.
fn cache(args: &Args) -> anyhow::Result<StaticView> {
    let mut view = StaticView::new();
    for path in &args.cache {
        for doc in super::read_documents(path)? {
            view.insert(doc)
                .with_context(|| format!("{}: cache object", path.display()))?;
        }
    }
    Ok(view)
}

/// Fills in what a cluster would have given `object` (read from `path`): `default` for a
/// namespaced object without a namespace, as kubectl does, and a stand-in uid (the host sets
/// owner references from it). Its namespace and name.
fn as_the_host_sees_it(object: &mut Value, path: &Path) -> anyhow::Result<(String, String)> {
    let Some(name) = object["metadata"]["name"].as_str().map(String::from) else {
        bail!("{}: object has no metadata.name", path.display());
    };
    if namespaced(object)
        && object["metadata"]["namespace"]
            .as_str()
            .is_none_or(str::is_empty)
    {
        object["metadata"]["namespace"] = json!("default");
    }
    if object["metadata"]["uid"].is_null() {
        object["metadata"]["uid"] = json!(SAMPLE_UID);
    }
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Ok((namespace, name))
}

/// The sandbox, with `args`' deadline and databases, and the tokio runtime SQL queries run on
/// (the reconcile itself runs on this thread) when a database is granted.
fn sandbox(args: &Args) -> anyhow::Result<(Option<tokio::runtime::Runtime>, Runtime)> {
    let io = if args.sql.is_empty() {
        None
    } else {
        Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()?,
        )
    };
    let databases = {
        let _entered = io.as_ref().map(|io| io.enter());
        args.sql.databases()?
    };
    let runtime = Runtime::new(Config {
        deadline: std::time::Duration::from_millis(args.deadline_ms),
        max_instances: 2,
        databases,
        ..Config::default()
    })?;
    Ok((io, runtime))
}

/// The printed report of one reconcile of `key`, and the exit code it means.
fn report(
    plugin: &Plugin,
    key: &str,
    simulated: &[String],
    outcome: Result<Reconciled, ReconcileError>,
) -> anyhow::Result<(Value, ExitCode)> {
    let manifest = plugin.manifest();
    let mut report = json!({
        "plugin": manifest.name,
        "version": manifest.version,
        "digest": plugin.digest(),
        "key": key,
        "fieldManager": manifest.field_manager(),
    });
    if !simulated.is_empty() {
        report["simulatedFinalizers"] = json!(simulated);
    }
    let code = match outcome {
        Ok(done) => {
            report["result"] = json!("ok");
            report["actions"] = actions_json(&done.intents, &done.best_effort)?;
            report["requeueAfterMs"] = json!(done.requeue_after.map(|d| d.as_millis() as u64));
            ExitCode::SUCCESS
        }
        Err(e) => {
            report["result"] = json!("error");
            report["error"] = json!({
                "reason": e.kind.label(),
                "retryable": e.kind.retryable(),
                "message": e.to_string(),
            });
            ExitCode::FAILURE
        }
    };
    Ok((report, code))
}

/// The checked actions as `wasmctrl test` prints them, each action whose failure does not stop
/// the ones after it marked `"bestEffort": true` (`Outcome::push_best_effort`).
fn actions_json(intents: &[Intent], best_effort: &[usize]) -> serde_json::Result<Value> {
    let mut actions = serde_json::to_value(intents)?;
    for &position in best_effort {
        if let Some(action) = actions.get_mut(position).and_then(Value::as_object_mut) {
            action.insert("bestEffort".into(), Value::Bool(true));
        }
    }
    Ok(actions)
}

/// The uid a sample without one is given, so the printed actions carry the owner reference the
/// host will add (with the object's real uid).
const SAMPLE_UID: &str = "00000000-0000-0000-0000-000000000000";

/// Whether the object's kind is namespaced: built-in kinds by what Kubernetes says, custom ones
/// (whose CRD is not at hand) taken as namespaced, as most are.
fn namespaced(object: &Value) -> bool {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let kind = object["kind"].as_str().unwrap_or_default();
    crate::kinds::Kinds::default()
        .get(group, kind)
        .is_none_or(|k| k.namespaced)
}

/// The finalizers the plugin adds to the live object: what holds it once deletion starts.
fn finalizers_added(
    plugin: &Plugin,
    request: wit::Request,
    view: Arc<StaticView>,
) -> anyhow::Result<Vec<String>> {
    let done = plugin
        .reconcile(request, view)
        .map_err(|e| anyhow::anyhow!("reconciling the live object to find its finalizers: {e}"))?;
    Ok(done
        .intents
        .into_iter()
        .filter_map(|i| match i {
            Intent::AddFinalizer { finalizer } => Some(finalizer),
            _ => None,
        })
        .collect())
}

/// One entry of `--previous`, as an author writes it.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
enum PreviousStatus {
    Applied,
    Unchanged,
    Skipped,
    Failed(PreviousFailure),
}

/// A failed action of `--previous`.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PreviousFailure {
    code: u16,
    reason: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    target: Option<PreviousTarget>,
}

/// The object a failure was about.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PreviousTarget {
    api_version: String,
    kind: String,
    #[serde(default)]
    namespace: String,
    name: String,
}

/// The `--previous` file as the request's action results; a failure without a target is about
/// the reconciled `object`.
fn previous_results(
    path: &std::path::Path,
    object: &Value,
) -> anyhow::Result<Vec<wit::ActionResult>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    // Through JSON's data model, so that `{failed: {...}}` reads as the variant it names.
    let list: Value = serde_yaml::from_str(&text)
        .with_context(|| format!("{}: invalid YAML/JSON", path.display()))?;
    let entries: Vec<PreviousStatus> = serde_json::from_value(list).with_context(|| {
        format!(
            "{}: not a list of action results (applied, unchanged, skipped, {{failed: ...}})",
            path.display()
        )
    })?;
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let reconciled = || wit::ObjectRef {
        api_version: text(&object["apiVersion"]),
        kind: text(&object["kind"]),
        namespace: text(&object["metadata"]["namespace"]),
        name: text(&object["metadata"]["name"]),
    };
    (entries.into_iter().enumerate())
        .map(|(index, entry)| {
            let status = match entry {
                PreviousStatus::Applied => wit::ActionStatus::Applied,
                PreviousStatus::Unchanged => wit::ActionStatus::Unchanged,
                PreviousStatus::Skipped => wit::ActionStatus::Skipped,
                PreviousStatus::Failed(f) => wit::ActionStatus::Failed(wit::ActionFailure {
                    target: f.target.map_or_else(reconciled, |t| wit::ObjectRef {
                        api_version: t.api_version,
                        kind: t.kind,
                        namespace: t.namespace,
                        name: t.name,
                    }),
                    code: f.code,
                    reason: f.reason,
                    message: f.message,
                }),
            };
            let index = u32::try_from(index).context("--previous: too many action results")?;
            Ok(wit::ActionResult { index, status })
        })
        .collect()
}
