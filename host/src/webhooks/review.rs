//! AdmissionReview v1 and ConversionReview v1 as a webhook reads and answers them
//! (controller-runtime's `admission` and `conversion` packages).

use base64::Engine as _;
use serde_json::{Value, json};

use crate::runtime::plugin::bindings::{hooks, wit};

/// The request of an AdmissionReview, as the plugin contract carries it.
pub fn admission_request(review: &Value) -> Result<hooks::AdmissionRequest, String> {
    let r = &review["request"];
    if !r.is_object() {
        return Err("the AdmissionReview has no request".into());
    }
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let operation = match r["operation"].as_str() {
        Some("CREATE") => hooks::Operation::Create,
        Some("UPDATE") => hooks::Operation::Update,
        Some("DELETE") => hooks::Operation::Delete,
        Some("CONNECT") => hooks::Operation::Connect,
        other => return Err(format!("unknown operation {other:?}")),
    };
    let object = |v: &Value| (!v.is_null()).then(|| v.to_string());
    let groups = (r["userInfo"]["groups"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    Ok(hooks::AdmissionRequest {
        uid: text(&r["uid"]),
        kind: wit::Gvk {
            group: text(&r["kind"]["group"]),
            version: text(&r["kind"]["version"]),
            kind: text(&r["kind"]["kind"]),
        },
        plural: text(&r["resource"]["resource"]),
        subresource: text(&r["subResource"]),
        name: text(&r["name"]),
        namespace: text(&r["namespace"]),
        operation,
        user_info: hooks::UserInfo {
            username: text(&r["userInfo"]["username"]),
            uid: text(&r["userInfo"]["uid"]),
            groups,
        },
        object: object(&r["object"]),
        old_object: object(&r["oldObject"]),
        dry_run: r["dryRun"] == true,
        settings: String::new(),
        now: wit::Timestamp::now(),
    })
}

/// The AdmissionReview answering the review `uid` with the plugin's decision: a defaulter's
/// object answered as the JSON Patch from the request's `object` to it.
pub fn admission_response(
    uid: &str,
    decided: &hooks::AdmissionResponse,
    object: Option<&str>,
) -> Value {
    let mut response = json!({"uid": uid, "allowed": decided.allowed});
    if !decided.warnings.is_empty() {
        response["warnings"] = json!(decided.warnings);
    }
    if !decided.allowed {
        let code = if decided.code == 0 { 403 } else { decided.code };
        response["status"] = json!({"code": code, "message": decided.message});
    }
    if let (true, Some(patched), Some(object)) = (decided.allowed, &decided.patched, object) {
        let (Ok(before), Ok(after)) = (
            serde_json::from_str::<Value>(object),
            serde_json::from_str::<Value>(patched),
        ) else {
            return errored(uid, 500, "the defaulted object is not JSON");
        };
        let patch = json_patch::diff(&before, &after);
        if !patch.0.is_empty() {
            let bytes = serde_json::to_vec(&patch).unwrap_or_default();
            response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
            response["patchType"] = json!("JSONPatch");
        }
    }
    review(response)
}

/// A refusal for a request that could not be decided (controller-runtime's
/// `admission.Errored`).
pub fn errored(uid: &str, code: u16, message: &str) -> Value {
    review(json!({"uid": uid, "allowed": false, "status": {"code": code, "message": message}}))
}

fn review(response: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// The ConversionReview answering `uid`: the converted objects, or the failure.
pub fn converted(uid: &str, objects: Result<Vec<String>, String>) -> Value {
    let response = match objects {
        Ok(objects) => {
            let parsed: Result<Vec<Value>, _> = objects
                .iter()
                .map(|o| serde_json::from_str::<Value>(o))
                .collect();
            match parsed {
                Ok(objects) => json!({"uid": uid, "convertedObjects": objects,
                    "result": {"status": "Success"}}),
                Err(e) => json!({"uid": uid, "convertedObjects": [],
                    "result": {"status": "Failure", "message": format!("a converted object is not JSON: {e}")}}),
            }
        }
        Err(message) => json!({"uid": uid, "convertedObjects": [],
            "result": {"status": "Failure", "message": message}}),
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response})
}
