//! CEL validation rules of CRD schemas (`x-kubernetes-validations`), evaluated with the `cel`
//! crate as kube-apiserver evaluates them: `self` the value the rule is declared on, `oldSelf`
//! its stored value on an update (a rule that names `oldSelf`, a transition rule, is only
//! evaluated when there is one), a failure reported at the rule's node (or its `fieldPath`)
//! with its `reason`, `message` or `failed rule: <rule>`, printing the value as its schema
//! type (`Invalid value: "object": ...`).
//!
//! Not as kube: no cost estimation (kube refuses rules it estimates too costly; bound lists,
//! maps and strings as it asks and the same CRD works on both), no `messageExpression`, and
//! only the functions of CEL's standard library and the `cel` crate's extensions (kube adds its
//! own libraries: quantities, URLs, IPs, `format`); a rule calling one of those fails at
//! evaluation with the function named.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::super::status::Cause;
use super::field;

/// One rule, compiled when its CRD is registered.
#[derive(Clone)]
pub struct Rule {
    /// The expression.
    pub rule: String,
    /// `message`, if set.
    pub message: Option<String>,
    /// `reason` (`FieldValueInvalid` when not set).
    pub reason: Option<String>,
    /// `fieldPath`, relative to the node (`.spec.replicas`).
    pub field_path: Option<String>,
    /// Whether the rule names `oldSelf`.
    pub transition: bool,
    program: Arc<::cel::Program>,
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule").field("rule", &self.rule).finish()
    }
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        (&self.rule, &self.message, &self.reason, &self.field_path)
            == (
                &other.rule,
                &other.message,
                &other.reason,
                &other.field_path,
            )
    }
}

/// The rules of a schema node at `path`; what does not compile is appended to `errs` as kube
/// refuses the CRD for it.
pub fn parse(node: &Value, path: &str, errs: &mut Vec<Cause>) -> Vec<Rule> {
    let mut rules = Vec::new();
    let declared = node
        .get("x-kubernetes-validations")
        .and_then(Value::as_array);
    for (i, r) in declared.into_iter().flatten().enumerate() {
        let text = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
        let at = format!("{path}.x-kubernetes-validations[{i}].rule");
        let Some(rule) = text("rule").filter(|r| !r.trim().is_empty()) else {
            errs.push(field::required(&at));
            continue;
        };
        let program = match ::cel::Program::compile(&rule) {
            Ok(p) => p,
            Err(e) => {
                let msg = format!("compilation failed: {e}");
                errs.push(field::invalid(&at, &Value::String(rule), &msg));
                continue;
            }
        };
        // (Macro variables count as references too, so undeclared names are only found when
        // a rule is evaluated.)
        let references = program.references();
        let transition = references.has_variable("oldSelf");
        rules.push(Rule {
            rule,
            message: text("message"),
            reason: text("reason"),
            field_path: text("fieldPath"),
            transition,
            program: Arc::new(program),
        });
    }
    rules
}

/// A JSON value as CEL sees it: integers as `int`, as kube's JSON decoding makes them.
fn to_cel(v: &Value) -> ::cel::Value {
    match v {
        Value::Null => ::cel::Value::Null,
        Value::Bool(b) => ::cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => ::cel::Value::Int(i),
            None => ::cel::Value::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => ::cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => ::cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: std::collections::HashMap<::cel::objects::Key, ::cel::Value> = m
                .iter()
                .map(|(k, v)| (::cel::objects::Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            ::cel::Value::Map(::cel::objects::Map { map: Arc::new(map) })
        }
    }
}

/// Evaluates `rules` on `value` (of the schema type `type_name`, `old` its stored value), at
/// `path`, appending each failure.
pub fn check(
    rules: &[Rule],
    type_name: &str,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    out: &mut Vec<Cause>,
) {
    for rule in rules {
        if rule.transition && old.is_none() {
            continue;
        }
        let mut context = ::cel::Context::default();
        context.add_variable_from_value("self", to_cel(value));
        if let Some(old) = old.filter(|_| rule.transition) {
            context.add_variable_from_value("oldSelf", to_cel(old));
        }
        let shown = Value::String(type_name.to_string());
        let said =
            || (rule.message.clone()).unwrap_or_else(|| format!("failed rule: {}", rule.rule));
        match rule.program.execute(&context) {
            Ok(::cel::Value::Bool(true)) => {}
            Ok(::cel::Value::Bool(false)) => {
                let at = match rule.field_path.as_deref() {
                    Some(fp) => format!("{path}{fp}"),
                    None => path.to_string(),
                };
                out.push(match rule.reason.as_deref() {
                    Some("FieldValueForbidden") => field::forbidden(&at, &said()),
                    Some("FieldValueRequired") => field::required_because(&at, &said()),
                    Some("FieldValueDuplicate") => field::duplicate(&at, &field::render(&shown)),
                    _ => field::invalid(&at, &shown, &said()),
                });
            }
            Ok(other) => {
                let msg = format!(
                    "rule did not evaluate to a bool ({other:?}) evaluating rule: {}",
                    rule.rule
                );
                out.push(field::invalid(path, &shown, &msg));
            }
            Err(e) => {
                // Go's errors start lower-case (`no such key: x`).
                let e = e.to_string();
                let mut chars = e.chars();
                let e = match chars.next() {
                    Some(c) => c.to_lowercase().chain(chars).collect(),
                    None => e,
                };
                let subject = rule.message.clone().unwrap_or_else(|| rule.rule.clone());
                let msg = format!("{e} evaluating rule: {subject}");
                out.push(field::invalid(path, &shown, &msg));
            }
        }
    }
}
