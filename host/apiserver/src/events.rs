//! Events are one resource served in two API groups, as in kube-apiserver: core/v1 `events`
//! and `events.k8s.io/v1` `events` read and write the same objects, stored in the core form.
//! So an Event a controller records through `events.k8s.io/v1` (kube-runtime's and client-go's
//! recorders) is what `kubectl get events` and `kubectl describe` show, through core/v1.
//!
//! The two forms differ only in field names; these are kube's conversions
//! (`k8s.io/kubernetes/pkg/apis/events/v1`), field for field.

use serde_json::{Map, Value};

/// `(events.k8s.io/v1 field, core/v1 field)` for the fields whose names differ. The others
/// (`metadata`, `eventTime`, `series`, `reason`, `type`, `action`, `related`,
/// `reportingInstance`) are the same in both.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Whether `(group, plural)` is core/v1 `events`, the storage of both groups' Events.
pub fn is_core_events(group: &str, plural: &str) -> bool {
    group.is_empty() && plural == "events"
}

/// An `events.k8s.io` Event in the core/v1 form it is stored in. Anything else (a core Event,
/// a malformed body) is returned as it is.
pub fn to_core(obj: Value) -> Value {
    let from_v1 = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| v.starts_with("events.k8s.io/"));
    if !from_v1 {
        return obj;
    }
    rename(obj, "v1", |(v1, core)| (v1, core))
}

/// A stored core/v1 Event in the `events.k8s.io/v1` form. Anything else is returned as it is.
pub fn from_core(obj: &Value) -> Value {
    if obj.get("apiVersion").and_then(Value::as_str) != Some("v1") {
        return obj.clone();
    }
    rename(obj.clone(), "events.k8s.io/v1", |(v1, core)| (core, v1))
}

/// `obj` with `apiVersion` set and each `(from, to)` field that `pair` picks out of
/// [`RENAMED`] moved from `from` to `to`.
fn rename(
    obj: Value,
    api_version: &str,
    pair: impl Fn((&'static str, &'static str)) -> (&'static str, &'static str),
) -> Value {
    let Value::Object(mut fields) = obj else {
        return obj;
    };
    let mut out = Map::with_capacity(fields.len());
    out.insert("apiVersion".into(), Value::String(api_version.into()));
    for &names in RENAMED {
        let (from, to) = pair(names);
        // A field already spelled the target way would be dropped by kube's typed decoding.
        fields.remove(to);
        if let Some(v) = fields.remove(from) {
            out.insert(to.into(), v);
        }
    }
    fields.remove("apiVersion");
    out.extend(fields);
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the host's recorder sends (`apply.rs`), with the deprecated fields of an Event
    /// recorded through core/v1.
    fn v1_event() -> Value {
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "vm.1", "namespace": "default"},
            "eventTime": "2026-11-25T00:00:00.000000Z",
            "type": "Normal", "reason": "Active", "action": "Reconcile",
            "note": "the VM is running",
            "reportingController": "wasmctrl/virtualmachine", "reportingInstance": "host-0",
            "regarding": {"apiVersion": "cloudnative.tw/v1", "kind": "VirtualMachine",
                          "namespace": "default", "name": "vm", "uid": "u-1"},
            "related": {"kind": "Pod", "name": "p"},
            "series": {"count": 2, "lastObservedTime": "2026-11-25T00:01:00.000000Z"},
            "deprecatedSource": {"component": "old"},
            "deprecatedFirstTimestamp": "2026-11-24T00:00:00Z",
            "deprecatedLastTimestamp": "2026-11-25T00:00:00Z",
            "deprecatedCount": 3,
        })
    }

    #[test]
    fn an_events_v1_event_is_stored_in_the_core_form_and_read_back_unchanged() {
        let core = to_core(v1_event());
        assert_eq!(
            core,
            json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "vm.1", "namespace": "default"},
                "eventTime": "2026-11-25T00:00:00.000000Z",
                "type": "Normal", "reason": "Active", "action": "Reconcile",
                "message": "the VM is running",
                "reportingComponent": "wasmctrl/virtualmachine", "reportingInstance": "host-0",
                "involvedObject": {"apiVersion": "cloudnative.tw/v1", "kind": "VirtualMachine",
                                   "namespace": "default", "name": "vm", "uid": "u-1"},
                "related": {"kind": "Pod", "name": "p"},
                "series": {"count": 2, "lastObservedTime": "2026-11-25T00:01:00.000000Z"},
                "source": {"component": "old"},
                "firstTimestamp": "2026-11-24T00:00:00Z",
                "lastTimestamp": "2026-11-25T00:00:00Z",
                "count": 3,
            })
        );
        assert_eq!(from_core(&core), v1_event());
    }

    #[test]
    fn other_objects_pass_through() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "message": "m"});
        assert_eq!(to_core(core.clone()), core);
        let v1 = v1_event();
        assert_eq!(from_core(&v1), v1);
        assert_eq!(to_core(json!("not an object")), json!("not an object"));
    }
}
