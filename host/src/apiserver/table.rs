//! `meta.k8s.io/v1` Table responses (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`),
//! which kubectl asks for when it prints human-readable output: Name, the kind's printer
//! columns (a CRD's `additionalPrinterColumns`), Age; each row carries the object's metadata.

use serde_json::{Value, json};

use super::registry::Resource;

fn column(name: &str, ty: &str, format: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": 0})
}

/// Column definitions of a resource.
pub fn columns(r: &Resource) -> Vec<Value> {
    let mut cols = vec![column("Name", "string", "name")];
    for (name, ty, _) in &r.columns {
        let ty = if ty.is_empty() { "string" } else { ty };
        cols.push(column(name, ty, ""));
    }
    cols.push(column("Age", "string", ""));
    cols
}

/// A simple JSONPath (`.a.b`, `.a[0].b`, `.a[?(@.k=="v")].b`) evaluated on `obj`.
fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut rest = path.trim_start_matches('.');
    while !rest.is_empty() {
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let (field, tail) = rest.split_at(end);
        if !field.is_empty() {
            cur = cur.get(field)?;
        }
        rest = tail;
        if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']')?;
            let inner = &r[..close];
            if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, v) = filter.split_once("==")?;
                let v = v.trim().trim_matches('"').trim_matches('\'');
                cur = cur
                    .as_array()?
                    .iter()
                    .find(|i| i.get(k.trim()).and_then(Value::as_str) == Some(v))?;
            } else {
                cur = cur.get(inner.parse::<usize>().ok()?)?;
            }
            rest = &r[close + 1..];
        }
        rest = rest.trim_start_matches('.');
    }
    Some(cur)
}

/// kubectl's short duration style (`45s`, `3m12s`, `5h`, `2d`).
fn age(ts: &str) -> String {
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(ts) else {
        return "<unknown>".into();
    };
    let s = (chrono::Utc::now() - t.with_timezone(&chrono::Utc))
        .num_seconds()
        .max(0);
    match s {
        0..120 => format!("{s}s"),
        120..600 => format!("{}m{}s", s / 60, s % 60),
        600..10800 => format!("{}m", s / 60),
        10800..172800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// One row.
pub fn row(r: &Resource, obj: &Value) -> Value {
    let mut cells = vec![
        obj.pointer("/metadata/name")
            .cloned()
            .unwrap_or(Value::Null),
    ];
    for (_, _, path) in &r.columns {
        cells.push(json_path(obj, path).cloned().unwrap_or(Value::Null));
    }
    let ts = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .unwrap_or("");
    cells.push(json!(age(ts)));
    json!({
        "cells": cells,
        "object": {
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        },
    })
}

/// A Table of `objs`.
pub fn table<'a>(r: &Resource, objs: impl Iterator<Item = &'a Value>, metadata: Value) -> Value {
    let rows: Vec<Value> = objs.map(|o| row(r, o)).collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
        "columnDefinitions": columns(r), "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths() {
        let o = json!({"spec": {"a": [1, 2]}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(json_path(&o, ".spec.a[1]"), Some(&json!(2)));
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(&json!("True"))
        );
        assert_eq!(json_path(&o, ".nope"), None);
    }
}
