//! PATCH bodies: JSON Patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch.
//!
//! JSON and merge patches use the `json-patch` crate. Strategic merge patch is written by hand:
//! it needs the merge keys of the built-in kinds (containers by `name`, ports by `containerPort`,
//! ...), which only the Kubernetes Go types carry; [`merge_key`] is the table of those we serve.

use serde_json::{Map, Value};

use super::status::{ApiError, ApiResult};

/// The PATCH content types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

/// Media types PATCH accepts, in the order kube-apiserver lists them.
pub const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

impl PatchType {
    /// From the Content-Type header.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Applies a JSON Patch: malformed -> 400 BadRequest, failing operation -> 422.
pub fn json_patch(doc: &Value, body: &[u8]) -> ApiResult<Value> {
    let p: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let mut out = doc.clone();
    for op in &p.0 {
        // kube-apiserver's JSON Patch (evanphx/json-patch) treats `test` of `null` against a
        // missing member as a match; kube-runtime's finalizer helper relies on that.
        if let json_patch::PatchOperation::Test(t) = op
            && t.value.is_null()
            && out.pointer(t.path.as_str()).is_none()
        {
            continue;
        }
        json_patch::patch(&mut out, std::slice::from_ref(op)).map_err(|e| match op {
            // kube-apiserver's wording, which clients match on to tell a failed precondition.
            json_patch::PatchOperation::Test(t) => ApiError::new(
                422,
                "Invalid",
                format!("testing value {} failed: test failed", t.path),
            ),
            _ => ApiError::new(422, "Invalid", e.to_string()),
        })?;
    }
    Ok(out)
}

/// Applies a JSON merge patch; the body must be a JSON object.
pub fn merge_patch(doc: &Value, body: &[u8]) -> ApiResult<Value> {
    let p = patch_object(body)?;
    let mut out = doc.clone();
    json_patch::merge(&mut out, &p);
    Ok(out)
}

/// Applies a strategic merge patch (built-in kinds only).
pub fn strategic_patch(doc: &Value, body: &[u8]) -> ApiResult<Value> {
    let p = patch_object(body)?;
    let mut out = doc.clone();
    strategic(&mut out, &p, None);
    Ok(out)
}

fn patch_object(body: &[u8]) -> ApiResult<Value> {
    let p: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    if !p.is_object() {
        return Err(ApiError::bad_request("the patch must be a JSON object"));
    }
    Ok(p)
}

/// Merge key of a list field of the built-in kinds (`None`: the list is atomic).
/// `parent` is the name of the field that holds the list's parent object.
pub fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates"
        // A webhook configuration's webhooks (what `kubectl apply` of a changed one patches).
        | "webhooks" => "name",
        "ports" => {
            if items.iter().any(|i| i.get("containerPort").is_some()) {
                "containerPort"
            } else {
                "port"
            }
        }
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "hostAliases" => "ip",
        "readinessGates" => "conditionType",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Lists of scalars that merge as sets.
pub fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

/// Strategic merge of `patch` into `target` (directives `$patch`, `$deleteFromPrimitiveList`,
/// `$setElementOrder` and `$retainKeys` understood; the last two only ordering/pruning hints).
pub fn strategic(target: &mut Value, patch: &Value, _field: Option<&str>) {
    let Some(pm) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if pm.get("$patch").and_then(Value::as_str) == Some("replace") {
        *target = Value::Object(strip_directives(pm));
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(tm) = target.as_object_mut() else {
        return;
    };
    for (k, pv) in pm {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Some(del)) = (tm.get_mut(field), pv.as_array()) {
                cur.retain(|x| !del.contains(x));
            }
            continue;
        }
        match pv {
            Value::Null => {
                tm.remove(k);
            }
            Value::Array(items) => {
                if let Some(key) = merge_key(k, items) {
                    let cur = tm.entry(k.clone()).or_insert_with(|| Value::Array(vec![]));
                    merge_list(cur, items, key);
                } else if is_set_list(k) {
                    let cur = tm.entry(k.clone()).or_insert_with(|| Value::Array(vec![]));
                    if let Value::Array(c) = cur {
                        for i in items {
                            if !c.contains(i) {
                                c.push(i.clone());
                            }
                        }
                    } else {
                        *cur = pv.clone();
                    }
                } else {
                    tm.insert(k.clone(), pv.clone());
                }
            }
            Value::Object(_) => {
                let cur = tm.entry(k.clone()).or_insert(Value::Null);
                strategic(cur, pv, Some(k));
            }
            _ => {
                tm.insert(k.clone(), pv.clone());
            }
        }
    }
}

fn strip_directives(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn merge_list(cur: &mut Value, items: &[Value], key: &str) {
    if !cur.is_array() {
        *cur = Value::Array(vec![]);
    }
    let Value::Array(list) = cur else { return };
    for item in items {
        let Some(kv) = item.get(key) else {
            list.push(item.clone());
            continue;
        };
        let directive = item.get("$patch").and_then(Value::as_str);
        let pos = list.iter().position(|x| x.get(key) == Some(kv));
        match (directive, pos) {
            (Some("delete"), Some(i)) => {
                list.remove(i);
            }
            (Some("delete"), None) => {}
            (Some("replace"), Some(i)) => {
                if let Some(m) = item.as_object() {
                    list[i] = Value::Object(strip_directives(m));
                }
            }
            (_, Some(i)) => strategic(&mut list[i], item, None),
            (_, None) => {
                let mut v = Value::Null;
                strategic(&mut v, item, None);
                list.push(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merges_containers_by_name() {
        let doc = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}});
        let p = json!({"spec": {"containers": [
            {"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"},
            {"name": "a", "$patch": "delete"}]}});
        let out = strategic_patch(&doc, p.to_string().as_bytes()).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}])
        );
    }

    #[test]
    fn strategic_merges_a_configurations_webhooks_by_name() {
        let doc = json!({"webhooks": [
            {"name": "a", "failurePolicy": "Fail", "sideEffects": "None"},
            {"name": "b", "failurePolicy": "Fail", "sideEffects": "None"}]});
        let patch = br#"{"webhooks": [{"name": "b", "failurePolicy": "Ignore"}]}"#;
        let out = strategic_patch(&doc, patch).unwrap();
        assert_eq!(
            out["webhooks"],
            json!([{"name": "a", "failurePolicy": "Fail", "sideEffects": "None"},
                   {"name": "b", "failurePolicy": "Ignore", "sideEffects": "None"}])
        );
    }

    #[test]
    fn json_patch_errors() {
        let doc = json!({"a": 1});
        assert_eq!(json_patch(&doc, b"{").unwrap_err().code, 400);
        let bad_test = br#"[{"op":"test","path":"/a","value":2}]"#;
        let err = json_patch(&doc, bad_test).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(err.message, "testing value /a failed: test failed");
    }
}
