//! JSON request bodies decoded as kube's strict decoder reads them: a field named twice is
//! kept as Go's decoder keeps it (the last value; objects merged into the earlier one) and
//! reported (`duplicate field "metadata.labels.a"`), so `fieldValidation` can refuse it, warn
//! about it or ignore it as it does unknown fields.
//!
//! Hand-written over serde (a `DeserializeSeed` that builds the value): `serde_json::Value`
//! keeps the last of two keys silently, and no crate reports duplicates with their paths.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parses `body`, returning the value and the paths of the fields it names more than once.
pub fn json_with_duplicates(body: &[u8]) -> Result<(Value, Vec<String>), serde_json::Error> {
    let duplicates = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = Tracked {
        path: String::new(),
        duplicates: &duplicates,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok((value, duplicates.into_inner()))
}

/// A value at `path`, recording duplicate fields below it.
struct Tracked<'a> {
    path: String,
    duplicates: &'a RefCell<Vec<String>>,
}

impl Tracked<'_> {
    fn child(&self, step: &str) -> Self {
        let path = if self.path.is_empty() {
            step.to_string()
        } else if step.starts_with('[') {
            format!("{}{step}", self.path)
        } else {
            format!("{}.{step}", self.path)
        };
        Tracked {
            path,
            duplicates: self.duplicates,
        }
    }
}

/// `later` over `earlier` as Go decodes a repeated field into what it already holds: objects
/// merged (recursively), anything else replaced.
fn merge(earlier: &mut Value, later: Value) {
    match (earlier, later) {
        (Value::Object(e), Value::Object(l)) => {
            for (k, v) in l {
                match e.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        e.insert(k, v);
                    }
                }
            }
        }
        (e, l) => *e = l,
    }
}

impl<'de> DeserializeSeed<'de> for Tracked<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tracked<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(self.child(&format!("[{}]", items.len())))? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self.child(&key))?;
            match out.get_mut(&key) {
                Some(earlier) => {
                    self.duplicates.borrow_mut().push(self.child(&key).path);
                    merge(earlier, value);
                }
                None => {
                    out.insert(key, value);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn duplicates_are_named_and_kept_as_go_keeps_them() {
        // Read off kube-apiserver 1.32: these three, and the data kube stored.
        let body = br#"{"metadata":{"name":"dup","labels":{"a":"1","a":"2"}},"data":{"k":"1","k":"2"},"data":{"z":"3"},"list":[{"x":1,"x":2}]}"#;
        let (value, duplicates) = json_with_duplicates(body).unwrap();
        assert_eq!(
            duplicates,
            ["metadata.labels.a", "data.k", "data", "list[0].x"]
        );
        assert_eq!(value["metadata"]["labels"], json!({"a": "2"}));
        assert_eq!(value["data"], json!({"k": "2", "z": "3"}));
        assert_eq!(value["list"], json!([{"x": 2}]));
        let (plain, none) = json_with_duplicates(br#"{"a": [1, 2.5, null, true]}"#).unwrap();
        assert!(none.is_empty());
        assert_eq!(plain, json!({"a": [1, 2.5, null, true]}));
        assert!(json_with_duplicates(b"{\"a\": 1} x").is_err());
    }
}
