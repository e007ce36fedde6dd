//! Validation of a pruned custom resource against its structural schema, rule for rule as
//! kube-openapi's schema validator does it and worded as kube-apiserver turns its results into
//! field causes (`kubeOpenAPIResultToFieldErrors`): every violation is collected, with its field
//! path (`spec.items[0].name`) and message (`spec.age in body should be greater than or equal
//! to 0`).
//!
//! Per node: the type (integral floats pass as integers; with a `format`, a non-string value's
//! mismatch is reported against the format, as go-openapi does), string length and pattern
//! (first failure only), numeric bounds (integers against truncated bounds, floats against the
//! exact ones, each printed in its own Go form), item counts, `enum`, then object property
//! counts (which stop the object's checks), properties and `required`.
//!
//! Ratcheting: on updates a value equal to the one stored at the same path is not judged
//! again. Object fields and map values are matched by key; list items are never matched
//! (kube-apiserver matches items of `map` and `set` lists only).

use serde_json::{Map, Value, json};

use super::super::status::Cause;
use super::field::{self, go_float, go_quote};
use super::{Additional, ListType, Schema, cel, format};

/// Every violation of `obj` against the root schema `s`. The root `metadata` belongs to the
/// server, not the schema. `old` is the stored object of an update (ratcheting).
pub fn object(s: &Schema, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    match obj {
        _ if old == Some(obj) => {}
        Value::Object(m) => properties(s, m, old, "", true, &mut out),
        other => check(s, other, old, "", &mut out),
    }
    // CEL rules only on an object of the schema's types, as kube (`hasBlockingErr`).
    if !out.iter().any(|c| c.reason == "FieldValueTypeInvalid") {
        rules(s, obj, old, "", true, &mut out);
    }
    out
}

/// The violations of a lone value (a schema node's `default`) against its node `s`, as kube's
/// `ValidateDefaults` finds them: the schema's keywords at paths below the value (`""` for the
/// value itself, `a.b`, `[0]`), then, only when those hold, the CEL rules of the subtree (at
/// `""`, `.a`, `[0]`: the second list of the pair). List-type uniqueness is left out: kube
/// checks it (`ValidateListSetsAndMaps`) on objects, never on defaults.
pub fn value(s: &Schema, v: &Value) -> (Vec<Cause>, Vec<Cause>) {
    let mut schema_causes = Vec::new();
    check(s, v, None, "", &mut schema_causes);
    schema_causes.retain(|c| c.reason != "FieldValueDuplicate");
    let mut rule_causes = Vec::new();
    if schema_causes.is_empty() {
        rules(s, v, None, "", false, &mut rule_causes);
    }
    (schema_causes, rule_causes)
}

/// The CEL rules of `s` and of the schemas below it, on `v` (`old` its stored value: unchanged
/// values are not judged again, and transition rules see it as `oldSelf`). List items have no
/// stored value (kube correlates only the items of `map` and `set` lists).
fn rules(s: &Schema, v: &Value, old: Option<&Value>, path: &str, root: bool, out: &mut Vec<Cause>) {
    if old == Some(v) {
        return;
    }
    if !s.rules.is_empty() {
        let type_name = s.types.first().map_or("object", |t| t.name());
        cel::check(&s.rules, type_name, v, old, path, out);
    }
    match v {
        Value::Object(m) => {
            for (k, value) in m {
                if root && k == "metadata" {
                    continue;
                }
                let was = old.and_then(|o| o.get(k));
                match (s.properties.get(k), &s.additional) {
                    (Some(p), _) => rules(p, value, was, &join(path, k), false, out),
                    (None, Additional::Schema(a)) => {
                        rules(a, value, was, &join(path, k), false, out)
                    }
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = &s.items {
                for (i, value) in items.iter().enumerate() {
                    rules(item, value, None, &format!("{path}[{i}]"), false, out);
                }
            }
        }
        _ => {}
    }
}

fn check(s: &Schema, v: &Value, old: Option<&Value>, path: &str, out: &mut Vec<Cause>) {
    if old == Some(v) {
        return;
    }
    out.extend(type_error(s, v, path));
    match v {
        Value::String(text) => string(s, text, v, path, out),
        Value::Number(_) => number(s, v, path, out),
        Value::Array(a) => array(s, a, path, out),
        _ => {}
    }
    // A null never matches an enum in go-openapi, even one that lists null.
    if !s.enumeration.is_empty() && (v.is_null() || !s.enumeration.iter().any(|e| same(e, v))) {
        let allowed: Vec<String> = s
            .enumeration
            .iter()
            .map(|e| match e {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect();
        out.push(field::not_supported(path, v, &allowed));
    }
    if let Value::Object(m) = v {
        properties(s, m, old, path, false, out);
    }
}

/// Enum membership: numbers compare by value (`1` matches `1.0`), the rest structurally.
fn same(e: &Value, v: &Value) -> bool {
    match (e, v) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => e == v,
    }
}

fn mismatch(path: &str, want: &str, got: &str) -> Cause {
    let detail = format!("{path} in body must be of type {want}: {}", go_quote(got));
    field::type_invalid(path, &json!(got), &detail)
}

fn type_error(s: &Schema, v: &Value, path: &str) -> Option<Cause> {
    if s.types.is_empty() && s.format.is_empty() {
        return None;
    }
    let want: Vec<&str> = s.types.iter().map(|t| t.name()).collect();
    let want = want.join(",");
    let (got, got_format, whole) = match v {
        Value::Null => {
            return (!s.types.is_empty() && !s.nullable).then(|| mismatch(path, &want, "null"));
        }
        Value::Bool(_) => ("boolean", "", false),
        Value::String(_) => ("string", "", false),
        Value::Number(n) if n.as_i64().is_some() => ("integer", "int64", false),
        Value::Number(n) => ("number", "float64", json_integer(n.as_f64().unwrap_or(0.5))),
        Value::Array(_) => ("array", "", false),
        Value::Object(_) => ("object", "", false),
    };
    let has = |name: &str| want.split(',').any(|w| w == name);
    let float_int = got == "number" && whole && has("integer");
    let int_float = got == "integer" && has("number");
    let fits = has(got) || float_int || int_float;
    if !s.format.is_empty() {
        if let Value::String(text) = v
            && !(has("number") || has("integer"))
        {
            // A string not of its format is a type error of the format.
            return (!format::valid(&s.format, text)).then(|| mismatch(path, &s.format, text));
        }
        if v.is_array() {
            if !(has("number") || has("integer")) {
                return None;
            }
        } else if !(fits || got_format == s.format) {
            return Some(mismatch(path, &s.format, got_format));
        }
    }
    (!fits).then(|| mismatch(path, &want, got))
}

/// go-openapi's `IsFloat64AJSONInteger`: within ±(2^53-1) and integral, or within a relative
/// 1e-9 of the integer below it.
fn json_integer(f: f64) -> bool {
    const MAX: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || f.abs() > MAX {
        return false;
    }
    if f.fract() == 0.0 {
        return true;
    }
    let g = f.trunc();
    f > 0.0 && g > 0.0 && (f - g) / (f + g) < 1e-9
}

fn string(s: &Schema, text: &str, v: &Value, path: &str, out: &mut Vec<Cause>) {
    let len = text.chars().count() as i64;
    if let Some(max) = s.length.1
        && len > max
    {
        out.push(field::too_long(path, max));
    } else if let Some(min) = s.length.0
        && len < min
    {
        let detail = format!("{path} in body should be at least {min} chars long");
        out.push(field::invalid(path, v, &detail));
    } else if let Some(p) = &s.pattern
        && !p.0.is_match(text)
    {
        let detail = format!("{path} in body should match '{}'", p.0.as_str());
        out.push(field::invalid(path, v, &detail));
    }
}

fn number(s: &Schema, v: &Value, path: &str, out: &mut Vec<Cause>) {
    let mut fail = |what: String| {
        out.push(field::invalid(
            path,
            v,
            &format!("{path} in body should be {what}"),
        ))
    };
    let below = |ex: bool| {
        if ex {
            "greater than"
        } else {
            "greater than or equal to"
        }
    };
    let above = |ex: bool| {
        if ex {
            "less than"
        } else {
            "less than or equal to"
        }
    };
    if let Some(i) = v.as_i64() {
        // Go converts the float bounds to int64 (truncating) before comparing integers.
        if let Some(f) = s.multiple_of.map(|f| f as i64).filter(|f| *f > 0)
            && i % f != 0
        {
            fail(format!("a multiple of {f}"));
        }
        if let Some((m, ex)) = s.minimum.map(|(m, ex)| (m as i64, ex))
            && (i < m || (ex && i == m))
        {
            fail(format!("{} {m}", below(ex)));
        }
        if let Some((m, ex)) = s.maximum.map(|(m, ex)| (m as i64, ex))
            && (i > m || (ex && i == m))
        {
            fail(format!("{} {m}", above(ex)));
        }
        return;
    }
    let f = v.as_f64().unwrap_or(0.0);
    if let Some(factor) = s.multiple_of.filter(|f| *f > 0.0) {
        let mult = if factor < 1.0 {
            1.0 / factor * f
        } else {
            f / factor
        };
        if !json_integer(mult) {
            fail(format!("a multiple of {}", go_float(factor)));
        }
    }
    if let Some((m, ex)) = s.minimum
        && (f < m || (ex && f == m))
    {
        fail(format!("{} {}", below(ex), go_float(m)));
    }
    if let Some((m, ex)) = s.maximum
        && (f > m || (ex && f == m))
    {
        fail(format!("{} {}", above(ex), go_float(m)));
    }
}

fn array(s: &Schema, items: &[Value], path: &str, out: &mut Vec<Cause>) {
    if let Some(schema) = &s.items {
        for (i, item) in items.iter().enumerate() {
            check(schema, item, None, &format!("{path}[{i}]"), out);
        }
    }
    duplicates(s, items, path, out);
    let n = items.len();
    if let Some(min) = s.items_count.0
        && (n as i64) < min
    {
        let detail = format!("{path} in body should have at least {min} items");
        out.push(field::invalid(path, &json!(n), &detail));
    }
    if let Some(max) = s.items_count.1
        && n as i64 > max
    {
        out.push(field::too_many(path, n, max));
    }
}

/// The items a `set` or `map` list holds twice (`ValidateListSetsAndMaps`): each reported at its
/// second place, a set's by its value, a map's by its key fields (as Go prints a
/// `map[string]interface {}`).
fn duplicates(s: &Schema, items: &[Value], path: &str, out: &mut Vec<Cause>) {
    let key = |item: &Value| -> Option<Value> {
        match &s.list_type {
            ListType::Atomic => None,
            ListType::Set => Some(item.clone()),
            ListType::Map(keys) => {
                let fields = keys
                    .iter()
                    .filter_map(|k| item.get(k).map(|v| (k.clone(), v.clone())));
                Some(Value::Object(fields.collect()))
            }
        }
    };
    let mut seen = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(k) = key(item) else {
            return;
        };
        if seen.contains(&k) {
            let printed = match (&s.list_type, &k) {
                (ListType::Map(_), Value::Object(_)) => field::go_printed(&k),
                _ => field::render(&k),
            };
            out.push(field::duplicate(&format!("{path}[{i}]"), &printed));
        } else {
            seen.push(k);
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn properties(
    s: &Schema,
    m: &Map<String, Value>,
    old: Option<&Value>,
    path: &str,
    root: bool,
    out: &mut Vec<Cause>,
) {
    let n = m.len();
    if let Some(min) = s.properties_count.0
        && (n as i64) < min
    {
        let detail = format!("{path} in body should have at least {min} properties");
        out.push(field::invalid(path, &json!(n), &detail));
        return;
    }
    if let Some(max) = s.properties_count.1
        && n as i64 > max
    {
        out.push(field::too_many(path, n, max));
        return;
    }
    for (k, v) in m {
        if root && k == "metadata" {
            continue;
        }
        let was = old.and_then(|o| o.get(k));
        match (s.properties.get(k), &s.additional) {
            (Some(p), _) => check(p, v, was, &join(path, k), out),
            (None, Additional::Schema(a)) => check(a, v, was, &join(path, k), out),
            _ => {}
        }
    }
    for r in s.required.iter().filter(|r| !m.contains_key(*r)) {
        out.push(field::required(&join(path, r)));
    }
}
