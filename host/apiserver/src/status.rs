//! Kubernetes `Status` error bodies: the typed error every handler returns and its JSON form.
//!
//! Every non-2xx answer of the server is one of these, with the `reason` and `code` a real
//! kube-apiserver gives for the same situation (API conventions, "Response Status Kind").

use http::StatusCode;
use serde_json::{Value, json};

/// One `details.causes` entry of a 422 Invalid (a `field.Error` in apimachinery's terms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, ...
    pub reason: &'static str,
    /// The field path (`spec.age`, `spec.items[0].name`).
    pub field: String,
    /// The message without the field (`Invalid value: -1: ...`).
    pub message: String,
}

/// An API error that renders as a `Status` object.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `AlreadyExists`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details` of the Status (name, group, kind, causes), when known.
    pub details: Option<Value>,
    /// Seconds for `Retry-After` (429 and some 5xx).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// Builds an error with no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// Adds `details.name/group/kind`.
    pub fn with_details(mut self, name: &str, group: &str, kind: &str) -> Self {
        let mut d = json!({ "name": name, "kind": kind });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        if let Some(Value::Object(old)) = self.details.take() {
            for (k, v) in old {
                d[k] = v;
            }
        }
        self.details = Some(d);
        self
    }

    /// Adds `details.causes`.
    pub fn with_causes(mut self, causes: Vec<Value>) -> Self {
        let mut d = self.details.take().unwrap_or_else(|| json!({}));
        d["causes"] = Value::Array(causes);
        self.details = Some(d);
        self
    }

    /// 404 NotFound for a named object of a resource (`configmaps "x" not found`).
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(plural, group)),
        )
        .with_details(name, group, plural)
    }

    /// 404 NotFound for a path that names no resource.
    pub fn not_found_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(plural, group)),
        )
        .with_details(name, group, plural)
    }

    /// 409 Conflict (optimistic concurrency and preconditions).
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(plural, group)
            ),
        )
        .with_details(name, group, plural)
    }

    /// 422 Invalid with one `FieldValueInvalid` cause per `(field, message)`.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: &[(String, String)]) -> Self {
        let causes: Vec<Cause> = causes
            .iter()
            .map(|(f, m)| Cause {
                reason: "FieldValueInvalid",
                field: f.clone(),
                message: m.clone(),
            })
            .collect();
        Self::invalid_causes(kind, group, name, &causes)
    }

    /// 422 Invalid with the given causes. The message aggregates them as apimachinery's
    /// `ErrorList.ToAggregate` does: duplicates dropped, several in brackets.
    pub fn invalid_causes(kind: &str, group: &str, name: &str, causes: &[Cause]) -> Self {
        let mut text: Vec<String> = Vec::new();
        for c in causes {
            let line = format!("{}: {}", c.field, c.message);
            if !text.contains(&line) {
                text.push(line);
            }
        }
        let joined = match text.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let msg = format!("{kind}{} \"{name}\" is invalid: {joined}", dot_group(group));
        let causes = causes
            .iter()
            .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
            .collect();
        Self::new(422, "Invalid", msg)
            .with_details(name, group, kind)
            .with_causes(causes)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({verb})"),
        )
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(got: &str, accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({got}) - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 410 Expired.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// The error a fault rule produces for `code`.
    pub fn injected(code: u16) -> Self {
        match code {
            409 => Self::new(409, "Conflict", "injected fault: conflict"),
            429 => {
                let mut e = Self::new(429, "TooManyRequests", "injected fault: too many requests");
                e.retry_after = Some(1);
                e
            }
            400 => Self::new(400, "BadRequest", "injected fault: bad request"),
            403 => Self::new(403, "Forbidden", "injected fault: forbidden"),
            404 => Self::new(404, "NotFound", "injected fault: not found"),
            422 => Self::new(422, "Invalid", "injected fault: invalid"),
            410 => Self::expired("injected fault: expired"),
            503 => Self::new(
                503,
                "ServiceUnavailable",
                "injected fault: service unavailable",
            ),
            _ => Self::new(
                code,
                "InternalError",
                "Internal error occurred: injected fault",
            ),
        }
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        if let Some(secs) = self.retry_after {
            let d = s.get("details").cloned().unwrap_or_else(|| json!({}));
            let mut d = d;
            d["retryAfterSeconds"] = json!(secs);
            s["details"] = d;
        }
        s
    }

    /// The HTTP response.
    pub fn into_response(self) -> http::Response<axum::body::Body> {
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        let mut b = http::Response::builder()
            .status(StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
            .header(http::header::CONTENT_TYPE, "application/json");
        if let Some(secs) = self.retry_after {
            b = b.header(http::header::RETRY_AFTER, secs.to_string());
        }
        b.body(axum::body::Body::from(body)).unwrap_or_default()
    }
}

/// `plural.group` as kube-apiserver spells a resource in messages.
pub fn qualified(plural: &str, group: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

fn dot_group(group: &str) -> String {
    if group.is_empty() {
        String::new()
    } else {
        format!(".{group}")
    }
}

/// Result alias for handlers.
pub type ApiResult<T> = Result<T, ApiError>;

tokio::task_local! {
    /// Warnings for the request being served, sent back as `Warning` headers.
    static WARNINGS: std::cell::RefCell<Vec<String>>;
}

/// Adds a warning to the response of the request being served (kubectl prints each as
/// `Warning: <text>`). Outside a request, nothing.
///
/// Bounded as kube-apiserver's warning recorder bounds them (a webhook chooses its warnings'
/// text): once a request's warnings reach 4 KiB, each further one is cut to 256 characters, and
/// past 4 KiB of those none is kept; a repeated warning is sent once.
pub fn warn(text: impl Into<String>) {
    const TOTAL: usize = 4 * 1024;
    const ITEM: usize = 256;
    let text = text.into();
    let _ = WARNINGS.try_with(|w| {
        let mut w = w.borrow_mut();
        if w.contains(&text) {
            return;
        }
        let written: usize = w.iter().map(|t| t.chars().count()).sum();
        let length = text.chars().count();
        if written + length <= TOTAL {
            w.push(text);
        } else if written < TOTAL {
            w.push(text.chars().take(ITEM.min(TOTAL - written)).collect());
        }
    });
}

tokio::task_local! {
    /// The fields the request's body named twice, for `fieldValidation` to judge.
    static DUPLICATES: std::cell::RefCell<Vec<String>>;
}

/// Records fields the request's body named twice (`metadata.labels.a`). Outside a request,
/// nothing.
pub fn duplicate_fields(fields: Vec<String>) {
    let _ = DUPLICATES.try_with(|d| d.borrow_mut().extend(fields));
}

/// Takes the duplicate fields recorded for the request being served.
pub fn take_duplicate_fields() -> Vec<String> {
    DUPLICATES.try_with(|d| d.take()).unwrap_or_default()
}

/// Runs `work`, collecting what it [`warn`]s.
pub async fn collecting_warnings<F: std::future::Future>(work: F) -> (F::Output, Vec<String>) {
    let work = DUPLICATES.scope(std::cell::RefCell::new(Vec::new()), work);
    WARNINGS
        .scope(std::cell::RefCell::new(Vec::new()), async move {
            let out = work.await;
            let warnings = WARNINGS.with(|w| w.take());
            (out, warnings)
        })
        .await
}

/// A warning as an HTTP `Warning` header value: `299 - "<text>"`, quoted as Go's
/// `net/http` warning writer does.
pub fn warning_header(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    format!("299 - \"{escaped}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn warnings_are_bounded_as_kube_bounds_them() {
        let ((), kept) = collecting_warnings(async {
            warn("short");
            warn("short");
            for _ in 0..10 {
                warn("x".repeat(1000));
            }
        })
        .await;
        assert_eq!(kept[0], "short", "{kept:?}");
        assert_eq!(kept.iter().filter(|w| *w == "short").count(), 1);
        let total: usize = kept.iter().map(|w| w.chars().count()).sum();
        assert!(total <= 4 * 1024, "{total}");
        assert!(
            kept.iter()
                .skip(1)
                .all(|w| w.len() == 1000 || w.len() <= 256),
            "{kept:?}"
        );
    }
}
