//! Field sets and `metadata.managedFields`: which fields an object sets (in the FieldsV1
//! path spelling `f:spec`, `k:{"name":"web"}`, `v:"x"`, `.`), reading and writing FieldsV1
//! trees, and getting or removing the value at a path. Used by [`super::apply`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::patch::{is_set_list, merge_key};

/// A FieldsV1 path.
pub(crate) type Path = Vec<String>;

/// Which part of an object a write manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The main resource; `status` excluded when the kind has a status subresource.
    Main {
        /// Kind has a status subresource.
        status_sub: bool,
    },
    /// The `status` subresource.
    Status,
    /// Another subresource that writes one field of the object (a Pod's `ephemeralcontainers`
    /// its `spec.ephemeralContainers`, a CSR's `approval` its `status.conditions`): its name
    /// and the field's path.
    Part(&'static str, &'static [&'static str]),
}

impl Scope {
    /// `subresource` of the managedFields entry.
    pub(crate) fn subresource(self) -> Option<&'static str> {
        match self {
            Scope::Status => Some("status"),
            Scope::Part(name, _) => Some(name),
            Scope::Main { .. } => None,
        }
    }
}

/// Metadata fields that field sets track.
pub(crate) const META_FIELDS: &[&str] = &["labels", "annotations", "finalizers", "ownerReferences"];

/// The fields an object sets, with their values (markers `.` carry `null`).
pub(crate) fn field_set(obj: &Value, custom: bool, scope: Scope) -> BTreeMap<Path, Value> {
    let mut out = BTreeMap::new();
    let Some(m) = obj.as_object() else { return out };
    if let Scope::Part(_, part) = scope {
        let prefix: Path = part.iter().map(|k| format!("f:{k}")).collect();
        let mut whole = field_set(obj, custom, Scope::Main { status_sub: false });
        whole.retain(|path, _| path.starts_with(&prefix));
        return whole;
    }
    for (k, v) in m {
        let take = match (k.as_str(), scope) {
            ("apiVersion" | "kind", _) => false,
            ("status", Scope::Status) => true,
            (_, Scope::Status | Scope::Part(..)) => false,
            ("status", Scope::Main { status_sub }) => !status_sub,
            _ => true,
        };
        if !take {
            continue;
        }
        let mut path = vec![format!("f:{k}")];
        if k == "metadata" {
            if let Some(mm) = v.as_object() {
                for (mk, mv) in mm
                    .iter()
                    .filter(|(mk, _)| META_FIELDS.contains(&mk.as_str()))
                {
                    path.push(format!("f:{mk}"));
                    walk(mv, &mut path, Some(mk), false, &mut out);
                    path.pop();
                }
            }
        } else {
            walk(v, &mut path, Some(k), custom, &mut out);
        }
    }
    out
}

/// Adds the paths under `v` to `out`.
pub(crate) fn walk(
    v: &Value,
    path: &mut Path,
    field: Option<&str>,
    custom: bool,
    out: &mut BTreeMap<Path, Value>,
) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                path.push(format!("f:{k}"));
                walk(c, path, Some(k), custom, out);
                path.pop();
            }
        }
        Value::Array(items) if !custom && field.is_some_and(is_set_list) => {
            for i in items {
                path.push(format!("v:{i}"));
                out.insert(path.clone(), i.clone());
                path.pop();
            }
        }
        Value::Array(items)
            if !custom
                && field
                    .and_then(|f| merge_key(f, items))
                    .is_some_and(|key| items.iter().all(|i| i.get(key).is_some())) =>
        {
            let key = field.and_then(|f| merge_key(f, items)).unwrap_or("name");
            for i in items {
                path.push(format!("k:{}", json!({ key: i[key] })));
                path.push(".".into());
                out.insert(path.clone(), Value::Null);
                path.pop();
                walk(i, path, None, custom, out);
                path.pop();
            }
        }
        _ => {
            out.insert(path.clone(), v.clone());
        }
    }
}

/// The value at a path.
pub(crate) fn get_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for el in path {
        if el == "." {
            return Some(cur);
        } else if let Some(f) = el.strip_prefix("f:") {
            cur = cur.get(f)?;
        } else if let Some(k) = el.strip_prefix("k:") {
            let kv: Value = serde_json::from_str(k).ok()?;
            let kv = kv.as_object()?;
            cur = cur
                .as_array()?
                .iter()
                .find(|i| kv.iter().all(|(a, b)| i.get(a) == Some(b)))?;
        } else if let Some(v) = el.strip_prefix("v:") {
            let vv: Value = serde_json::from_str(v).ok()?;
            cur = cur.as_array()?.iter().find(|i| **i == vv)?;
        } else {
            return None;
        }
    }
    Some(cur)
}

/// Removes the field, list item or set value at a path.
pub(crate) fn remove_at(obj: &mut Value, path: &[String]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    if last == "." {
        // Remove the list item itself.
        if let Some((item_el, list_path)) = parent_path.split_last() {
            let Some(k) = item_el.strip_prefix("k:") else {
                return;
            };
            let Ok(Value::Object(kv)) = serde_json::from_str::<Value>(k) else {
                return;
            };
            if let Some(Value::Array(list)) = get_mut_at(obj, list_path) {
                list.retain(|i| !kv.iter().all(|(a, b)| i.get(a) == Some(b)));
            }
        }
        return;
    }
    let Some(parent) = get_mut_at(obj, parent_path) else {
        return;
    };
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = parent.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(v) = last.strip_prefix("v:")
        && let (Ok(vv), Some(list)) = (serde_json::from_str::<Value>(v), parent.as_array_mut())
    {
        list.retain(|i| *i != vv);
    }
}

/// The value at a path, mutably.
pub(crate) fn get_mut_at<'a>(obj: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = obj;
    for el in path {
        if let Some(f) = el.strip_prefix("f:") {
            cur = cur.get_mut(f)?;
        } else if let Some(k) = el.strip_prefix("k:") {
            let kv: Value = serde_json::from_str(k).ok()?;
            let kv = kv.as_object()?.clone();
            cur = cur
                .as_array_mut()?
                .iter_mut()
                .find(|i| kv.iter().all(|(a, b)| i.get(a) == Some(b)))?;
        } else {
            return None;
        }
    }
    Some(cur)
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) manager: String,
    pub(crate) operation: String,
    pub(crate) api_version: String,
    pub(crate) time: String,
    pub(crate) subresource: Option<String>,
    pub(crate) set: BTreeSet<Path>,
}

/// A set of paths as a FieldsV1 tree.
pub(crate) fn to_fields_v1(set: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut cur = &mut root;
        for el in p {
            let next = cur
                .entry(el.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(m) = next else { break };
            cur = m;
        }
    }
    Value::Object(root)
}

/// A FieldsV1 tree as a set of paths.
pub(crate) fn from_fields_v1(v: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
    if let Some(m) = v.as_object() {
        for (k, c) in m {
            path.push(k.clone());
            if c.as_object().is_some_and(|cm| cm.is_empty()) {
                out.insert(path.clone());
            } else {
                from_fields_v1(c, path, out);
            }
            path.pop();
        }
    }
}

/// The managedFields entries of an object (malformed entries skipped).
pub(crate) fn entries(obj: &Value) -> Vec<Entry> {
    let Some(list) = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return vec![];
    };
    list.iter()
        .filter_map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).map(String::from);
            let mut set = BTreeSet::new();
            from_fields_v1(
                e.get("fieldsV1").unwrap_or(&Value::Null),
                &mut vec![],
                &mut set,
            );
            Some(Entry {
                manager: s("manager")?,
                operation: s("operation").unwrap_or_else(|| "Update".into()),
                api_version: s("apiVersion").unwrap_or_default(),
                time: s("time").unwrap_or_default(),
                subresource: s("subresource"),
                set,
            })
        })
        .collect()
}

/// Stores entries back (dropping empty ones).
pub(crate) fn write_entries(obj: &mut Value, list: Vec<Entry>) {
    let out: Vec<Value> = list
        .into_iter()
        .filter(|e| !e.set.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "time": e.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.set),
            });
            if let Some(s) = e.subresource {
                v["subresource"] = json!(s);
            }
            v
        })
        .collect();
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if out.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(out));
        }
    }
}
