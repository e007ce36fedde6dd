//! `/openapi/v2`: the Swagger 2.0 document of every served kind, as JSON or as the protobuf
//! (gnostic's `openapi_v2.Document`) that client-go's `OpenAPISchema()` asks for. kubectl
//! validates what it sends with it client-side when the server cannot (a `List` is not a
//! resource: `kubectl create -f` of one validates each item against these definitions).
//!
//! The definitions are the OpenAPI v3 schemas `discovery` publishes (built-in kinds' from
//! `k8s-openapi`, CRDs' own), rewritten as kube rewrites them for v2: references into
//! `#/definitions/`, a lone `allOf` reference as the reference itself.
//!
//! The protobuf encoder is hand-written: only this one message family is ever encoded, and its
//! field numbers are gnostic's (`openapiv2/OpenAPIv2.proto`).

use serde_json::{Map, Value, json};

use super::catalog::Catalog;
use super::discovery;
use super::typed;

/// The media type of the protobuf form, as kube-apiserver answers it (client-go asks for
/// `...spec.v2@v1.0+protobuf`, which Go's MIME parser would refuse as an answer).
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Whether an `Accept` header asks for the protobuf form.
pub fn wants_protobuf(accept: &str) -> bool {
    accept.contains("application/com.github.proto-openapi.spec.v2")
}

/// The built-in kinds' definitions (the same for every registry: built-in kinds are always
/// served), made once.
fn builtin_definitions(reg: &Catalog) -> Map<String, Value> {
    static BUILTIN: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    BUILTIN
        .get_or_init(|| {
            let mut definitions = Map::new();
            let builtin = reg.all().filter(|r| !r.custom);
            let api_versions: std::collections::BTreeSet<String> = builtin
                .flat_map(|r| {
                    r.versions
                        .iter()
                        .map(|v| r.api_version(v))
                        .collect::<Vec<_>>()
                })
                .collect();
            for api_version in api_versions {
                definitions.extend(typed::schemas(&api_version));
            }
            definitions
        })
        .clone()
}

/// The Swagger 2.0 document: every served kind's definition and those they refer to.
pub fn document(reg: &Catalog) -> Value {
    let mut definitions = builtin_definitions(reg);
    for (group, versions) in reg.groups() {
        for version in versions {
            for r in reg
                .in_group_version(&group, &version)
                .iter()
                .filter(|r| r.custom)
            {
                if let Some(schema) = r.openapi.get(&version) {
                    let (name, schema) = discovery::custom_schema(r, &version, schema);
                    definitions.insert(name, schema);
                    definitions.extend(typed::object_meta_schemas());
                }
            }
        }
    }
    for schema in definitions.values_mut() {
        to_v2(schema);
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": {},
        "definitions": definitions,
    })
}

/// A v3 schema as kube writes it in v2.
fn to_v2(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::String(r)) = map.get_mut("$ref") {
        *r = r.replace("#/components/schemas/", "#/definitions/");
    }
    // `{"allOf": [{"$ref": X}], "description": ...}` is v3's way of describing a reference.
    let lone_ref = match map
        .get("allOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([only]) if only.get("$ref").is_some() => only["$ref"].as_str().map(str::to_string),
        _ => None,
    };
    if let Some(r) = lone_ref {
        map.remove("allOf");
        map.insert(
            "$ref".into(),
            json!(r.replace("#/components/schemas/", "#/definitions/")),
        );
    }
    map.remove("nullable");
    for key in ["items", "additionalProperties"] {
        if let Some(v) = map.get_mut(key) {
            to_v2(v);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(all)) = map.get_mut(key) {
            all.iter_mut().for_each(to_v2);
        }
    }
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        props.values_mut().for_each(to_v2);
    }
}

/// Protobuf's base-128 varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field (strings, bytes, messages).
fn bytes(out: &mut Vec<u8>, field: u64, payload: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

fn string(out: &mut Vec<u8>, field: u64, s: &str) {
    bytes(out, field, s.as_bytes());
}

/// A message field, built by `f`.
fn message(out: &mut Vec<u8>, field: u64, f: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    f(&mut inner);
    bytes(out, field, &inner);
}

/// A `NamedAny` (vendor extensions): the value as YAML, which JSON is.
fn named_any(out: &mut Vec<u8>, field: u64, name: &str, value: &Value) {
    message(out, field, |m| {
        string(m, 1, name);
        message(m, 2, |any| string(any, 2, &value.to_string()));
    });
}

/// A `NamedSchema` (definitions, properties).
fn named_schema(out: &mut Vec<u8>, field: u64, name: &str, schema: &Value) {
    message(out, field, |m| {
        string(m, 1, name);
        message(m, 2, |s| encode_schema(s, schema));
    });
}

/// gnostic's `Schema`.
fn encode_schema(out: &mut Vec<u8>, schema: &Value) {
    let text = |key: &str| schema.get(key).and_then(Value::as_str);
    if let Some(r) = text("$ref") {
        string(out, 1, r);
    }
    if let Some(f) = text("format") {
        string(out, 2, f);
    }
    if let Some(d) = text("description") {
        string(out, 4, d);
    }
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        string(out, 19, r.as_str().unwrap_or_default());
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(b)) => message(out, 21, |m| {
            varint(m, 2 << 3);
            varint(m, u64::from(*b));
        }),
        Some(s @ Value::Object(_)) => message(out, 21, |m| message(m, 1, |x| encode_schema(x, s))),
        _ => {}
    }
    if let Some(t) = text("type") {
        message(out, 22, |m| string(m, 1, t));
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        message(out, 23, |m| message(m, 1, |x| encode_schema(x, items)));
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        message(out, 25, |m| {
            for (name, s) in props {
                named_schema(m, 1, name, s);
            }
        });
    }
    for (key, value) in schema.as_object().into_iter().flatten() {
        if key.starts_with("x-") {
            named_any(out, 31, key, value);
        }
    }
}

/// The document as gnostic's `openapi_v2.Document`.
pub fn protobuf(document: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, "2.0");
    message(&mut out, 2, |info| {
        string(info, 1, "Kubernetes");
        string(
            info,
            2,
            document
                .pointer("/info/version")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
    });
    message(&mut out, 8, |_| {});
    message(&mut out, 9, |defs| {
        for (name, schema) in document["definitions"].as_object().into_iter().flatten() {
            named_schema(defs, 1, name, schema);
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v3_references_become_v2_ones() {
        let mut schema = json!({"properties": {
            "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.M"}], "description": "d"},
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.I"}},
        }});
        to_v2(&mut schema);
        assert_eq!(
            schema["properties"]["metadata"],
            json!({"$ref": "#/definitions/io.k8s.M", "description": "d"})
        );
        assert_eq!(
            schema["properties"]["items"]["items"]["$ref"],
            "#/definitions/io.k8s.I"
        );
    }

    #[test]
    fn the_protobuf_form_carries_gnostics_field_numbers() {
        let doc = json!({"info": {"version": "v1.32.0"}, "definitions": {
            "io.k8s.X": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}},
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "X", "version": "v1"}]}}});
        let pb = protobuf(&doc);
        // swagger = "2.0" first, then info.
        assert_eq!(&pb[..5], b"\x0a\x032.0");
        let text = String::from_utf8_lossy(&pb);
        for part in [
            "Kubernetes",
            "v1.32.0",
            "io.k8s.X",
            "x-kubernetes-group-version-kind",
            "\"kind\":\"X\"",
        ] {
            assert!(text.contains(part), "{part} in {text:?}");
        }
    }
}
