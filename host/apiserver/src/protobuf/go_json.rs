//! The JSON kube-apiserver writes for a built-in object is Go's `encoding/json` of its typed
//! struct, which writes more than the object holds: every non-pointer struct (`"status": {}`,
//! `"loadBalancer": {}`, a template's `"creationTimestamp": null`) and every field without
//! `omitempty` (`"rules": null`, `"disruptionsAllowed": 0`). Clients decode into the same
//! shapes and come to rely on them (a Service's `status` is there on a cluster), so objects
//! leave this server completed the same way. The field table knows each field's Go shape.

use serde_json::{Map, Value, json};

use super::messages::{MESSAGES, MsgId, Ty};

/// Completes `obj` (an object of `kind` in `api_version`) as Go's JSON encoder would write it;
/// objects of kinds without a table (custom resources) are left as they are.
pub fn complete(obj: &mut Value) {
    if let Some((map, id)) = typed(obj) {
        complete_message(map, id);
    }
}

/// A built-in object's fields and its message; `None` for other objects.
fn typed(obj: &mut Value) -> Option<(&mut Map<String, Value>, MsgId)> {
    let id = match (obj.get("apiVersion"), obj.get("kind")) {
        (Some(Value::String(v)), Some(Value::String(k))) => MESSAGES.kind(v, k)?,
        _ => return None,
    };
    Some((obj.as_object_mut()?, id))
}

fn complete_message(obj: &mut Map<String, Value>, id: MsgId) {
    for field in &MESSAGES.messages[id].fields {
        if field.inline {
            if let Ty::Msg(child) = field.ty {
                complete_message(obj, child);
            }
            continue;
        }
        let Some(name) = &field.json else { continue };
        match obj.get_mut(name) {
            Some(value) => complete_value(value, &field.ty, field.repeated),
            None if field.ptr => {}
            None => {
                if let Some(mut zero) = absent(&field.ty, field.repeated, field.omitempty) {
                    complete_value(&mut zero, &field.ty, field.repeated);
                    obj.insert(name.clone(), zero);
                }
            }
        }
    }
}

/// Completes the messages inside a present value.
fn complete_value(value: &mut Value, ty: &Ty, repeated: bool) {
    match (ty, value) {
        (_, Value::Array(items)) if repeated => {
            for item in items {
                complete_value(item, ty, false);
            }
        }
        (Ty::Msg(id), Value::Object(m)) => complete_message(m, *id),
        (Ty::Map(_, v), Value::Object(m)) => {
            for item in m.values_mut() {
                complete_value(item, v, false);
            }
        }
        _ => {}
    }
}

/// What Go writes for a non-pointer field the object does not hold: `None` when it writes
/// nothing (a zero `omitempty` value).
fn absent(ty: &Ty, repeated: bool, omitempty: bool) -> Option<Value> {
    // Structs are written whether or not they are `omitempty`; the others as their own JSON.
    let always = match ty {
        _ if repeated => None,
        Ty::Msg(_) => Some(json!({})),
        Ty::Time | Ty::MicroTime | Ty::Raw => Some(Value::Null),
        Ty::Quantity => Some(json!("0")),
        Ty::IntOrString => Some(json!(0)),
        Ty::Duration => Some(json!("0s")),
        _ => None,
    };
    if always.is_some() || omitempty {
        return always;
    }
    Some(match ty {
        _ if repeated => Value::Null,
        Ty::Map(..) | Ty::Items(_) | Ty::Bytes => Value::Null,
        Ty::Str => json!(""),
        Ty::Bool => json!(false),
        Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64 | Ty::Double | Ty::Float => json!(0),
        _ => Value::Null,
    })
}

/// Writes every quantity of a built-in object (`obj`, of the kind its `apiVersion` and `kind`
/// say) as kube stores it: a JSON number as its string, in canonical form, the values of
/// resource lists rounded up to a thousandth. Text that is no quantity is left for validation
/// to refuse.
pub fn canonical_quantities(obj: &mut Value) {
    if let Some((map, id)) = typed(obj) {
        quantities_of(map, id);
    }
}

fn quantities_of(obj: &mut Map<String, Value>, id: MsgId) {
    for field in &MESSAGES.messages[id].fields {
        if field.inline {
            if let Ty::Msg(child) = field.ty {
                quantities_of(obj, child);
            }
            continue;
        }
        let Some(value) = field.json.as_ref().and_then(|name| obj.get_mut(name)) else {
            continue;
        };
        match (&field.ty, value) {
            (Ty::Msg(child), Value::Array(items)) if field.repeated => {
                for item in items.iter_mut().filter_map(Value::as_object_mut) {
                    quantities_of(item, *child);
                }
            }
            (Ty::Msg(child), Value::Object(m)) => quantities_of(m, *child),
            (Ty::Map(_, v), Value::Object(m)) if **v == Ty::Quantity => {
                for q in m.values_mut() {
                    canonical_quantity(q, crate::quantity::canonical_in_resource_list);
                }
            }
            (Ty::Map(_, v), Value::Object(m)) => {
                if let Ty::Msg(child) = **v {
                    for item in m.values_mut().filter_map(Value::as_object_mut) {
                        quantities_of(item, child);
                    }
                }
            }
            (Ty::Quantity, q) => canonical_quantity(q, crate::quantity::canonical),
            _ => {}
        }
    }
}

fn canonical_quantity(q: &mut Value, canonical: fn(&str) -> Option<String>) {
    let text = match q {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => return,
    };
    if let Some(c) = canonical(&text) {
        *q = Value::String(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_completed_as_go_writes_them() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        complete(&mut d);
        assert_eq!(d["status"], json!({}));
        assert_eq!(d["spec"]["strategy"], json!({}));
        assert_eq!(
            d["spec"]["template"]["metadata"]["creationTimestamp"],
            Value::Null
        );
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["resources"],
            json!({})
        );
        assert!(
            d["spec"].get("paused").is_none(),
            "omitempty zero scalars stay out"
        );
        assert!(
            d["spec"].get("revisionHistoryLimit").is_none(),
            "pointers stay out"
        );

        let mut role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r"}});
        complete(&mut role);
        assert_eq!(role["rules"], Value::Null);

        let mut pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "p"}, "spec": {}});
        complete(&mut pdb);
        assert_eq!(
            pdb["status"],
            json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                "expectedPods": 0})
        );

        let mut cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {}});
        complete(&mut cr);
        assert_eq!(
            cr,
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {}})
        );
    }
}
