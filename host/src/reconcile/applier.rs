//! Carrying out checked [`Intent`]s against the API server: server-side apply with one field
//! manager per plugin, merge and JSON patches, deletes, status through the status subresource,
//! finalizers through JSON Patch with `test` preconditions, and events.k8s.io/v1 Events.
//!
//! Writes whose intent is unchanged since the last successful write (and whose target has not
//! changed since) are skipped, so a controller that reconciles often does not write often. A
//! cache that has not caught up with our own write yet (the target still at the version we
//! wrote over) is no reason to write again: a change to it would come as an event and queue
//! the key anyway. Without that, a reconcile triggered by one event (a child created) re-sent
//! what the previous one wrote whenever the other event (its own status write) had not arrived.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, RwLock};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::discovery::Scope;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use wasmctrl_core::Gvk;

use k8s_openapi::api::core::v1::ObjectReference;

use crate::identity::Account;
use crate::observe::events::{HOST_CONTROLLER, Note, Recorders};
use crate::observe::metrics::Metrics;
use crate::plugin::{Child, Intent, Manifest, Target, wit};
use crate::reconcile::informer::{Entry, Informer, Informers, ObjectKey, Version};
use crate::replicas::leader::Fence;
use wasmctrl_core::sync::{lock, read, write};

/// Why carrying out an intent failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Someone else changed the object first (409, or a failed `test` precondition): requeue.
    #[error("{target}: conflict: {message}")]
    Conflict {
        /// The object.
        target: String,
        /// The server's answer: 409, or 422 for a failed `test`.
        code: u16,
        /// The server's `Status.reason`.
        reason: String,
        /// The server's message.
        message: String,
    },
    /// The API server refused or failed the request. (Causes are in the messages, so they are
    /// not also `source()`: a chain printed whole says each once.)
    #[error("{target}: {verb} failed: {error}")]
    Api {
        /// The object.
        target: String,
        /// What was attempted.
        verb: &'static str,
        /// The client error.
        error: kube::Error,
    },
    /// The plugin's intent cannot be sent as asked (a JSON Patch that does not parse): retrying
    /// the same intent cannot help.
    #[error("{target}: {message}")]
    Malformed {
        /// The object.
        target: String,
        /// What is wrong.
        message: String,
    },
    /// Not sent: this replica does not lead (any more); another one reconciles now.
    #[error("{target}: not sent: this replica is not the leader")]
    NotLeader {
        /// The object.
        target: String,
    },
    /// Children of a kind cannot be pruned: no informer caches them where they live (yet).
    #[error(
        "{target}: children of kind {kind} cannot be pruned: no cache of them covers namespace {namespace:?}"
    )]
    Uncached {
        /// The reconciled object.
        target: String,
        /// The children's kind.
        kind: String,
        /// Where they were looked for.
        namespace: String,
    },
    /// The kind is not served (CRD missing).
    #[error("{kind}: not served by the API server: {error}")]
    Discovery {
        /// The kind.
        kind: String,
        /// The client error.
        error: kube::Error,
    },
}

impl Error {
    /// A short stable label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Conflict { .. } => "conflict",
            Error::Api { .. } => "api_error",
            Error::Malformed { .. } => "malformed_intent",
            Error::Discovery { .. } => "discovery",
            Error::NotLeader { .. } => "not_leader",
            Error::Uncached { .. } => "uncached",
        }
    }

    /// Whether the API server refused the request as forbidden (RBAC): retrying helps only once
    /// an operator grants what is missing, so it deserves telling.
    pub fn forbidden(&self) -> bool {
        matches!(self, Error::Api { error: kube::Error::Api(s), .. } if s.code == 403)
    }

    /// Whether the same intent could succeed later.
    pub fn retryable(&self) -> bool {
        !matches!(self, Error::Malformed { .. })
    }

    /// The HTTP code and `Status.reason` the server answered, with its message; for a request
    /// that got no answer or was not sent, 0 and the host's own reason, with the whole error.
    fn answer(&self) -> (u16, String, String) {
        let host = |reason: &str| (0, reason.to_owned(), self.to_string());
        match self {
            Error::Conflict {
                code,
                reason,
                message,
                ..
            } => (*code, reason.clone(), message.clone()),
            Error::Api {
                error: kube::Error::Api(status),
                ..
            } => (status.code, status.reason.clone(), status.message.clone()),
            Error::Api { .. } => host("RequestFailed"),
            Error::Discovery { .. } => host("NotServed"),
            Error::Malformed { .. } => host("Malformed"),
            Error::NotLeader { .. } => host("NotLeader"),
            Error::Uncached { .. } => host("Uncached"),
        }
    }
}

/// What became of one intent: the contract's `action-status`, kept small, since the controller
/// keeps one for each action of every key's last reconcile.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionStatus {
    /// A request was sent and accepted.
    Applied,
    /// No request was needed (the cache showed the effect in place), or a delete found the
    /// object gone.
    Unchanged,
    /// The request failed.
    Failed(Box<Failure>),
    /// Not attempted: an earlier intent that was not best effort failed.
    Skipped,
}

/// A failed intent: which object it was about, and how the server (or the host) answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The action's target; the reconciled object for status, finalizer and event intents; for
    /// a set of children, the child whose write failed.
    pub target: Target,
    /// The HTTP status code; 0 when the request got no answer or was not sent.
    pub code: u16,
    /// The server's `Status.reason`, or the host's own (see [`Error`]).
    pub reason: String,
    /// What the server (or the host) said.
    pub message: String,
}

impl Failure {
    fn new(target: Target, error: &Error) -> Self {
        let (code, reason, message) = error.answer();
        Self {
            target,
            code,
            reason,
            message,
        }
    }
}

/// An intent that failed, and the object it failed on.
struct Failed {
    target: Target,
    error: Error,
}

/// What the applier did for one reconcile.
#[derive(Debug, Default)]
pub struct Applied {
    /// Requests sent.
    pub writes: usize,
    /// Requests not sent because nothing would change.
    pub skipped: usize,
    /// The writes that changed a cached object, whose events the caches have yet to show.
    pub echoes: Vec<Echo>,
    /// What became of each intent, in order.
    pub statuses: Vec<ActionStatus>,
    /// The first failure, if any intent failed: it decides how the key is retried.
    pub error: Option<Error>,
}

impl Applied {
    /// What was done, when every intent succeeded; else the first failure.
    pub fn succeeded(self) -> Result<Self, Error> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(self),
        }
    }

    fn count(&mut self, sent: bool) {
        if sent {
            self.writes += 1;
        } else {
            self.skipped += 1;
        }
    }
}

/// The writes of one reconcile that changed an object some cache holds: the events they cause
/// (their echo) are on their way to that cache. The controller waits for the echoes of a key's
/// last reconcile before reconciling that key again (`controller::echoes`).
///
/// One echo per object, however many times the reconcile wrote it: it waits until the cache has
/// moved past every version those writes replaced, so a reconcile that writes an object's
/// status and then removes its finalizer is not satisfied by the status write's event alone
/// (as kube-controller-manager's expectations count each write, not the first).
#[derive(Clone)]
pub struct Echo {
    informer: Arc<Informer>,
    key: ObjectKey,
    /// The versions the writes replaced: the cached one before the first (`None`: not there,
    /// a create), then what each write but the last returned.
    passed: Vec<Option<Version>>,
    /// What the last write returned, when known (a delete's is not).
    after: Option<Version>,
}

impl std::fmt::Debug for Echo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Echo")
            .field("cache", &self.informer.watch().to_string())
            .field("key", &self.key)
            .field("passed", &self.passed)
            .field("after", &self.after)
            .finish()
    }
}

impl Echo {
    /// The echo of a write to `key` in `informer`'s cache, made over `before`.
    #[cfg(test)]
    pub(crate) fn new(informer: Arc<Informer>, key: ObjectKey, before: Option<Version>) -> Self {
        Self {
            informer,
            key,
            passed: vec![before],
            after: None,
        }
    }

    /// Whether the cache has moved past every version the writes replaced, so it shows the
    /// last write (or something later). resourceVersions are opaque: no order between them is
    /// assumed, only that a write changes the object's.
    pub fn seen(&self) -> bool {
        let now = self.informer.get(&self.key);
        let now = now.as_ref().map(|e| e.resource_version.clone());
        !self.passed.contains(&now)
    }

    /// Whether `other` is an echo of the same object in the same cache.
    fn same_object(&self, other: &Echo) -> bool {
        Arc::ptr_eq(&self.informer, &other.informer) && self.key == other.key
    }
}

/// Adds `echo` (one write, `after` being what it returned) to a reconcile's `echoes`: a later
/// write to an object written before extends that object's echo with the version the earlier
/// write left, which the cache must move past too.
fn add_echo(echoes: &mut Vec<Echo>, mut echo: Echo, after: Option<&str>) {
    echo.after = after
        .filter(|v| !v.is_empty())
        .map(|v| Version::new(v.to_owned()));
    match echoes.iter_mut().find(|e| e.same_object(&echo)) {
        Some(earlier) => {
            if let Some(left) = earlier.after.take() {
                let left = Some(left);
                if !earlier.passed.contains(&left) {
                    earlier.passed.push(left);
                }
            }
            earlier.after = echo.after;
        }
        None => echoes.push(echo),
    }
}

/// A write's target as the cache covering it holds it.
struct Cached {
    informer: Arc<Informer>,
    key: ObjectKey,
    entry: Option<Arc<Entry>>,
}

impl Cached {
    /// The cached resourceVersion; empty when the object is not cached.
    fn version(&self) -> String {
        self.entry
            .as_ref()
            .map(|e| e.resource_version.to_string())
            .unwrap_or_default()
    }

    fn into_echo(self) -> Echo {
        Echo {
            informer: self.informer,
            key: self.key,
            passed: vec![self.entry.map(|e| e.resource_version.clone())],
            after: None,
        }
    }
}

/// The object being reconciled, as the applier needs it.
pub struct Subject<'a> {
    /// The plugin's manifest (field manager, reconciled kind).
    pub manifest: &'a Manifest,
    /// Key of the reconciled object.
    pub key: &'a ObjectKey,
    /// The cached object, when it exists.
    pub object: Option<&'a Entry>,
    /// The cache the object was read from (where the echo of a status write shows).
    pub cache: Option<&'a Arc<Informer>>,
}

impl Subject<'_> {
    /// The echo of a write to the reconciled object; `None` when it was not read from a cache.
    fn echo(&self) -> Option<Echo> {
        let (informer, object) = (self.cache?, self.object?);
        Some(Echo {
            informer: informer.clone(),
            key: object.key.clone(),
            passed: vec![Some(object.resource_version.clone())],
            after: None,
        })
    }
}

/// Sends checked intents to the API server.
pub struct Applier {
    /// The host's own client: discovery, and the plugins that act as the host.
    client: kube::Client,
    /// plugin -> the account it acts as and a client sending as it; a plugin not here acts
    /// as the host.
    acting: RwLock<HashMap<String, (Account, kube::Client)>>,
    informers: Arc<Informers>,
    resources: Mutex<HashMap<Gvk, Arc<Discovered>>>,
    /// target -> plugin -> what it last wrote there. Keyed by target first so that an object's
    /// deletion forgets it at once ([`Applier::forget_object`]).
    last: Mutex<HashMap<WrittenTo, Written>>,
    /// Events, best effort: recorded with series, never failing a reconcile.
    recorders: Recorders,
    /// Checked before every request for a plugin: a replica that does not lead sends nothing.
    fence: Fence,
}

/// Where a remembered write went: an object, or its status (written apart, through the status
/// subresource). Objects are told apart as kube-apiserver does: by group, kind (any version),
/// namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WrittenTo {
    group: String,
    kind: String,
    namespace: String,
    name: String,
    status: bool,
}

impl WrittenTo {
    fn object(gvk: &Gvk, namespace: &str, name: &str) -> Self {
        Self {
            group: gvk.group.clone(),
            kind: gvk.kind.clone(),
            namespace: namespace.into(),
            name: name.into(),
            status: false,
        }
    }

    fn status(gvk: &Gvk, namespace: &str, name: &str) -> Self {
        Self {
            status: true,
            ..Self::object(gvk, namespace, name)
        }
    }
}

/// What each plugin last wrote to one object: plugin -> its last write.
type Written = HashMap<String, Write>;

/// One remembered write.
#[derive(Debug, Clone, Default)]
struct Write {
    /// Hash of the intent.
    hash: u64,
    /// The target's resourceVersion in the cache when we wrote (empty: not there).
    before: String,
    /// The resourceVersion our write produced.
    after: String,
}

impl Write {
    /// Whether the target, at `cached` in the cache now, is as this write left it: the cache
    /// shows our write, or has not caught up with it yet.
    fn holds(&self, hash: u64, cached: &str) -> bool {
        self.hash == hash && (cached == self.after || cached == self.before)
    }
}

/// All the applier reads of a write's response: the resourceVersion the write produced. The
/// response is the whole object, managedFields and all; `Api::patch` would build all of it as
/// a `DynamicObject` only for this to be read (`cargo bench --bench convergence`: a tenth of
/// the host's CPU time in an update storm went to carrying out writes besides the requests).
#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    metadata: ResponseMeta,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponseMeta {
    #[serde(default)]
    resource_version: Option<String>,
}

/// The body of a patch intent.
#[derive(Clone, Copy)]
enum Patching<'a> {
    /// RFC 7386.
    Merge(&'a Value),
    /// RFC 6902, `test` operations included.
    Json(&'a json_patch::Patch),
}

/// Builds a request against a resource's URL, as `kube::core::Request`'s methods do.
trait BuildRequest:
    FnOnce(&kube::core::Request) -> Result<http::Request<Vec<u8>>, kube::core::request::Error>
{
}

impl<F> BuildRequest for F where
    F: FnOnce(&kube::core::Request) -> Result<http::Request<Vec<u8>>, kube::core::request::Error>
{
}

/// What a status write's response is read for: the version it produced, and the status as the
/// server stored it (to tell whether it pruned fields the plugin wrote).
#[derive(Deserialize)]
struct StatusResponse {
    #[serde(default)]
    metadata: ResponseMeta,
    #[serde(default)]
    status: Option<Value>,
}

/// The fields of `sent` (a status) that `stored` lacks, as `.status.a.b` paths: what the API
/// server pruned because the CRD's schema does not declare them (a CRD older than the plugin).
/// Values the server may rewrite are not compared, only whether keys survived; `null`s are left
/// out (the server drops them from non-nullable fields by design).
fn pruned_fields(sent: &Value, stored: &Value) -> Vec<String> {
    fn walk(sent: &Value, stored: &Value, path: &mut String, out: &mut Vec<String>) {
        match (sent, stored) {
            (Value::Object(sent), Value::Object(stored)) => {
                for (key, value) in sent {
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    match stored.get(key) {
                        None if !value.is_null() => out.push(path.clone()),
                        None => {}
                        Some(kept) => walk(value, kept, path, out),
                    }
                    path.truncate(len);
                }
            }
            (Value::Array(sent), Value::Array(stored)) if sent.len() == stored.len() => {
                for (i, (value, kept)) in sent.iter().zip(stored).enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    walk(value, kept, path, out);
                    path.truncate(len);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    // No status stored at all: every field was pruned.
    let nothing = Value::Object(Default::default());
    let stored = if stored.is_null() { &nothing } else { stored };
    walk(sent, stored, &mut ".status".to_string(), &mut out);
    out
}

/// Whether a write that produced `after` changed an object cached at `before`: a no-op apply or
/// patch keeps the resourceVersion, and no event (echo) follows it.
fn changed(before: Option<&str>, after: &str) -> bool {
    before != Some(after)
}

/// The `status` of an object's JSON, without building the rest of it.
fn status_of(json: &str) -> Option<Value> {
    #[derive(Deserialize)]
    struct Status {
        #[serde(default)]
        status: Option<Value>,
    }
    serde_json::from_str::<Status>(json).ok()?.status
}

/// A kind's discovered resource and whether it is namespaced, once some worker has found it.
type Discovered = tokio::sync::OnceCell<(ApiResource, bool)>;

fn hash_of(value: &impl Hash) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

fn target_label(gvk: &Gvk, namespace: &str, name: &str) -> String {
    let kind = if gvk.group.is_empty() {
        gvk.kind.clone()
    } else {
        format!("{}.{}", gvk.kind, gvk.group)
    };
    if namespace.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {namespace}/{name}")
    }
}

/// The `reportingController` of a plugin's events (also its field manager's name).
fn reporting_controller(plugin: &str) -> String {
    format!("wasmctrl/{plugin}")
}

/// Someone else changed the object first: 409, or (for a patch with `test` preconditions) a 422,
/// which is how a failed `test` comes back; servers word its message differently.
fn is_conflict(e: &kube::Error, preconditions: bool) -> Option<&kube::core::Status> {
    match e {
        kube::Error::Api(s) if s.code == 409 || (preconditions && s.code == 422) => Some(s),
        _ => None,
    }
}

/// The reconciled object, as a [`Target`].
fn subject_target(subject: &Subject<'_>) -> Target {
    let gvk = subject.manifest.kind();
    Target {
        api_version: gvk.api_version(),
        kind: gvk.kind.clone(),
        namespace: subject.key.namespace().to_owned(),
        name: subject.key.name().to_owned(),
    }
}

/// The object an intent (other than a set of children) writes.
fn intent_target(intent: &Intent, subject: &Subject<'_>) -> Target {
    match intent {
        Intent::Apply { target, .. }
        | Intent::MergePatch { target, .. }
        | Intent::JsonPatch { target, .. }
        | Intent::Delete { target, .. } => target.clone(),
        _ => subject_target(subject),
    }
}

/// Whether a JSON Patch carries `test` preconditions.
fn has_test(ops: &json_patch::Patch) -> bool {
    ops.0
        .iter()
        .any(|op| matches!(op, json_patch::PatchOperation::Test(_)))
}

/// Whether the server answered 404 Not Found.
fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

impl Applier {
    /// An applier over `client`, consulting `informers` to skip unchanged writes.
    pub fn new(client: kube::Client, informers: Arc<Informers>) -> Self {
        // The Pod's name (downward API), else the hostname, which in a Pod is the same and is
        // what kube-runtime reports.
        let instance = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| HOST_CONTROLLER.into());
        Self {
            recorders: Recorders::new(&instance),
            client,
            acting: RwLock::new(HashMap::new()),
            informers,
            resources: Mutex::new(HashMap::new()),
            last: Mutex::new(HashMap::new()),
            fence: Fence::open(),
        }
    }

    /// Makes every request for `plugin` as `account` (impersonated), or as the host (`None`).
    pub fn act_as(&self, plugin: &str, account: Option<Account>) {
        let mut acting = write(&self.acting);
        match account {
            Some(account) => {
                let client = account.client(&self.client);
                acting.insert(plugin.to_owned(), (account, client));
            }
            None => {
                acting.remove(plugin);
            }
        }
    }

    /// The account `plugin` acts as (`None`: the host).
    fn account(&self, plugin: &str) -> Option<Account> {
        let acting = read(&self.acting);
        acting.get(plugin).map(|(account, _)| account.clone())
    }

    /// The client that sends `plugin`'s requests.
    fn client(&self, plugin: &str) -> kube::Client {
        let acting = read(&self.acting);
        match acting.get(plugin) {
            Some((_, client)) => client.clone(),
            None => self.client.clone(),
        }
    }

    /// Whether `key` of `cache`'s kind exists now, as the API server says, read as `plugin`'s
    /// account: sharding by uid, a `Gone` asks before it runs on a name that may be back
    /// (see [`crate::replicas::sharding::tombstones`]). A kind not resolved yet cannot be asked about.
    pub async fn exists(
        &self,
        plugin: &str,
        cache: &Informer,
        key: &ObjectKey,
    ) -> Result<bool, kube::Error> {
        let Some((resource, namespaced)) = cache.resource() else {
            return Err(kube::Error::Api(
                kube::core::Status::failure("the kind is not resolved yet", "NotFound")
                    .with_code(404)
                    .boxed(),
            ));
        };
        let client = self.client(plugin);
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(client, key.namespace(), &resource)
        } else {
            Api::all_with(client, &resource)
        };
        Ok(api.get_opt(key.name()).await?.is_some())
    }

    /// Counts the events the API server refuses into `metrics`.
    pub fn counted(mut self, metrics: Arc<Metrics>) -> Self {
        self.recorders = self.recorders.counted(metrics);
        self
    }

    /// Sends requests for plugins only while `fence` holds (leader election).
    pub fn fenced(mut self, fence: Fence) -> Self {
        self.fence = fence;
        self
    }

    /// Carries out `intents` in order. The first failure of an intent whose position is not in
    /// `best_effort` (sorted) stops the rest, which are skipped.
    pub async fn apply(
        &self,
        subject: &Subject<'_>,
        intents: &[Intent],
        best_effort: &[usize],
    ) -> Applied {
        let mut applied = Applied {
            statuses: Vec::with_capacity(intents.len()),
            ..Applied::default()
        };
        // An intent that was not best effort failed: the rest are skipped.
        let mut stopped = false;
        for (index, intent) in intents.iter().enumerate() {
            if stopped {
                applied.statuses.push(ActionStatus::Skipped);
                continue;
            }
            let writes = applied.writes;
            let done = match intent {
                Intent::Children {
                    api_version,
                    kind,
                    objects,
                } => {
                    self.apply_children(subject, api_version, kind, objects, &mut applied)
                        .await
                }
                intent => match self.apply_one(subject, intent, &mut applied.echoes).await {
                    Ok(sent) => {
                        applied.count(sent);
                        Ok(())
                    }
                    Err(error) => Err(Failed {
                        target: intent_target(intent, subject),
                        error,
                    }),
                },
            };
            let status = match done {
                Ok(()) if applied.writes > writes => ActionStatus::Applied,
                Ok(()) => ActionStatus::Unchanged,
                Err(Failed { target, error }) => {
                    let status = ActionStatus::Failed(Box::new(Failure::new(target, &error)));
                    applied.error.get_or_insert(error);
                    stopped = best_effort.binary_search(&index).is_err();
                    status
                }
            };
            applied.statuses.push(status);
        }
        applied
    }

    /// Applies each desired child, then deletes the children of that kind the reconciled object
    /// controls and the set leaves out, found through the informer's owner index. A child the
    /// object does not control (no controller reference with its UID) is never deleted.
    async fn apply_children(
        &self,
        subject: &Subject<'_>,
        api_version: &str,
        kind: &str,
        objects: &[Child],
        applied: &mut Applied,
    ) -> Result<(), Failed> {
        let mut desired = HashSet::with_capacity(objects.len());
        for child in objects {
            let failed = |error| Failed {
                target: child.target.clone(),
                error,
            };
            let intent = Intent::Apply {
                target: child.target.clone(),
                object: child.object.clone(),
            };
            let sent = self
                .apply_one(subject, &intent, &mut applied.echoes)
                .await
                .map_err(failed)?;
            applied.count(sent);
            let (_, namespace, _) = self.api_for(&child.target, subject).await.map_err(failed)?;
            desired.insert(ObjectKey::new(&namespace, &child.target.name));
        }
        // Checked before: the set is returned only for an object that exists.
        let Some(owner) = subject.object else {
            return Ok(());
        };
        let any = Target {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: String::new(),
            name: String::new(),
        };
        let namespace = subject.key.namespace();
        let account = self.account(&subject.manifest.name);
        let Some(informer) = (self.informers).covering(&any.gvk(), namespace, account.as_ref())
        else {
            let (gvk, key) = (subject.manifest.kind(), subject.key);
            return Err(Failed {
                target: subject_target(subject),
                error: Error::Uncached {
                    target: target_label(gvk, key.namespace(), key.name()),
                    kind: kind.into(),
                    namespace: namespace.to_owned(),
                },
            });
        };
        let owner_uid = owner.meta().uid;
        for key in informer.children_of(&owner_uid) {
            let controlled = informer.get(&key).is_some_and(|child| {
                !child.deleting
                    && child
                        .owners()
                        .iter()
                        .any(|o| o.controller && o.uid == owner_uid)
            });
            if !controlled || desired.contains(&key) {
                continue;
            }
            let target = Target {
                namespace: key.namespace().to_owned(),
                name: key.name().to_owned(),
                ..any.clone()
            };
            let delete = Intent::Delete {
                target: target.clone(),
                propagation: wit::Propagation::Background,
            };
            match self.apply_one(subject, &delete, &mut applied.echoes).await {
                Ok(sent) => applied.count(sent),
                Err(error) => return Err(Failed { target, error }),
            }
        }
        Ok(())
    }

    /// Records a Warning Event on the reconciled object (used for errors the plugin caused).
    pub async fn warn(&self, subject: &Subject<'_>, reason: &str, note: &str) -> Result<(), Error> {
        let event = Intent::Event {
            type_: "Warning".into(),
            reason: reason.into(),
            note: note.into(),
            action: "Reconcile".into(),
        };
        self.apply_one(subject, &event, &mut Vec::new())
            .await
            .map(|_| ())
    }

    /// Forgets remembered writes of a plugin (its new version must write afresh) and its
    /// events' series.
    pub fn forget_plugin(&self, plugin: &str) {
        self.recorders.forget(&reporting_controller(plugin));
        lock(&self.last).retain(|_, by_plugin| {
            by_plugin.remove(plugin);
            !by_plugin.is_empty()
        });
    }

    /// Forgets what was written to (and recorded about) an object that is gone, so deleted
    /// objects leave nothing behind.
    pub fn forget_object(&self, gvk: &Gvk, key: &ObjectKey) {
        let (namespace, name) = (key.namespace(), key.name());
        let mut last = lock(&self.last);
        last.remove(&WrittenTo::status(gvk, namespace, name));
        last.remove(&WrittenTo::object(gvk, namespace, name));
    }

    /// How many objects the applier remembers writes to or events about.
    pub fn remembered(&self) -> usize {
        lock(&self.last).len()
    }

    fn last(&self, plugin: &str, to: &WrittenTo) -> Option<Write> {
        lock(&self.last).get(to)?.get(plugin).cloned()
    }

    fn record(&self, plugin: &str, to: WrittenTo, write: Write) {
        lock(&self.last)
            .entry(to)
            .or_default()
            .insert(plugin.to_string(), write);
    }

    /// A target as the cache covering it (filled with `plugin`'s rights) holds it; `None`
    /// when no cache covers it.
    fn cached(&self, plugin: &str, gvk: &Gvk, namespace: &str, name: &str) -> Option<Cached> {
        let account = self.account(plugin);
        let informer = self.informers.covering(gvk, namespace, account.as_ref())?;
        let key = ObjectKey::new(namespace, name);
        let entry = informer.get(&key);
        Some(Cached {
            informer,
            key,
            entry,
        })
    }

    /// Returns whether a request was sent. A write that changed a cached object adds its echo
    /// to `echoes`.
    async fn apply_one(
        &self,
        subject: &Subject<'_>,
        intent: &Intent,
        echoes: &mut Vec<Echo>,
    ) -> Result<bool, Error> {
        if !self.fence.holds() {
            let (kind, key) = (subject.manifest.kind(), subject.key);
            return Err(Error::NotLeader {
                target: target_label(kind, key.namespace(), key.name()),
            });
        }
        match intent {
            Intent::Apply { target, object } => {
                self.server_side_apply(subject, target, object, echoes)
                    .await
            }
            Intent::MergePatch { target, patch } => {
                self.patch(subject, target, Patching::Merge(patch), echoes)
                    .await
            }
            Intent::JsonPatch { target, patch } => {
                self.patch(subject, target, Patching::Json(patch), echoes)
                    .await
            }
            Intent::Delete {
                target,
                propagation,
            } => self.delete(subject, target, *propagation, echoes).await,
            Intent::UpdateStatus { status } => self.write_status(subject, status, echoes).await,
            Intent::AddFinalizer { finalizer } => {
                self.write_finalizer(subject, finalizer, true, echoes).await
            }
            Intent::RemoveFinalizer { finalizer } => {
                self.write_finalizer(subject, finalizer, false, echoes)
                    .await
            }
            Intent::Event {
                type_,
                reason,
                note,
                action,
            } => {
                let note = Note {
                    warning: type_ == "Warning",
                    reason,
                    note,
                    action,
                };
                self.event(subject, &note).await
            }
            // A set is many requests; `apply` carries it out with `apply_children`.
            Intent::Children { kind, .. } => Err(Error::Malformed {
                target: kind.clone(),
                message: "a set of children is applied as a whole, not as one request".into(),
            }),
        }
    }

    /// Server-side applies a whole object with the plugin's field manager, unless the cache
    /// shows what the last apply of the same intent left.
    async fn server_side_apply(
        &self,
        subject: &Subject<'_>,
        target: &Target,
        object: &Value,
        echoes: &mut Vec<Echo>,
    ) -> Result<bool, Error> {
        let plugin = subject.manifest.name.as_str();
        let (api, namespace, gvk) = self.api_for(target, subject).await?;
        // Serialized once: the same text is hashed and sent.
        let body = if !namespace.is_empty() && object["metadata"]["namespace"].is_null() {
            let mut object = object.clone();
            object["metadata"]["namespace"] = json!(namespace);
            object.to_string()
        } else {
            object.to_string()
        };
        let label = target_label(&gvk, &namespace, &target.name);
        let to = WrittenTo::object(&gvk, &namespace, &target.name);
        let intent_hash = hash_of(&body);
        let cached = self.cached(&subject.manifest.name, &gvk, &namespace, &target.name);
        let before = cached.as_ref().map(Cached::version);
        if self.unchanged(plugin, &to, intent_hash, before.as_deref()) {
            return Ok(false);
        }
        let params = PatchParams::apply(&subject.manifest.field_manager()).force();
        let body = RawValue::from_string(body).map_err(|e| Error::Malformed {
            target: label.clone(),
            message: e.to_string(),
        })?;
        let result = self
            .write(&api, "patch", |r| {
                r.patch(&target.name, &params, &Patch::Apply(&body))
            })
            .await;
        let after = self.map(result, &label, "apply")?;
        if changed(before.as_deref(), &after)
            && let Some(cached) = cached
        {
            add_echo(echoes, cached.into_echo(), Some(&after));
        }
        self.remember(plugin, to, intent_hash, before, after);
        Ok(true)
    }

    /// A merge patch, or a JSON Patch whose `test` operations are preconditions.
    async fn patch(
        &self,
        subject: &Subject<'_>,
        target: &Target,
        patch: Patching<'_>,
        echoes: &mut Vec<Echo>,
    ) -> Result<bool, Error> {
        let plugin = subject.manifest.name.as_str();
        let (api, namespace, gvk) = self.api_for(target, subject).await?;
        let label = target_label(&gvk, &namespace, &target.name);
        let to = WrittenTo::object(&gvk, &namespace, &target.name);
        let intent_hash = match patch {
            Patching::Merge(patch) => hash_of(&(false, patch.to_string())),
            Patching::Json(ops) => hash_of(&(true, serde_json::to_string(ops).unwrap_or_default())),
        };
        let cached = self.cached(&subject.manifest.name, &gvk, &namespace, &target.name);
        let before = cached.as_ref().map(Cached::version);
        if self.unchanged(plugin, &to, intent_hash, before.as_deref()) {
            return Ok(false);
        }
        let params = PatchParams {
            field_manager: Some(subject.manifest.field_manager()),
            ..Default::default()
        };
        let (result, preconditions) = match patch {
            Patching::Json(ops) => {
                let patch = Patch::<()>::Json(ops.clone());
                let result = self
                    .write(&api, "patch", |r| r.patch(&target.name, &params, &patch))
                    .await;
                (result, has_test(ops))
            }
            Patching::Merge(patch) => {
                let patch = Patch::Merge(patch);
                let result = self
                    .write(&api, "patch", |r| r.patch(&target.name, &params, &patch))
                    .await;
                (result, false)
            }
        };
        let after = result.map_err(|e| self.classify(e, &label, "patch", preconditions))?;
        if changed(before.as_deref(), &after)
            && let Some(cached) = cached
        {
            add_echo(echoes, cached.into_echo(), Some(&after));
        }
        self.remember(plugin, to, intent_hash, before, after);
        Ok(true)
    }

    /// Deletes with the plugin's propagation policy; an object already gone, or already being
    /// deleted, needs no request.
    async fn delete(
        &self,
        subject: &Subject<'_>,
        target: &Target,
        propagation: wit::Propagation,
        echoes: &mut Vec<Echo>,
    ) -> Result<bool, Error> {
        let (api, namespace, gvk) = self.api_for(target, subject).await?;
        let label = target_label(&gvk, &namespace, &target.name);
        let cached = self.cached(&subject.manifest.name, &gvk, &namespace, &target.name);
        if cached
            .as_ref()
            .is_some_and(|c| c.entry.as_ref().is_none_or(|e| e.deleting))
        {
            return Ok(false);
        }
        let params = match propagation {
            wit::Propagation::Background => DeleteParams::background(),
            wit::Propagation::Foreground => DeleteParams::foreground(),
            wit::Propagation::Orphan => DeleteParams::orphan(),
        };
        match api.delete(&target.name, &params).await {
            Ok(_) => {
                // Gone, or marked for deletion: either way a new version.
                if let Some(cached) = cached {
                    add_echo(echoes, cached.into_echo(), None);
                }
                Ok(true)
            }
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(self.classify(e, &label, "delete", false)),
        }
    }

    /// Replaces the reconciled object's status through the status subresource, and says when
    /// the server pruned fields of it.
    async fn write_status(
        &self,
        subject: &Subject<'_>,
        status: &Value,
        echoes: &mut Vec<Echo>,
    ) -> Result<bool, Error> {
        let plugin = subject.manifest.name.as_str();
        let Some(object) = subject.object else {
            return Ok(false);
        };
        if status_of(&object.json).as_ref() == Some(status) {
            return Ok(false);
        }
        let status_hash = hash_of(&status.to_string());
        let (namespace, name) = (object.key.namespace(), object.key.name());
        let to = WrittenTo::status(subject.manifest.kind(), namespace, name);
        if self
            .last(plugin, &to)
            .is_some_and(|w| w.holds(status_hash, &object.resource_version.to_string()))
        {
            return Ok(false);
        }
        let (api, label) = self.subject_api(subject).await?;
        let ops: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/status", "value": status}]))
                .map_err(|e| Error::Malformed {
                    target: label.clone(),
                    message: e.to_string(),
                })?;
        let params = PatchParams {
            field_manager: Some(subject.manifest.field_manager()),
            ..Default::default()
        };
        let patch = Patch::<()>::Json(ops);
        let result = self
            .send(&api, "patch_subresource", |r| {
                r.patch_subresource("status", object.key.name(), &params, &patch)
            })
            .await;
        let written: StatusResponse = self.map(result, &label, "update status")?;
        let pruned = pruned_fields(status, written.status.as_ref().unwrap_or(&Value::Null));
        if !pruned.is_empty() {
            self.report_pruned(subject, &label, &pruned).await;
        }
        let after = written.metadata.resource_version.unwrap_or_default();
        let before = object.resource_version.to_string();
        if changed(Some(&before), &after)
            && let Some(echo) = subject.echo()
        {
            add_echo(echoes, echo, Some(&after));
        }
        self.remember(plugin, to, status_hash, Some(before), after);
        Ok(true)
    }

    /// Adds (`adding`) or removes a finalizer of the reconciled object with a JSON Patch whose
    /// `test` makes it act only on the list it saw.
    async fn write_finalizer(
        &self,
        subject: &Subject<'_>,
        finalizer: &str,
        adding: bool,
        echoes: &mut Vec<Echo>,
    ) -> Result<bool, Error> {
        let Some(object) = subject.object else {
            return Ok(false);
        };
        let finalizers = object.meta().finalizers;
        let present = finalizers.iter().position(|f| f == finalizer);
        let ops = match (adding, present) {
            (true, Some(_)) | (false, None) => return Ok(false),
            // Same preconditions as kube-runtime's finalizer helper: act only on the
            // list we saw, so a concurrent writer's finalizer is never lost.
            (true, None) if finalizers.is_empty() => json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
            ]),
            (true, None) => json!([
                {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
            ]),
            (false, Some(i)) => json!([
                {"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": finalizer},
                {"op": "remove", "path": format!("/metadata/finalizers/{i}")},
            ]),
        };
        let (api, label) = self.subject_api(subject).await?;
        let ops: json_patch::Patch = serde_json::from_value(ops).map_err(|e| Error::Malformed {
            target: label.clone(),
            message: e.to_string(),
        })?;
        let result = api
            .patch(
                object.key.name(),
                &PatchParams::default(),
                &Patch::<()>::Json(ops),
            )
            .await;
        match result {
            Err(e) if !adding && is_not_found(&e) => Ok(false),
            Err(e) => Err(self.classify(e, &label, "patch finalizers", true)),
            Ok(patched) => {
                // Adding or removing a finalizer always makes a new version.
                if let Some(echo) = subject.echo() {
                    let after = patched.metadata.resource_version;
                    add_echo(echoes, echo, after.as_deref());
                }
                Ok(true)
            }
        }
    }

    /// Says that the API server pruned status fields the plugin wrote, in the log and as a
    /// Warning Event on the object: without it a plugin's new status field just never appears.
    async fn report_pruned(&self, subject: &Subject<'_>, label: &str, pruned: &[String]) {
        let fields = pruned.join(", ");
        tracing::warn!(
            plugin.name = subject.manifest.name,
            object = label,
            %fields,
            "the API server pruned status fields the plugin wrote: its schema for the kind does not \
             declare them (is the installed CRD older than the plugin?)"
        );
        let note = format!(
            "the API server pruned status fields the plugin wrote, which the installed CRD does \
             not declare: {fields}; install the plugin's current CRD"
        );
        let note = Note {
            warning: true,
            reason: "StatusFieldsPruned",
            note: &note,
            action: "UpdateStatus",
        };
        // Best effort, like every event.
        let _ = self.event(subject, &note).await;
    }

    async fn event(&self, subject: &Subject<'_>, note: &Note<'_>) -> Result<bool, Error> {
        let Some(object) = subject.object else {
            return Ok(false);
        };
        let plugin = subject.manifest.name.as_str();
        let kind = subject.manifest.kind();
        let namespace = object.key.namespace();
        // No resourceVersion: the recorder's series key compares whole references, and each
        // write moves the version on.
        let regarding = ObjectReference {
            api_version: Some(if kind.group.is_empty() {
                kind.version.clone()
            } else {
                format!("{}/{}", kind.group, kind.version)
            }),
            kind: Some(kind.kind.clone()),
            namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
            name: Some(object.key.name().to_owned()),
            uid: Some(object.meta().uid),
            ..ObjectReference::default()
        };
        let controller = reporting_controller(plugin);
        let client = self.client(plugin);
        Ok(self
            .recorders
            .record(&client, &controller, plugin, &regarding, note)
            .await)
    }

    /// Records an Event about the host itself (its Pod: plugins loaded or refused), reported
    /// by controller [`HOST_CONTROLLER`]; best effort, as every event.
    pub async fn host_event(&self, regarding: &ObjectReference, note: &Note<'_>) -> bool {
        self.recorders
            .record(
                &self.client,
                HOST_CONTROLLER,
                HOST_CONTROLLER,
                regarding,
                note,
            )
            .await
    }

    /// Whether the same intent was written last and the target (at `cached` in the cache
    /// covering it, `None` when no cache does) has not changed since. Without a cache we cannot
    /// see drift and trust the intent hash alone.
    fn unchanged(
        &self,
        plugin: &str,
        to: &WrittenTo,
        intent_hash: u64,
        cached: Option<&str>,
    ) -> bool {
        let Some(last) = self.last(plugin, to) else {
            return false;
        };
        match cached {
            Some(cached) => last.holds(intent_hash, cached),
            None => last.hash == intent_hash,
        }
    }

    /// Sends the write `build` makes for `api`'s resource; returns the resourceVersion it
    /// produced. `verb` names the request for the client's tracing, as `Api`'s methods do.
    async fn write(
        &self,
        api: &Api<DynamicObject>,
        verb: &'static str,
        build: impl BuildRequest,
    ) -> Result<String, kube::Error> {
        let response: Response = self.send(api, verb, build).await?;
        Ok(response.metadata.resource_version.unwrap_or_default())
    }

    /// Sends a request built against `api` and reads the response as `R`.
    async fn send<R: serde::de::DeserializeOwned>(
        &self,
        api: &Api<DynamicObject>,
        verb: &'static str,
        build: impl BuildRequest,
    ) -> Result<R, kube::Error> {
        let mut request = build(&kube::core::Request::new(api.resource_url()))
            .map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert(verb);
        // The client the Api was made with: the plugin's.
        api.clone().into_client().request(request).await
    }

    fn remember(
        &self,
        plugin: &str,
        to: WrittenTo,
        hash: u64,
        before: Option<String>,
        after: String,
    ) {
        let write = Write {
            hash,
            before: before.unwrap_or_default(),
            after,
        };
        self.record(plugin, to, write);
    }

    fn map<T>(
        &self,
        result: Result<T, kube::Error>,
        label: &str,
        verb: &'static str,
    ) -> Result<T, Error> {
        result.map_err(|e| self.classify(e, label, verb, false))
    }

    fn classify(
        &self,
        e: kube::Error,
        label: &str,
        verb: &'static str,
        preconditions: bool,
    ) -> Error {
        match is_conflict(&e, preconditions) {
            Some(status) => Error::Conflict {
                target: label.to_string(),
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            None => Error::Api {
                target: label.to_string(),
                verb,
                error: e,
            },
        }
    }

    /// A kind's resource and whether it is namespaced, discovered once: workers that need the
    /// same kind at once wait for one discovery request instead of each sending their own. A
    /// failed discovery is not kept; the next caller tries again.
    async fn resource(&self, gvk: &Gvk) -> Result<(ApiResource, bool), Error> {
        let cell = lock(&self.resources)
            .entry(gvk.clone())
            .or_default()
            .clone();
        let discovered = cell
            .get_or_try_init(|| async {
                let (resource, caps) = kube::discovery::pinned_kind(&self.client, &gvk.into())
                    .await
                    .map_err(|error| Error::Discovery {
                        kind: gvk.to_string(),
                        error,
                    })?;
                Ok::<_, Error>((resource, caps.scope == Scope::Namespaced))
            })
            .await?;
        Ok(discovered.clone())
    }

    /// The API for a target; a namespaced target without a namespace defaults to the
    /// reconciled object's namespace.
    async fn api_for(
        &self,
        target: &Target,
        subject: &Subject<'_>,
    ) -> Result<(Api<DynamicObject>, String, Gvk), Error> {
        let gvk = target.gvk();
        let (resource, namespaced) = self.resource(&gvk).await?;
        let client = self.client(&subject.manifest.name);
        if !namespaced {
            return Ok((Api::all_with(client, &resource), String::new(), gvk));
        }
        let namespace = if target.namespace.is_empty() {
            subject.key.namespace().to_owned()
        } else {
            target.namespace.clone()
        };
        Ok((
            Api::namespaced_with(client, &namespace, &resource),
            namespace,
            gvk,
        ))
    }

    async fn subject_api(
        &self,
        subject: &Subject<'_>,
    ) -> Result<(Api<DynamicObject>, String), Error> {
        let gvk = subject.manifest.kind();
        let (resource, namespaced) = self.resource(gvk).await?;
        let label = target_label(gvk, subject.key.namespace(), subject.key.name());
        let client = self.client(&subject.manifest.name);
        let api = if namespaced {
            Api::namespaced_with(client, subject.key.namespace(), &resource)
        } else {
            Api::all_with(client, &resource)
        };
        Ok((api, label))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reconcile that writes an object's status and then removes its finalizer (both made
    /// from the version it read) waits for the second write, not only the first: the cache
    /// showing the status write alone is still stale.
    #[test]
    fn an_object_written_twice_is_seen_only_once_the_cache_shows_the_last_write() {
        let informer = Informer::detached(Gvk::new("", "v1", "ConfigMap"));
        let at = |rv: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": "ns", "resourceVersion": rv}})
        };
        informer.put(at("1"));
        let key = ObjectKey::new("ns", "cm");
        let read = || Echo::new(informer.clone(), key.clone(), Some(Version::Revision(1)));
        let mut echoes = Vec::new();
        add_echo(&mut echoes, read(), Some("2"));
        add_echo(&mut echoes, read(), Some("3"));
        assert_eq!(echoes.len(), 1, "one echo per object");
        let echo = &echoes[0];
        assert!(!echo.seen(), "the cache still holds what was read");
        informer.put(at("2"));
        assert!(!echo.seen(), "the first write alone is not enough");
        informer.put(at("3"));
        assert!(echo.seen());
        // Something later than the last write (another writer) counts too, and so does the
        // object being gone after a delete.
        informer.put(at("7"));
        assert!(echo.seen());
        add_echo(&mut echoes, read(), None);
        assert!(echoes[0].seen(), "at 7: past 1, 2 and 3");
        informer.remove(at("8"));
        assert!(echoes[0].seen());
    }

    #[test]
    fn pruned_fields_are_keys_the_server_did_not_keep() {
        let sent = json!({"phase": "Ready", "conditions": [{"type": "Ready", "extra": 1}],
            "nested": {"kept": 1, "gone": {"deep": true}}, "cleared": null});
        let stored = json!({"phase": "Ready", "conditions": [{"type": "Ready"}],
            "nested": {"kept": 2}});
        assert_eq!(
            pruned_fields(&sent, &stored),
            [".status.conditions[0].extra", ".status.nested.gone"]
        );
        assert!(pruned_fields(&sent, &sent).is_empty());
        assert_eq!(pruned_fields(&json!({"a": 1}), &Value::Null), [".status.a"]);
    }

    #[test]
    fn status_of_reads_only_the_status() {
        let object = json!({"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": "a", "labels": {"x": "y"}},
            "spec": {"value": 1}, "status": {"phase": "Ready", "observedGeneration": 2}});
        assert_eq!(
            status_of(&object.to_string()),
            Some(json!({"phase": "Ready", "observedGeneration": 2}))
        );
        assert_eq!(status_of(r#"{"metadata": {"name": "a"}}"#), None);
        assert_eq!(status_of(r#"{"status": null}"#), None);
        assert_eq!(status_of("not json"), None);
    }

    #[test]
    fn a_write_response_yields_its_resource_version() {
        let response = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "42",
                "managedFields": [{"manager": "m", "operation": "Apply", "fieldsV1": {"f:data": {}}}]},
            "data": {"k": "v"}});
        let parsed: Response = serde_json::from_value(response).unwrap();
        assert_eq!(parsed.metadata.resource_version.as_deref(), Some("42"));
        let bare: Response = serde_json::from_str("{}").unwrap();
        assert_eq!(bare.metadata.resource_version, None);
    }
}
