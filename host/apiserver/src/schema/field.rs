//! Field errors worded as apimachinery's `field.Error` renders them (`ErrorBody`), with values
//! printed the way Go prints them: strings `%q`-quoted, floats as `%v` (`2.147483647e+09`),
//! objects and arrays as JSON. Clients and people match on this text, so it is copied exactly.

use serde_json::Value;

use super::super::status::Cause;

/// `field.Required`: `Required value`.
pub fn required(field: &str) -> Cause {
    cause("FieldValueRequired", field, "Required value".into())
}

/// `field.Forbidden`: `Forbidden: <detail>`.
pub fn forbidden(field: &str, detail: &str) -> Cause {
    cause("FieldValueForbidden", field, format!("Forbidden: {detail}"))
}

/// `field.Required` with a detail: `Required value: <detail>`.
pub fn required_because(field: &str, detail: &str) -> Cause {
    cause(
        "FieldValueRequired",
        field,
        format!("Required value: {detail}"),
    )
}

/// `field.Duplicate`: `Duplicate value: <value>`, the value already printed.
pub fn duplicate(field: &str, printed: &str) -> Cause {
    cause(
        "FieldValueDuplicate",
        field,
        format!("Duplicate value: {printed}"),
    )
}

/// `field.Invalid`: `Invalid value: <value>: <detail>`.
pub fn invalid(field: &str, value: &Value, detail: &str) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {}: {detail}", render(value)),
    )
}

/// `field.Invalid` of a value kube prints as a Go structure (`printed`).
pub fn invalid_printed(field: &str, printed: &str, detail: &str) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {printed}: {detail}"),
    )
}

/// `field.TypeInvalid` (worded like `Invalid`, with its own reason).
pub fn type_invalid(field: &str, value: &Value, detail: &str) -> Cause {
    cause(
        "FieldValueTypeInvalid",
        field,
        format!("Invalid value: {}: {detail}", render(value)),
    )
}

/// `field.NotSupported`: `Unsupported value: <value>: supported values: "a", "b"`.
pub fn not_supported(field: &str, value: &Value, allowed: &[String]) -> Cause {
    let mut msg = format!("Unsupported value: {}", render(value));
    if !allowed.is_empty() {
        let quoted: Vec<String> = allowed.iter().map(|a| go_quote(a)).collect();
        msg.push_str(&format!(": supported values: {}", quoted.join(", ")));
    }
    cause("FieldValueNotSupported", field, msg)
}

/// `field.TooLong`: the value itself is left out.
pub fn too_long(field: &str, max: i64) -> Cause {
    let unit = if max == 1 { "byte" } else { "bytes" };
    cause(
        "FieldValueTooLong",
        field,
        format!("Too long: may not be more than {max} {unit}"),
    )
}

/// `field.TooMany`: `Too many: <actual>: must have at most <max> items`.
pub fn too_many(field: &str, actual: usize, max: i64) -> Cause {
    let unit = if max == 1 { "item" } else { "items" };
    cause(
        "FieldValueTooMany",
        field,
        format!("Too many: {actual}: must have at most {max} {unit}"),
    )
}

fn cause(reason: &'static str, field: &str, message: String) -> Cause {
    Cause {
        reason,
        field: field.to_string(),
        message,
    }
}

/// A bad value as `ErrorBody` prints it.
pub fn render(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or(0.0)),
        },
        Value::Bool(b) => b.to_string(),
        // Go marshals maps with sorted keys, as serde_json's default map does.
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// A decoded JSON value as Go's `%#v` prints it (how `ErrorBody` prints a map or slice):
/// `map[string]interface {}{"a":1, "b":[]interface {}{"x"}}`, keys sorted.
pub fn go_printed(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::Object(m) => {
            let fields: Vec<String> = (m.iter())
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_printed(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", fields.join(", "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_printed).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        scalar => render(scalar),
    }
}

/// Go's `strconv.Quote` for the characters JSON strings carry.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%v` for a float64 (`strconv.FormatFloat(f, 'g', -1, 64)`): the shortest digits, in
/// exponent form when the exponent is below -4 or at least 6 (`1e+06`, `0.0001`, `1.5e-05`).
pub fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: `-2.147483647e9`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    // Plain form: place the decimal point `exp + 1` digits in.
    let point = exp + 1;
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{body}")
}
