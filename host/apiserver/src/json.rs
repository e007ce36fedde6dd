//! Reading the fields of JSON objects, as every layer reads stored objects: below the store,
//! the schemas and the printers, so each can read an object without depending on another.

use serde_json::Value;

/// `obj[ptr]` as a string, or `""`.
pub fn str_at<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}
