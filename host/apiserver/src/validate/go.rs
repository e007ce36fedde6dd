//! Values printed as kube-apiserver prints the refused value of a 422 cause when it is not a
//! string or a number: Go's `%#v` of kube's internal types (`map[string]string{"a":"b"}`,
//! `v1.LabelSelector{...}`). Pointers to structures Go prints as addresses, which say nothing;
//! they print here as `(*T)(…)`.

use serde_json::Value;

use wasmctrl_core::validation::quote;

/// A printer of one kind of value.
pub(super) type Print = fn(&Value) -> String;

/// A string as Go's `%#v` prints it.
fn string(v: &Value) -> String {
    quote(v.as_str().unwrap_or_default())
}

/// `map[string]string{"a":"b", "c":"d"}` (keys sorted, as Go's fmt sorts them), or
/// `map[string]string(nil)`.
pub(super) fn string_map(v: &Value) -> String {
    match v.as_object() {
        None => "map[string]string(nil)".into(),
        Some(m) => {
            let mut pairs: Vec<(&String, &Value)> = m.iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = pairs
                .iter()
                .map(|(k, v)| format!("{}:{}", quote(k), string(v)))
                .collect();
            format!("map[string]string{{{}}}", inner.join(", "))
        }
    }
}

/// `[]string{"a", "b"}` or `[]string(nil)`.
pub(super) fn strings(v: &Value) -> String {
    match v.as_array() {
        None => "[]string(nil)".into(),
        Some(a) => format!(
            "[]string{{{}}}",
            a.iter().map(string).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A `metav1.LabelSelector`.
pub(super) fn label_selector(v: &Value) -> String {
    if v.is_null() {
        return "null".into();
    }
    let expressions = match v["matchExpressions"].as_array() {
        None => "[]v1.LabelSelectorRequirement(nil)".into(),
        Some(reqs) => {
            let reqs: Vec<String> = reqs
                .iter()
                .map(|r| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        string(&r["key"]),
                        string(&r["operator"]),
                        strings(&r["values"])
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", reqs.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{expressions}}}",
        string_map(&v["matchLabels"])
    )
}

/// An `intstr.IntOrString`.
pub(super) fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            quote(s)
        ),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or_default()
        ),
    }
}

/// An update strategy (`apps.DeploymentStrategy`, ...): its type and its rolling update.
pub(super) fn strategy(v: &Value, kind: &str, rolling: &str) -> String {
    let rolling_update = if v.get("rollingUpdate").is_none_or(Value::is_null) {
        format!("(*apps.{rolling})(nil)")
    } else {
        format!("(*apps.{rolling})(…)")
    };
    format!(
        "apps.{kind}{{Type:{}, RollingUpdate:{rolling_update}}}",
        string(&v["type"])
    )
}

/// An `rbac.RoleRef`.
pub(super) fn role_ref(v: &Value) -> String {
    format!(
        "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
        string(&v["apiGroup"]),
        string(&v["kind"]),
        string(&v["name"])
    )
}

/// A structure too large to restate field by field: its Go type and its JSON.
pub(super) fn structure(kind: &str, v: &Value) -> String {
    format!("{kind}{v}")
}

/// An integer, or `null`.
pub(super) fn int(v: &Value) -> String {
    v.as_i64().map_or_else(|| "null".into(), |n| n.to_string())
}

/// A string, or `null`.
pub(super) fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| "null".into(), quote)
}
