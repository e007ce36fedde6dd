//! One message of the field table to JSON and back, as kube's Go types do it: the JSON is the
//! one a JSON client sends or receives for the same object, so every other step of the server
//! sees one format.
//!
//! Decoding follows Go: the encoder writes every non-pointer field, zero or not, and JSON then
//! leaves out zero `omitempty` scalars, so a zero is kept only for pointers (where it was
//! meant) and for fields JSON always writes. Messages are kept even when empty, as JSON writes
//! non-pointer structs (`"resources": {}`). Fields a table does not know are skipped, as kube
//! drops unknown fields. Encoding writes what the JSON holds, in field-number order.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::messages::{Field, MESSAGES, MsgId, Ty};
use super::wire::{self, Wire, bad, fields, string};
use crate::status::ApiResult;

/// How deep messages may nest in a body: deeper than the objects kube serves (a CRD's schema
/// nests one level per property level), shallow enough that a hostile body cannot exhaust a
/// worker thread's 2 MiB stack (128 levels did, in a debug build).
const MAX_DEPTH: usize = 64;

thread_local! {
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One level of message nesting, given back when dropped.
struct Nested;

impl Nested {
    fn enter() -> ApiResult<Self> {
        let depth = DEPTH.get() + 1;
        if depth > MAX_DEPTH {
            return Err(bad("messages nested too deeply"));
        }
        DEPTH.set(depth);
        Ok(Nested)
    }
}

impl Drop for Nested {
    fn drop(&mut self) {
        DEPTH.set(DEPTH.get().saturating_sub(1));
    }
}

/// The JSON object of message `id` on the wire.
pub(super) fn decode(buf: &[u8], id: MsgId) -> ApiResult<Map<String, Value>> {
    // Every nested message and embedded envelope is decoded through here.
    let _level = Nested::enter()?;
    let message = &MESSAGES.messages[id];
    let mut wires: Vec<Vec<Wire<'_>>> = message.fields.iter().map(|_| Vec::new()).collect();
    for (number, w) in fields(buf)? {
        if let Some(i) = message.index(number) {
            wires[i].push(w);
        }
    }
    let mut out = Map::new();
    for (field, wires) in message.fields.iter().zip(wires) {
        if wires.is_empty() {
            continue;
        }
        if field.inline {
            if let Ty::Msg(child) = field.ty {
                for w in &wires {
                    out.extend(decode(bytes(w)?, child)?);
                }
            }
            continue;
        }
        let Some(name) = &field.json else { continue };
        if let Some(v) = field_value(field, &wires)? {
            out.insert(name.clone(), v);
        }
    }
    Ok(out)
}

/// A field's JSON from its occurrences on the wire, `None` where JSON leaves it out.
fn field_value(field: &Field, wires: &[Wire<'_>]) -> ApiResult<Option<Value>> {
    if field.repeated {
        let items = repeated(&field.ty, wires)?;
        return Ok((!items.is_empty()).then_some(Value::Array(items)));
    }
    if let Ty::Map(k, v) = &field.ty {
        let mut map = Map::new();
        for w in wires {
            let (mut key, mut value) = (zero(k), zero(v));
            for (n, e) in fields(bytes(w)?)? {
                match n {
                    1 => key = value_of(k, &e)?,
                    2 => value = value_of(v, &e)?,
                    _ => {}
                }
            }
            let key = match key {
                Value::String(s) => s,
                other => other.to_string(),
            };
            map.insert(key, value);
        }
        return Ok((!map.is_empty()).then_some(Value::Object(map)));
    }
    // A field written twice: the last one counts.
    let Some(last) = wires.last() else {
        return Ok(None);
    };
    let v = value_of(&field.ty, last)?;
    let scalar_zero = match &v {
        Value::String(s) => s.is_empty() && matches!(field.ty, Ty::Str | Ty::Bytes),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    };
    Ok((!(scalar_zero && field.omitempty && !field.ptr)).then_some(v))
}

/// The values of a repeated field, packed or not.
fn repeated(ty: &Ty, wires: &[Wire<'_>]) -> ApiResult<Vec<Value>> {
    let mut out = Vec::new();
    for w in wires {
        match (ty, w) {
            (Ty::Bool | Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64, Wire::Bytes(b)) => {
                for v in wire::packed(b)? {
                    out.push(value_of(ty, &Wire::Varint(v))?);
                }
            }
            (Ty::Double, Wire::Bytes(b)) => {
                for c in b.chunks_exact(8) {
                    let bits = u64::from_le_bytes(c.try_into().map_err(|_| bad("packed"))?);
                    out.push(value_of(ty, &Wire::Fixed64(bits))?);
                }
            }
            _ => out.push(value_of(ty, w)?),
        }
    }
    Ok(out)
}

/// The JSON of a value absent from a map entry: Go's zero value.
fn zero(ty: &Ty) -> Value {
    match ty {
        Ty::Str | Ty::Bytes => json!(""),
        Ty::Bool => json!(false),
        Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64 | Ty::Double | Ty::Float => json!(0),
        Ty::Msg(_) | Ty::Map(..) => json!({}),
        Ty::Quantity => json!("0"),
        Ty::IntOrString => json!(0),
        Ty::Duration => json!("0s"),
        _ => Value::Null,
    }
}

fn bytes<'a>(w: &Wire<'a>) -> ApiResult<&'a [u8]> {
    match w {
        Wire::Bytes(b) => Ok(b),
        _ => Err(bad("expected a length-delimited field")),
    }
}

fn varint(w: &Wire<'_>) -> ApiResult<u64> {
    match w {
        Wire::Varint(v) => Ok(*v),
        _ => Err(bad("expected a varint")),
    }
}

/// One value's JSON.
fn value_of(ty: &Ty, w: &Wire<'_>) -> ApiResult<Value> {
    Ok(match ty {
        Ty::Str => json!(string(bytes(w)?)?),
        Ty::Bytes => json!(base64::engine::general_purpose::STANDARD.encode(bytes(w)?)),
        Ty::Bool => json!(varint(w)? != 0),
        Ty::Int32 => json!(i64::from(varint(w)? as i32)),
        Ty::Int64 => json!(varint(w)? as i64),
        Ty::Uint32 => json!(varint(w)? as u32),
        Ty::Uint64 => json!(varint(w)?),
        Ty::Double | Ty::Float => {
            let f = match w {
                Wire::Fixed64(bits) => f64::from_bits(*bits),
                Wire::Fixed32(bits) => f64::from(f32::from_bits(*bits)),
                _ => return Err(bad("expected a fixed-width number")),
            };
            number(f)
        }
        Ty::Msg(id) => Value::Object(decode(bytes(w)?, *id)?),
        Ty::Time | Ty::MicroTime => time(ty, w)?,
        Ty::Duration => {
            let mut nanos = 0i64;
            for (n, f) in fields(bytes(w)?)? {
                if n == 1 {
                    nanos = varint(&f)? as i64;
                }
            }
            let text = wasmctrl_core::duration::format_go(std::time::Duration::from_nanos(
                nanos.unsigned_abs(),
            ));
            json!(if nanos < 0 { format!("-{text}") } else { text })
        }
        Ty::Quantity => {
            let mut s = "0".to_string();
            for (n, f) in fields(bytes(w)?)? {
                if n == 1 {
                    s = string(bytes(&f)?)?;
                }
            }
            json!(s)
        }
        Ty::IntOrString => {
            let (mut kind, mut int, mut text) = (0, 0i64, String::new());
            for (n, f) in fields(bytes(w)?)? {
                match n {
                    1 => kind = varint(&f)?,
                    2 => int = i64::from(varint(&f)? as i32),
                    3 => text = string(bytes(&f)?)?,
                    _ => {}
                }
            }
            if kind == 1 { json!(text) } else { json!(int) }
        }
        Ty::Raw => raw(w)?,
        Ty::PropsOrArray | Ty::PropsOrBool | Ty::PropsOrStrings => props_or(ty, w)?,
        Ty::Items(item) => {
            let mut wires = Vec::new();
            for (n, f) in fields(bytes(w)?)? {
                if n == 1 {
                    wires.push(f);
                }
            }
            Value::Array(repeated(item, &wires)?)
        }
        Ty::Map(..) => return Err(bad("a map as a map's value")),
    })
}

/// A `Time` (to the second) or `MicroTime` (to the microsecond) as Go writes it in JSON;
/// an empty message is Go's zero time, `null`.
fn time(ty: &Ty, w: &Wire<'_>) -> ApiResult<Value> {
    let (mut seconds, mut nanos) = (None, 0);
    for (n, f) in fields(bytes(w)?)? {
        match n {
            1 => seconds = Some(varint(&f)? as i64),
            2 => nanos = varint(&f)? as i32,
            _ => {}
        }
    }
    // An empty message is Go's zero time, `null` in JSON. Go reads a Time to the
    // second (its JSON holds no more), a MicroTime to the microsecond.
    let Some(seconds) = seconds else {
        return Ok(Value::Null);
    };
    let micros = if *ty == Ty::MicroTime {
        nanos / 1000
    } else {
        0
    };
    let t = chrono::DateTime::from_timestamp(seconds, (micros * 1000) as u32)
        .ok_or_else(|| bad("time out of range"))?;
    let format = if *ty == Ty::MicroTime {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(json!(t.format(format).to_string()))
}

/// A `RawExtension`: embedded JSON, or an object in its own protobuf envelope.
fn raw(w: &Wire<'_>) -> ApiResult<Value> {
    let mut raw: &[u8] = &[];
    for (n, f) in fields(bytes(w)?)? {
        if n == 1 {
            raw = bytes(&f)?;
        }
    }
    if raw.is_empty() {
        Ok(Value::Null)
    } else if raw.starts_with(super::MAGIC) {
        // An object embedded in its own protobuf envelope (a watch event's).
        super::decode(raw)
    } else {
        serde_json::from_slice(raw).map_err(|e| bad(&format!("embedded JSON: {e}")))
    }
}

/// A schema's `JSONSchemaPropsOrArray`, `...OrBool` or `...OrStringArray`.
fn props_or(ty: &Ty, w: &Wire<'_>) -> ApiResult<Value> {
    let props = MESSAGES.schema_props;
    let (mut schema, mut list, mut allows) = (None, Vec::new(), false);
    for (n, f) in fields(bytes(w)?)? {
        match (ty, n) {
            (Ty::PropsOrArray | Ty::PropsOrStrings, 1) | (Ty::PropsOrBool, 2) => {
                schema = Some(Value::Object(decode(bytes(&f)?, props)?));
            }
            (Ty::PropsOrArray, 2) => list.push(Value::Object(decode(bytes(&f)?, props)?)),
            (Ty::PropsOrStrings, 2) => list.push(json!(string(bytes(&f)?)?)),
            (Ty::PropsOrBool, 1) => allows = varint(&f)? != 0,
            _ => {}
        }
    }
    Ok(match ty {
        Ty::PropsOrBool => schema.unwrap_or(json!(allows)),
        _ if !list.is_empty() => Value::Array(list),
        _ => schema.unwrap_or(Value::Null),
    })
}

/// A JSON number as Go writes a float64: whole numbers without a fraction.
fn number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        json!(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// Appends message `id` of JSON object `obj`.
pub(super) fn encode(obj: &Map<String, Value>, id: MsgId, out: &mut Vec<u8>) {
    let message = &MESSAGES.messages[id];
    let mut order: Vec<&Field> = message.fields.iter().collect();
    order.sort_by_key(|f| f.number);
    for field in order {
        if field.inline {
            if let Ty::Msg(child) = field.ty {
                let mut inner = Vec::new();
                encode(obj, child, &mut inner);
                wire::put_bytes(out, field.number, &inner);
            }
            continue;
        }
        let Some(v) = field.json.as_ref().and_then(|name| obj.get(name)) else {
            continue;
        };
        match (&field.ty, v) {
            (_, Value::Null) => {}
            (ty, Value::Array(items)) if field.repeated => {
                for item in items {
                    put_value(out, field.number, ty, item);
                }
            }
            (Ty::Map(k, v), Value::Object(map)) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for key in keys {
                    let mut entry = Vec::new();
                    put_value(&mut entry, 1, k, &json!(key));
                    put_value(&mut entry, 2, v, &map[key]);
                    wire::put_bytes(out, field.number, &entry);
                }
            }
            (ty, v) => put_value(out, field.number, ty, v),
        }
    }
}

/// Appends field `number` holding `v` as type `ty`; a value of the wrong JSON type is left out
/// (what is encoded was validated on its way in).
fn put_value(out: &mut Vec<u8>, number: u64, ty: &Ty, v: &Value) {
    let message = |out: &mut Vec<u8>, build: &dyn Fn(&mut Vec<u8>)| {
        let mut inner = Vec::new();
        build(&mut inner);
        wire::put_bytes(out, number, &inner);
    };
    if put_scalar(out, number, ty, v) {
        return;
    }
    match (ty, v) {
        (Ty::Msg(id), Value::Object(m)) => message(out, &|inner| encode(m, *id, inner)),
        (Ty::Time | Ty::MicroTime, Value::String(s)) => {
            if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
                // Go writes the nanoseconds, zero or not; a Time holds none.
                let nanos = if *ty == Ty::MicroTime {
                    t.timestamp_subsec_micros() * 1000
                } else {
                    0
                };
                message(out, &|inner| {
                    wire::put_int(inner, 1, t.timestamp() as u64);
                    wire::put_int(inner, 2, u64::from(nanos));
                });
            }
        }
        (Ty::Duration, Value::String(s)) => {
            let (negative, text) = s
                .strip_prefix('-')
                .map_or((false, s.as_str()), |t| (true, t));
            if let Some(d) = wasmctrl_core::duration::parse_go(text) {
                let nanos = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
                let nanos = if negative { -nanos } else { nanos };
                message(out, &|inner| wire::put_int(inner, 1, nanos as u64));
            }
        }
        (Ty::Quantity, Value::String(s)) => {
            message(out, &|inner| wire::put_bytes(inner, 1, s.as_bytes()));
        }
        (Ty::Quantity, Value::Number(n)) => {
            let s = n.to_string();
            message(out, &|inner| wire::put_bytes(inner, 1, s.as_bytes()));
        }
        // Go writes all three fields of an IntOrString.
        (Ty::IntOrString, Value::Number(n)) => message(out, &|inner| {
            wire::put_int(inner, 1, 0);
            wire::put_int(inner, 2, n.as_i64().unwrap_or(0) as u64);
            wire::put_bytes(inner, 3, b"");
        }),
        (Ty::IntOrString, Value::String(s)) => message(out, &|inner| {
            wire::put_int(inner, 1, 1);
            wire::put_int(inner, 2, 0);
            wire::put_bytes(inner, 3, s.as_bytes());
        }),
        (Ty::Raw, v) => {
            let raw = serde_json::to_vec(v).unwrap_or_default();
            message(out, &|inner| wire::put_bytes(inner, 1, &raw));
        }
        (Ty::PropsOrArray | Ty::PropsOrStrings | Ty::PropsOrBool, _) => {
            put_props(out, number, ty, v)
        }
        (Ty::Items(item), Value::Array(items)) => message(out, &|inner| {
            for v in items {
                put_value(inner, 1, item, v);
            }
        }),
        _ => {}
    }
}

/// A scalar field (string, bytes, bool, integer, float) of `ty` holding `v`; whether `ty` is
/// one (a value of the wrong JSON type is left out, as for messages).
fn put_scalar(out: &mut Vec<u8>, number: u64, ty: &Ty, v: &Value) -> bool {
    match (ty, v) {
        (Ty::Str, Value::String(s)) => wire::put_bytes(out, number, s.as_bytes()),
        (Ty::Bytes, Value::String(s)) => {
            if let Ok(b) = base64::engine::general_purpose::STANDARD.decode(s) {
                wire::put_bytes(out, number, &b);
            }
        }
        (Ty::Bool, Value::Bool(b)) => wire::put_int(out, number, u64::from(*b)),
        (Ty::Int32 | Ty::Int64, Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                wire::put_int(out, number, i as u64);
            }
        }
        (Ty::Uint32 | Ty::Uint64, Value::Number(n)) => {
            if let Some(u) = n.as_u64() {
                wire::put_int(out, number, u);
            }
        }
        (Ty::Double, Value::Number(n)) => {
            wire::put_fixed64(out, number, n.as_f64().unwrap_or(0.0).to_bits());
        }
        (Ty::Float, Value::Number(n)) => {
            wire::put_fixed32(out, number, (n.as_f64().unwrap_or(0.0) as f32).to_bits());
        }
        (Ty::Str | Ty::Bytes | Ty::Bool | Ty::Int32 | Ty::Int64, _) => {}
        (Ty::Uint32 | Ty::Uint64 | Ty::Double | Ty::Float, _) => {}
        _ => return false,
    }
    true
}

/// A schema's `JSONSchemaPropsOrArray`, `...OrStringArray` or `...OrBool` holding `v`.
fn put_props(out: &mut Vec<u8>, number: u64, ty: &Ty, v: &Value) {
    let message = |out: &mut Vec<u8>, build: &dyn Fn(&mut Vec<u8>)| {
        let mut inner = Vec::new();
        build(&mut inner);
        wire::put_bytes(out, number, &inner);
    };
    match (ty, v) {
        (Ty::PropsOrArray, Value::Array(items)) => message(out, &|inner| {
            for item in items {
                put_value(inner, 2, &Ty::Msg(MESSAGES.schema_props), item);
            }
        }),
        (Ty::PropsOrArray | Ty::PropsOrStrings, Value::Object(_)) => {
            message(out, &|inner| {
                put_value(inner, 1, &Ty::Msg(MESSAGES.schema_props), v);
            });
        }
        (Ty::PropsOrStrings, Value::Array(items)) => message(out, &|inner| {
            for item in items {
                put_value(inner, 2, &Ty::Str, item);
            }
        }),
        (Ty::PropsOrBool, Value::Bool(b)) => {
            message(out, &|inner| wire::put_int(inner, 1, u64::from(*b)));
        }
        // A schema allows what it describes.
        (Ty::PropsOrBool, Value::Object(_)) => message(out, &|inner| {
            wire::put_int(inner, 1, 1);
            put_value(inner, 2, &Ty::Msg(MESSAGES.schema_props), v);
        }),
        _ => {}
    }
}
