//! Decoding `application/vnd.kubernetes.protobuf` request bodies for the kinds kubectl's typed
//! commands send that way (`kubectl create namespace|configmap|secret`): Namespace, ConfigMap,
//! Secret. Responses are always JSON (those clients accept it).
//!
//! Written by hand: the envelope (`k8s\0` + `runtime.Unknown`) and these messages are small,
//! and k8s-openapi carries no protobuf support. Field numbers follow `generated.proto` of
//! k8s.io/api and k8s.io/apimachinery.

use serde_json::{Map, Value, json};

use super::status::{ApiError, ApiResult};

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";

fn bad(what: &str) -> ApiError {
    ApiError::bad_request(format!("unable to decode protobuf body: {what}"))
}

/// One wire field: number and value.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> ApiResult<u64> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self
                .buf
                .split_first()
                .ok_or_else(|| bad("truncated varint"))?;
            self.buf = rest;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(bad("varint too long"))
    }

    fn next(&mut self) -> ApiResult<Option<(u64, Wire<'a>)>> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let (num, ty) = (key >> 3, key & 7);
        let wire = match ty {
            0 => Wire::Varint(self.varint()?),
            1 | 5 => {
                let n = if ty == 1 { 8 } else { 4 };
                if self.buf.len() < n {
                    return Err(bad("truncated fixed field"));
                }
                self.buf = &self.buf[n..];
                Wire::Varint(0)
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| bad("length"))?;
                if self.buf.len() < len {
                    return Err(bad("truncated length-delimited field"));
                }
                let (b, rest) = self.buf.split_at(len);
                self.buf = rest;
                Wire::Bytes(b)
            }
            _ => return Err(bad("unsupported wire type")),
        };
        Ok(Some((num, wire)))
    }
}

fn fields(buf: &[u8]) -> ApiResult<Vec<(u64, Wire<'_>)>> {
    let mut r = Reader { buf };
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Ok(out)
}

fn string(b: &[u8]) -> ApiResult<String> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("invalid UTF-8"))
}

/// Standard base64 (JSON's encoding of `bytes` fields).
fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// A `map<string, string|bytes>` entry.
fn map_entry(b: &[u8], bytes_value: bool) -> ApiResult<(String, Value)> {
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    for (num, w) in fields(b)? {
        if let Wire::Bytes(x) = w {
            match num {
                1 => k = string(x)?,
                2 if bytes_value => v = json!(base64(x)),
                2 => v = json!(string(x)?),
                _ => {}
            }
        }
    }
    Ok((k, v))
}

fn time(b: &[u8]) -> ApiResult<Value> {
    let mut secs = 0i64;
    for (num, w) in fields(b)? {
        if let (1, Wire::Varint(v)) = (num, w) {
            secs = v as i64;
        }
    }
    let t = chrono::DateTime::from_timestamp(secs, 0).ok_or_else(|| bad("timestamp"))?;
    Ok(json!(t.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

fn insert_map(m: &mut Map<String, Value>, key: &str, (k, v): (String, Value)) {
    let e = m.entry(key.to_string()).or_insert_with(|| json!({}));
    e[k] = v;
}

fn push(m: &mut Map<String, Value>, key: &str, v: Value) {
    let e = m.entry(key.to_string()).or_insert_with(|| json!([]));
    if let Value::Array(a) = e {
        a.push(v);
    }
}

fn object_meta(b: &[u8]) -> ApiResult<Value> {
    let mut m = Map::new();
    for (num, w) in fields(b)? {
        match (num, w) {
            (1..=6, Wire::Bytes(x)) => {
                let k = [
                    "name",
                    "generateName",
                    "namespace",
                    "selfLink",
                    "uid",
                    "resourceVersion",
                ][(num - 1) as usize];
                m.insert(k.into(), json!(string(x)?));
            }
            (7, Wire::Varint(v)) => {
                m.insert("generation".into(), json!(v as i64));
            }
            (8, Wire::Bytes(x)) => {
                m.insert("creationTimestamp".into(), time(x)?);
            }
            (11, Wire::Bytes(x)) => insert_map(&mut m, "labels", map_entry(x, false)?),
            (12, Wire::Bytes(x)) => insert_map(&mut m, "annotations", map_entry(x, false)?),
            (13, Wire::Bytes(x)) => push(&mut m, "ownerReferences", owner_ref(x)?),
            (14, Wire::Bytes(x)) => push(&mut m, "finalizers", json!(string(x)?)),
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

fn owner_ref(b: &[u8]) -> ApiResult<Value> {
    let mut m = Map::new();
    for (num, w) in fields(b)? {
        match (num, w) {
            (1, Wire::Bytes(x)) => drop(m.insert("kind".into(), json!(string(x)?))),
            (3, Wire::Bytes(x)) => drop(m.insert("name".into(), json!(string(x)?))),
            (4, Wire::Bytes(x)) => drop(m.insert("uid".into(), json!(string(x)?))),
            (5, Wire::Bytes(x)) => drop(m.insert("apiVersion".into(), json!(string(x)?))),
            (6, Wire::Varint(v)) => drop(m.insert("controller".into(), json!(v != 0))),
            (7, Wire::Varint(v)) => drop(m.insert("blockOwnerDeletion".into(), json!(v != 0))),
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

/// Decodes a protobuf body into the JSON object it encodes (Namespace, ConfigMap, Secret);
/// other kinds get 415 like a server that does not speak protobuf for them.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let unknown = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("missing k8s envelope"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (num, w) in fields(unknown)? {
        match (num, w) {
            (1, Wire::Bytes(tm)) => {
                for (n, w2) in fields(tm)? {
                    match (n, w2) {
                        (1, Wire::Bytes(x)) => api_version = string(x)?,
                        (2, Wire::Bytes(x)) => kind = string(x)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(x)) => raw = x,
            _ => {}
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    let supported =
        api_version == "v1" && matches!(kind.as_str(), "Namespace" | "ConfigMap" | "Secret");
    if !supported {
        return Err(ApiError::unsupported_media_type(
            MEDIA_TYPE,
            &["application/json", "application/yaml"],
        ));
    }
    for (num, w) in fields(raw)? {
        match (kind.as_str(), num, w) {
            (_, 1, Wire::Bytes(x)) => drop(obj.insert("metadata".into(), object_meta(x)?)),
            ("ConfigMap", 2, Wire::Bytes(x)) => insert_map(&mut obj, "data", map_entry(x, false)?),
            ("ConfigMap", 3, Wire::Bytes(x)) => {
                insert_map(&mut obj, "binaryData", map_entry(x, true)?)
            }
            ("ConfigMap" | "Secret", 4 | 5, Wire::Varint(v))
                if (kind == "ConfigMap") == (num == 4) =>
            {
                obj.insert("immutable".into(), json!(v != 0));
            }
            ("Secret", 2, Wire::Bytes(x)) => insert_map(&mut obj, "data", map_entry(x, true)?),
            ("Secret", 3, Wire::Bytes(x)) => drop(obj.insert("type".into(), json!(string(x)?))),
            ("Secret", 4, Wire::Bytes(x)) => {
                insert_map(&mut obj, "stringData", map_entry(x, false)?)
            }
            ("Namespace", 2, Wire::Bytes(x)) => {
                let mut fins = Vec::new();
                for (n, w2) in fields(x)? {
                    if let (1, Wire::Bytes(f)) = (n, w2) {
                        fins.push(json!(string(f)?));
                    }
                }
                obj.insert("spec".into(), json!({ "finalizers": fins }));
            }
            _ => {}
        }
    }
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![((num << 3) | 2) as u8, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn decodes_configmap() {
        let meta = [
            field(1, b"c1"),
            field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ]
        .concat();
        let raw = [
            field(1, &meta),
            field(2, &[field(1, b"a"), field(2, b"1")].concat()),
            field(3, &[field(1, b"b"), field(2, b"hi!")].concat()),
        ]
        .concat();
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm), field(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c1", "labels": {"app": "web"}}, "data": {"a": "1"}, "binaryData": {"b": "aGkh"}})
        );
        assert_eq!(decode(b"k8s\0\x0a").unwrap_err().code, 400);
    }
}
