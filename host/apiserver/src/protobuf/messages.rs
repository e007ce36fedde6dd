//! The protobuf messages of every built-in kind (their fields, numbers and types), parsed once from `data/protobuf.txt`
//! (generated from the Go types' `protobuf` and `json` tags; its README describes the format).

use std::collections::HashMap;
use std::sync::LazyLock;

const DATA: &str = include_str!("../../data/protobuf.txt");

/// Index of a message in [`Messages::messages`].
pub(super) type MsgId = usize;

/// What one value on the wire is, and how it reads as JSON.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Ty {
    Str,
    Bool,
    Int32,
    Int64,
    Uint32,
    Uint64,
    Double,
    Float,
    Bytes,
    Msg(MsgId),
    /// metav1.Time: `{seconds, nanos}`, RFC 3339 to the second in JSON.
    Time,
    /// metav1.MicroTime: as Time, to the microsecond.
    MicroTime,
    /// metav1.Duration: `{duration}` nanoseconds, Go's duration string in JSON.
    Duration,
    /// resource.Quantity: `{string}`, the string in JSON.
    Quantity,
    /// intstr.IntOrString: `{type, intVal, strVal}`.
    IntOrString,
    /// `{raw}` bytes that are JSON: RawExtension, FieldsV1, apiextensions JSON.
    Raw,
    /// apiextensions JSONSchemaPropsOrArray: `{schema, jSONSchemas}`, an object or an array.
    PropsOrArray,
    /// apiextensions JSONSchemaPropsOrBool: `{allows, schema}`, a boolean or an object.
    PropsOrBool,
    /// apiextensions JSONSchemaPropsOrStringArray: `{schema, property}`, an object or strings.
    PropsOrStrings,
    /// A named Go slice: a message of `repeated <ty> items = 1`, an array in JSON.
    Items(Box<Ty>),
    /// `map<key, value>`: repeated entries `{key = 1, value = 2}`, an object in JSON.
    Map(Box<Ty>, Box<Ty>),
}

/// One field of a message.
#[derive(Debug)]
pub(super) struct Field {
    pub number: u64,
    /// The JSON name; `None` for fields JSON does not carry (`runtime.Unknown`'s).
    pub json: Option<String>,
    /// JSON leaves the zero value out.
    pub omitempty: bool,
    /// A Go pointer: written only when set, so a zero on the wire was meant.
    pub ptr: bool,
    pub repeated: bool,
    /// An embedded struct whose fields JSON lists as the parent's.
    pub inline: bool,
    pub ty: Ty,
}

/// One message: its fields in declaration order (the order Go's JSON writes them in).
#[derive(Debug)]
pub(super) struct Message {
    pub fields: Vec<Field>,
}

impl Message {
    /// The index of field `number` in [`Message::fields`].
    pub fn index(&self, number: u64) -> Option<usize> {
        self.fields.iter().position(|f| f.number == number)
    }
}

/// Every message and the kinds encoded as them.
pub(super) struct Messages {
    pub messages: Vec<Message>,
    /// apiVersion → kind → message: looked up by `&str` on every object read or written.
    kinds: HashMap<String, HashMap<String, MsgId>>,
    /// apiextensions JSONSchemaProps, which the `Props*` types hold.
    pub schema_props: MsgId,
}

impl Messages {
    /// The message of a kind (`apps/v1`, `Deployment`).
    pub fn kind(&self, api_version: &str, kind: &str) -> Option<MsgId> {
        self.kinds.get(api_version)?.get(kind).copied()
    }
}

pub(super) static MESSAGES: LazyLock<Messages> = LazyLock::new(|| parse(DATA));

fn parse(data: &str) -> Messages {
    let lines: Vec<&str> = data
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    // Names first, so that fields can refer to messages declared after them.
    let ids: HashMap<&str, MsgId> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("message "))
        .enumerate()
        .map(|(i, name)| (name, i))
        .collect();
    let id = |name: &str| -> MsgId {
        *ids.get(name)
            .unwrap_or_else(|| panic!("protobuf.txt: no message {name}"))
    };
    let mut messages: Vec<Message> = Vec::with_capacity(ids.len());
    let mut kinds: HashMap<String, HashMap<String, MsgId>> = HashMap::new();
    for line in lines {
        if let Some(rest) = line.strip_prefix("kind ") {
            let mut w = rest.split(' ');
            let (Some(v), Some(k), Some(m)) = (w.next(), w.next(), w.next()) else {
                panic!("protobuf.txt: bad kind line {line:?}");
            };
            (kinds.entry(v.to_string()).or_default()).insert(k.to_string(), id(m));
        } else if line.starts_with("message ") {
            messages.push(Message { fields: Vec::new() });
        } else {
            let w: Vec<&str> = line.split(' ').collect();
            let [number, json, flags, ty] = w[..] else {
                panic!("protobuf.txt: bad field line {line:?}");
            };
            let flags: Vec<&str> = flags.split(',').collect();
            let message = messages
                .last_mut()
                .expect("protobuf.txt: a field before any message");
            message.fields.push(Field {
                number: number.parse().expect("protobuf.txt: a field number"),
                json: (json != "-").then(|| json.to_string()),
                omitempty: flags.contains(&"omitempty"),
                ptr: flags.contains(&"ptr"),
                repeated: flags.contains(&"rep"),
                inline: flags.contains(&"inline"),
                ty: parse_ty(ty, &id),
            });
        }
    }
    Messages {
        messages,
        kinds,
        schema_props: id("apiextensions/v1.JSONSchemaProps"),
    }
}

fn parse_ty(s: &str, id: &impl Fn(&str) -> MsgId) -> Ty {
    if let Some(rest) = s.strip_prefix("map:") {
        let (k, v) = rest
            .split_once(':')
            .expect("protobuf.txt: map:<key>:<value>");
        return Ty::Map(Box::new(parse_ty(k, id)), Box::new(parse_ty(v, id)));
    }
    if let Some(rest) = s.strip_prefix("items:") {
        return Ty::Items(Box::new(parse_ty(rest, id)));
    }
    match s {
        "string" => Ty::Str,
        "bool" => Ty::Bool,
        "int32" => Ty::Int32,
        "int64" => Ty::Int64,
        "uint32" => Ty::Uint32,
        "uint64" => Ty::Uint64,
        "double" => Ty::Double,
        "float" => Ty::Float,
        "bytes" => Ty::Bytes,
        "time" => Ty::Time,
        "microtime" => Ty::MicroTime,
        "duration" => Ty::Duration,
        "quantity" => Ty::Quantity,
        "intorstring" => Ty::IntOrString,
        "raw" => Ty::Raw,
        "propsorarray" => Ty::PropsOrArray,
        "propsorbool" => Ty::PropsOrBool,
        "propsorstrings" => Ty::PropsOrStrings,
        name => Ty::Msg(id(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_kind_has_a_message() {
        let t = &*MESSAGES;
        let deployment = &t.messages[t.kind("apps/v1", "Deployment").unwrap()];
        let spec = &deployment.fields[deployment.index(2).unwrap()];
        assert_eq!(spec.json.as_deref(), Some("spec"));
        let Ty::Msg(spec) = spec.ty else {
            panic!("spec is a message")
        };
        let replicas = &t.messages[spec].fields[t.messages[spec].index(1).unwrap()];
        assert!(replicas.ptr && replicas.ty == Ty::Int32);
        let served: Vec<serde_json::Value> =
            serde_json::from_str(include_str!("../../data/builtin-resources.json")).unwrap();
        for r in served {
            let kind = r["kind"].as_str().unwrap();
            for v in r["versions"].as_array().unwrap() {
                let group = r["group"].as_str().unwrap();
                let v = v.as_str().unwrap();
                let api_version = if group.is_empty() {
                    v.to_string()
                } else {
                    format!("{group}/{v}")
                };
                let lists = r["verbs"].as_array().unwrap().contains(&"list".into());
                assert!(t.kind(&api_version, kind).is_some(), "{api_version} {kind}");
                assert!(
                    !lists || t.kind(&api_version, &format!("{kind}List")).is_some(),
                    "{api_version} {kind}List"
                );
            }
        }
    }
}
