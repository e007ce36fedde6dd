//! Table-driven decoding of one protobuf message into the JSON a JSON client sends for it.
//!
//! A kind is described by [`Field`] tables (number, JSON name, [`Ty`]) copied from
//! `generated.proto` of k8s.io/api and k8s.io/apimachinery; fields not in a table are skipped,
//! as kube-apiserver drops unknown JSON fields. The Go encoder writes every non-pointer field,
//! zero or not, while Go's JSON leaves zero `omitempty` scalars out: `Str`/`Int`/`Bool` drop
//! the zero value to match, the `*Set` forms keep it (pointer fields, on the wire only when
//! set, and fields JSON always writes). Messages are kept even when empty, as JSON keeps
//! non-pointer structs (`"resources": {}`).

use serde_json::{Map, Value, json};

use super::wire::{Wire, bad, base64, fields, string};
use crate::status::ApiResult;

/// How one field's wire value becomes JSON.
#[derive(Clone, Copy)]
pub(super) enum Ty {
    /// `string`, left out when empty.
    Str,
    /// `string` kept when empty.
    StrSet,
    /// `int32`/`int64` varint, left out when zero.
    Int,
    /// `int32`/`int64` kept when zero.
    IntSet,
    /// `bool`, left out when false.
    Bool,
    /// `bool` kept when false.
    BoolSet,
    /// `repeated string`.
    Strs,
    /// `map<string, string>`.
    Map,
    /// `map<string, bytes>`, values base64 as in JSON.
    BytesMap,
    /// `map<string, resource.Quantity>`, values the quantity string.
    QtyMap,
    /// `metav1.Time`.
    Time,
    /// `intstr.IntOrString`.
    IntOrStr,
    /// A nested message.
    Msg(&'static [Field]),
    /// A `repeated` message.
    Msgs(&'static [Field]),
    /// A message whose Go struct is embedded `json:",inline"`: its fields join the parent's.
    Inline(&'static [Field]),
}

/// One message field: number, JSON name, type.
pub(super) type Field = (u64, &'static str, Ty);

/// metav1.ObjectMeta.
pub(super) const META: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "generateName", Ty::Str),
    (3, "namespace", Ty::Str),
    (4, "selfLink", Ty::Str),
    (5, "uid", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "generation", Ty::Int),
    (8, "creationTimestamp", Ty::Time),
    (9, "deletionTimestamp", Ty::Time),
    (10, "deletionGracePeriodSeconds", Ty::IntSet),
    (11, "labels", Ty::Map),
    (12, "annotations", Ty::Map),
    (13, "ownerReferences", Ty::Msgs(OWNER_REF)),
    (14, "finalizers", Ty::Strs),
];

const OWNER_REF: &[Field] = &[
    (1, "kind", Ty::StrSet),
    (3, "name", Ty::StrSet),
    (4, "uid", Ty::StrSet),
    (5, "apiVersion", Ty::StrSet),
    (6, "controller", Ty::BoolSet),
    (7, "blockOwnerDeletion", Ty::BoolSet),
];

/// metav1.LabelSelector.
pub(super) const LABEL_SELECTOR: &[Field] = &[
    (1, "matchLabels", Ty::Map),
    (2, "matchExpressions", Ty::Msgs(LABEL_REQUIREMENT)),
];

const LABEL_REQUIREMENT: &[Field] = &[
    (1, "key", Ty::StrSet),
    (2, "operator", Ty::StrSet),
    (3, "values", Ty::Strs),
];

/// Decodes one message by its table.
pub(super) fn message(b: &[u8], table: &[Field]) -> ApiResult<Value> {
    let mut m = Map::new();
    decode_into(&mut m, b, table)?;
    Ok(Value::Object(m))
}

fn decode_into(m: &mut Map<String, Value>, b: &[u8], table: &[Field]) -> ApiResult<()> {
    for (num, w) in fields(b)? {
        let Some(&(_, key, ty)) = table.iter().find(|f| f.0 == num) else {
            continue;
        };
        let v = match (ty, w) {
            (Ty::Str | Ty::StrSet, Wire::Bytes(x)) => json!(string(x)?),
            // int32 negatives are sign-extended to 64 bits on the wire, so one cast fits both.
            (Ty::Int | Ty::IntSet, Wire::Varint(v)) => json!(v as i64),
            (Ty::Bool | Ty::BoolSet, Wire::Varint(v)) => json!(v != 0),
            (Ty::Time, Wire::Bytes(x)) => time(x)?,
            (Ty::IntOrStr, Wire::Bytes(x)) => int_or_string(x)?,
            (Ty::Msg(t), Wire::Bytes(x)) => message(x, t)?,
            (Ty::Inline(t), Wire::Bytes(x)) => {
                decode_into(m, x, t)?;
                continue;
            }
            (Ty::Strs, Wire::Bytes(x)) => {
                push(m, key, json!(string(x)?));
                continue;
            }
            (Ty::Msgs(t), Wire::Bytes(x)) => {
                push(m, key, message(x, t)?);
                continue;
            }
            (Ty::Map | Ty::BytesMap | Ty::QtyMap, Wire::Bytes(x)) => {
                let (k, v) = entry(x, ty)?;
                if let Value::Object(o) = m.entry(key).or_insert_with(|| json!({})) {
                    o.insert(k, v);
                }
                continue;
            }
            _ => continue,
        };
        let zero = match ty {
            Ty::Str => v.as_str() == Some(""),
            Ty::Int => v.as_i64() == Some(0),
            Ty::Bool => v.as_bool() == Some(false),
            _ => false,
        };
        if zero {
            m.remove(key);
        } else {
            m.insert(key.to_string(), v);
        }
    }
    Ok(())
}

fn push(m: &mut Map<String, Value>, key: &str, v: Value) {
    if let Value::Array(a) = m.entry(key).or_insert_with(|| json!([])) {
        a.push(v);
    }
}

/// One map entry: key 1, value 2.
fn entry(b: &[u8], ty: Ty) -> ApiResult<(String, Value)> {
    let (mut k, mut v) = (String::new(), json!(""));
    for (num, w) in fields(b)? {
        let Wire::Bytes(x) = w else { continue };
        match (num, ty) {
            (1, _) => k = string(x)?,
            (2, Ty::BytesMap) => v = json!(base64(x)),
            // resource.Quantity is a message carrying its canonical string as field 1.
            (2, Ty::QtyMap) => {
                for (n, w2) in fields(x)? {
                    if let (1, Wire::Bytes(s)) = (n, w2) {
                        v = json!(string(s)?);
                    }
                }
            }
            (2, _) => v = json!(string(x)?),
            _ => {}
        }
    }
    Ok((k, v))
}

/// metav1.Time: seconds since the epoch. The zero time is an empty message, and null in JSON
/// (`creationTimestamp: null` in every object a client builds).
fn time(b: &[u8]) -> ApiResult<Value> {
    if b.is_empty() {
        return Ok(Value::Null);
    }
    let mut secs = 0i64;
    for (num, w) in fields(b)? {
        if let (1, Wire::Varint(v)) = (num, w) {
            secs = v as i64;
        }
    }
    let t = chrono::DateTime::from_timestamp(secs, 0).ok_or_else(|| bad("timestamp"))?;
    Ok(json!(t.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

/// intstr.IntOrString: type 0 is the number `intVal` (2), type 1 the string `strVal` (3).
fn int_or_string(b: &[u8]) -> ApiResult<Value> {
    let (mut is_str, mut int, mut s) = (false, 0i64, String::new());
    for (num, w) in fields(b)? {
        match (num, w) {
            (1, Wire::Varint(v)) => is_str = v == 1,
            (2, Wire::Varint(v)) => int = v as i64,
            (3, Wire::Bytes(x)) => s = string(x)?,
            _ => {}
        }
    }
    Ok(if is_str { json!(s) } else { json!(int) })
}
