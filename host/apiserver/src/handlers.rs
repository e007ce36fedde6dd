//! Request routing and the read verbs: path parsing into a [`Target`], query parameters,
//! content negotiation (JSON, `as=PartialObjectMetadata`), get and list.
//!
//! Writes live in [`super::write`], watches in [`super::watch`], discovery in
//! [`super::discovery`].

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use http::{Method, Request, Response, StatusCode, header};
use serde_json::{Value, json};

use super::Inner;
use super::catalog::{ResKey, Resource, storage_key};
use super::events;
use super::json::str_at;
use super::registry;
use super::selector::Selectors;
use super::status::{ApiError, ApiResult};
use super::store::{Snapshot, State};
use super::table;

/// Largest request body accepted (kube-apiserver's limit).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// The resource (and object) a request addresses.
#[derive(Debug, Clone)]
pub struct Target {
    /// The resource.
    pub res: Arc<Resource>,
    /// Version in the URL.
    pub version: String,
    /// Namespace in the URL.
    pub namespace: Option<String>,
    /// Object name in the URL.
    pub name: Option<String>,
    /// Subresource (`status`).
    pub sub: Option<String>,
}

impl Target {
    /// Storage key.
    pub fn key(&self) -> ResKey {
        storage_key(&self.res)
    }

    /// apiVersion for responses.
    pub fn api_version(&self) -> String {
        self.res.api_version(&self.version)
    }

    /// Namespace an object lives in (`""` for cluster-scoped).
    pub fn ns(&self) -> &str {
        if self.res.namespaced {
            self.namespace.as_deref().unwrap_or("")
        } else {
            ""
        }
    }

    /// 404 for the named object.
    pub fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.res.group, &self.res.plural, name)
    }
}

/// Query parameters.
pub type Query = HashMap<String, String>;

/// Parses the query string.
pub fn query(req: &Request<Body>) -> Query {
    axum::extract::Query::<Query>::try_from_uri(req.uri())
        .map(|q| q.0)
        .unwrap_or_default()
}

/// Whether a boolean query parameter is set.
pub fn flag(q: &Query, k: &str) -> bool {
    q.get(k).is_some_and(|v| v == "true" || v == "1")
}

/// Response shape the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The objects themselves.
    Full,
    /// `PartialObjectMetadata` / `PartialObjectMetadataList`.
    Meta,
    /// `meta.k8s.io/v1` Table (human-readable kubectl output).
    Table,
}

/// Reads the Accept header: metadata-only, full or a Table (JSON or protobuf alike: the
/// encoding is negotiated as the response leaves), or 406 for media types this server does
/// not write.
pub fn shape(req: &Request<Body>) -> ApiResult<Shape> {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if accept.is_empty() {
        return Ok(Shape::Full);
    }
    let mut json_ok = false;
    for part in accept.split(',') {
        let part = part.trim();
        let mime = part.split(';').next().unwrap_or("").trim();
        if mime == "application/json"
            || mime == "*/*"
            || mime == "application/*"
            || mime == "application/yaml"
            || mime == super::protobuf::MEDIA_TYPE
        {
            if part.contains("as=PartialObjectMetadata") {
                return Ok(Shape::Meta);
            }
            if part.contains("as=Table") {
                if part.contains("g=meta.k8s.io")
                    && part.contains("v=v1")
                    && !part.contains("v=v1beta1")
                {
                    return Ok(Shape::Table);
                }
                continue;
            }
            json_ok = true;
        }
    }
    if json_ok {
        Ok(Shape::Full)
    } else {
        Err(ApiError::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml",
        ))
    }
}

/// Parses `/api/v1/...` and `/apis/g/v/...` into a [`Target`]; `Ok(None)` means "not a resource
/// path" (discovery or other endpoints).
pub fn target(inner: &Inner, segs: &[&str]) -> ApiResult<Option<Target>> {
    let (group, version, rest) = match segs {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return Ok(None),
    };
    let st = inner.store.lock();
    let reg = st.catalog();
    let lookup = |plural: &str| reg.get(group, version, plural);
    let ns_path = rest.len() >= 3
        && rest[0] == "namespaces"
        && !(rest.len() == 3 && (rest[2] == "status" || rest[2] == "finalize"));
    let (res, namespace, name, sub) = if ns_path {
        let res = lookup(rest[2]).ok_or_else(ApiError::not_found_path)?;
        if !res.namespaced {
            return Err(ApiError::not_found_path());
        }
        (
            res,
            Some(rest[1]),
            rest.get(3).copied(),
            rest.get(4).copied(),
        )
    } else {
        let res = lookup(rest[0]).ok_or_else(ApiError::not_found_path)?;
        (res, None, rest.get(1).copied(), rest.get(2).copied())
    };
    if rest.len() > if ns_path { 5 } else { 3 } {
        return Err(ApiError::not_found_path());
    }
    if let Some(s) = sub {
        let ok = (s == "status" && res.status)
            || (s == "finalize" && res.plural == "namespaces")
            || (s == "token" && res.plural == "serviceaccounts" && res.group.is_empty())
            || (s == "scale" && res.has_scale())
            || (matches!(s, "binding" | "eviction" | "ephemeralcontainers")
                && res.plural == "pods"
                && res.group.is_empty())
            || (s == "approval" && res.plural == "certificatesigningrequests");
        if !ok {
            return Err(ApiError::not_found_path());
        }
    }
    Ok(Some(Target {
        res,
        version: version.to_string(),
        namespace: namespace.map(String::from),
        name: name.map(String::from),
        sub: sub.map(String::from),
    }))
}

/// A JSON response.
pub fn json_response(code: u16, v: &Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(v).unwrap_or_default()))
        .unwrap_or_default()
}

/// The object as the client asked for it (version rewrite, metadata-only), a built-in one
/// with every field Go's JSON writes (`protobuf::complete`).
pub fn render(t: &Target, obj: &Value, shape: Shape) -> Value {
    // A Table is printed from the stored (core) form, as kube has one Event printer.
    if t.res.is_events_v1() && shape != Shape::Table {
        return render_stored(t, &events::from_core(obj), shape);
    }
    render_stored(t, obj, shape)
}

/// [`render`] of an object already in the form of the target's group.
fn render_stored(t: &Target, obj: &Value, shape: Shape) -> Value {
    match shape {
        Shape::Meta => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        }),
        Shape::Table => table::table(&t.res, &t.version, std::iter::once(obj), json!({})),
        Shape::Full => {
            let mut o = obj.clone();
            if o.get("apiVersion").and_then(Value::as_str) != Some(&t.api_version()) {
                o["apiVersion"] = json!(t.api_version());
            }
            super::protobuf::complete(&mut o);
            o
        }
    }
}

/// GET of one object: as stored (the caller converts and renders it).
pub fn fetch(inner: &Inner, t: &Target, name: &str) -> ApiResult<Arc<Value>> {
    let started = std::time::Instant::now();
    let found = inner.store.lock().get(&t.key(), t.ns(), name);
    let (group, plural) = t.key();
    (inner.store.metrics()).stored("get", &group, &plural, started.elapsed());
    found.ok_or_else(|| t.not_found(name))
}

/// Whether an object is visible through this target's namespace and selectors.
pub fn visible(t: &Target, selectors: &Selectors, obj: &Value) -> bool {
    if let Some(ns) = &t.namespace
        && t.res.namespaced
        && str_at(obj, "/metadata/namespace") != ns
    {
        return false;
    }
    selectors.matches(obj)
}

/// Parses the selectors of a list, watch or collection delete.
pub fn selectors(t: &Target, q: &Query) -> ApiResult<Selectors> {
    let param = |name: &str| q.get(name).map(String::as_str);
    Selectors::parse(
        param("labelSelector"),
        param("fieldSelector"),
        param("shardSelector"),
        &t.res,
        registry::of(&t.res).selectable_fields(),
    )
}

fn expired_continue() -> ApiError {
    ApiError::expired(
        "The provided continue parameter is too old to display a consistent list result. \
         You can start a new list without the continue parameter.",
    )
}

/// LIST with selectors, `limit`/`continue` over a saved snapshot, `resourceVersionMatch`
/// (an `Exact` list, or a legacy one with `limit`, at an older revision is rebuilt from the
/// event history: [`State::objects_at`]): the page of objects as stored and the list's
/// metadata (the caller converts and renders them, [`list_response`]).
pub fn list(inner: &Inner, t: &Target, q: &Query) -> ApiResult<(Vec<Arc<Value>>, Value)> {
    let selectors = selectors(t, q)?;
    let limit: usize = match q.get("limit") {
        Some(l) => l
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid limit: {l}")))?,
        None => 0,
    };
    let mut st = inner.store.lock();
    let (snap, offset, saved) = match q.get("continue").filter(|s| !s.is_empty()) {
        Some(token) => {
            let (id, off) = token.split_once(':').ok_or_else(expired_continue)?;
            let id: u64 = id.parse().map_err(|_| expired_continue())?;
            let off: usize = off.parse().map_err(|_| expired_continue())?;
            (st.snapshot(id).ok_or_else(expired_continue)?, off, Some(id))
        }
        None => {
            let at = list_revision(&st, q, limit)?;
            let started = std::time::Instant::now();
            let snap = snapshot(&mut st, t, &selectors, at)?;
            let (group, plural) = t.key();
            (inner.store.metrics()).stored("list", &group, &plural, started.elapsed());
            (Arc::new(snap), 0, None)
        }
    };
    // Only pages that leave something behind need the snapshot kept for a continue token.
    let end = if limit > 0 {
        (offset + limit).min(snap.items.len())
    } else {
        snap.items.len()
    };
    let token = if end < snap.items.len() {
        let id = match saved {
            Some(id) => id,
            None => st.save_snapshot(snap.clone()),
        };
        Some(format!("{id}:{end}"))
    } else {
        None
    };
    drop(st);
    let page = snap.items.get(offset.min(end)..end).unwrap_or(&[]).to_vec();
    let mut meta = json!({ "resourceVersion": snap.rv.to_string() });
    if let Some(tok) = token {
        meta["continue"] = json!(tok);
        meta["remainingItemCount"] = json!(snap.items.len() - end);
    }
    if let Some(info) = selectors.shard_info() {
        meta["shardInfo"] = info;
    }
    Ok((page, meta))
}

/// The list of a page of objects in the shape asked for.
pub fn list_response(t: &Target, page: &[Arc<Value>], meta: Value, shape: Shape) -> Response<Body> {
    if shape == Shape::Table {
        let tab = table::table(&t.res, &t.version, page.iter().map(|o| &**o), meta);
        return json_response(200, &tab);
    }
    let items: Vec<Value> = page.iter().map(|o| render(t, o, shape)).collect();
    let (kind, api_version) = match shape {
        Shape::Meta => (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
        Shape::Full | Shape::Table => (t.res.list_kind.clone(), t.api_version()),
    };
    json_response(
        200,
        &json!({ "kind": kind, "apiVersion": api_version, "metadata": meta, "items": items }),
    )
}

fn list_options_invalid(detail: &str) -> ApiError {
    ApiError::invalid(
        "ListOptions",
        "meta.k8s.io",
        "",
        &[("resourceVersionMatch".into(), detail.into())],
    )
}

/// The revision a new list reads: `None` for the current one (no resourceVersion,
/// `NotOlderThan`, or a legacy resourceVersion without `limit`, all served from the latest
/// state as kube's watch cache serves them), `Some(rv)` for an exact one (`Exact`, or a
/// resourceVersion other than "0" with `limit`, which kube-apiserver 1.32 reads from etcd
/// at that revision).
fn list_revision(st: &State, q: &Query, limit: usize) -> ApiResult<Option<u64>> {
    let rv_param = q.get("resourceVersion").filter(|s| !s.is_empty());
    let rv_match = q.get("resourceVersionMatch").filter(|s| !s.is_empty());
    let Some(rv) = rv_param else {
        return match rv_match {
            Some(_) => Err(list_options_invalid(
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            )),
            None => Ok(None),
        };
    };
    let exact = match rv_match.map(String::as_str) {
        Some("Exact") if rv == "0" => {
            return Err(list_options_invalid(
                "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        Some("Exact") => true,
        Some("NotOlderThan") => false,
        Some(other) => {
            return Err(list_options_invalid(&format!(
                "Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\", \"\""
            )));
        }
        None => limit > 0 && rv != "0",
    };
    let want: u64 = rv
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?;
    if want > st.rv() {
        return Err(too_large(want, st.rv()));
    }
    Ok((exact && want < st.rv()).then_some(want))
}

/// The objects a new list returns, at revision `at` (`None`: the current one), or 410
/// `Expired` as etcd's compaction makes kube answer for a revision no longer kept.
fn snapshot(
    st: &mut State,
    t: &Target,
    selectors: &Selectors,
    at: Option<u64>,
) -> ApiResult<Snapshot> {
    let (objects, rv) = match at {
        Some(rv) => {
            let past = st.objects_at(&t.key(), rv).ok_or_else(|| {
                ApiError::expired("The resourceVersion for the provided list is too old.")
            })?;
            (std::borrow::Cow::Owned(past), rv)
        }
        None => {
            let current = (st.table_of(&t.key())).map(|tab| &tab.objects);
            let current = current.map_or_else(Default::default, std::borrow::Cow::Borrowed);
            (current, st.rv())
        }
    };
    let in_scope: Box<dyn Iterator<Item = &Arc<Value>>> = match (&t.namespace, t.res.namespaced) {
        (Some(ns), true) => Box::new(
            (objects.range((ns.clone(), String::new())..))
                .take_while(move |((n, _), _)| n == ns)
                .map(|(_, v)| v),
        ),
        _ => Box::new(objects.values()),
    };
    let items = in_scope
        .filter(|o| visible(t, selectors, o))
        .cloned()
        .collect();
    Ok(Snapshot { items, rv })
}

fn too_large(want: u64, cur: u64) -> ApiError {
    let mut e = ApiError::new(
        504,
        "Timeout",
        format!("Too large resource version: {want}, current resource version: {cur}"),
    );
    e.retry_after = Some(1);
    e
}

/// Verb of a resource request (for faults and 405s).
pub fn verb(method: &Method, t: &Target, q: &Query) -> &'static str {
    match (method.as_str(), t.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if flag(q, "watch") => "watch",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unsupported",
    }
}
