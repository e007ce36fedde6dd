//! Structural defaulting (`structuraldefaulting.Default`): a property with a `default` that is
//! absent from its object is set to it, everywhere in the object, defaults inside defaulted
//! values included. Kube applies it to what a client writes (after pruning, before validating)
//! and to what it reads from storage.

use serde_json::Value;

use super::{Additional, Schema};

/// Sets the defaults `s` declares below `v`.
pub fn apply(s: &Schema, v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, p) in &s.properties {
                if let Some(d) = p.default.as_ref().filter(|_| !m.contains_key(k)) {
                    m.insert(k.clone(), d.clone());
                }
            }
            for (k, value) in m.iter_mut() {
                match (s.properties.get(k), &s.additional) {
                    (Some(p), _) => apply(p, value),
                    (None, Additional::Schema(a)) => apply(a, value),
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(i) = &s.items {
                items.iter_mut().for_each(|item| apply(i, item));
            }
        }
        _ => {}
    }
}
