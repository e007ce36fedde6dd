//! Checks a write must pass before it is stored: body type and apiVersion, object metadata
//! and Events by kube's own rules (`wasmctrl_core::validation`, shared with the host), namespaces
//! that exist and are not terminating, CRD naming; plus the small helpers every write uses
//! (timestamps, field manager, dry run, body decoding).

use serde_json::{Value, json};
use wasmctrl_core::validation::{self, FieldError, NameRule};

use super::events;
use super::handlers::{Query, Target};
use super::json::str_at;
use super::registry;
use super::status::{ApiError, ApiResult, Cause};
use super::store::State;

/// Current time in the RFC 3339 form Kubernetes uses (second precision, `Z`).
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Who is writing: the `fieldManager` query parameter, else the User-Agent's program name, else
/// `unknown`, as kube-apiserver names a client that sends neither (kube-rs sends no User-Agent).
pub fn manager(q: &Query, user_agent: &str) -> String {
    if let Some(m) = q.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.clone();
    }
    match user_agent.split('/').next().unwrap_or("").trim() {
        "" => "unknown".into(),
        ua => ua.to_string(),
    }
}

/// `dryRun=All`.
pub(crate) fn dry_run(q: &Query) -> bool {
    q.get("dryRun").is_some_and(|v| v == "All")
}

/// 422 Invalid for one field of the target's kind.
pub(crate) fn invalid(t: &Target, name: &str, field: &str, msg: String) -> ApiError {
    ApiError::invalid(&t.res.kind, &t.res.group, name, &[(field.into(), msg)])
}

/// 422 Invalid listing every refused field, as kube's `NewInvalid` words it; `Ok` when there
/// are none. Events are validated as kube's internal core Event whichever group served them,
/// so their errors name the kind without a group, as kube's do.
fn refuse(t: &Target, name: &str, errors: Vec<FieldError>) -> ApiResult<()> {
    if errors.is_empty() {
        return Ok(());
    }
    let causes: Vec<Cause> = errors
        .iter()
        .map(|e| Cause {
            reason: e.kind.reason(),
            field: e.field.clone(),
            message: e.body(),
        })
        .collect();
    let group = if t.res.is_events_v1() {
        ""
    } else {
        t.res.group.as_str()
    };
    Err(ApiError::invalid_causes(&t.res.kind, group, name, &causes))
}

/// Whether the target stores Events (through core/v1 or events.k8s.io/v1).
fn stores_events(t: &Target) -> bool {
    t.res.is_events_v1() || events::is_core_events(&t.res.group, &t.res.plural)
}

/// What kube refuses of the metadata of an object about to be created, its name generated and
/// namespace settled, before the server fills in its own fields: its metadata by the kind's
/// name rule (`rest.BeforeCreate`), and an Event by the Event rules.
pub(crate) fn meta_errors(t: &Target, obj: &Value) -> Vec<FieldError> {
    let rule = NameRule::of(&t.res.group, &t.res.kind);
    let mut errors = validation::object_meta(&obj["metadata"], t.res.namespaced, rule);
    if stores_events(t) {
        let core = events::to_core(obj.clone());
        errors.extend(validation::event(&core, t.res.is_events_v1()));
    }
    errors
}

/// What kube refuses of a built-in kind's spec (`validate`), on create (`old` is `None`) or on
/// an update of the main resource.
fn spec_errors(t: &Target, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    if t.res.custom || t.sub.is_some() {
        return Vec::new();
    }
    let strategy = registry::of(&t.res);
    match old {
        None => strategy.validate(obj),
        Some(old) => strategy.validate_update(obj, old),
    }
}

/// Refuses a create, once the object is defaulted, with its metadata's errors (`meta_errors`)
/// and its spec's, in one 422 as kube reports them.
pub(crate) fn check_create(t: &Target, obj: &Value, meta: Vec<FieldError>) -> ApiResult<()> {
    let mut errors = meta;
    errors.extend(spec_errors(t, obj, None));
    refuse(t, str_at(obj, "/metadata/name"), errors)
}

/// An update of the main resource, once the server has carried over what clients may not set
/// (`rest.BeforeUpdate`) and defaulted it: what kube still refuses of the new metadata, its
/// spec (`validate`), and of an Event.
pub(crate) fn check_update(t: &Target, new: &Value, old: &Value) -> ApiResult<()> {
    let mut errors = validation::object_meta_update(&new["metadata"], &old["metadata"]);
    errors.extend(spec_errors(t, new, Some(old)));
    if stores_events(t) {
        let (new_core, old_core) = (events::to_core(new.clone()), events::to_core(old.clone()));
        errors.extend(validation::event_update(
            &new_core,
            &old_core,
            t.res.is_events_v1(),
        ));
    }
    refuse(t, str_at(new, "/metadata/name"), errors)
}

/// An update through a subresource that writes one part of the object (a Pod's
/// `ephemeralcontainers`, a CSR's `approval`): what kube refuses of that part.
pub(crate) fn check_subresource_update(t: &Target, new: &Value, old: &Value) -> ApiResult<()> {
    let sub = t.sub.as_deref().unwrap_or_default();
    let errors = registry::of(&t.res).validate_subresource_update(sub, new, old);
    refuse(t, str_at(new, "/metadata/name"), errors)
}

/// Checks `apiVersion`/`kind` of a body against the target and fills them in.
pub(crate) fn check_type(t: &Target, obj: &mut Value) -> ApiResult<()> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the object provided is unrecognized (must be a JSON object)",
        ));
    }
    if !obj.get("metadata").is_none_or(Value::is_object) {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    let av = t.api_version();
    match obj.get("apiVersion").and_then(Value::as_str) {
        Some(v) if v != av && !(t.res.group.is_empty() && v.is_empty()) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({av})"
            )));
        }
        _ => {}
    }
    match obj.get("kind").and_then(Value::as_str) {
        Some(k) if !k.is_empty() && k != t.res.kind => {
            return Err(ApiError::bad_request(format!(
                "{k} in version \"{}\" cannot be handled as a {}: the kind in the data does not match",
                t.version, t.res.kind
            )));
        }
        _ => {}
    }
    obj["apiVersion"] = json!(av);
    obj["kind"] = json!(t.res.kind);
    Ok(())
}

/// A written object into its stored form, as kube's conversion of the request body does for
/// built-in kinds: a Secret's write-only `stringData` is merged into `data` (base64, its keys
/// winning over `data`'s) and not stored; the bytes of a Secret's `data` and a ConfigMap's
/// `binaryData` are decoded and stored re-encoded.
pub(crate) fn convert_in(t: &Target, obj: &mut Value) -> ApiResult<()> {
    if t.res.custom || !t.res.group.is_empty() {
        return Ok(());
    }
    match t.res.kind.as_str() {
        "Secret" => {
            merge_string_data(obj)?;
            canonical_bytes(t, obj, "data")
        }
        "ConfigMap" => canonical_bytes(t, obj, "binaryData"),
        _ => Ok(()),
    }
}

/// The base64 values of the map `obj[field]` (Go `[]byte`s) as kube decodes and re-encodes
/// them: line breaks ignored, as Go's decoder ignores them (YAML writers fold long values), and
/// gone from what is stored; anything else that is not base64 refused as kube's decoder
/// refuses it.
fn canonical_bytes(t: &Target, obj: &mut Value, field: &str) -> ApiResult<()> {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    let Some(map) = obj.get_mut(field).and_then(Value::as_object_mut) else {
        return Ok(());
    };
    for value in map.values_mut() {
        let Value::String(text) = value else {
            continue;
        };
        let joined: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
        match STANDARD.decode(&joined) {
            Ok(bytes) => *value = json!(STANDARD.encode(bytes)),
            Err(e) => {
                let at = match e {
                    base64::DecodeError::InvalidByte(at, _)
                    | base64::DecodeError::InvalidLastSymbol(at, _) => at,
                    _ => joined.len(),
                };
                let kind = &t.res.kind;
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"{}\" cannot be handled as a {kind}: illegal base64 data at input byte {at}",
                    t.version
                )));
            }
        }
    }
    Ok(())
}

/// A Secret's `stringData` merged into its `data`.
fn merge_string_data(obj: &mut Value) -> ApiResult<()> {
    let Some(map) = obj.as_object_mut() else {
        return Ok(());
    };
    let Some(string_data) = map.remove("stringData") else {
        return Ok(());
    };
    let entries = match string_data {
        Value::Null => return Ok(()),
        Value::Object(m) => m,
        _ => return Err(ApiError::bad_request("stringData must be a map of strings")),
    };
    use base64::Engine as _;
    let data = map.entry("data").or_insert_with(|| json!({}));
    if data.is_null() {
        *data = json!({});
    }
    let Some(data) = data.as_object_mut() else {
        return Err(ApiError::bad_request(
            "data must be a map of base64 strings",
        ));
    };
    for (k, v) in entries {
        let Value::String(v) = v else {
            return Err(ApiError::bad_request(format!(
                "stringData.{k} must be a string"
            )));
        };
        data.insert(
            k,
            json!(base64::engine::general_purpose::STANDARD.encode(v)),
        );
    }
    Ok(())
}

/// The namespace must exist and not be terminating.
pub(crate) fn check_namespace(st: &State, ns: &str) -> ApiResult<()> {
    let key = (String::new(), "namespaces".to_string());
    match st.get(&key, "", ns) {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => Err(ApiError::new(
            403,
            "Forbidden",
            format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        )
        .with_details(ns, "", "namespaces")),
        Some(_) => Ok(()),
    }
}

/// Decodes a YAML or JSON body (apply patches are YAML; JSON is YAML).
pub fn decode_yaml(body: &[u8]) -> ApiResult<Value> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let v: serde_yaml::Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    serde_json::to_value(v).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

/// Shapes every stored object must have (what the generated types would refuse to decode):
/// `metadata` an object, labels and annotations string maps, finalizers strings,
/// ownerReferences objects, and `spec`/`status` objects where the server writes into them.
pub(crate) fn check_shape(t: &Target, obj: &Value) -> ApiResult<()> {
    let name = str_at(obj, "/metadata/name").to_string();
    let bad =
        |field: &str, what: &str| Err(invalid(t, &name, field, format!("Invalid value: {what}")));
    let Some(meta) = obj.get("metadata").and_then(Value::as_object) else {
        return bad("metadata", "must be an object");
    };
    for k in ["labels", "annotations"] {
        match meta.get(k) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) if m.values().all(Value::is_string) => {}
            Some(_) => return bad(&format!("metadata.{k}"), "must be a map of strings"),
        }
    }
    match meta.get("finalizers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        Some(_) => return bad("metadata.finalizers", "must be a list of strings"),
    }
    match meta.get("ownerReferences") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_object) => {}
        Some(_) => return bad("metadata.ownerReferences", "must be a list of objects"),
    }
    for k in [
        "name",
        "namespace",
        "generateName",
        "resourceVersion",
        "uid",
    ] {
        if meta.get(k).is_some_and(|v| !v.is_string() && !v.is_null()) {
            return bad(&format!("metadata.{k}"), "must be a string");
        }
    }
    let must_be_object = |k: &str| obj.get(k).is_some_and(|v| !v.is_object() && !v.is_null());
    if (t.res.status || !t.res.custom) && must_be_object("status") {
        return bad("status", "must be an object");
    }
    if !t.res.custom && must_be_object("spec") {
        return bad("spec", "must be an object");
    }
    Ok(())
}
