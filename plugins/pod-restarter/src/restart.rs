//! The one JSON Patch (RFC 6902) that both records a handled Pod and restarts the Deployment.
//!
//! Record and effect travel in the same write, guarded by a `test` of the record as it was read:
//! either both happen or neither does. A concurrent writer of the record (another Pod reconciled
//! at the same moment, or a stale cache) makes the `test` fail, the API server answers 422, and
//! the host requeues the Pod to decide again from fresher data.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use wasmctrl_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The Deployment annotation holding the UIDs of the Pods already handled, as a sorted JSON array.
pub const HANDLED: &str = "pod-restarter.wasmctrl.io/handled-pods";

/// The Pod template annotation `kubectl rollout restart` sets; changing it rolls the Deployment.
pub const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";

/// The record and the restart read and write a Deployment's annotations; k8s-openapi's
/// metadata tell an absent map (`None`) from an empty one, which [`patch`] needs: a `test` of a
/// member of a missing map fails.
pub use wasmctrl_sdk::k8s_openapi::api::apps::v1::Deployment;

/// What the restart reads of a Deployment.
pub trait Record {
    /// The raw record annotation, when present.
    fn record(&self) -> Option<&str>;
    /// The handled Pod UIDs; a record someone edited into something else is an error, because
    /// guessing would either restart again for old Pods or never for new ones.
    fn handled(&self) -> Result<BTreeSet<String>, String>;
}

impl Record for Deployment {
    fn record(&self) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(HANDLED))
            .map(String::as_str)
    }

    fn handled(&self) -> Result<BTreeSet<String>, String> {
        match self.record() {
            None => Ok(BTreeSet::new()),
            Some(raw) => serde_json::from_str(raw).map_err(|e| {
                format!(
                    "annotation {HANDLED} is not a JSON array of Pod UIDs ({e}); fix or remove it"
                )
            }),
        }
    }
}

/// JSON Pointer escaping (RFC 6901) of one path segment: annotation keys contain `/`.
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The operations that replace the record with `handled` and set `restartedAt` to `now`.
///
/// Every map that may be absent is created whole behind a `test` that it is still absent: the
/// Kubernetes API server (and the embedded one) treat `test` with `null` on a missing member as
/// a match, but reject a `test` whose parent is missing, so the absent-map case tests the map
/// itself rather than a key inside it. Adding a whole map without that test could overwrite
/// annotations someone else added in the meantime.
pub fn patch(
    deployment: &Deployment,
    handled: &BTreeSet<String>,
    now: &str,
) -> Result<Vec<Value>, String> {
    let record = serde_json::to_string(handled).map_err(|e| e.to_string())?;
    let mut ops = Vec::with_capacity(4);
    match (&deployment.metadata.annotations, deployment.record()) {
        (None, _) => ops.extend([
            json!({"op": "test", "path": "/metadata/annotations", "value": null}),
            json!({"op": "add", "path": "/metadata/annotations", "value": {HANDLED: record}}),
        ]),
        (Some(_), previous) => {
            let path = format!("/metadata/annotations/{}", escape(HANDLED));
            ops.extend([
                json!({"op": "test", "path": path, "value": previous}),
                json!({"op": "add", "path": path, "value": record}),
            ]);
        }
    }
    // A Deployment always has a spec; one without is treated as a template without metadata.
    let template_meta = (deployment.spec.as_ref()).and_then(|spec| spec.template.metadata.as_ref());
    let restart = |path: &str, value: Value| {
        [
            json!({"op": "test", "path": path, "value": null}),
            json!({"op": "add", "path": path, "value": value}),
        ]
    };
    match template_meta {
        None => ops.extend(restart(
            "/spec/template/metadata",
            json!({"annotations": {RESTARTED_AT: now}}),
        )),
        Some(ObjectMeta {
            annotations: None, ..
        }) => ops.extend(restart(
            "/spec/template/metadata/annotations",
            json!({RESTARTED_AT: now}),
        )),
        // `add` replaces an existing member: no precondition needed, the newest restart wins.
        Some(ObjectMeta {
            annotations: Some(_),
            ..
        }) => ops.push(json!({
            "op": "add",
            "path": format!("/spec/template/metadata/annotations/{}", escape(RESTARTED_AT)),
            "value": now,
        })),
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(mut value: Value) -> Deployment {
        // k8s-openapi requires what every stored Deployment has.
        if let Some(spec) = value.get_mut("spec") {
            spec["selector"] = json!({});
            if spec.get("template").is_none() {
                spec["template"] = json!({});
            }
        }
        serde_json::from_value(value).unwrap()
    }

    fn uids(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn absent_maps_are_created_behind_a_test_that_they_are_still_absent() {
        let d = deployment(json!({"metadata": {"name": "tools"}, "spec": {"template": {}}}));
        let ops = patch(&d, &uids(&["u1"]), "T").unwrap();
        assert_eq!(
            ops,
            vec![
                json!({"op": "test", "path": "/metadata/annotations", "value": null}),
                json!({"op": "add", "path": "/metadata/annotations", "value": {HANDLED: "[\"u1\"]"}}),
                json!({"op": "test", "path": "/spec/template/metadata", "value": null}),
                json!({"op": "add", "path": "/spec/template/metadata",
                    "value": {"annotations": {RESTARTED_AT: "T"}}}),
            ]
        );
    }

    #[test]
    fn present_maps_get_member_operations_with_the_record_tested() {
        let d = deployment(json!({
            "metadata": {"annotations": {HANDLED: "[\"u0\"]", "other": "x"}},
            "spec": {"template": {"metadata": {"labels": {"app": "tools"}}}},
        }));
        let ops = patch(&d, &uids(&["u0", "u1"]), "T").unwrap();
        let record_path = "/metadata/annotations/pod-restarter.wasmctrl.io~1handled-pods";
        assert_eq!(
            ops,
            vec![
                json!({"op": "test", "path": record_path, "value": "[\"u0\"]"}),
                json!({"op": "add", "path": record_path, "value": "[\"u0\",\"u1\"]"}),
                json!({"op": "test", "path": "/spec/template/metadata/annotations", "value": null}),
                json!({"op": "add", "path": "/spec/template/metadata/annotations",
                    "value": {RESTARTED_AT: "T"}}),
            ]
        );
    }

    #[test]
    fn an_absent_record_in_a_present_map_is_tested_as_null() {
        let d = deployment(json!({
            "metadata": {"annotations": {"other": "x"}},
            "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: "old"}}}},
        }));
        let ops = patch(&d, &uids(&["u1"]), "T").unwrap();
        assert_eq!(ops[0]["value"], Value::Null);
        assert_eq!(
            ops[0]["path"],
            "/metadata/annotations/pod-restarter.wasmctrl.io~1handled-pods"
        );
        assert_eq!(
            ops[2],
            json!({"op": "add",
                "path": "/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt",
                "value": "T"})
        );
        assert_eq!(ops.len(), 3);
    }

    #[test]
    fn a_mangled_record_is_an_error_not_a_guess() {
        let d = deployment(json!({"metadata": {"annotations": {HANDLED: "u1,u2"}}}));
        assert!(d.handled().unwrap_err().contains("fix or remove it"));
        let d = deployment(json!({"metadata": {"annotations": {HANDLED: "[\"u1\"]"}}}));
        assert_eq!(d.handled().unwrap(), uids(&["u1"]));
    }
}
