//! AdmissionReviews: the request a webhook is sent (`request.CreateV1AdmissionReview`) and
//! what its answer must be to count (`request.VerifyAdmissionResponse`).

use base64::Engine as _;
use serde_json::{Value, json};

use super::Attributes;
use crate::status::ApiError;

/// The review sent to a webhook: `object` as it stands now (after earlier mutations),
/// `old` the stored object of an update or delete.
pub(crate) fn request(
    uid: &str,
    attrs: &Attributes,
    version: &str,
    v1: bool,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let group = &attrs.group;
    let kind = json!({"group": group, "version": version, "kind": attrs.kind});
    let resource = json!({"group": group, "version": version, "resource": attrs.resource});
    let request_kind = json!({"group": group, "version": attrs.version, "kind": attrs.kind});
    let request_resource =
        json!({"group": group, "version": attrs.version, "resource": attrs.resource});
    let mut user = json!({"username": attrs.user.name, "groups": attrs.user.groups});
    if !attrs.user.uid.is_empty() {
        user["uid"] = json!(attrs.user.uid);
    }
    let mut request = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": request_kind,
        "requestResource": request_resource,
        "name": attrs.name,
        "operation": attrs.operation.as_str(),
        "userInfo": user,
        "object": object.cloned().unwrap_or(Value::Null),
        "oldObject": old.cloned().unwrap_or(Value::Null),
        "dryRun": attrs.dry_run,
        "options": attrs.options,
    });
    if !attrs.namespace.is_empty() {
        request["namespace"] = json!(attrs.namespace);
    }
    if !attrs.subresource.is_empty() {
        request["subResource"] = json!(attrs.subresource);
        request["requestSubResource"] = json!(attrs.subresource);
    }
    let api_version = if v1 {
        "admission.k8s.io/v1"
    } else {
        "admission.k8s.io/v1beta1"
    };
    json!({"apiVersion": api_version, "kind": "AdmissionReview", "request": request})
}

/// A webhook's answer, checked.
#[derive(Debug, Default)]
pub(crate) struct Answer {
    pub(crate) allowed: bool,
    /// `response.status`, when it refused.
    pub(crate) status: Value,
    /// The decoded JSON Patch of a mutating webhook.
    pub(crate) patch: Option<json_patch::Patch>,
    pub(crate) warnings: Vec<String>,
}

/// Reads a webhook's answer to the review with `uid` as kube does; the error says what is
/// wrong with it (`received invalid webhook response: ...`).
pub(crate) fn answer(body: &[u8], uid: &str, v1: bool, mutating: bool) -> Result<Answer, String> {
    let review: Value = serde_json::from_slice(body).map_err(|e| {
        format!("failed to call webhook: the response is not an AdmissionReview: {e}")
    })?;
    let invalid = |why: String| format!("received invalid webhook response: {why}");
    let response = &review["response"];
    if !response.is_object() {
        return Err(invalid("webhook response was absent".into()));
    }
    if v1 {
        let got = str_of(response, "uid");
        if got != uid {
            return Err(invalid(format!(
                "expected response.uid={uid:?}, got {got:?}"
            )));
        }
        let (api_version, kind) = (str_of(&review, "apiVersion"), str_of(&review, "kind"));
        if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            let got = match api_version.split_once('/') {
                Some((g, v)) => format!("{g}/{v}, Kind={kind}"),
                None => format!("/{api_version}, Kind={kind}"),
            };
            return Err(invalid(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {got}"
            )));
        }
    }
    let patch = str_of(response, "patch");
    let patch_type = &response["patchType"];
    if !mutating {
        if !patch.is_empty() {
            return Err(invalid(
                "validating webhook may not return response.patch".into(),
            ));
        }
        if !patch_type.is_null() {
            return Err(invalid(
                "validating webhook may not return response.patchType".into(),
            ));
        }
    } else if !patch.is_empty() && patch_type.is_null() {
        return Err(invalid(
            "webhook returned response.patch but not response.patchType".into(),
        ));
    } else if patch.is_empty() && !patch_type.is_null() {
        return Err(invalid(
            "webhook returned response.patchType but not response.patch".into(),
        ));
    }
    let patch = if patch.is_empty() {
        None
    } else {
        if patch_type != "JSONPatch" {
            return Err(format!(
                "unsupported patch type {:?}",
                patch_type.as_str().unwrap_or_default()
            ));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .map_err(|e| invalid(format!("response.patch is not base64: {e}")))?;
        let decoded: json_patch::Patch = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the webhook's JSON Patch does not decode: {e}"))?;
        Some(decoded)
    };
    let warnings = (response["warnings"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    Ok(Answer {
        allowed: response["allowed"] == true,
        status: response["status"].clone(),
        patch,
        warnings,
    })
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The error a refusal answers with (`webhookerrors.ToStatusErr`): the webhook's status, its
/// code at least 400, its message prefixed by who denied it.
pub(crate) fn denied(webhook: &str, status: &Value) -> ApiError {
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400);
    let message = str_of(status, "message");
    let reason = str_of(status, "reason");
    let text = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    let mut e = ApiError::new(code, known_reason(reason), text);
    if status["details"].is_object() {
        e.details = Some(status["details"].clone());
    }
    e
}

/// A Status reason kube defines, as the static string [`ApiError`] carries; any other the
/// webhook sent is dropped (the reason is a code clients switch on, not free text).
fn known_reason(reason: &str) -> &'static str {
    const REASONS: &[&str] = &[
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "StoreReadError",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    REASONS
        .iter()
        .find(|r| **r == reason)
        .copied()
        .unwrap_or("")
}
