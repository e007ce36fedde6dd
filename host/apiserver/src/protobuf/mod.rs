//! `application/vnd.kubernetes.protobuf` bodies of every built-in kind, both ways: requests
//! (kubectl's typed commands send them; so do clients built with client-go's protobuf content
//! type, as kube's own controllers are), responses, lists, errors and watch streams to clients
//! that ask for them. Custom resources have no protobuf form (as in kube): a client accepting
//! JSON too gets JSON, one accepting only protobuf gets 406, one sending it gets 415.
//!
//! Table-driven: `table` reads the field numbers of every message from `data/protobuf.txt`
//! (generated from k8s.io/api's Go tags; k8s-openapi carries no protobuf support), `codec`
//! turns a message into the JSON a JSON client would send and back, and `wire` reads and
//! writes the wire format. A body is `k8s\0` followed by a `runtime.Unknown` envelope holding
//! the apiVersion, kind and encoded object.

mod codec;
mod go_json;
mod messages;
mod wire;

pub use self::go_json::{canonical_quantities, complete};

use axum::body::Body;
use http::{HeaderValue, Response, header};
use serde_json::{Map, Value, json};

use self::messages::MESSAGES;
use self::wire::{Wire, bad, fields, string};
use super::status::{ApiError, ApiResult};

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The media type of a protobuf watch stream (length-prefixed `WatchEvent`s).
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

const MAGIC: &[u8] = b"k8s\0";

/// Marks a response already written in the encoding the client negotiated (a watch stream),
/// which [`negotiate`] leaves as it is.
#[derive(Clone, Copy)]
pub struct Encoded;

/// Whether a kind has a protobuf form.
pub fn has_form(api_version: &str, kind: &str) -> bool {
    MESSAGES.kind(api_version, kind).is_some()
}

/// Re-encodes a JSON response as protobuf for a client that prefers it (its `Accept`
/// header); a kind without a protobuf form stays JSON when the client accepts JSON and is a
/// 406 when it does not, as kube answers. Streams ([`Encoded`]) and other media types pass.
pub async fn negotiate(accept: &str, response: Response<Body>) -> Response<Body> {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "application/json");
    if !preferred(accept) || !is_json || response.extensions().get::<Encoded>().is_some() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::internal("reading a response to encode").into_response();
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| encode(&v));
    match encoded {
        Some(pb) => {
            parts
                .headers
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(pb))
        }
        None if accepts_json(accept) => Response::from_parts(parts, Body::from(bytes)),
        // As kube answers it: the Status itself in protobuf, which the client takes.
        None => {
            let error = ApiError::new(
                406,
                "NotAcceptable",
                "only the following media types are accepted: application/json, \
                 application/yaml, application/vnd.kubernetes.protobuf",
            );
            let status = encode(&error.to_status()).unwrap_or_default();
            let mut response = error.into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
            response.headers_mut().remove(header::CONTENT_LENGTH);
            *response.body_mut() = Body::from(status);
            response
        }
    }
}

/// Whether an `Accept` header takes JSON at all.
fn accepts_json(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let mime = part.split(';').next().unwrap_or("").trim();
        matches!(
            mime,
            "application/json" | "application/yaml" | "*/*" | "application/*"
        )
    })
}

/// Decodes a protobuf body into the JSON object it encodes; a kind without a protobuf form
/// gets 415, like a server that does not speak protobuf for it.
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
    let id = MESSAGES.kind(&api_version, &kind).ok_or_else(|| {
        ApiError::unsupported_media_type(MEDIA_TYPE, &["application/json", "application/yaml"])
    })?;
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    obj.extend(codec::decode(raw, id)?);
    Ok(Value::Object(obj))
}

/// Encodes an object (its `apiVersion` and `kind` say which) in its protobuf envelope;
/// `None` for a kind without a protobuf form.
pub fn encode(obj: &Value) -> Option<Vec<u8>> {
    let api_version = obj.get("apiVersion")?.as_str()?;
    let kind = obj.get("kind")?.as_str()?;
    let id = MESSAGES.kind(api_version, kind)?;
    let mut raw = Vec::new();
    codec::encode(obj.as_object()?, id, &mut raw);
    let mut type_meta = Vec::new();
    wire::put_bytes(&mut type_meta, 1, api_version.as_bytes());
    wire::put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    wire::put_bytes(&mut out, 1, &type_meta);
    wire::put_bytes(&mut out, 2, &raw);
    // contentEncoding and contentType, empty: the raw bytes are protobuf.
    wire::put_bytes(&mut out, 3, b"");
    wire::put_bytes(&mut out, 4, b"");
    Some(out)
}

/// One frame of a protobuf watch stream: the event (a `WatchEvent` without envelope, its
/// object in one) after its length as four big-endian bytes; `None` when the object has no
/// protobuf form.
pub fn watch_frame(event_type: &str, obj: &Value) -> Option<Vec<u8>> {
    let object = encode(obj)?;
    let mut event = Vec::new();
    wire::put_bytes(&mut event, 1, event_type.as_bytes());
    let mut raw = Vec::new();
    wire::put_bytes(&mut raw, 1, &object);
    wire::put_bytes(&mut event, 2, &raw);
    let len = u32::try_from(event.len()).ok()?;
    Some([len.to_be_bytes().to_vec(), event].concat())
}

/// Whether a client's `Accept` header prefers protobuf: its first media type this server
/// answers with (by quality, then order) is protobuf. Messages are JSON only, so
/// `as=Table` entries are passed over as kube passes over what it cannot encode.
pub fn preferred(accept: &str) -> bool {
    let mut entries: Vec<(f32, usize, &str, &str)> = accept
        .split(',')
        .enumerate()
        .map(|(i, part)| {
            let part = part.trim();
            let mime = part.split(';').next().unwrap_or("").trim();
            let q = part
                .split(';')
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.parse().ok())
                .unwrap_or(1.0);
            (q, i, mime, part)
        })
        .collect();
    entries.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (q, _, mime, part) in entries {
        if q <= 0.0 || part.contains("as=Table") {
            continue;
        }
        match mime {
            MEDIA_TYPE => return true,
            "application/json" | "application/yaml" | "*/*" | "application/*" => return false,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    /// A length-delimited field.
    fn field(num: u64, payload: &[u8]) -> Vec<u8> {
        [
            varint((num << 3) | 2),
            varint(payload.len() as u64),
            payload.to_vec(),
        ]
        .concat()
    }

    /// A varint field (negative values sign-extended, as Go writes int32/int64).
    fn int(num: u64, v: i64) -> Vec<u8> {
        [varint(num << 3), varint(v as u64)].concat()
    }

    fn entry(num: u64, k: &[u8], v: &[u8]) -> Vec<u8> {
        field(num, &[field(1, k), field(2, v)].concat())
    }

    fn body(api_version: &[u8], kind: &[u8], raw: &[u8]) -> Vec<u8> {
        let tm = [field(1, api_version), field(2, kind)].concat();
        [MAGIC.to_vec(), field(1, &tm), field(2, raw)].concat()
    }

    /// ObjectMeta as Go writes it for a fresh object: every string, generation and an empty
    /// creationTimestamp, set or not.
    fn meta(name: &[u8], app: &[u8]) -> Vec<u8> {
        let empty = (2..=6).map(|n| field(n, b"")).collect::<Vec<_>>().concat();
        [
            field(1, name),
            empty,
            int(7, 0),
            field(8, b""),
            entry(11, b"app", app),
        ]
        .concat()
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
        let v = decode(&body(b"v1", b"ConfigMap", &raw)).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c1", "labels": {"app": "web"}}, "data": {"a": "1"}, "binaryData": {"b": "aGkh"}})
        );
        assert_eq!(decode(b"k8s\0\x0a").unwrap_err().code, 400);
        assert_eq!(
            decode(&body(b"example.com/v1", b"Widget", &[]))
                .unwrap_err()
                .code,
            415,
            "kinds without a protobuf form are refused, not half-decoded"
        );
    }

    /// `kubectl create deployment web --image=nginx --replicas=3 --port=8080 -- sleep 3600`,
    /// with env, resources and a rolling-update strategy added, and an unknown field.
    #[test]
    fn decodes_deployment() {
        let port = [
            field(1, b""),
            int(2, 0),
            int(3, 8080),
            field(4, b""),
            field(5, b""),
        ];
        let limits = entry(1, b"cpu", &field(1, b"500m"));
        let container = [
            field(1, b"nginx"),
            field(2, b"nginx"),
            field(3, b"sleep"),
            field(3, b"3600"),
            field(5, b""),
            field(6, &port.concat()),
            field(7, &[field(1, b"A"), field(2, b"1")].concat()),
            field(8, &limits),
            field(13, b""),
            field(14, b""),
            int(16, 0),
            int(17, 0),
            int(18, 0),
            field(20, b""),
            int(99, 7),
            field(98, b"future"),
        ];
        let pod = [
            field(2, &container.concat()),
            field(3, b""),
            field(6, b""),
            field(8, b""),
            int(11, 0),
        ];
        let template = [field(1, &meta(b"", b"web")), field(2, &pod.concat())].concat();
        let max_unavailable = [int(1, 0), int(2, 0), field(3, b"")].concat();
        let max_surge = [int(1, 1), int(2, 0), field(3, b"25%")].concat();
        let strategy = [
            field(1, b"RollingUpdate"),
            field(
                2,
                &[field(1, &max_unavailable), field(2, &max_surge)].concat(),
            ),
        ];
        let spec = [
            int(1, 3),
            field(2, &entry(1, b"app", b"web")),
            field(3, &template),
            field(4, &strategy.concat()),
            int(5, 0),
            int(6, 0),
            int(7, 0),
        ];
        let raw = [
            field(1, &meta(b"web", b"web")),
            field(2, &spec.concat()),
            field(3, b""),
        ];
        let v = decode(&body(b"apps/v1", b"Deployment", &raw.concat())).unwrap();
        let labels = json!({"app": "web"});
        let container = json!({"name": "nginx", "image": "nginx", "command": ["sleep", "3600"],
            "ports": [{"containerPort": 8080}], "env": [{"name": "A", "value": "1"}],
            "resources": {"limits": {"cpu": "500m"}}});
        assert_eq!(
            v,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "creationTimestamp": null, "labels": labels},
            "spec": {"replicas": 3, "revisionHistoryLimit": 0,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"creationTimestamp": null, "labels": labels},
                    "spec": {"containers": [container]}},
                "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}}},
            "status": {}})
        );
    }

    /// `kubectl create service nodeport web --tcp=80:8080` plus a named target port.
    #[test]
    fn decodes_service() {
        let target = |ty: i64, n: i64, s: &[u8]| [int(1, ty), int(2, n), field(3, s)].concat();
        let p1 = [
            field(1, b"80-8080"),
            field(2, b"TCP"),
            int(3, 80),
            field(4, &target(0, 8080, b"")),
            int(5, 0),
        ];
        let p2 = [
            field(1, b"https"),
            field(2, b"TCP"),
            int(3, 443),
            field(4, &target(1, 0, b"https")),
            int(5, 30443),
        ];
        let spec = [
            field(1, &p1.concat()),
            field(1, &p2.concat()),
            entry(2, b"app", b"web"),
            field(3, b""),
            field(4, b"NodePort"),
            field(5, b"10.0.0.9"),
            field(7, b""),
            field(10, b""),
            int(12, 0),
            int(13, 0),
            field(14, &field(1, &int(1, 600))),
        ];
        let raw = [
            field(1, &meta(b"web", b"web")),
            field(2, &spec.concat()),
            field(3, &field(1, b"")),
        ];
        let v = decode(&body(b"v1", b"Service", &raw.concat())).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "creationTimestamp": null, "labels": {"app": "web"}},
            "spec": {"ports": [
                    {"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080},
                    {"name": "https", "protocol": "TCP", "port": 443, "targetPort": "https",
                     "nodePort": 30443}],
                "selector": {"app": "web"}, "type": "NodePort", "externalIPs": ["10.0.0.9"],
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}}},
            "status": {"loadBalancer": {}}})
        );
    }

    /// A body of JSONSchemaProps nested far deeper than any CRD is refused, not a stack overflow.
    #[test]
    fn refuses_bodies_nested_too_deeply() {
        // JSONSchemaProps.not (field 28) holds another JSONSchemaProps.
        let mut props = Vec::new();
        for _ in 0..1_000 {
            props = field(28, &props);
        }
        let validation = field(1, &props);
        let version = [field(1, b"v1"), field(4, &validation)].concat();
        let spec = field(7, &version);
        let e = decode(&body(
            b"apiextensions.k8s.io/v1",
            b"CustomResourceDefinition",
            &field(2, &spec),
        ))
        .unwrap_err();
        assert_eq!(
            (e.code, e.message.contains("nested too deeply")),
            (400, true),
            "{}",
            e.message
        );
    }

    #[test]
    fn keeps_negative_ints_and_set_zeroes() {
        let spec = [int(1, 0), int(9, -1)].concat();
        let v = decode(&body(b"apps/v1", b"Deployment", &field(2, &spec))).unwrap();
        assert_eq!(
            v["spec"],
            json!({"replicas": 0, "progressDeadlineSeconds": -1})
        );
    }

    /// Kubernetes' own round-trip fixtures (`k8s.io/api/testdata/HEAD`: every kind with every
    /// field set, as protobuf and as JSON), when `WASMCTRL_KUBE_API_TESTDATA` names such
    /// directories (`:`-separated): each `.pb` decodes to its `.json`, and the JSON encodes
    /// back to bytes that decode to it again. Kubernetes' sources are not part of this
    /// repository, so `make test` passes over it; the field table is checked against them
    /// when it is regenerated.
    #[test]
    fn kubes_fixtures_decode_to_their_json_and_back() {
        let Ok(dirs) = std::env::var("WASMCTRL_KUBE_API_TESTDATA") else {
            eprintln!("WASMCTRL_KUBE_API_TESTDATA unset: kube's fixtures not checked");
            return;
        };
        let (mut checked, mut identical, mut failures) = (0, 0, Vec::new());
        for dir in dirs.split(':') {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|e| e != "pb") {
                    continue;
                }
                let pb = std::fs::read(&path).unwrap();
                let expected: Value =
                    serde_json::from_slice(&std::fs::read(path.with_extension("json")).unwrap())
                        .unwrap();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                let decoded = match decode(&pb) {
                    Ok(v) => v,
                    Err(e) if e.code == 415 => continue,
                    Err(e) => {
                        failures.push(format!("{name}: {}", e.message));
                        continue;
                    }
                };
                checked += 1;
                if decoded != expected {
                    failures.push(format!("{name}: decodes to\n{decoded}\nnot\n{expected}"));
                    continue;
                }
                let encoded = encode(&expected).unwrap();
                identical += usize::from(encoded == pb);
                if encoded != pb {
                    eprintln!("{name}: re-encoded otherwise (same JSON)");
                }
                if decode(&encoded).unwrap() != expected {
                    failures.push(format!("{name}: does not encode back"));
                }
            }
        }
        eprintln!("{checked} fixtures checked, {identical} re-encoded byte for byte");
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
        assert!(checked > 0);
    }
}
