//! `meta.k8s.io/v1` Table responses (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`),
//! which kubectl asks for when it prints human-readable output. As kube-apiserver does: built-in
//! kinds get their printer's columns (`super::printers`); a CRD with `additionalPrinterColumns`
//! gets Name and exactly those (its own Age column, if it wants one), one without gets Name and
//! Age, and its `date` cells are shown as ages (`5m`), not timestamps. Each row carries the
//! object's metadata.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::catalog::Resource;
use super::printers;
use super::registry;

fn column(name: &str, ty: &str, priority: u64) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": priority})
}

/// Column definitions of a resource at `version`.
pub fn columns(r: &Resource, version: &str) -> Vec<Value> {
    if !r.custom {
        return (registry::of(r).printer())
            .columns
            .iter()
            .map(|&(n, t, pr)| column(n, t, pr.into()))
            .collect();
    }
    let mut cols = vec![column("Name", "string", 0)];
    let own = r.columns_at(version);
    for c in own {
        let ty = if c.ty.is_empty() { "string" } else { &c.ty };
        cols.push(column(&c.name, ty, c.priority));
    }
    // A CRD without printer columns of its own gets Name and Age.
    if own.is_empty() {
        cols.push(column("Age", "date", 0));
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

/// One row, its cells worked out at `now`.
fn row(r: &Resource, version: &str, obj: &Value, now: DateTime<Utc>) -> Value {
    let cells = if r.custom {
        let mut cells = vec![obj["metadata"]["name"].clone()];
        let own = r.columns_at(version);
        for c in own {
            let cell = json_path(obj, &c.json_path).cloned().unwrap_or(Value::Null);
            cells.push(match (c.ty.as_str(), cell.as_str()) {
                ("date", Some(ts)) => json!(printers::since(ts, now)),
                _ => cell,
            });
        }
        if own.is_empty() {
            let ts = obj["metadata"]["creationTimestamp"].as_str().unwrap_or("");
            cells.push(json!(printers::since(ts, now)));
        }
        cells
    } else {
        (registry::of(r).printer().cells)(obj, now)
    };
    json!({
        "cells": cells,
        "object": {
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        },
    })
}

/// A Table of `objs` (at `version`).
pub fn table<'a>(
    r: &Resource,
    version: &str,
    objs: impl Iterator<Item = &'a Value>,
    metadata: Value,
) -> Value {
    let now = Utc::now();
    let rows: Vec<Value> = objs.map(|o| row(r, version, o, now)).collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
        "columnDefinitions": columns(r, version), "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::super::catalog::PrinterColumn;
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
            columns: [(
                "v1".to_string(),
                (columns.iter())
                    .map(|(n, t, p)| PrinterColumn {
                        name: n.to_string(),
                        ty: t.to_string(),
                        json_path: p.to_string(),
                        priority: 0,
                    })
                    .collect(),
            )]
            .into(),
            selectable: vec![],
            schemas: Default::default(),
            create_only: false,
            verbs: vec![],
            subresources: vec![],
            openapi: Default::default(),
            conversion: None,
        }
    }

    fn names(r: &Resource) -> Vec<String> {
        columns(r, "v1")
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn crd_printer_columns_replace_the_default_age_and_dates_read_as_ages() {
        let now = Utc::now();
        let old = (now - chrono::Duration::minutes(20)).to_rfc3339();
        let obj = json!({"metadata": {"name": "a", "creationTimestamp": old}, "spec": {"n": 3}});
        let crd = resource(
            true,
            &[
                ("N", "integer", ".spec.n"),
                ("Age", "date", ".metadata.creationTimestamp"),
            ],
        );
        assert_eq!(names(&crd), ["Name", "N", "Age"]);
        assert_eq!(row(&crd, "v1", &obj, now)["cells"], json!(["a", 3, "20m"]));
        assert_eq!(names(&resource(true, &[])), ["Name", "Age"]);
        assert_eq!(
            row(&resource(true, &[]), "v1", &obj, now)["cells"],
            json!(["a", "20m"])
        );
    }

    #[test]
    fn a_crd_column_s_priority_is_kept_so_kubectl_shows_it_only_wide() {
        let crd = json!({"spec": {"group": "example.com", "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true, "additionalPrinterColumns": [
                {"name": "N", "type": "integer", "jsonPath": ".spec.n"},
                {"name": "Detail", "type": "string", "jsonPath": ".spec.d", "priority": 1}]}]}});
        let r = super::super::catalog::crd_resource(&crd).unwrap();
        let priorities: Vec<_> = columns(&r, "v1")
            .iter()
            .map(|c| c["priority"].clone())
            .collect();
        assert_eq!(priorities, [json!(0), json!(0), json!(1)]);
    }

    #[test]
    fn built_in_kinds_print_as_kube_prints_them() {
        let mut pods = resource(false, &[]);
        (pods.group, pods.kind) = (String::new(), "Pod".into());
        assert_eq!(
            names(&pods),
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        let wide: Vec<_> = columns(&pods, "v1")
            .iter()
            .map(|c| c["priority"].clone())
            .collect();
        assert_eq!(
            wide,
            json!([0, 0, 0, 0, 0, 1, 1, 1, 1])
                .as_array()
                .unwrap()
                .clone()
        );
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}});
        assert_eq!(row(&pods, "v1", &pod, Utc::now())["cells"][2], "Pending");
        // A kind without a printer of its own: Name and Created At.
        assert_eq!(names(&resource(false, &[])), ["Name", "Created At"]);
    }
}
