//! Request dispatch: one fallback handler that routes by path to discovery, health, OpenAPI,
//! admin and resource handlers, applying faults and reading bodies with a size cap.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use http::{Method, Request, Response, header};
use serde_json::{Value, json};

use super::Inner;
use super::audit;
use super::auth::{self, Attributes, User};
use super::discovery;
use super::handlers::{self, MAX_BODY, Target, json_response};
use super::patch::{PATCH_TYPES, PatchType};
use super::status::{self, ApiError, ApiResult};
use super::webhooks::Batch;
use super::{
    admin, admission, decode, delete, metrics, pods, protobuf, reviews, scale, swagger, watch,
    write,
};

/// The axum router of a server.
pub(crate) fn router(inner: Arc<Inner>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(inner)
}

async fn handle(State(inner): State<Arc<Inner>>, req: Request<Body>) -> Response<Body> {
    use futures::FutureExt;
    // A bug must cost one request a 500, never the server: state changes are applied in one
    // step after every check, so a panic before that leaves the store as it was.
    let accept = accept(&req);
    let routed = std::panic::AssertUnwindSafe(route(&inner, req))
        .catch_unwind()
        .await;
    let response = match routed {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => e.into_response(),
        Err(_) => {
            tracing::error!("apiserver handler panicked");
            ApiError::internal("the request handler panicked").into_response()
        }
    };
    protobuf::negotiate(&accept, response).await
}

/// The request's `Accept` header, empty when it has none.
fn accept(req: &Request<Body>) -> String {
    (req.headers().get(header::ACCEPT))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// The `/metrics` exposition.
fn metrics_text(inner: &Inner) -> Response<Body> {
    let counts = inner.store.lock().object_counts();
    let text = inner.store.metrics().encode(counts);
    Response::builder()
        .header(header::CONTENT_TYPE, metrics::CONTENT_TYPE)
        .body(Body::from(text))
        .unwrap_or_default()
}

fn text(s: &str) -> Response<Body> {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(s.to_string()))
        .unwrap_or_default()
}

async fn body_bytes(req: Request<Body>) -> ApiResult<bytes::Bytes> {
    axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|_| {
            ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {MAX_BODY}"),
            )
        })
}

fn content_type(req: &Request<Body>) -> String {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Decodes a create/update body by Content-Type.
fn decode_object(ct: &str, body: &[u8]) -> ApiResult<Value> {
    let mime = ct.split(';').next().unwrap_or("").trim();
    match mime {
        "" | "application/json" | "*/*" => {
            let (value, duplicates) = decode::json_with_duplicates(body).map_err(|e| {
                ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
            })?;
            status::duplicate_fields(duplicates);
            Ok(value)
        }
        "application/yaml" => admission::decode_yaml(body),
        protobuf::MEDIA_TYPE => protobuf::decode(body),
        other => Err(ApiError::unsupported_media_type(
            other,
            &["application/json", "application/yaml"],
        )),
    }
}

/// The answer to a GET of a path that is not a resource's: the root's paths, version, metrics,
/// health, discovery (legacy and aggregated) and OpenAPI v2 and v3; `None` for any other path.
fn discovery_document(
    inner: &Inner,
    segs: &[&str],
    accept: &str,
) -> Option<ApiResult<Response<Body>>> {
    let reg = || inner.store.lock().catalog().clone();
    let aggregated = |core: bool| {
        let body = serde_json::to_vec(&discovery::aggregated(&reg(), core)).unwrap_or_default();
        Response::builder()
            .header(header::CONTENT_TYPE, discovery::AGGREGATED_CT)
            .body(Body::from(body))
            .unwrap_or_default()
    };
    let found = |d: Option<Value>| {
        d.map(|d| json_response(200, &d))
            .ok_or_else(ApiError::not_found_path)
    };
    Some(Ok(match segs {
        [] => {
            let paths = [
                "/api",
                "/api/v1",
                "/apis",
                "/healthz",
                "/livez",
                "/metrics",
                "/openapi/v2",
                "/openapi/v3",
                "/readyz",
                "/version",
            ];
            json_response(200, &json!({ "paths": paths }))
        }
        ["version"] => json_response(200, &discovery::version()),
        ["metrics"] => metrics_text(inner),
        ["healthz" | "livez" | "readyz", ..] => text("ok"),
        ["api"] if discovery::wants_aggregated(accept) => aggregated(true),
        ["api"] => {
            let addr = inner.addr.lock().map(|a| a.clone()).unwrap_or_default();
            json_response(200, &discovery::api_versions(&addr))
        }
        ["apis"] if discovery::wants_aggregated(accept) => aggregated(false),
        ["apis"] => json_response(200, &discovery::api_groups(&reg())),
        ["api", v] => return Some(found(discovery::resource_list(&reg(), "", v))),
        ["apis", g] => return Some(found(discovery::api_group(&reg(), g))),
        ["apis", g, v] => return Some(found(discovery::resource_list(&reg(), g, v))),
        ["openapi", "v2"] => {
            let document = swagger::document(&reg());
            if swagger::wants_protobuf(accept) {
                Response::builder()
                    .header(header::CONTENT_TYPE, swagger::PROTOBUF)
                    .body(Body::from(swagger::protobuf(&document)))
                    .unwrap_or_default()
            } else {
                json_response(200, &document)
            }
        }
        ["openapi", "v3"] => json_response(200, &discovery::openapi_index(&reg())),
        ["openapi", "v3", "api", v] => return Some(found(discovery::openapi_gv(&reg(), "", v))),
        ["openapi", "v3", "apis", g, v] => {
            return Some(found(discovery::openapi_gv(&reg(), g, v)));
        }
        _ => return None,
    }))
}

async fn route(inner: &Arc<Inner>, req: Request<Body>) -> ApiResult<Response<Body>> {
    let path = req.uri().path().to_string();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let accept = accept(&req);
    let get = req.method() == Method::GET;
    let user = inner
        .auth
        .authenticate(req.headers(), &inner.store.lock())?;
    // Resource paths are authorized in `resource`; the test-only admin endpoints are open.
    let resource_path = matches!(segs.as_slice(), ["api", _, _, ..] | ["apis", _, _, _, ..]);
    if !resource_path && !matches!(segs.as_slice(), ["_admin", ..]) {
        let attrs = Attributes::NonResource {
            verb: req.method().as_str().to_lowercase(),
            path: path.clone(),
        };
        if !auth::authorize(&inner.store.lock(), &user, &attrs).allowed {
            return Err(attrs.forbidden(&user));
        }
    }
    if get && let Some(response) = discovery_document(inner, &segs, &accept) {
        return response;
    }
    if let ["_admin", action] = segs.as_slice()
        && inner.admin
    {
        let action = action.to_string();
        let body = body_bytes(req).await?;
        return admin::admin(inner, &action, &body);
    }
    let Some(t) = handlers::target(inner, &segs)? else {
        return Err(ApiError::not_found_path());
    };
    let (served, warnings) = status::collecting_warnings(resource(inner, t, req, &user)).await;
    let mut response = served?;
    for warning in warnings {
        if let Ok(value) = header::HeaderValue::from_str(&status::warning_header(&warning)) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    Ok(response)
}

/// Fails with kube's 403 unless `user` may do `verb` on the target.
fn authorize(inner: &Inner, user: &User, verb: &str, t: &Target) -> ApiResult<()> {
    let text = |v: Option<&String>| v.cloned().unwrap_or_default();
    let attrs = Attributes::resource(
        verb,
        &t.res.group,
        &t.res.plural,
        &text(t.sub.as_ref()),
        &text(t.namespace.as_ref()),
        &text(t.name.as_ref()),
    );
    if auth::authorize(&inner.store.lock(), user, &attrs).allowed {
        Ok(())
    } else {
        Err(attrs.forbidden(user))
    }
}

async fn resource(
    inner: &Arc<Inner>,
    t: Target,
    req: Request<Body>,
    user: &User,
) -> ApiResult<Response<Body>> {
    let mut q = handlers::query(&req);
    if !inner.shard_selectors {
        q.remove("shardSelector");
    }
    let verb = handlers::verb(req.method(), &t, &q);
    let text_of = |v: Option<&String>| v.cloned().unwrap_or_default();
    inner.audit.record(audit::Request {
        verb: verb.to_string(),
        group: t.res.group.clone(),
        resource: t.res.plural.clone(),
        subresource: text_of(t.sub.as_ref()),
        namespace: text_of(t.namespace.as_ref()),
        name: text_of(t.name.as_ref()),
        label_selector: text_of(q.get("labelSelector")),
        field_selector: text_of(q.get("fieldSelector")),
        shard_selector: text_of(q.get("shardSelector")),
        user_agent: req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string(),
        user: user.name.clone(),
    });
    let latency = inner.faults.current_latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    // A TokenRequest is a create of the `token` subresource of the account it names.
    let verb = if t.sub.as_deref() == Some("token") && req.method() == Method::POST {
        "create"
    } else {
        verb
    };
    authorize(inner, user, verb, &t)?;
    // What kube installs no route for (a create of ComponentStatuses, a deletecollection of
    // Namespaces) it answers 405, after authorization as here.
    if t.sub.is_none() && !t.res.serves_verb(verb) {
        return Err(ApiError::method_not_allowed(req.method().as_str()));
    }
    // Routed: from here on kube's route instrumentation counts and times the request.
    let labels = request_labels(&req, &t, verb);
    let started = std::time::Instant::now();
    let answered = serve(inner, t, req, user, q, verb).await;
    let code = match &answered {
        Ok(r) => r.status().as_u16(),
        Err(e) => e.code,
    };
    inner
        .store
        .metrics()
        .answered(labels, code, started.elapsed());
    answered
}

/// The `apiserver_request_*` labels of a routed resource request.
fn request_labels(req: &Request<Body>, t: &Target, verb: &str) -> metrics::Request {
    let target = [
        t.res.group.as_str(),
        t.version.as_str(),
        t.res.plural.as_str(),
        t.sub.as_deref().unwrap_or(""),
        t.namespace.as_deref().unwrap_or(""),
        t.name.as_deref().unwrap_or(""),
    ];
    let query = req.uri().query().unwrap_or("");
    let ct = content_type(req);
    metrics::Request::new(req.method().as_str(), target, query, &ct, verb == "create")
}

/// Serves an authorized resource request.
async fn serve(
    inner: &Arc<Inner>,
    t: Target,
    req: Request<Body>,
    user: &User,
    q: handlers::Query,
    verb: &str,
) -> ApiResult<Response<Body>> {
    if let Some(e) = inner.faults.check(verb, &t.res.plural) {
        return Err(e);
    }
    if is_post_only(&t) {
        return post_only(inner, &t, req, user).await;
    }
    if t.res.namespaced && t.namespace.is_none() && t.name.is_some() {
        return Err(ApiError::not_found_path());
    }
    let shape = handlers::shape(&req)?;
    let ua = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let ct = content_type(&req);
    let method = req.method().clone();
    let name = t.name.clone();
    let render = |code: u16, v: &Value| json_response(code, &handlers::render(&t, v, shape));
    match (method, name) {
        (m, Some(n)) if t.sub.as_deref() == Some("scale") => {
            let body = body_bytes(req).await?;
            let out = scale::handle(inner, &t, &q, &n, &m, &ct, &body, &ua)?;
            Ok(json_response(200, &out))
        }
        (Method::GET, name) => {
            let accept = req.headers().get(header::ACCEPT);
            let accept = accept.and_then(|v| v.to_str().ok()).unwrap_or("");
            get(inner, &t, &q, shape, protobuf::preferred(accept), name).await
        }
        (Method::POST, None) if t.sub.is_none() => {
            if t.res.namespaced && t.namespace.is_none() {
                return Err(ApiError::method_not_allowed("create"));
            }
            let body = body_bytes(req).await?;
            let obj = decode_object(&ct, &body)?;
            let w = writer(&q, &ua, user, "CreateOptions");
            let (code, out) = write::create(inner, &t, &w, obj).await?;
            Ok(render(code, &out))
        }
        (Method::PUT, Some(n)) => {
            let body = body_bytes(req).await?;
            let obj = decode_object(&ct, &body)?;
            let w = writer(&q, &ua, user, "UpdateOptions");
            let out = write::update(inner, &t, &w, &n, obj).await?;
            Ok(render(200, &out))
        }
        (Method::PATCH, Some(n)) => {
            let pt = patch_type(inner, &t, user, &n, &ct)?;
            let body = body_bytes(req).await?;
            let w = writer(&q, &ua, user, "PatchOptions");
            let (code, out) = write::patch(inner, &t, &w, &n, pt, &body).await?;
            Ok(render(code, &out))
        }
        (Method::DELETE, Some(n)) if t.sub.is_none() => {
            let body = body_bytes(req).await?;
            let out = delete::delete(inner, &t, &q, &n, &body, user).await?;
            let out = (inner.webhooks)
                .convert_one(&t.res, &t.version, out)
                .await?;
            Ok(render(200, &out))
        }
        (Method::DELETE, None) if t.sub.is_none() => delete_collection(inner, &t, &q),
        (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

/// A GET of a resource: one object, a watch (`protobuf`: the client prefers it) or a list, each
/// object converted to the version asked for.
async fn get(
    inner: &Arc<Inner>,
    t: &Target,
    q: &handlers::Query,
    shape: handlers::Shape,
    protobuf: bool,
    name: Option<String>,
) -> ApiResult<Response<Body>> {
    match name {
        Some(n) => {
            let obj = handlers::fetch(inner, t, &n)?;
            let mut obj = (inner.webhooks)
                .convert(&t.res, &t.version, vec![obj], Batch::One)
                .await?;
            let obj = obj.pop().unwrap_or_default();
            Ok(json_response(200, &handlers::render(t, &obj, shape)))
        }
        None if handlers::flag(q, "watch") => watch::watch(inner, t.clone(), q, shape, protobuf),
        None => {
            let (page, meta) = handlers::list(inner, t, q)?;
            let page = (inner.webhooks)
                .convert(&t.res, &t.version, page, Batch::List)
                .await?;
            Ok(handlers::list_response(t, &page, meta, shape))
        }
    }
}

/// Who writes, for the write verbs.
fn writer<'a>(
    q: &'a handlers::Query,
    ua: &'a str,
    user: &'a User,
    options: &'static str,
) -> write::Writer<'a> {
    write::Writer {
        q,
        ua,
        user,
        options,
    }
}

/// The patch type the Content-Type `ct` names; an apply that would create object `name` must
/// also be allowed to create, as kube-apiserver checks.
fn patch_type(
    inner: &Inner,
    t: &Target,
    user: &User,
    name: &str,
    ct: &str,
) -> ApiResult<PatchType> {
    let pt = PatchType::from_content_type(ct)
        .ok_or_else(|| ApiError::unsupported_media_type(ct, PATCH_TYPES))?;
    if pt == PatchType::Apply && t.sub.is_none() {
        let ns = t.namespace.clone().unwrap_or_default();
        if inner.store.lock().get(&t.key(), &ns, name).is_none() {
            authorize(inner, user, "create", t)?;
        }
    }
    Ok(pt)
}

/// Whether the target takes only a POST of a request object, answered with a 201 and nothing
/// stored as posted: reviews and Bindings, a Pod's `binding` and `eviction`, a TokenRequest.
fn is_post_only(t: &Target) -> bool {
    let sub = t.sub.as_deref();
    t.res.create_only
        || (t.name.is_some() && matches!(sub, Some("binding" | "eviction")))
        || (t.namespace.is_some() && t.name.is_some() && sub == Some("token"))
}

/// Serves a target [`is_post_only`] accepts.
async fn post_only(
    inner: &Arc<Inner>,
    t: &Target,
    req: Request<Body>,
    user: &User,
) -> ApiResult<Response<Body>> {
    if t.res.create_only {
        if req.method() != Method::POST || t.name.is_some() {
            return Err(ApiError::method_not_allowed(req.method().as_str()));
        }
        let ct = content_type(&req);
        let body = body_bytes(req).await?;
        let object = decode_object(&ct, &body)?;
        if t.res.kind == "Binding" {
            let ns = t.namespace.as_deref().unwrap_or_default();
            let bound = write::bind(inner, ns, object)?;
            return Ok(json_response(201, &bound));
        }
        let ns = t.namespace.as_deref();
        let review = reviews::answer(inner, &t.res.kind, ns, user, object)?;
        return Ok(json_response(201, &review));
    }
    if let (Some(name), Some(sub @ ("binding" | "eviction"))) = (&t.name, t.sub.as_deref()) {
        if req.method() != Method::POST {
            return Err(ApiError::method_not_allowed(req.method().as_str()));
        }
        let ct = content_type(&req);
        let body = body_bytes(req).await?;
        let object = decode_object(&ct, &body)?;
        let out = if sub == "binding" {
            pods::bind(inner, t, name, object)?
        } else {
            pods::evict(inner, t, name, &object)?
        };
        return Ok(json_response(201, &out));
    }
    if let (Some(ns), Some(name), Some("token")) = (&t.namespace, &t.name, t.sub.as_deref()) {
        if req.method() != Method::POST {
            return Err(ApiError::method_not_allowed(req.method().as_str()));
        }
        let ct = content_type(&req);
        let body = body_bytes(req).await?;
        let request = if body.is_empty() {
            json!({})
        } else {
            decode_object(&ct, &body)?
        };
        return Ok(json_response(
            201,
            &reviews::token(inner, ns, name, request)?,
        ));
    }
    Err(ApiError::not_found_path())
}

/// DELETE on a collection: deletes every object the selectors match.
fn delete_collection(
    inner: &Arc<Inner>,
    t: &Target,
    q: &handlers::Query,
) -> ApiResult<Response<Body>> {
    let selectors = handlers::selectors(t, q)?;
    let dry = q.get("dryRun").is_some_and(|v| v == "All");
    let mut st = inner.store.lock();
    let victims: Vec<_> = st
        .table_of(&t.key())
        .map(|tab| {
            tab.objects
                .values()
                .filter(|o| handlers::visible(t, &selectors, o))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let mut items = Vec::new();
    for v in victims {
        items.push(delete::delete_locked(&mut st, t, &v, dry)?);
    }
    let rv = st.rv();
    drop(st);
    inner.store.notify(rv);
    Ok(json_response(
        200,
        &json!({"kind": t.res.list_kind, "apiVersion": t.api_version(), "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
    ))
}
