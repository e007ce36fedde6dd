//! The write verbs create, update (PUT) and patch, and the shared update path that enforces
//! resourceVersion preconditions, status/main-resource separation, generation, finalizer rules
//! and no-op detection. Deletion lives in [`super::delete`], input checks in
//! [`super::admission`].

use std::sync::Arc;

use serde_json::{Value, json};

use super::Inner;
use super::admission::{
    check_create, check_namespace, check_shape, check_subresource_update, check_type, check_update,
    convert_in, decode_yaml, dry_run, invalid, manager, meta_errors, now,
};
use super::apply::{self, ApplyRequest, Scope};
use super::auth::User;
use super::delete::{finalize_delete, has_spec_finalizers};
use super::events;
use super::handlers::{Query, Target, flag};
use super::json::str_at;
use super::names::random_suffix;
use super::patch::{self, PatchType};
use super::protobuf;
use super::registry::{self, Strategy};
use super::schema;
use super::status::{ApiError, ApiResult};
use super::store::State;
use super::typed;
use super::webhooks::{Attributes, Batch, Matched, Operation};

/// The stored object in the form of the target's group, which updates and patches work on
/// (an `events.k8s.io` Event is stored as a core one, [`super::events`]).
fn current(st: &State, t: &Target, name: &str) -> Option<Arc<Value>> {
    let cur = st.get(&t.key(), t.ns(), name)?;
    if t.res.is_events_v1() {
        return Some(Arc::new(events::from_core(&cur)));
    }
    Some(cur)
}

/// POST: creates an object (201).
pub async fn create(
    inner: &Inner,
    t: &Target,
    w: &Writer<'_>,
    mut obj: Value,
) -> ApiResult<(u16, Value)> {
    check_type(t, &mut obj)?;
    known_fields(t, w.q, &mut obj)?;
    if !str_at(&obj, "/metadata/resourceVersion").is_empty() {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let manager = manager(w.q, w.ua);
    write(inner, t, w, |_| {
        Ok(Requested::Create {
            obj: obj.clone(),
            manager: Some(manager.clone()),
        })
    })
    .await
}

/// Who writes and how: what managedFields and admission record of a request.
pub struct Writer<'a> {
    /// The request's query (`fieldManager`, `dryRun`, `fieldValidation`, `force`).
    pub q: &'a Query,
    /// Its User-Agent (the field manager when it names none).
    pub ua: &'a str,
    /// Who sent it.
    pub user: &'a User,
    /// The options it carries, as admission reports them: `CreateOptions`, `UpdateOptions`
    /// or `PatchOptions`.
    pub options: &'static str,
}

/// What a write asks for, computed from what is stored (kube's `rest.UpdatedObjectInfo`).
pub(crate) enum Requested {
    /// A new object; `manager` records an `Update` entry (an apply records its own).
    Create { obj: Value, manager: Option<String> },
    /// `new` in place of the stored `cur`.
    Update {
        cur: Arc<Value>,
        new: Value,
        via: Via,
    },
}

/// How often a write whose object changed while webhooks looked at it is tried again (kube's
/// `GuaranteedUpdate` retries until it lands; a bound keeps a busy object from looping).
const ATTEMPTS: usize = 5;

/// Runs a write: `requested` computes what it asks for from the stored object the target
/// names (at the target's version). Without webhooks that may apply (nearly always) it is
/// prepared and stored under one lock; with them, as kube-apiserver's handlers do, the mutating
/// webhooks change the requested object outside the lock, it is prepared (defaulted, validated)
/// under it, the validating webhooks judge it outside it, and it is stored if what it was
/// prepared against is still what is stored (else all again). A custom resource whose CRD
/// converts through a webhook always takes the second way: its stored object is converted to
/// the request's version before, and the written one to the storage version after.
async fn write(
    inner: &Inner,
    t: &Target,
    w: &Writer<'_>,
    mut requested: impl FnMut(Option<Arc<Value>>) -> ApiResult<Requested>,
) -> ApiResult<(u16, Value)> {
    let converting = t.res.conversion.is_some();
    for _ in 0..ATTEMPTS {
        let converted = match t.name.as_deref() {
            Some(name) if converting => at_request_version(inner, t, name).await?,
            _ => None,
        };
        let (asked, attrs, matched) = {
            let mut st = inner.store.lock();
            let cur = match t.name.as_deref() {
                None => None,
                Some(name) if converting => {
                    let now = current(&st, t, name);
                    if resource_version(now.as_deref()) != resource_version(converted.as_deref()) {
                        continue;
                    }
                    converted
                }
                Some(name) => current(&st, t, name),
            };
            let mut asked = requested(cur)?;
            let attrs = attributes(t, w, &asked);
            let object = match &asked {
                Requested::Create { obj, .. } => obj,
                Requested::Update { new, .. } => new,
            };
            let matched = inner.webhooks.matching(&st, &attrs, Some(object))?;
            if matched.is_empty() && !converting {
                let (code, old, prepared) = match asked {
                    Requested::Create { obj, manager } => {
                        let prepared = prepare_create(&st, t, w.q, obj, manager.as_deref())?;
                        (201, None, prepared)
                    }
                    Requested::Update { cur, new, via } => {
                        let prepared = prepare_update(&st, t, w.q, &cur, new, via, w.ua)?;
                        (200, Some(cur), prepared)
                    }
                };
                inner
                    .policies
                    .admit(&st, &attrs, Some(&prepared.obj), old.as_deref())?;
                let out = commit(&mut st, t, prepared)?.ok_or_else(changed_under_lock)?;
                let rv = st.rv();
                drop(st);
                inner.store.notify(rv);
                return Ok((code, out));
            }
            as_decoded(&st, t, &mut asked)?;
            (asked, attrs, matched)
        };
        if let Some(out) = admitted(inner, t, w, asked, &attrs, &matched).await? {
            return Ok(out);
        }
    }
    let name = t.name.as_deref().unwrap_or_default();
    Err(ApiError::conflict(
        &t.res.group,
        &t.res.plural,
        name,
        "the object has been modified; please apply your changes to the latest version and try again",
    ))
}

/// The stored object `name` at the target's version, converted by its CRD's webhook when it
/// is stored at another.
async fn at_request_version(
    inner: &Inner,
    t: &Target,
    name: &str,
) -> ApiResult<Option<Arc<Value>>> {
    let Some(stored) = current(&inner.store.lock(), t, name) else {
        return Ok(None);
    };
    let converted = (inner.webhooks)
        .convert(&t.res, &t.version, vec![stored], Batch::One)
        .await?;
    Ok(converted.into_iter().next())
}

/// An object's resourceVersion (empty for none).
fn resource_version(obj: Option<&Value>) -> &str {
    obj.map(|o| str_at(o, "/metadata/resourceVersion"))
        .unwrap_or_default()
}

/// The requested object as kube's decoding leaves it for the mutating webhooks: shaped,
/// in the URL's namespace, defaulted.
fn as_decoded(st: &State, t: &Target, asked: &mut Requested) -> ApiResult<()> {
    let strategy = registry::of(&t.res);
    match asked {
        Requested::Create { obj, .. } => {
            if obj.get("metadata").is_none() {
                obj["metadata"] = json!({});
            }
            check_shape(t, obj)?;
            if let Some(ns) = t.namespace.as_deref().filter(|_| t.res.namespaced)
                && str_at(obj, "/metadata/namespace").is_empty()
            {
                obj["metadata"]["namespace"] = json!(ns);
            }
            strategy.default(st, obj, None);
        }
        Requested::Update { cur, new, .. } if t.sub.is_none() => {
            strategy.default(st, new, Some(cur))
        }
        Requested::Update { .. } => {}
    }
    Ok(())
}

/// A write with webhooks to call, from the mutating webhooks to the store; `None` when the
/// object it was prepared against changed meanwhile.
async fn admitted(
    inner: &Inner,
    t: &Target,
    w: &Writer<'_>,
    asked: Requested,
    attrs: &Attributes,
    matched: &Matched,
) -> ApiResult<Option<(u16, Value)>> {
    let (code, mut obj, cur, manager, via) = match asked {
        Requested::Create { obj, manager } => (201, obj, None, manager, Via::Put),
        Requested::Update { cur, new, via } => (200, new, Some(cur), None, via),
    };
    inner
        .webhooks
        .mutate(matched, attrs, &mut obj, cur.as_deref())
        .await?;
    let prepared = {
        let st = inner.store.lock();
        let prepared = match &cur {
            None => prepare_create(&st, t, w.q, obj, manager.as_deref())?,
            Some(cur) => {
                let name = str_at(cur, "/metadata/name");
                let now = current(&st, t, name);
                if resource_version(now.as_deref()) != resource_version(Some(cur)) {
                    return Ok(None);
                }
                prepare_update(&st, t, w.q, cur, obj, via, w.ua)?
            }
        };
        inner
            .policies
            .admit(&st, attrs, Some(&prepared.obj), cur.as_deref())?;
        prepared
    };
    inner
        .webhooks
        .validate(matched, attrs, Some(&prepared.obj), cur.as_deref())
        .await?;
    let prepared = at_storage_version(inner, t, prepared).await?;
    let (out, rv) = {
        let mut st = inner.store.lock();
        let Some(out) = commit(&mut st, t, prepared)? else {
            return Ok(None);
        };
        (out, st.rv())
    };
    inner.store.notify(rv);
    // What was stored, read back at the request's version (kube's storage decodes it so).
    let out = (inner.webhooks)
        .convert_one(&t.res, &t.version, out)
        .await?;
    Ok(Some((code, out)))
}

/// A prepared create or update to be stored at the resource's storage version: converted by
/// its CRD's webhook when the request's is another (kube's storage encodes it so).
async fn at_storage_version(inner: &Inner, t: &Target, prepared: Prepared) -> ApiResult<Prepared> {
    if !matches!(prepared.step, Step::Create | Step::Update(_)) {
        return Ok(prepared);
    }
    let storage = t.res.storage_version();
    let obj = (inner.webhooks)
        .convert_one(&t.res, storage, prepared.obj)
        .await?;
    Ok(Prepared { obj, ..prepared })
}

/// The admission attributes of a write (its options as the request carried them).
fn attributes(t: &Target, w: &Writer<'_>, asked: &Requested) -> Attributes {
    let (operation, obj) = match asked {
        Requested::Create { obj, .. } => (Operation::Create, obj),
        Requested::Update { new, .. } => (Operation::Update, new),
    };
    let namespace = t.namespace.as_deref().filter(|_| t.res.namespaced);
    let name = t
        .name
        .clone()
        .unwrap_or_else(|| str_at(obj, "/metadata/name").to_string());
    let mut options = json!({});
    if let Some(m) = w.q.get("fieldManager") {
        options["fieldManager"] = json!(m);
    }
    if dry_run(w.q) {
        options["dryRun"] = json!(["All"]);
    }
    if flag(w.q, "force") {
        options["force"] = json!(true);
    }
    Attributes::new(
        operation,
        &t.res,
        &t.version,
        t.sub.as_deref(),
        namespace.unwrap_or_default(),
        &name,
        w.user,
        dry_run(w.q),
        w.options,
        options,
    )
}

/// Where a new object goes: its name (generated from `generateName` when it has none) and
/// its namespace (the URL's, which the body may repeat but not contradict, and which must
/// exist; none for a cluster-scoped kind), both written into its metadata.
fn placed(st: &State, t: &Target, obj: &mut Value) -> ApiResult<(String, String)> {
    let meta = &obj["metadata"];
    let mut name = str_at(meta, "/name").to_string();
    let generate = str_at(meta, "/generateName");
    if name.is_empty() && !generate.is_empty() {
        name = format!("{generate}{}", random_suffix());
    }
    let ns = if t.res.namespaced {
        let url_ns = t.namespace.clone().unwrap_or_default();
        let body_ns = str_at(meta, "/namespace");
        if !body_ns.is_empty() && body_ns != url_ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        check_namespace(st, &url_ns)?;
        url_ns
    } else {
        String::new()
    };
    let m = &mut obj["metadata"];
    m["name"] = json!(name);
    if ns.is_empty() {
        if let Some(mm) = m.as_object_mut() {
            mm.remove("namespace");
        }
    } else {
        m["namespace"] = json!(ns);
    }
    Ok((ns, name))
}

/// Create under the lock (also used by apply's upsert, which records its own managedFields
/// entry and passes no `manager`).
pub fn create_locked(
    st: &mut State,
    t: &Target,
    q: &Query,
    obj: Value,
    manager: Option<&str>,
) -> ApiResult<Value> {
    let prepared = prepare_create(st, t, q, obj, manager)?;
    commit(st, t, prepared)?.ok_or_else(changed_under_lock)
}

/// A write prepared under the store's lock and not yet stored: [`commit`] stores it once
/// admission lets it (kube's validating admission runs between the two).
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The object to store, or the answer when nothing is stored.
    pub(crate) obj: Value,
    step: Step,
}

/// What storing a [`Prepared`] write does.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Nothing: a dry run, or an update that changes nothing.
    Answer,
    /// Creates the object (refused if one of its name was created meanwhile).
    Create,
    /// Replaces the object stored at this resourceVersion.
    Update(String),
    /// Removes the object stored at this resourceVersion: its last finalizer went.
    Finalize(String),
}

/// Stores a prepared write: the object as stored, or `None` when what it was prepared
/// against changed since (prepare it again, as kube's `GuaranteedUpdate` retries).
pub(crate) fn commit(st: &mut State, t: &Target, prepared: Prepared) -> ApiResult<Option<Value>> {
    let Prepared { obj, step } = prepared;
    let strategy = registry::of(&t.res);
    let (ns, name) = (
        str_at(&obj, "/metadata/namespace"),
        str_at(&obj, "/metadata/name"),
    );
    match step {
        Step::Answer => Ok(Some(obj)),
        Step::Create => {
            if st.get(&t.key(), ns, name).is_some() {
                return Err(ApiError::already_exists(&t.res.group, &t.res.plural, name));
            }
            strategy.storing(st, &obj);
            Ok(Some((*st.put(&t.key(), obj)?).clone()))
        }
        Step::Update(ref rv) | Step::Finalize(ref rv) => {
            let stored = st.get(&t.key(), ns, name);
            if stored.is_none_or(|s| str_at(&s, "/metadata/resourceVersion") != rv.as_str()) {
                return Ok(None);
            }
            if matches!(step, Step::Finalize(_)) {
                return finalize_delete(st, t, &obj).map(Some);
            }
            strategy.storing(st, &obj);
            Ok(Some((*st.put(&t.key(), obj)?).clone()))
        }
    }
}

/// A write prepared and committed under one lock found its object changed: cannot happen.
fn changed_under_lock() -> ApiError {
    ApiError::internal("the object changed while the store was locked")
}

/// Prepares a create: the object defaulted, given its identity, validated and checked
/// against what is stored, as kube's `BeforeCreate` does.
pub(crate) fn prepare_create(
    st: &State,
    t: &Target,
    q: &Query,
    mut obj: Value,
    manager: Option<&str>,
) -> ApiResult<Prepared> {
    if obj.get("metadata").is_none() {
        obj["metadata"] = json!({});
    }
    check_shape(t, &obj)?;
    let (ns, name) = placed(st, t, &mut obj)?;
    let meta_errors = meta_errors(t, &obj);
    let strategy = registry::of(&t.res);
    let now = now();
    let m = &mut obj["metadata"];
    m["uid"] = json!(uuid::Uuid::new_v4().to_string());
    m["creationTimestamp"] = json!(now);
    if strategy.has_generation() {
        m["generation"] = json!(1);
    } else if let Some(mm) = m.as_object_mut() {
        mm.remove("generation");
    }
    protobuf::canonical_quantities(&mut obj);
    strategy.default(st, &mut obj, None);
    // What only the server sets, and a status written only through its own subresource.
    if let Some(m) = obj["metadata"].as_object_mut() {
        for k in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "selfLink",
        ] {
            m.remove(k);
        }
    }
    if t.res.status
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    strategy.prepare_for_create(st, &mut obj, &now)?;
    convert_in(t, &mut obj)?;
    admit(t, &mut obj, None, q)?;
    // Before the name is looked up, as kube validates before it stores.
    check_create(t, &obj, meta_errors)?;
    if st.get(&t.key(), &ns, &name).is_some() {
        return Err(ApiError::already_exists(&t.res.group, &t.res.plural, &name));
    }
    if let Some(mgr) = manager {
        let scope = Scope::Main {
            status_sub: t.res.status,
        };
        apply::record_update(
            None,
            &mut obj,
            mgr,
            &t.api_version(),
            t.res.custom,
            scope,
            &now,
        );
    }
    let step = if dry_run(q) {
        Step::Answer
    } else {
        Step::Create
    };
    Ok(Prepared { obj, step })
}

/// How an update was requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// PUT.
    Put,
    /// JSON, merge or strategic patch.
    Patch,
    /// Server-side apply.
    Apply,
}

/// What an update through `t`'s subresource writes, as the managed-fields scope it is
/// recorded under: `status`, or the one part its strategy says (kube's strategy for the
/// subresource takes the rest from the stored object); `None` for the main resource.
fn subresource_scope(t: &Target, strategy: &dyn Strategy) -> Option<Scope> {
    let sub = t.sub.as_deref()?;
    if sub == "status" {
        return Some(Scope::Status);
    }
    let (name, path) = strategy.subresource_part(sub)?;
    Some(Scope::Part(name, path))
}

/// Finishes any update: `new` is the requested full object (body or patched result).
pub(crate) fn update_locked(
    st: &mut State,
    t: &Target,
    q: &Query,
    cur: &Value,
    new: Value,
    via: Via,
    ua: &str,
) -> ApiResult<Value> {
    let prepared = prepare_update(st, t, q, cur, new, via, ua)?;
    commit(st, t, prepared)?.ok_or_else(changed_under_lock)
}

/// Prepares an update of `cur` to `new`: kept to the part the target writes, defaulted,
/// validated, its generation and managed fields updated, as kube's `BeforeUpdate` does.
pub(crate) fn prepare_update(
    st: &State,
    t: &Target,
    q: &Query,
    cur: &Value,
    new: Value,
    via: Via,
    ua: &str,
) -> ApiResult<Prepared> {
    let name = str_at(cur, "/metadata/name").to_string();
    let strategy = registry::of(&t.res);
    let sub_scope = subresource_scope(t, strategy);
    // Through a subresource, only its part of the object is written.
    let status = sub_scope.is_some();
    resource_version_matches(t, &name, &new, cur)?;
    let mut out = written(t, &name, cur, new, sub_scope, via)?;
    // Before the generation and no-op checks: a write that only adds unknown fields changes
    // nothing.
    convert_in(t, &mut out)?;
    protobuf::canonical_quantities(&mut out);
    if !status {
        strategy.default(st, &mut out, Some(cur));
    }
    let now = now();
    if let Some(sub) = t.sub.as_deref() {
        strategy.prepare_subresource_update(sub, &mut out, cur, &now);
    }
    admit(t, &mut out, Some(cur), q)?;
    match sub_scope {
        None => check_update(t, &out, cur)?,
        Some(Scope::Part(..)) => check_subresource_update(t, &out, cur)?,
        Some(_) => {}
    }
    let deleting = cur.pointer("/metadata/deletionTimestamp").is_some();
    if deleting {
        no_new_finalizers(t, &name, cur, &out)?;
    }
    if !status {
        if strategy.has_generation()
            && strategy.generation_source(cur, t.res.status)
                != strategy.generation_source(&out, t.res.status)
        {
            let g = (cur.pointer("/metadata/generation").and_then(Value::as_i64)).unwrap_or(0);
            out["metadata"]["generation"] = json!(g + 1);
        }
        strategy.prepare_for_update(st, &mut out, cur, &now)?;
    }
    if via != Via::Apply {
        let scope = sub_scope.unwrap_or(Scope::Main {
            status_sub: t.res.status,
        });
        let (api_version, mgr) = (t.api_version(), manager(q, ua));
        apply::record_update(
            Some(cur),
            &mut out,
            &mgr,
            &api_version,
            t.res.custom,
            scope,
            &now,
        );
    }
    Ok(update_step(q, cur, out, deleting))
}

/// What storing an update comes to: nothing for a no-op or a dry run; removing the object when
/// it is being deleted and its last finalizer went (unless its grace period still runs, as a
/// Pod the kubelet is stopping); else replacing what is stored.
fn update_step(q: &Query, cur: &Value, out: Value, deleting: bool) -> Prepared {
    let mut cmp = out.clone();
    cmp["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
    if cmp == *cur {
        return Prepared {
            obj: cur.clone(),
            step: Step::Answer,
        };
    }
    if dry_run(q) {
        return Prepared {
            obj: out,
            step: Step::Answer,
        };
    }
    let graceful = (out.pointer("/metadata/deletionGracePeriodSeconds"))
        .and_then(Value::as_i64)
        .is_some_and(|g| g > 0);
    let rv = str_at(cur, "/metadata/resourceVersion").to_string();
    let step = if deleting && !graceful && finalizers(&out).is_empty() && !has_spec_finalizers(&out)
    {
        Step::Finalize(rv)
    } else {
        Step::Update(rv)
    };
    Prepared { obj: out, step }
}

/// Optimistic concurrency: a resourceVersion in the request must be the stored one.
fn resource_version_matches(t: &Target, name: &str, new: &Value, cur: &Value) -> ApiResult<()> {
    let want = str_at(new, "/metadata/resourceVersion");
    if want.is_empty() || want == str_at(cur, "/metadata/resourceVersion") {
        return Ok(());
    }
    Err(ApiError::conflict(
        &t.res.group,
        &t.res.plural,
        name,
        "the object has been modified; please apply your changes to the latest version and try again",
    ))
}

/// An object being deleted takes no new finalizer (`rest.BeforeUpdate`).
fn no_new_finalizers(t: &Target, name: &str, cur: &Value, out: &Value) -> ApiResult<()> {
    let before = finalizers(cur);
    let Some(f) = finalizers(out).into_iter().find(|f| !before.contains(f)) else {
        return Ok(());
    };
    Err(invalid(
        t,
        name,
        "metadata.finalizers",
        format!(
            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{\"{f}\"}}"
        ),
    ))
}

/// An object's `metadata.finalizers`.
fn finalizers(o: &Value) -> Vec<String> {
    (o.pointer("/metadata/finalizers").and_then(Value::as_array))
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The object an update writes, before defaulting and admission: through a subresource that
/// writes one part (`sub_scope`), the stored object with that part replaced; through `status`,
/// the stored object with the new status (and, for an apply, its managedFields); through the
/// main resource, `new` with what clients may not set carried over and the status kept where
/// it has its own subresource.
fn written(
    t: &Target,
    name: &str,
    cur: &Value,
    mut new: Value,
    sub_scope: Option<Scope>,
    via: Via,
) -> ApiResult<Value> {
    let mut out = match sub_scope {
        Some(Scope::Part(_, path)) => {
            let mut o = cur.clone();
            let pointer: String = path.iter().map(|k| format!("/{k}")).collect();
            let value = new.pointer(&pointer).cloned().unwrap_or(Value::Null);
            let (parent, key) = pointer.rsplit_once('/').unwrap_or_default();
            match o.pointer_mut(parent).and_then(Value::as_object_mut) {
                Some(m) if value.is_null() => {
                    m.remove(key);
                }
                Some(m) => {
                    m.insert(key.to_string(), value);
                }
                None if value.is_null() => {}
                None => o[path[0]][path[1]] = value,
            }
            o
        }
        Some(_) => {
            let mut o = cur.clone();
            let status = new.get("status").cloned().unwrap_or(Value::Null);
            if !status.is_object() && !status.is_null() {
                let message = "Invalid value: must be an object".into();
                return Err(invalid(t, name, "status", message));
            }
            o["status"] = status;
            if via == Via::Apply {
                o["metadata"]["managedFields"] = (new.pointer("/metadata/managedFields"))
                    .cloned()
                    .unwrap_or(Value::Null);
            }
            o
        }
        None => {
            carry_over(t, name, cur, &mut new, via)?;
            if new.pointer("/metadata/managedFields").is_none()
                && let Some(mf) = cur.pointer("/metadata/managedFields")
            {
                new["metadata"]["managedFields"] = mf.clone();
            }
            if t.res.status {
                match cur.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            new
        }
    };
    if let Some(m) = out["metadata"].as_object_mut()
        && m.get("managedFields").is_some_and(Value::is_null)
    {
        m.remove("managedFields");
    }
    out["apiVersion"] = cur["apiVersion"].clone();
    out["kind"] = cur["kind"].clone();
    Ok(out)
}

/// What an update may not set, carried over from the stored object as kube's
/// `rest.BeforeUpdate` does: the name, namespace, generation and creation timestamp always, the
/// deletion timestamp once deletion has started, the uid and grace period when the request
/// leaves them out. A different uid is a failed precondition for a PUT (409, as kube's storage
/// answers) and left to validation ("field is immutable") for a patch; so is a deletion
/// timestamp or grace period set by hand.
fn carry_over(t: &Target, name: &str, cur: &Value, new: &mut Value, via: Via) -> ApiResult<()> {
    let old_uid = str_at(cur, "/metadata/uid");
    let new_uid = str_at(new, "/metadata/uid");
    if via == Via::Put && !new_uid.is_empty() && new_uid != old_uid {
        // Worded as kube's storage layer words it, etcd key and all.
        let group = if t.res.custom {
            format!("{}/", t.res.group)
        } else {
            String::new()
        };
        let namespace = t
            .namespace
            .as_deref()
            .map_or(String::new(), |n| format!("{n}/"));
        let why = format!(
            "StorageError: invalid object, Code: 4, Key: /registry/{group}{}/{namespace}{name}, \
             ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: \
             {new_uid}, UID in object meta: {old_uid}",
            t.res.plural
        );
        return Err(ApiError::conflict(&t.res.group, &t.res.plural, name, &why));
    }
    let given = |new: &Value, k: &str| new["metadata"].get(k).is_some_and(|v| !v.is_null());
    let deleting = given(cur, "deletionTimestamp");
    for k in [
        "name",
        "namespace",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "uid",
        "deletionGracePeriodSeconds",
    ] {
        let keep_given = match k {
            "deletionTimestamp" => !deleting,
            "uid" | "deletionGracePeriodSeconds" => true,
            _ => false,
        };
        if keep_given && given(new, k) {
            continue;
        }
        match cur["metadata"].get(k) {
            Some(v) => new["metadata"][k] = v.clone(),
            None => {
                if let Some(m) = new["metadata"].as_object_mut() {
                    m.remove(k);
                }
            }
        }
    }
    Ok(())
}

/// PUT.
pub async fn update(
    inner: &Inner,
    t: &Target,
    w: &Writer<'_>,
    name: &str,
    mut obj: Value,
) -> ApiResult<Value> {
    check_type(t, &mut obj)?;
    known_fields(t, w.q, &mut obj)?;
    if obj.get("metadata").is_none() {
        obj["metadata"] = json!({});
    }
    check_shape(t, &obj)?;
    let body_name = str_at(&obj, "/metadata/name");
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if t.res.namespaced {
        let body_ns = str_at(&obj, "/metadata/namespace");
        if !body_ns.is_empty() && Some(body_ns) != t.namespace.as_deref() {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    let (_, out) = write(inner, t, w, |cur| {
        let cur = cur.ok_or_else(|| t.not_found(name))?;
        if str_at(&obj, "/metadata/resourceVersion").is_empty()
            && !registry::of(&t.res).allows_unconditional_update()
        {
            // Worded as kube's store words it: the resource, not the kind, names the object.
            return Err(ApiError::invalid(
                &t.res.plural,
                &t.res.group,
                name,
                &[(
                    "metadata.resourceVersion".into(),
                    "Invalid value: 0x0: must be specified for an update".into(),
                )],
            ));
        }
        Ok(Requested::Update {
            cur,
            new: obj.clone(),
            via: Via::Put,
        })
    })
    .await?;
    Ok(out)
}

/// PATCH with any of the four patch types.
pub async fn patch(
    inner: &Inner,
    t: &Target,
    w: &Writer<'_>,
    name: &str,
    pt: PatchType,
    body: &[u8],
) -> ApiResult<(u16, Value)> {
    if pt == PatchType::Strategic && t.res.custom {
        return Err(ApiError::unsupported_media_type(
            "application/strategic-merge-patch+json",
            &[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ],
        ));
    }
    write(inner, t, w, |cur| match pt {
        PatchType::Apply => apply_patch(t, w, name, cur, body),
        _ => {
            let cur = cur.ok_or_else(|| t.not_found(name))?;
            let new = patched(t, w.q, name, &cur, pt, body)?;
            Ok(Requested::Update {
                cur,
                new,
                via: Via::Patch,
            })
        }
    })
    .await
}

/// A server-side apply: of the object stored (`cur`), or creating it when there is none.
fn apply_patch(
    t: &Target,
    w: &Writer<'_>,
    name: &str,
    cur: Option<Arc<Value>>,
    body: &[u8],
) -> ApiResult<Requested> {
    let q = w.q;
    let Some(mgr) = q.get("fieldManager").filter(|m| !m.is_empty()) else {
        return Err(ApiError::bad_request(
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    };
    let config = apply_config(t, q, name, body)?;
    let req = ApplyRequest {
        manager: mgr,
        force: flag(q, "force"),
        api_version: &t.api_version(),
        custom: t.res.custom,
        scope: subresource_scope(t, registry::of(&t.res)).unwrap_or(Scope::Main {
            status_sub: t.res.status,
        }),
        now: &now(),
    };
    let Some(cur) = cur else {
        if t.sub.is_some() {
            return Err(t.not_found(name));
        }
        let mut seed =
            json!({"apiVersion": t.api_version(), "kind": t.res.kind, "metadata": {"name": name}});
        if let Some(ns) = &t.namespace {
            seed["metadata"]["namespace"] = json!(ns);
        }
        let mut applied = apply::apply(&seed, &config, req)?;
        for k in ["name", "generateName", "namespace"] {
            if let Some(v) = config.pointer(&format!("/metadata/{k}")) {
                applied["metadata"][k] = v.clone();
            }
        }
        applied["metadata"]["name"] = json!(name);
        return Ok(Requested::Create {
            obj: applied,
            manager: None,
        });
    };
    let mut new = apply::apply(&cur, &config, req)?;
    new["metadata"]["resourceVersion"] = (config.pointer("/metadata/resourceVersion"))
        .unwrap_or(&cur["metadata"]["resourceVersion"])
        .clone();
    Ok(Requested::Update {
        cur,
        new,
        via: Via::Apply,
    })
}

/// An apply patch's body as the configuration to apply: typed, shaped, its unknown fields
/// handled as `fieldValidation` says, pruned by the schema, and naming the URL's object.
fn apply_config(t: &Target, q: &Query, name: &str, body: &[u8]) -> ApiResult<Value> {
    let mut config = decode_yaml(body)?;
    check_type(t, &mut config)?;
    if config.get("metadata").is_none() {
        config["metadata"] = json!({});
    }
    check_shape(t, &config)?;
    known_fields(t, q, &mut config)?;
    if let Some(s) = t.res.schemas.get(&t.version) {
        schema::prune_config(s, &mut config);
    }
    let cname = str_at(&config, "/metadata/name");
    if !cname.is_empty() && cname != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({cname}) does not match the name on the URL ({name})"
        )));
    }
    Ok(config)
}

/// The stored object `cur` with a JSON, merge or strategic patch applied, checked to still be
/// an object of this name; a patch that does not mention resourceVersion carries the current
/// one.
fn patched(
    t: &Target,
    q: &Query,
    name: &str,
    cur: &Value,
    pt: PatchType,
    body: &[u8],
) -> ApiResult<Value> {
    let mut patched = match pt {
        PatchType::Json => patch::json_patch(cur, body)?,
        PatchType::Merge => patch::merge_patch(cur, body)?,
        _ => patch::strategic_patch(cur, body)?,
    };
    if !patched.is_object() {
        return Err(ApiError::bad_request(
            "the patch produced something that is not an object",
        ));
    }
    check_shape(t, &patched)?;
    known_fields(t, q, &mut patched)?;
    if str_at(&patched, "/metadata/name") != name {
        let message = "Invalid value: field is immutable".into();
        return Err(invalid(t, name, "metadata.name", message));
    }
    if str_at(&patched, "/metadata/resourceVersion").is_empty() {
        patched["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
    }
    Ok(patched)
}

/// A Binding (`POST /api/v1/namespaces/{ns}/bindings`, what a scheduler sends): assigns the
/// Pod it names to the Node its `target` names, as kube's `BindingREST` does: `spec.nodeName`
/// set and the `PodScheduled` condition true, refused when the Pod is already assigned or being
/// deleted. Answers kube's success Status.
pub fn bind(inner: &Inner, namespace: &str, binding: Value) -> ApiResult<Value> {
    let pod = str_at(&binding, "/metadata/name").to_string();
    let node = str_at(&binding, "/target/name").to_string();
    let mut causes = Vec::new();
    if pod.is_empty() {
        causes.push((
            "metadata.name".to_string(),
            "Required value: name or generateName is required".to_string(),
        ));
    }
    if node.is_empty() {
        causes.push(("target.name".to_string(), "Required value".to_string()));
    }
    let target_kind = str_at(&binding, "/target/kind");
    if !target_kind.is_empty() && target_kind != "Node" {
        causes.push((
            "target.kind".to_string(),
            format!("Unsupported value: {target_kind:?}: supported values: \"Node\""),
        ));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid("Binding", "", &pod, &causes));
    }
    let mut st = inner.store.lock();
    let out = bind_locked(&mut st, namespace, &pod, &node)?;
    let rv = st.rv();
    drop(st);
    inner.store.notify(rv);
    Ok(out)
}

/// Assigns Pod `pod` of `namespace` to `node` under the lock (the scheduler's binding, shared
/// with the dev cluster's scheduler): its `nodeName`, then its `PodScheduled` condition.
pub(crate) fn bind_locked(
    st: &mut State,
    namespace: &str,
    pod: &str,
    node: &str,
) -> ApiResult<Value> {
    let pod = pod.to_string();
    let Some(pods) = st.catalog().get("", "v1", "pods") else {
        return Err(ApiError::not_found_path());
    };
    // Through the `binding` subresource: the one write that may set a Pod's node (a Pod
    // update may not).
    let t = Target {
        res: pods,
        version: "v1".into(),
        namespace: Some(namespace.to_string()),
        name: Some(pod.clone()),
        sub: Some("binding".into()),
    };
    let cur = st
        .get(&t.key(), namespace, &pod)
        .ok_or_else(|| t.not_found(&pod))?;
    let conflict = |why: String| ApiError::conflict("", "pods/binding", &pod, &why);
    if cur.pointer("/metadata/deletionTimestamp").is_some() {
        return Err(conflict(format!(
            "pod {pod} is being deleted, cannot be assigned to a host"
        )));
    }
    let assigned = str_at(&cur, "/spec/nodeName");
    if !assigned.is_empty() {
        return Err(conflict(format!(
            "pod {pod} is already assigned to node {assigned:?}"
        )));
    }
    let mut new = (*cur).clone();
    new["spec"]["nodeName"] = json!(node);
    let cur = update_locked(st, &t, &Query::default(), &cur, new, Via::Put, "")?;
    // The condition through the status subresource: the main resource's writes keep status.
    let mut new = cur.clone();
    let now = super::admission::now();
    let conditions = new["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut conditions: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c["type"] != "PodScheduled")
        .collect();
    conditions.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
    new["status"]["conditions"] = json!(conditions);
    let status = Target {
        sub: Some("status".into()),
        ..t
    };
    update_locked(st, &status, &Query::default(), &cur, new, Via::Put, "")?;
    Ok(
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}

/// Judges a built-in object's unknown fields as the request's `fieldValidation` says
/// (custom resources' are judged against their schema in [`admit`]).
fn known_fields(t: &Target, q: &Query, obj: &mut Value) -> ApiResult<()> {
    if t.res.custom {
        return Ok(());
    }
    typed::admit(
        &t.api_version(),
        &t.res.kind,
        &t.version,
        obj,
        validation(q)?,
    )
}

/// Prunes a custom resource to the schema of the version `t` addresses and validates it
/// (`schema::admit`); kinds without a schema pass.
fn admit(t: &Target, obj: &mut Value, old: Option<&Value>, q: &Query) -> ApiResult<()> {
    let validation = validation(q)?;
    match t.res.schemas.get(&t.version) {
        Some(s) => {
            let (group, kind) = (&t.res.group, &t.res.kind);
            schema::admit(s, group, kind, &t.version, obj, old, validation)
        }
        None => Ok(()),
    }
}

/// The request's `fieldValidation` directive.
fn validation(q: &Query) -> ApiResult<schema::FieldValidation> {
    schema::FieldValidation::parse(q.get("fieldValidation").map(String::as_str))
}
