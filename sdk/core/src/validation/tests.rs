use serde_json::json;

use super::*;

fn fields(errors: &[FieldError]) -> Vec<&str> {
    errors.iter().map(|e| e.field.as_str()).collect()
}

#[test]
fn names_follow_their_kind_s_grammar_as_apimachinery_words_it() {
    // (rule, name, prefix, whether kube accepts it)
    let cases = [
        (NameRule::Subdomain, "test-vm.abc12", false, true),
        (NameRule::Subdomain, "a.b-c.d", false, true),
        (NameRule::Subdomain, "test-vm.", true, false),
        (NameRule::Subdomain, "test-vm-", true, true),
        (NameRule::Subdomain, "Test", false, false),
        (NameRule::Subdomain, &"a".repeat(254), false, false),
        (NameRule::Label, "team-a", false, true),
        (NameRule::Label, "team.a", false, false),
        (NameRule::Dns1035Label, "web", false, true),
        (NameRule::Dns1035Label, "1web", false, false),
        (NameRule::Label, "1web", false, true),
        (NameRule::PathSegment, "system:discovery", false, true),
        (NameRule::PathSegment, "..", false, false),
        (NameRule::PathSegment, "..", true, true),
        (NameRule::PathSegment, "a/b", false, false),
        (NameRule::PathSegment, "a%b", true, false),
    ];
    for (rule, name, prefix, ok) in cases {
        assert_eq!(
            rule.check(name, prefix).is_empty(),
            ok,
            "{rule:?} {name:?} prefix={prefix}: {:?}",
            rule.check(name, prefix)
        );
    }
    assert_eq!(
        dns1123_subdomain("test-vm."),
        [
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ]
    );
    assert_eq!(dns1123_label("a.b"), ["must not contain dots"]);
    assert_eq!(
        dns1123_label(&"a".repeat(64)),
        ["must be no more than 63 characters"]
    );
}

#[test]
fn kinds_name_their_objects_as_kube_s_strategies_do() {
    assert_eq!(NameRule::of("", "Namespace"), NameRule::Label);
    assert_eq!(NameRule::of("", "Service"), NameRule::Dns1035Label);
    assert_eq!(NameRule::of("", "Event"), NameRule::PathSegment);
    assert_eq!(NameRule::of("events.k8s.io", "Event"), NameRule::Subdomain);
    assert_eq!(
        NameRule::of("rbac.authorization.k8s.io", "ClusterRole"),
        NameRule::PathSegment
    );
    assert_eq!(NameRule::of("example.com", "Widget"), NameRule::Subdomain);
}

#[test]
fn qualified_names_and_label_values() {
    for ok in ["app", "example.com/app", "a_b.c-d", "A1"] {
        assert!(qualified_name(ok).is_empty(), "{ok}");
    }
    assert_eq!(qualified_name("/app"), ["prefix part must be non-empty"]);
    assert_eq!(
        qualified_name("a/b/c")[0],
        "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    );
    assert!(qualified_name("Example.com/app")[0].starts_with("prefix part a lowercase RFC 1123"));
    assert_eq!(
        qualified_name(&"a".repeat(64))[0],
        "name part must be no more than 63 characters"
    );
    assert!(label_value("").is_empty());
    assert!(label_value("v1.2_3").is_empty());
    assert_eq!(label_value("-x").len(), 1);
    assert_eq!(label_value(&"a".repeat(64)).len(), 1);
}

#[test]
fn create_metadata_rules_and_kube_s_causes() {
    // (metadata, the field kube names, its cause reason)
    let long = "x".repeat(ANNOTATIONS_MAX_BYTES);
    let refused = [
        (
            json!({"generateName": "test-vm.", "namespace": "default", "name": "test-vm.x1"}),
            "metadata.generateName",
            "FieldValueInvalid",
        ),
        (
            json!({"namespace": "default"}),
            "metadata.name",
            "FieldValueRequired",
        ),
        (
            json!({"name": "a", "labels": {"bad key!": "v"}, "namespace": "default"}),
            "metadata.labels",
            "FieldValueInvalid",
        ),
        (
            json!({"name": "a", "labels": {"k": "bad value!"}, "namespace": "default"}),
            "metadata.labels",
            "FieldValueInvalid",
        ),
        (
            json!({"name": "a", "annotations": {"no spaces": ""}, "namespace": "default"}),
            "metadata.annotations",
            "FieldValueInvalid",
        ),
        (
            json!({"name": "a", "annotations": {"big": long}, "namespace": "default"}),
            "metadata.annotations",
            "FieldValueTooLong",
        ),
        (
            json!({"name": "a", "finalizers": ["not/a/name"], "namespace": "default"}),
            "metadata.finalizers",
            "FieldValueInvalid",
        ),
        (
            json!({"name": "a", "finalizers": ["orphan", "foregroundDeletion"], "namespace": "default"}),
            "metadata.finalizers",
            "FieldValueInvalid",
        ),
        (
            json!({"name": "a", "namespace": "default", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o"}]}),
            "metadata.ownerReferences.uid",
            "FieldValueInvalid",
        ),
        (
            json!({"name": "a", "namespace": "default", "ownerReferences": [{"apiVersion": "example.com/", "kind": "X", "name": "o", "uid": "1"}]}),
            "metadata.ownerReferences.apiVersion",
            "FieldValueInvalid",
        ),
        (
            json!({"name": "a", "namespace": "default", "ownerReferences": [
            {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": true}]}),
            "metadata.ownerReferences",
            "FieldValueInvalid",
        ),
        (
            json!({"name": "a", "namespace": "default", "ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"}]}),
            "metadata.ownerReferences",
            "FieldValueInvalid",
        ),
        (
            json!({"name": "a"}),
            "metadata.namespace",
            "FieldValueRequired",
        ),
    ];
    for (meta, field, reason) in refused {
        let errors = object_meta(&meta, true, NameRule::Subdomain);
        assert!(
            errors
                .iter()
                .any(|e| e.field == field && e.kind.reason() == reason),
            "{meta}: want {field} {reason}, got {errors:?}"
        );
    }
    let accepted = json!({"name": "test-vm.18f0a", "generateName": "test-vm-", "namespace": "default",
        "labels": {"app.kubernetes.io/name": "x", "empty": ""},
        "annotations": {"Example.com/Mixed": "any value at all"},
        "finalizers": ["example.com/cleanup", "kubernetes"],
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "1", "controller": true},
                            {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "2", "controller": false}]});
    assert_eq!(object_meta(&accepted, true, NameRule::Subdomain), vec![]);
    let cluster = json!({"name": "a", "namespace": "default"});
    assert_eq!(
        fields(&object_meta(&cluster, false, NameRule::Subdomain)),
        ["metadata.namespace"]
    );
}

#[test]
fn messages_read_as_kube_s() {
    let meta = json!({"generateName": "test-vm.", "name": "test-vm.abcde", "namespace": "default"});
    let errors = object_meta(&meta, true, NameRule::Subdomain);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].to_string().starts_with(
            "metadata.generateName: Invalid value: \"test-vm.\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        ),
        "{}",
        errors[0]
    );
    assert_eq!(
        FieldError::too_long("metadata.annotations", ANNOTATIONS_MAX_BYTES).body(),
        "Too long: may not be more than 262144 bytes"
    );
    assert_eq!(
        FieldError::required("metadata.namespace", "").body(),
        "Required value"
    );
    assert_eq!(
        FieldError::forbidden("metadata.namespace", "not allowed on this type").to_string(),
        "metadata.namespace: Forbidden: not allowed on this type"
    );
}

#[test]
fn update_metadata_keeps_what_only_the_server_sets() {
    let old = json!({"name": "a", "uid": "1", "deletionTimestamp": null});
    assert_eq!(object_meta_update(&old.clone(), &old), vec![]);
    let changed_uid = json!({"name": "a", "uid": "2"});
    assert_eq!(
        fields(&object_meta_update(&changed_uid, &old)),
        ["metadata.uid"]
    );
    let deleting = json!({"name": "a", "uid": "1", "deletionTimestamp": "2026-01-01T00:00:00Z"});
    assert_eq!(
        fields(&object_meta_update(&deleting, &old)),
        ["metadata.deletionTimestamp"]
    );
    assert_eq!(
        object_meta_update(&deleting, &old)[0].to_string(),
        "metadata.deletionTimestamp: Invalid value: 2026-01-01 00:00:00 +0000 UTC: field is immutable"
    );
    let bad_label = json!({"name": "a", "uid": "1", "labels": {"k": "no spaces"}});
    assert_eq!(
        fields(&object_meta_update(&bad_label, &old)),
        ["metadata.labels"]
    );
}

/// An events.k8s.io/v1 Event as kube-runtime's Recorder writes it, in the core form.
fn recorded() -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "test-vm.18f0a", "namespace": "default"},
        "eventTime": "2026-11-26T05:00:00.123456Z", "type": "Normal", "reason": "Active",
        "message": "running", "action": "Reconcile", "reportingComponent": "wasmctrl.io/virtualmachine",
        "reportingInstance": "host-0",
        "involvedObject": {"apiVersion": "cloudnative.tw/v1alpha1", "kind": "VirtualMachine",
            "namespace": "default", "name": "test-vm", "uid": "1"}})
}

#[test]
fn events_rules_per_group() {
    assert_eq!(event(&recorded(), true), vec![]);
    assert_eq!(event(&recorded(), false), vec![]);
    // (change, the field kube names through events.k8s.io/v1)
    let cases: [(&str, serde_json::Value, &str); 8] = [
        ("/eventTime", serde_json::Value::Null, "eventTime"),
        (
            "/reportingComponent",
            json!("not a name"),
            "reportingController",
        ),
        ("/reportingComponent", json!(""), "reportingController"),
        ("/message", json!("n".repeat(EVENT_NOTE_MAX + 1)), "message"),
        ("/reason", json!("r".repeat(EVENT_REASON_MAX + 1)), "reason"),
        ("/action", json!(""), "action"),
        ("/type", json!("Info"), "type"),
        (
            "/series",
            json!({"count": 1, "lastObservedTime": "2026-11-26T05:00:00.000000Z"}),
            "series.count",
        ),
    ];
    for (pointer, value, field) in cases {
        let mut e = recorded();
        match pointer.rsplit_once('/') {
            Some(("", key)) => e[key] = value,
            _ => *e.pointer_mut(pointer).unwrap() = value,
        }
        let errors = event(&e, true);
        assert!(fields(&errors).contains(&field), "{pointer}: {errors:?}");
    }
    // A cluster-scoped object's Events live in "default" (or kube-system), nowhere else.
    let mut e = recorded();
    e["involvedObject"] = json!({"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "2"});
    assert_eq!(event(&e, true), vec![]);
    e["metadata"]["namespace"] = json!("team-a");
    assert_eq!(fields(&event(&e, true)), ["involvedObject.namespace"]);
    // Through core/v1 the controller is `reportingComponent`, and type/eventTime rules are
    // the strict API's only.
    let mut e = recorded();
    e["reportingComponent"] = json!("bad name!");
    e["type"] = json!("Info");
    assert_eq!(fields(&event(&e, false)), ["reportingComponent"]);
}

#[test]
fn an_event_update_may_change_only_its_series() {
    let old = recorded();
    let mut new = old.clone();
    new["series"] = json!({"count": 2, "lastObservedTime": "2026-11-26T05:01:00.000000Z"});
    assert_eq!(event_update(&new, &old, true), vec![]);
    // Sub-microsecond differences are tolerated, as kube does.
    new["eventTime"] = json!("2026-11-26T05:00:00.123456789Z");
    assert_eq!(event_update(&new, &old, true), vec![]);
    new["message"] = json!("another");
    new["reportingComponent"] = json!("other.io/x");
    assert_eq!(
        fields(&event_update(&new, &old, true)),
        ["message", "reportingController"]
    );
    // core/v1 updates are checked by the legacy rules only.
    assert_eq!(event_update(&new, &old, false), vec![]);
}
