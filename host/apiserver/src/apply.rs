//! Server-side apply and `Update` entries of `metadata.managedFields`.
//!
//! Written by hand (no Rust crate implements structured-merge-diff). Field sets come from
//! [`super::fields`]: associative lists of the built-in kinds merge by their keys, lists of
//! custom resources are atomic. Apply conflicts with any other manager owning a field whose
//! value would change; `force` takes the field over; fields the applier owned alone and stopped
//! sending are removed. Non-apply writes record an `Update` entry for the fields they changed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

pub use super::fields::Scope;
use super::fields::{
    Entry, META_FIELDS, Path, entries, field_set, get_at, remove_at, write_entries,
};
use super::patch::{is_set_list, merge_key};
use super::status::{ApiError, ApiResult};
/// Records an `Update` entry for `manager` covering the fields `new` changed relative to `old`
/// and takes those fields away from other managers.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    custom: bool,
    scope: Scope,
    now: &str,
) {
    let before = old.map(|o| field_set(o, custom, scope)).unwrap_or_default();
    let after = field_set(new, custom, scope);
    let changed: BTreeSet<Path> = after
        .iter()
        .filter(|(p, v)| before.get(*p) != Some(*v))
        .map(|(p, _)| p.clone())
        .collect();
    let removed: BTreeSet<Path> = before
        .keys()
        .filter(|p| !after.contains_key(*p))
        .cloned()
        .collect();
    if changed.is_empty() && removed.is_empty() {
        return;
    }
    let mut list = entries(new);
    for e in &mut list {
        e.set
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    let sub = scope.subresource().map(String::from);
    let pos = list
        .iter()
        .position(|e| e.manager == manager && e.operation == "Update" && e.subresource == sub);
    let e = match pos {
        Some(i) => &mut list[i],
        None => {
            list.push(Entry {
                manager: manager.into(),
                operation: "Update".into(),
                api_version: api_version.into(),
                time: now.into(),
                subresource: sub,
                set: BTreeSet::new(),
            });
            let n = list.len() - 1;
            &mut list[n]
        }
    };
    e.set.extend(changed);
    e.time = now.into();
    e.api_version = api_version.into();
    write_entries(new, list);
}

/// What an apply needs to know about the request.
#[derive(Debug, Clone, Copy)]
pub struct ApplyRequest<'a> {
    /// `fieldManager`.
    pub manager: &'a str,
    /// `force=true`.
    pub force: bool,
    /// apiVersion of the request.
    pub api_version: &'a str,
    /// Custom resource (atomic lists).
    pub custom: bool,
    /// Main resource or status.
    pub scope: Scope,
    /// Timestamp for the entry.
    pub now: &'a str,
}

fn render_path(p: &[String]) -> String {
    let mut s = String::new();
    for el in p {
        if let Some(f) = el.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = el.strip_prefix("k:") {
            s.push_str(&format!("[{k}]"));
        } else if let Some(v) = el.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

/// Server-side apply of `config` onto `live` (the object as stored, already carrying identity
/// metadata). Returns the new object with managedFields updated, or 409 with causes.
pub fn apply(live: &Value, config: &Value, req: ApplyRequest<'_>) -> ApiResult<Value> {
    let applied = field_set(config, req.custom, req.scope);
    let sub = req.scope.subresource().map(String::from);
    let mut list = entries(live);
    let conflicts = conflicts(live, &list, &applied, req, sub.as_deref());
    if !conflicts.is_empty() && !req.force {
        return Err(conflict_error(&list, &conflicts));
    }
    for (i, p) in &conflicts {
        list[*i].set.remove(p);
    }
    let mine =
        |e: &Entry| e.manager == req.manager && e.operation == "Apply" && e.subresource == sub;
    let prev: BTreeSet<Path> = list
        .iter()
        .find(|e| mine(e))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    let others: BTreeSet<Path> = list
        .iter()
        .filter(|e| !mine(e))
        .flat_map(|e| e.set.iter().cloned())
        .collect();
    let mut out = live.clone();
    remove_dropped(&mut out, &prev, &others, &applied);
    merge_config(&mut out, config, req);
    list.retain(|e| !mine(e));
    list.push(Entry {
        manager: req.manager.into(),
        operation: "Apply".into(),
        api_version: req.api_version.into(),
        time: req.now.into(),
        subresource: sub,
        set: applied.into_keys().collect(),
    });
    write_entries(&mut out, list);
    Ok(out)
}

/// The fields applied that another manager owns (of the same subresource) and whose value
/// would change: (index of that manager's entry, path).
fn conflicts(
    live: &Value,
    list: &[Entry],
    applied: &BTreeMap<Path, Value>,
    req: ApplyRequest<'_>,
    sub: Option<&str>,
) -> Vec<(usize, Path)> {
    let mut out = Vec::new();
    for (i, e) in list.iter().enumerate() {
        if (e.manager == req.manager && e.operation == "Apply") || e.subresource.as_deref() != sub {
            continue;
        }
        for (p, v) in applied {
            if p.last().is_some_and(|l| l == ".") || !e.set.contains(p) {
                continue;
            }
            if get_at(live, p) != Some(v) {
                out.push((i, p.clone()));
            }
        }
    }
    out
}

/// The 409 an unforced apply with conflicts gets: one cause per field, and kube's message.
fn conflict_error(list: &[Entry], conflicts: &[(usize, Path)]) -> ApiError {
    let with = |i: usize| {
        format!(
            "conflict with \"{}\" using {}",
            list[i].manager, list[i].api_version
        )
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(i, p)| {
            json!({
                "reason": "FieldManagerConflict",
                "message": with(*i),
                "field": render_path(p),
            })
        })
        .collect();
    let text: Vec<String> = conflicts
        .iter()
        .map(|(i, p)| format!("{}: {}", with(*i), render_path(p)))
        .collect();
    let n = conflicts.len();
    let msg = format!(
        "Apply failed with {n} conflict{}: {}",
        if n == 1 { "" } else { "s" },
        text.join("\n")
    );
    ApiError::new(409, "Conflict", msg).with_causes(causes)
}

/// Removes the fields this manager applied before, stopped sending and no one else owns.
fn remove_dropped(
    out: &mut Value,
    prev: &BTreeSet<Path>,
    others: &BTreeSet<Path>,
    applied: &BTreeMap<Path, Value>,
) {
    // Deepest paths first, so list items go after the fields inside them.
    let mut drop: Vec<&Path> = prev.iter().filter(|p| !applied.contains_key(*p)).collect();
    drop.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in drop {
        let owned_elsewhere = if p.last().is_some_and(|l| l == ".") {
            let item = &p[..p.len() - 1];
            others.iter().any(|o| o.starts_with(item))
                || applied.keys().any(|a| a.starts_with(item))
        } else {
            others.contains(p)
        };
        if !owned_elsewhere {
            remove_at(out, p);
        }
    }
}

fn merge_config(out: &mut Value, config: &Value, req: ApplyRequest<'_>) {
    let Some(cm) = config.as_object() else { return };
    for (k, v) in cm {
        match (k.as_str(), req.scope) {
            ("apiVersion" | "kind", _) => {}
            ("status", Scope::Status) => {
                merge_value(&mut out["status"], v, Some("status"), req.custom)
            }
            (_, Scope::Status | Scope::Part(..)) => {}
            ("status", Scope::Main { status_sub: true }) => {}
            ("metadata", _) => {
                if let Some(mm) = v.as_object() {
                    for (mk, mv) in mm
                        .iter()
                        .filter(|(mk, _)| META_FIELDS.contains(&mk.as_str()))
                    {
                        merge_value(&mut out["metadata"][mk], mv, Some(mk), false);
                    }
                }
            }
            _ => merge_value(&mut out[k], v, Some(k), req.custom),
        }
    }
}

fn merge_value(target: &mut Value, v: &Value, field: Option<&str>, custom: bool) {
    match v {
        Value::Object(m) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            for (k, c) in m {
                merge_value(&mut target[k], c, Some(k), custom);
            }
        }
        Value::Array(items) if !custom => {
            if let Some(key) = field.and_then(|f| merge_key(f, items)) {
                if !target.is_array() {
                    *target = Value::Array(vec![]);
                }
                let Value::Array(list) = target else { return };
                for item in items {
                    match list
                        .iter_mut()
                        .find(|x| x.get(key).is_some() && x.get(key) == item.get(key))
                    {
                        Some(x) => merge_value(x, item, None, custom),
                        None => list.push(item.clone()),
                    }
                }
            } else if field.is_some_and(is_set_list) {
                if !target.is_array() {
                    *target = Value::Array(vec![]);
                }
                let Value::Array(list) = target else { return };
                for i in items {
                    if !list.contains(i) {
                        list.push(i.clone());
                    }
                }
            } else {
                *target = v.clone();
            }
        }
        _ => *target = v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(manager: &'a str, force: bool) -> ApplyRequest<'a> {
        ApplyRequest {
            manager,
            force,
            api_version: "v1",
            custom: false,
            scope: Scope::Main { status_sub: false },
            now: "2026-01-01T00:00:00Z",
        }
    }

    #[test]
    fn conflicts_force_and_removal() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
        let a = apply(
            &live,
            &json!({"data": {"k": "1", "j": "2"}}),
            req("a", false),
        )
        .unwrap();
        assert_eq!(a["data"], json!({"k": "1", "j": "2"}));
        let err = apply(&a, &json!({"data": {"k": "9"}}), req("b", false)).unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(err.details.unwrap()["causes"][0]["field"], ".data.k");
        // Same value: shared ownership, no conflict.
        let b = apply(&a, &json!({"data": {"k": "1"}}), req("b", false)).unwrap();
        let forced = apply(&b, &json!({"data": {"k": "9"}}), req("b", true)).unwrap();
        assert_eq!(forced["data"]["k"], "9");
        // "a" drops j (owned alone) -> removed; k now belongs to b alone.
        let c = apply(&forced, &json!({"data": {}}), req("a", false)).unwrap();
        assert_eq!(c["data"], json!({"k": "9"}));
    }
}
