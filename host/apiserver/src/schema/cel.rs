//! CEL validation rules of CRD schemas (`x-kubernetes-validations`), evaluated with the `cel`
//! crate as kube-apiserver evaluates them: `self` the value the rule is declared on, `oldSelf`
//! its stored value on an update (a rule that names `oldSelf`, a transition rule, is only
//! evaluated when there is one), a failure reported at the rule's node (or its `fieldPath`)
//! with its `reason`, `message` or `failed rule: <rule>`, printing the value as its schema
//! type (`Invalid value: "object": ...`).
//!
//! A failed rule's `messageExpression` is its message when it evaluates to a one-line string
//! (else `message`, as kube falls back). The functions are CEL's standard library (`matches`
//! included), cel-go's strings extension, which kube enables, and of kube's own libraries
//! those a schema's rules use most: lists (`isSorted`, `sum`, `min`, `max`), regular
//! expressions (`find`, `findAll`) and the validity checks `isURL`, `isQuantity`, `isIP` and
//! `isCIDR`.
//!
//! Not as kube: no cost estimation (kube refuses rules it estimates too costly; bound lists,
//! maps and strings as it asks and the same CRD works on both), no type checking at
//! registration, and not kube's typed values (`quantity()`, `url()`, `ip()`, `cidr()`,
//! `format.*`): a rule calling one of those is not enforced here, with a warning naming it,
//! rather than refusing objects a cluster accepts.

use std::fmt;
use std::sync::{Arc, LazyLock};

use ::cel::extractors::This;

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
    /// `messageExpression`, compiled.
    message_expression: Option<Arc<::cel::Program>>,
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
        let program = match ROOT.compile(&rule) {
            Ok(p) => p,
            Err(e) => {
                let msg = format!("compilation failed: {e}");
                errs.push(field::invalid(&at, &Value::String(rule), &msg));
                continue;
            }
        };
        let message_expression = match text("messageExpression") {
            None => None,
            Some(expression) => match ROOT.compile(&expression) {
                Ok(p) => Some(Arc::new(p)),
                Err(e) => {
                    let at = format!("{path}.x-kubernetes-validations[{i}].messageExpression");
                    let msg = format!("messageExpression compilation failed: {e}");
                    errs.push(field::invalid_printed(&at, &go_rule(r), &msg));
                    continue;
                }
            },
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
            message_expression,
        });
    }
    rules
}

/// A rule as kube prints it in a refusal: its Go structure (pointers kube prints as addresses
/// shown as `0xc000000000`).
fn go_rule(r: &Value) -> String {
    let text = |k: &str| field::go_quote(r.get(k).and_then(Value::as_str).unwrap_or_default());
    let pointer = |k: &str, ty: &str| match r.get(k) {
        None | Some(Value::Null) => format!("(*{ty})(nil)"),
        Some(_) => format!("(*{ty})(0xc000000000)"),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        text("rule"),
        text("message"),
        text("messageExpression"),
        pointer("reason", "apiextensions.FieldValueErrorReason"),
        text("fieldPath"),
        pointer("optionalOldSelf", "bool"),
    )
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
        let mut context = FUNCTIONS.new_inner_scope();
        context.add_variable_from_value("self", to_cel(value));
        if let Some(old) = old.filter(|_| rule.transition) {
            context.add_variable_from_value("oldSelf", to_cel(old));
        }
        let shown = Value::String(type_name.to_string());
        let said = || {
            let expressed = (rule.message_expression.as_ref())
                .and_then(|p| match p.execute(&context) {
                    Ok(::cel::Value::String(s)) => Some(s.to_string()),
                    _ => None,
                })
                .filter(|s| !s.trim().is_empty() && !s.contains('\n'));
            (expressed.or_else(|| rule.message.clone()))
                .unwrap_or_else(|| format!("failed rule: {}", rule.rule))
        };
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
            Err(::cel::ExecutionError::UndeclaredReference(name))
                if UNSUPPORTED.contains(&name.as_str()) =>
            {
                tracing::warn!(
                    rule = %rule.rule,
                    "a CEL rule calls {name}() of kube's libraries, which the embedded API server does not evaluate: not enforced"
                );
            }
            Err(e) => {
                // Go's errors start lower-case (`no such key: x`).
                let e = go_error(&e.to_string());
                let subject = rule.message.clone().unwrap_or_else(|| rule.rule.clone());
                let msg = format!("{e} evaluating rule: {subject}");
                out.push(field::invalid(path, &shown, &msg));
            }
        }
    }
}

/// A compiled expression of admission's CEL (webhooks' `matchConditions`, policies'
/// validations).
pub(crate) type Program = ::cel::Program;

/// Compiles `expression` against the environment CRD rules compile against.
pub(crate) fn compile(expression: &str) -> Result<Program, String> {
    ROOT.compile(expression).map_err(|e| e.to_string())
}

/// What an admission expression gave: a bool, a string (a message expression), or the error
/// it failed with, worded as Go's errors are (lower case first).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    Bool(bool),
    Text(String),
    Other(String),
    Error(String),
}

/// Evaluates `program` with each `(name, value)` of `variables` bound to its JSON value
/// (`object`, `oldObject`, `request`, `params`, ...); an absent object is `null`, as kube binds it.
pub(crate) fn evaluate(program: &Program, variables: &[(&str, &Value)]) -> Outcome {
    Bindings::new(variables).evaluate(program)
}

/// The variables an admission expression sees, bound once for several expressions: JSON
/// values, and a policy's own `variables` (each seeing those declared before it).
pub(crate) struct Bindings {
    bound: Vec<(String, ::cel::Value)>,
}

impl Bindings {
    /// Binds each `(name, value)` to its JSON value.
    pub(crate) fn new(variables: &[(&str, &Value)]) -> Self {
        Self {
            bound: (variables.iter())
                .map(|(name, value)| (name.to_string(), to_cel(value)))
                .collect(),
        }
    }

    /// Evaluates a policy's `variables` in order and binds them as `variables.<name>`; one
    /// that fails is left out (an expression that reads it then fails with `no such key`).
    pub(crate) fn with_variables(mut self, variables: &[(String, Arc<Program>)]) -> Self {
        let mut map = std::collections::HashMap::new();
        for (name, program) in variables {
            let value = {
                let context = self.context(Some(&map));
                program.execute(&context)
            };
            if let Ok(value) = value {
                map.insert(::cel::objects::Key::String(Arc::new(name.clone())), value);
            }
        }
        self.bound.push((
            "variables".to_string(),
            ::cel::Value::Map(::cel::objects::Map { map: Arc::new(map) }),
        ));
        self
    }

    fn context(
        &self,
        variables: Option<&std::collections::HashMap<::cel::objects::Key, ::cel::Value>>,
    ) -> ::cel::Context<'_, '_> {
        let mut context = FUNCTIONS.new_inner_scope();
        for (name, value) in &self.bound {
            context.add_variable_from_value(name.clone(), value.clone());
        }
        if let Some(map) = variables {
            let map = ::cel::objects::Map {
                map: Arc::new(map.clone()),
            };
            context.add_variable_from_value("variables", ::cel::Value::Map(map));
        }
        context
    }

    /// Evaluates `program` with these bindings.
    pub(crate) fn evaluate(&self, program: &Program) -> Outcome {
        match program.execute(&self.context(None)) {
            Ok(::cel::Value::Bool(b)) => Outcome::Bool(b),
            Ok(::cel::Value::String(s)) => Outcome::Text(s.to_string()),
            Ok(other) => Outcome::Other(format!("{other:?}")),
            Err(e) => Outcome::Error(go_error(&e.to_string())),
        }
    }
}

/// An error message as Go words its errors: lower case first.
fn go_error(e: &str) -> String {
    let mut chars = e.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Functions of kube's CEL libraries this server does not evaluate (their typed values).
const UNSUPPORTED: &[&str] = &[
    "quantity", "url", "ip", "cidr", "format", "semver", "isSemver",
];

/// CEL as kube-apiserver's CRD rules see it: the standard library and cel-go's strings
/// extension (what a rule compiles against).
static ROOT: LazyLock<Arc<::cel::Env>> = LazyLock::new(|| {
    let mut env = ::cel::Env::stdlib();
    // Registering a fresh extension on a fresh environment cannot conflict.
    let _ = ::cel::extensions::strings(&mut env);
    Arc::new(env)
});

/// The root scope of every evaluation: [`ROOT`] and kube's own functions that rules use most.
static FUNCTIONS: LazyLock<::cel::Context<'static, 'static>> = LazyLock::new(|| {
    let mut ctx = ::cel::Context::with_env(ROOT.clone());
    // None of these names is an overload of the environment, so none can conflict.
    let _ = ctx.add_function("isSorted", |This(list): This<Arc<Vec<::cel::Value>>>| {
        list.windows(2).all(|w| w[0] <= w[1])
    });
    let _ = ctx.add_function("sum", |This(list): This<Arc<Vec<::cel::Value>>>| sum(&list));
    let _ = ctx.add_function("min", |This(list): This<Arc<Vec<::cel::Value>>>| {
        extreme(&list, "min", std::cmp::Ordering::Less)
    });
    let _ = ctx.add_function("max", |This(list): This<Arc<Vec<::cel::Value>>>| {
        extreme(&list, "max", std::cmp::Ordering::Greater)
    });
    let _ = ctx.add_function(
        "find",
        |This(text): This<Arc<String>>, pattern: Arc<String>| -> ::cel::ResolveResult {
            let re = regex(&pattern, "find")?;
            let found = re.find(&text).map_or("", |m| m.as_str());
            Ok(::cel::Value::String(Arc::new(found.to_string())))
        },
    );
    let _ = ctx.add_function(
        "findAll",
        |This(text): This<Arc<String>>, pattern: Arc<String>| -> ::cel::ResolveResult {
            let re = regex(&pattern, "findAll")?;
            let all = re
                .find_iter(&text)
                .map(|m| ::cel::Value::String(Arc::new(m.as_str().to_string())))
                .collect();
            Ok(::cel::Value::List(Arc::new(all)))
        },
    );
    let _ = ctx.add_function("isURL", |text: Arc<String>| {
        url::Url::parse(&text).is_ok() || text.starts_with('/')
    });
    let _ = ctx.add_function("isQuantity", |text: Arc<String>| {
        crate::quantity::Quantity::parse(&text).is_some()
    });
    let _ = ctx.add_function("isIP", |text: Arc<String>| {
        text.parse::<std::net::IpAddr>().is_ok()
    });
    let _ = ctx.add_function("isCIDR", |text: Arc<String>| {
        text.split_once('/').is_some_and(|(ip, bits)| {
            let bits: Result<u8, _> = bits.parse();
            match (ip.parse::<std::net::IpAddr>(), bits) {
                (Ok(std::net::IpAddr::V4(_)), Ok(b)) => b <= 32,
                (Ok(std::net::IpAddr::V6(_)), Ok(b)) => b <= 128,
                _ => false,
            }
        })
    });
    ctx
});

fn regex(pattern: &str, function: &str) -> Result<regex::Regex, ::cel::ExecutionError> {
    regex::Regex::new(pattern).map_err(|e| ::cel::ExecutionError::function_error(function, e))
}

/// kube's `sum()`: of ints, uints, doubles or durations; 0 of an empty list.
fn sum(list: &[::cel::Value]) -> ::cel::ResolveResult {
    use ::cel::Value as V;
    let mut total = match list.first() {
        None | Some(V::Int(_)) => V::Int(0),
        Some(V::UInt(_)) => V::UInt(0),
        Some(V::Float(_)) => V::Float(0.0),
        Some(other) => {
            return Err(::cel::ExecutionError::function_error(
                "sum",
                format!("cannot sum {other:?}"),
            ));
        }
    };
    for v in list {
        total =
            match (total, v) {
                (V::Int(a), V::Int(b)) => V::Int(a.checked_add(*b).ok_or_else(|| {
                    ::cel::ExecutionError::function_error("sum", "integer overflow")
                })?),
                (V::UInt(a), V::UInt(b)) => V::UInt(a.checked_add(*b).ok_or_else(|| {
                    ::cel::ExecutionError::function_error("sum", "integer overflow")
                })?),
                (V::Float(a), V::Float(b)) => V::Float(a + b),
                (_, other) => {
                    return Err(::cel::ExecutionError::function_error(
                        "sum",
                        format!("cannot sum {other:?}"),
                    ));
                }
            };
    }
    Ok(total)
}

/// kube's `min()`/`max()`: the least or greatest element; an error on an empty list.
fn extreme(
    list: &[::cel::Value],
    function: &str,
    keep: std::cmp::Ordering,
) -> ::cel::ResolveResult {
    let mut best = list.first().ok_or_else(|| {
        ::cel::ExecutionError::function_error(function, format!("{function} called on empty list"))
    })?;
    for v in &list[1..] {
        if v.partial_cmp(best) == Some(keep) {
            best = v;
        }
    }
    Ok(best.clone())
}
