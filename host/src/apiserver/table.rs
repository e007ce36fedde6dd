//! `meta.k8s.io/v1` Table responses (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`),
//! which kubectl asks for when it prints human-readable output. As kube-apiserver does: built-in
//! kinds get Name, their columns, Age; a CRD with `additionalPrinterColumns` gets Name and exactly
//! those (its own Age column, if it wants one), one without gets Name and Age. `date` cells are
//! shown as ages (`5m`), not timestamps. Each row carries the object's metadata.

use serde_json::{Value, json};

use super::registry::Resource;

fn column(name: &str, ty: &str, format: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": 0})
}

/// Whether the server adds its own Age column: always for built-in kinds, for a CRD only when it
/// declares no printer columns of its own.
fn adds_age(r: &Resource) -> bool {
    !r.custom || r.columns.is_empty()
}

/// Column definitions of a resource.
pub fn columns(r: &Resource) -> Vec<Value> {
    let mut cols = vec![column("Name", "string", "name")];
    for (name, ty, _) in &r.columns {
        let ty = if ty.is_empty() { "string" } else { ty };
        cols.push(column(name, ty, ""));
    }
    if adds_age(r) {
        cols.push(column("Age", "date", ""));
    }
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
        120..600 if s % 60 == 0 => format!("{}m", s / 60),
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
    for (_, ty, path) in &r.columns {
        let cell = json_path(obj, path).cloned().unwrap_or(Value::Null);
        cells.push(match (ty.as_str(), cell.as_str()) {
            ("date", Some(ts)) => json!(age(ts)),
            _ => cell,
        });
    }
    if adds_age(r) {
        let ts = obj
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .unwrap_or("");
        cells.push(json!(age(ts)));
    }
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

    fn resource(custom: bool, columns: &[(&str, &str, &str)]) -> Resource {
        Resource {
            group: "example.com".into(),
            versions: vec!["v1".into()],
            plural: "things".into(),
            singular: "thing".into(),
            kind: "Thing".into(),
            list_kind: "ThingList".into(),
            namespaced: true,
            short_names: vec![],
            categories: vec![],
            status: false,
            custom,
            columns: columns
                .iter()
                .map(|(n, t, p)| (n.to_string(), t.to_string(), p.to_string()))
                .collect(),
            schemas: Default::default(),
            create_only: false,
        }
    }

    fn names(r: &Resource) -> Vec<String> {
        columns(r)
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn crd_printer_columns_replace_the_default_age_and_dates_read_as_ages() {
        let old = (chrono::Utc::now() - chrono::Duration::minutes(20)).to_rfc3339();
        let obj = json!({"metadata": {"name": "a", "creationTimestamp": old}, "spec": {"n": 3}});
        let crd = resource(
            true,
            &[
                ("N", "integer", ".spec.n"),
                ("Age", "date", ".metadata.creationTimestamp"),
            ],
        );
        assert_eq!(names(&crd), ["Name", "N", "Age"]);
        assert_eq!(row(&crd, &obj)["cells"], json!(["a", 3, "20m"]));
        assert_eq!(names(&resource(true, &[])), ["Name", "Age"]);
        let builtin = resource(false, &[("N", "integer", ".spec.n")]);
        assert_eq!(names(&builtin), ["Name", "N", "Age"]);
        assert_eq!(row(&builtin, &obj)["cells"], json!(["a", 3, "20m"]));
    }
}
