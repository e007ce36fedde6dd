//! Decoding `application/vnd.kubernetes.protobuf` request bodies for the kinds kubectl's typed
//! commands send that way: Namespace, ConfigMap, Secret (`kubectl create namespace|configmap|
//! secret`), Service (`kubectl create service`, `kubectl expose`) and apps/v1 Deployment
//! (`kubectl create deployment`), the access-control kinds (`kubectl create serviceaccount|
//! token|role|rolebinding|...`, `kubectl auth can-i [--list]`, `kubectl auth whoami`) and a
//! scheduler's Binding. Other kinds get 415. Responses are always JSON (those
//! clients accept it).
//!
//! Written by hand, as field tables: the envelope (`k8s\0` + `runtime.Unknown`) and these
//! messages are small, and k8s-openapi carries no protobuf support. The result is the JSON a
//! JSON client would have sent for the same object, so every later step sees one format.
//! `wire` reads the wire format, `schema` turns a message into JSON by a table, `core` and
//! `apps` hold the tables (field numbers from `generated.proto` of k8s.io/api and
//! k8s.io/apimachinery).

mod access;
mod apps;
mod core;
mod schema;
mod wire;

use serde_json::{Map, Value, json};

use self::schema::Field;
use self::wire::{Wire, bad, fields, string};
use super::status::{ApiError, ApiResult};

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";

/// The table of a kind decoded from protobuf.
fn kind_table(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    Some(match (api_version, kind) {
        ("v1", "Namespace") => core::NAMESPACE,
        ("v1", "ConfigMap") => core::CONFIG_MAP,
        ("v1", "Secret") => core::SECRET,
        ("v1", "Service") => core::SERVICE,
        ("apps/v1", "Deployment") => apps::DEPLOYMENT,
        ("v1", "ServiceAccount") => access::SERVICE_ACCOUNT,
        ("authentication.k8s.io/v1", "TokenRequest") => access::TOKEN_REQUEST,
        ("authentication.k8s.io/v1", "TokenReview") => access::TOKEN_REVIEW,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            access::SELF_SUBJECT_ACCESS_REVIEW
        }
        ("authorization.k8s.io/v1", "SubjectAccessReview" | "LocalSubjectAccessReview") => {
            access::SUBJECT_ACCESS_REVIEW
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => access::SELF_SUBJECT_RULES_REVIEW,
        ("authentication.k8s.io/v1", "SelfSubjectReview") => access::SELF_SUBJECT_REVIEW,
        ("v1", "Binding") => access::BINDING_TO_NODE,
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => access::ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => access::BINDING,
        _ => return None,
    })
}

/// Decodes a protobuf body into the JSON object it encodes; kinds without a table get 415
/// like a server that does not speak protobuf for them.
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
    let table = kind_table(&api_version, &kind).ok_or_else(|| {
        ApiError::unsupported_media_type(MEDIA_TYPE, &["application/json", "application/yaml"])
    })?;
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    if let Value::Object(m) = schema::message(raw, table)? {
        obj.extend(m);
    }
    Ok(Value::Object(obj))
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
            decode(&body(b"v1", b"Pod", &[])).unwrap_err().code,
            415,
            "kinds without a table are refused, not half-decoded"
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

    #[test]
    fn keeps_negative_ints_and_set_zeroes() {
        let spec = [int(1, 0), int(9, -1)].concat();
        let v = decode(&body(b"apps/v1", b"Deployment", &field(2, &spec))).unwrap();
        assert_eq!(
            v["spec"],
            json!({"replicas": 0, "progressDeadlineSeconds": -1})
        );
    }
}
