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

mod echo;
mod outcome;
mod requests;
mod writes;

use echo::*;
pub use echo::{Echo, Subject};
use outcome::*;
pub use outcome::{ActionStatus, Applied, Error, Failure};

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

/// What a status write's response is read for: the version it produced, and the status as the
/// server stored it (to tell whether it pruned fields the plugin wrote), left as text: it is
/// parsed only when it differs from what was sent.
#[derive(Deserialize)]
struct StatusResponse<'a> {
    #[serde(default)]
    metadata: ResponseMeta,
    #[serde(default, borrow)]
    status: Option<&'a RawValue>,
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

/// The `status` of an object's JSON as it is written there, without building any of it.
///
/// The cache holds objects as the host serialized them, compactly and with sorted keys, as
/// `Value::to_string` writes a status: so the text equals a status's `to_string` exactly when
/// the values are equal (`1` and `1.0` differ in both).
fn status_of(json: &str) -> Option<&str> {
    #[derive(Deserialize)]
    struct Status<'a> {
        #[serde(default, borrow)]
        status: Option<&'a RawValue>,
    }
    Some(serde_json::from_str::<Status<'_>>(json).ok()?.status?.get())
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
        let owner_uid = owner.uid();
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
        let json = object.to_string();
        let status = json!({"phase": "Ready", "observedGeneration": 2});
        assert_eq!(status_of(&json), Some(status.to_string().as_str()));
        // The text compares as the values do: a float is not the integer it equals.
        assert_ne!(
            status_of(&json),
            Some(
                json!({"phase": "Ready", "observedGeneration": 2.0})
                    .to_string()
                    .as_str()
            )
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
