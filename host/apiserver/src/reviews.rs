//! The create-only APIs of authentication and authorization: SelfSubjectAccessReview,
//! LocalSubjectAccessReview and SubjectAccessReview (`kubectl auth can-i`, with or without
//! `--as`), answered from the RBAC objects in the store; SelfSubjectRulesReview (`kubectl auth
//! can-i --list`); SelfSubjectReview (`kubectl auth whoami`); TokenRequest (`kubectl create
//! token`); and TokenReview, which tells a delegating server (a controller's secure metrics
//! endpoint, kube-rbac-proxy) who a bearer token belongs to.

use serde_json::{Value, json};

use super::Inner;
use super::auth::{self, Attributes, User};
use super::status::{ApiError, ApiResult};

/// The attributes a review's `spec` asks about.
fn attributes(spec: &Value) -> ApiResult<Attributes> {
    let s = |v: &Value, field: &str| v[field].as_str().unwrap_or_default().to_string();
    if let Some(r) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
        return Ok(Attributes::resource(
            &s(r, "verb"),
            &s(r, "group"),
            &s(r, "resource"),
            &s(r, "subresource"),
            &s(r, "namespace"),
            &s(r, "name"),
        ));
    }
    if let Some(n) = spec.get("nonResourceAttributes").filter(|v| v.is_object()) {
        return Ok(Attributes::NonResource {
            verb: s(n, "verb"),
            path: s(n, "path"),
        });
    }
    Err(ApiError::new(
        422,
        "Invalid",
        "spec: Invalid value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
    ))
}

/// Answers a create-only review of `kind`, created in `namespace` (a LocalSubjectAccessReview's)
/// by `requester`.
pub fn answer(
    inner: &Inner,
    kind: &str,
    namespace: Option<&str>,
    requester: &User,
    body: Value,
) -> ApiResult<Value> {
    match kind {
        "TokenReview" => token_review(inner, body),
        "SelfSubjectReview" => Ok(self_subject_review(requester, body)),
        "SelfSubjectRulesReview" => Ok(rules_review(inner, requester, body)),
        "LocalSubjectAccessReview" => {
            local_review(inner, namespace.unwrap_or_default(), requester, body)
        }
        "SelfSubjectAccessReview" | "SubjectAccessReview" => review(inner, kind, requester, body),
        other => Err(ApiError::method_not_allowed(&format!("create {other}"))),
    }
}

/// Who the requester is (`kubectl auth whoami`).
fn self_subject_review(requester: &User, body: Value) -> Value {
    let mut info = json!({"username": requester.name, "groups": requester.groups});
    if !requester.uid.is_empty() {
        info["uid"] = json!(requester.uid);
    }
    answered(
        body,
        "authentication.k8s.io/v1",
        "SelfSubjectReview",
        json!({"userInfo": info}),
    )
}

/// The rules the requester holds in `spec.namespace` (`kubectl auth can-i --list`).
fn rules_review(inner: &Inner, requester: &User, body: Value) -> Value {
    let namespace = body["spec"]["namespace"].as_str().unwrap_or_default();
    let (resource, non_resource) = auth::rules(&inner.store.lock(), requester, namespace);
    let status = json!({
        "resourceRules": resource, "nonResourceRules": non_resource, "incomplete": false,
    });
    answered(
        body,
        "authorization.k8s.io/v1",
        "SelfSubjectRulesReview",
        status,
    )
}

/// A SubjectAccessReview confined to the namespace it is created in: its resource attributes'
/// namespace must be that one (or empty, meaning it).
fn local_review(
    inner: &Inner,
    namespace: &str,
    requester: &User,
    mut body: Value,
) -> ApiResult<Value> {
    let asked = &mut body["spec"]["resourceAttributes"]["namespace"];
    match asked.as_str() {
        None | Some("") => *asked = json!(namespace),
        Some(other) if other != namespace => {
            return Err(ApiError::bad_request(format!(
                "spec.resourceAttributes.namespace must match namespace: {namespace}"
            )));
        }
        Some(_) => {}
    }
    if body["metadata"]["namespace"].is_null() {
        body["metadata"]["namespace"] = json!(namespace);
    }
    review(inner, "LocalSubjectAccessReview", requester, body)
}

/// Answers a SelfSubjectAccessReview (about `requester`) or SubjectAccessReview (about the
/// user its spec names): the review back with its `status`.
pub fn review(inner: &Inner, kind: &str, requester: &User, body: Value) -> ApiResult<Value> {
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let attrs = attributes(&spec)?;
    let subject = if kind == "SelfSubjectAccessReview" {
        requester.clone()
    } else {
        let user = spec["user"].as_str().unwrap_or_default();
        let groups = (spec["groups"].as_array().into_iter().flatten())
            .filter_map(|g| g.as_str().map(String::from))
            .collect::<Vec<_>>();
        if user.is_empty() && groups.is_empty() {
            return Err(ApiError::new(
                422,
                "Invalid",
                "spec.user: Invalid value: at least one of user or group must be specified",
            ));
        }
        User {
            name: user.to_string(),
            groups,
            uid: spec["uid"].as_str().unwrap_or_default().to_string(),
        }
    };
    let decision = auth::authorize(&inner.store.lock(), &subject, &attrs);
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    Ok(answered(body, "authorization.k8s.io/v1", kind, status))
}

/// A review as created: the request with its `status`.
fn answered(mut body: Value, api_version: &str, kind: &str, status: Value) -> Value {
    body["apiVersion"] = json!(api_version);
    body["kind"] = json!(kind);
    body["status"] = status;
    if body["metadata"].is_null() {
        body["metadata"] = json!({});
    }
    body
}

/// Longest token lifetime a TokenRequest gets (kube's default maximum is far longer; two days
/// keep a leaked development token short-lived).
const MAX_EXPIRATION_SECONDS: i64 = 48 * 3600;

/// Issues a token for ServiceAccount `namespace/name` (TokenRequest).
pub fn token(inner: &Inner, namespace: &str, name: &str, mut body: Value) -> ApiResult<Value> {
    let key = (String::new(), "serviceaccounts".to_string());
    let account = inner
        .store
        .lock()
        .get(&key, namespace, name)
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let uid = account["metadata"]["uid"].as_str().unwrap_or_default();
    let seconds = body["spec"]["expirationSeconds"].as_i64().unwrap_or(3600);
    if seconds < 600 {
        return Err(ApiError::new(
            422,
            "Invalid",
            "spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes",
        ));
    }
    let seconds = seconds.min(MAX_EXPIRATION_SECONDS);
    let expires = chrono::Utc::now().timestamp() + seconds;
    let token = inner.auth.mint(namespace, name, uid, expires);
    let at = chrono::DateTime::from_timestamp(expires, 0).unwrap_or_default();
    body["apiVersion"] = json!("authentication.k8s.io/v1");
    body["kind"] = json!("TokenRequest");
    body["metadata"] = json!({"name": name, "namespace": namespace,
        "creationTimestamp": super::admission::now()});
    body["spec"]["expirationSeconds"] = json!(seconds);
    body["status"] = json!({
        "token": token,
        "expirationTimestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    });
    Ok(body)
}

/// Answers a TokenReview as kube-apiserver's does: the user `spec.token` authenticates as
/// (`status.user`, with `authenticated: true` and the audiences it is good for), or
/// `authenticated: false` and an `error`. Every token this server knows is for its one
/// audience ([`auth::AUDIENCE`]); `spec.audiences` without it is refused as kube refuses a
/// token for another audience.
pub fn token_review(inner: &Inner, body: Value) -> ApiResult<Value> {
    let token = body["spec"]["token"].as_str().unwrap_or_default();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let wanted: Vec<&str> = (body["spec"]["audiences"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    let user = inner.auth.verify(token, &inner.store.lock());
    let status = match user {
        None => json!({"authenticated": false, "user": {}, "error": "invalid bearer token"}),
        Some(_) if !wanted.is_empty() && !wanted.contains(&auth::AUDIENCE) => json!({
            "authenticated": false, "user": {},
            "error": format!("token audiences {:?} is invalid for the target audiences {wanted:?}", [auth::AUDIENCE]),
        }),
        Some(user) => {
            let mut info = json!({"username": user.name, "groups": user.groups});
            if !user.uid.is_empty() {
                info["uid"] = json!(user.uid);
            }
            json!({"authenticated": true, "user": info, "audiences": [auth::AUDIENCE]})
        }
    };
    Ok(answered(
        body,
        "authentication.k8s.io/v1",
        "TokenReview",
        status,
    ))
}
