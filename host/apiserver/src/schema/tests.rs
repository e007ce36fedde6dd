//! Unit tests: each keyword, kube-apiserver's wording, all violations collected, pruning,
//! ratcheting and CRD schema errors.

use serde_json::{Value, json};

use super::field::go_float;
use super::{Schema, crd_default_errors, crd_schemas, prune, validate};
use crate::status::Cause;

fn schema(v: Value) -> Schema {
    let mut errs = Vec::new();
    let s = Schema::parse(&v, "", &mut errs);
    assert!(errs.is_empty(), "{errs:?}");
    s
}

/// A root schema with `spec` as given.
fn root(spec: Value) -> Schema {
    schema(json!({"type": "object", "properties": {"spec": spec}}))
}

fn causes(s: &Schema, spec: Value) -> Vec<Cause> {
    let mut obj =
        json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}, "spec": spec});
    prune(s, &mut obj, false, true);
    validate::object(s, &obj, None)
}

/// `field: message` lines, as the 422 message lists them.
fn lines(s: &Schema, spec: Value) -> Vec<String> {
    causes(s, spec)
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

fn one(spec_schema: Value, spec: Value) -> Vec<String> {
    lines(&root(spec_schema), spec)
}

#[test]
fn type_mismatches_use_kube_wording() {
    let s = json!({"type": "object", "properties": {"age": {"type": "integer"}, "name": {"type": "string"},
        "on": {"type": "boolean"}, "ratio": {"type": "number"}, "list": {"type": "array", "items": {"type": "string"}}}});
    assert_eq!(
        one(s.clone(), json!({"age": "x"})),
        [
            r#"spec.age: Invalid value: "string": spec.age in body must be of type integer: "string""#
        ]
    );
    assert_eq!(
        one(s.clone(), json!({"name": 5, "on": "yes", "list": {"a": 1}})),
        [
            r#"spec.list: Invalid value: "object": spec.list in body must be of type array: "object""#,
            r#"spec.name: Invalid value: "integer": spec.name in body must be of type string: "integer""#,
            r#"spec.on: Invalid value: "string": spec.on in body must be of type boolean: "string""#,
        ]
    );
    let c = causes(&root(s.clone()), json!({"age": 1.5}));
    assert_eq!(c[0].reason, "FieldValueTypeInvalid");
    assert!(
        c[0].message
            .ends_with(r#"must be of type integer: "number""#)
    );
    // Integers are numbers; integral floats are integers.
    assert!(one(s.clone(), json!({"ratio": 3, "age": 4.0})).is_empty());
}

#[test]
fn integral_floats_are_stored_as_integers() {
    let s = root(
        json!({"type": "object", "properties": {"age": {"type": "integer"}, "r": {"type": "number"}}}),
    );
    let mut obj = json!({"spec": {"age": 3.0, "r": 2.0}});
    prune(&s, &mut obj, false, true);
    assert_eq!(obj["spec"]["age"].to_string(), "3");
    assert_eq!(obj["spec"]["r"].to_string(), "2.0");
}

#[test]
fn required_and_all_violations_are_collected() {
    let s = json!({"type": "object", "required": ["table", "name", "age", "country"], "properties": {
        "table": {"type": "string", "minLength": 1}, "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0}, "country": {"type": "string"}}});
    let got = causes(&root(s), json!({"table": "", "name": "a", "age": -1}));
    let summary: Vec<(&str, &str)> = got.iter().map(|c| (c.reason, c.field.as_str())).collect();
    assert_eq!(
        summary,
        [
            ("FieldValueInvalid", "spec.age"),
            ("FieldValueInvalid", "spec.table"),
            ("FieldValueRequired", "spec.country"),
        ]
    );
    assert_eq!(
        got[0].message,
        "Invalid value: -1: spec.age in body should be greater than or equal to 0"
    );
    assert_eq!(
        got[1].message,
        r#"Invalid value: "": spec.table in body should be at least 1 chars long"#
    );
    assert_eq!(got[2].message, "Required value");
    // A missing spec is one Required cause at the root.
    let s = schema(
        json!({"type": "object", "required": ["spec"], "properties": {"spec": {"type": "object"}}}),
    );
    let v = validate::object(&s, &json!({"metadata": {}}), None);
    assert_eq!(
        (v[0].field.as_str(), v[0].reason),
        ("spec", "FieldValueRequired")
    );
}

#[test]
fn numeric_bounds() {
    let s = json!({"type": "object", "properties": {
        "i": {"type": "integer", "minimum": 1, "maximum": 2147483647},
        "x": {"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 10, "exclusiveMaximum": true},
        "f": {"type": "number", "minimum": 0.5, "maximum": 2147483647},
        "m": {"type": "integer", "multipleOf": 5}}});
    assert_eq!(
        one(s.clone(), json!({"i": 0, "x": 0, "f": 0.25, "m": 7})),
        [
            "spec.f: Invalid value: 0.25: spec.f in body should be greater than or equal to 0.5",
            "spec.i: Invalid value: 0: spec.i in body should be greater than or equal to 1",
            "spec.m: Invalid value: 7: spec.m in body should be a multiple of 5",
            "spec.x: Invalid value: 0: spec.x in body should be greater than 0",
        ]
    );
    // Integers print bounds as integers, floats as Go prints a float64.
    assert_eq!(
        one(s.clone(), json!({"i": 2147483648_i64, "x": 10, "f": 3e9})),
        [
            "spec.f: Invalid value: 3e+09: spec.f in body should be less than or equal to 2.147483647e+09",
            "spec.i: Invalid value: 2147483648: spec.i in body should be less than or equal to 2147483647",
            "spec.x: Invalid value: 10: spec.x in body should be less than 10",
        ]
    );
    assert!(one(s, json!({"i": 1, "x": 5, "f": 0.5, "m": 10})).is_empty());
}

#[test]
fn go_float_formatting() {
    for (f, want) in [
        (0.0, "0"),
        (0.5, "0.5"),
        (1e6, "1e+06"),
        (123456.0, "123456"),
        (0.0001, "0.0001"),
        (0.000015, "1.5e-05"),
        (-2147483647.0, "-2.147483647e+09"),
        (1e21, "1e+21"),
        (3.25, "3.25"),
    ] {
        assert_eq!(go_float(f), want, "{f}");
    }
}

#[test]
fn strings_length_counts_characters_and_pattern() {
    let s = json!({"type": "object", "properties": {
        "t": {"type": "string", "maxLength": 3, "minLength": 2},
        "q": {"type": "string", "pattern": "^[0-9]+(m|Gi)?$"}}});
    // Four characters but eight bytes: too long by characters.
    let got = causes(&root(s.clone()), json!({"t": "ÅÅÅÅ", "q": "lots"}));
    assert_eq!(got[0].field, "spec.q");
    assert_eq!(
        got[0].message,
        r#"Invalid value: "lots": spec.q in body should match '^[0-9]+(m|Gi)?$'"#
    );
    assert_eq!(
        (got[1].reason, got[1].message.as_str()),
        (
            "FieldValueTooLong",
            "Too long: may not be more than 3 bytes"
        )
    );
    assert!(one(s.clone(), json!({"t": "ÅÅÅ", "q": "500m"})).is_empty());
    assert_eq!(
        one(s, json!({"t": "a"})),
        [r#"spec.t: Invalid value: "a": spec.t in body should be at least 2 chars long"#]
    );
}

#[test]
fn enums_list_supported_values() {
    let s = json!({"type": "object", "properties": {
        "a": {"type": "string", "enum": ["start", "stop"]}, "n": {"type": "integer", "enum": [1, 2]}}});
    let got = causes(&root(s.clone()), json!({"a": "go", "n": 3}));
    assert_eq!(got[0].reason, "FieldValueNotSupported");
    assert_eq!(
        got[0].message,
        r#"Unsupported value: "go": supported values: "start", "stop""#
    );
    assert_eq!(
        got[1].message,
        r#"Unsupported value: 3: supported values: "1", "2""#
    );
    assert!(one(s, json!({"a": "stop", "n": 2.0})).is_empty());
}

#[test]
fn arrays_and_maps() {
    let s = json!({"type": "object", "properties": {
        "l": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "object",
              "required": ["name"], "properties": {"name": {"type": "string"}}}},
        "m": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "integer"}},
        "n": {"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}}}});
    assert_eq!(
        one(
            s.clone(),
            json!({"l": [{"name": 1}, {}, {"name": "c"}], "m": {"a": 1, "b": 2}, "n": {"x": "y"}})
        ),
        [
            r#"spec.l[0].name: Invalid value: "integer": spec.l[0].name in body must be of type string: "integer""#,
            "spec.l[1].name: Required value",
            "spec.l: Too many: 3: must have at most 2 items",
            "spec.m: Too many: 2: must have at most 1 item",
            "spec.n: Invalid value: 1: spec.n in body should have at least 2 properties",
        ]
    );
    assert_eq!(
        one(s.clone(), json!({"l": [], "m": {"a": "x"}})),
        [
            "spec.l: Invalid value: 0: spec.l in body should have at least 1 items",
            r#"spec.m.a: Invalid value: "string": spec.m.a in body must be of type integer: "string""#,
        ]
    );
}

#[test]
fn nullable_int_or_string_and_format() {
    let s = json!({"type": "object", "properties": {
        "port": {"x-kubernetes-int-or-string": true},
        "n": {"type": "string", "nullable": true},
        "when": {"type": "string", "format": "date-time"},
        "gen": {"type": "integer", "format": "int64"},
        "list": {"type": "array", "items": {"type": "string"}}}});
    assert!(
        one(
            s.clone(),
            json!({"port": "http", "n": null, "when": "2026-01-01T00:00:00Z", "gen": 2})
        )
        .is_empty()
    );
    // A string not of its format is a type error of the format, as kube reports it.
    assert_eq!(
        one(s.clone(), json!({"when": "whenever"})),
        [
            r#"spec.when: Invalid value: "whenever": spec.when in body must be of type date-time: "whenever""#
        ]
    );
    assert!(one(s.clone(), json!({"port": 8080})).is_empty());
    assert_eq!(
        one(
            s.clone(),
            json!({"port": true, "when": 5, "gen": "x", "list": [null]})
        ),
        [
            r#"spec.gen: Invalid value: "string": spec.gen in body must be of type integer: "string""#,
            r#"spec.list[0]: Invalid value: "null": spec.list[0] in body must be of type string: "null""#,
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
            r#"spec.when: Invalid value: "int64": spec.when in body must be of type date-time: "int64""#,
        ]
    );
    // A nullable field keeps its null; a non-nullable one loses it (and is then missing).
    let s = root(json!({"type": "object", "required": ["r"], "properties": {
        "r": {"type": "string"}, "n": {"type": "string", "nullable": true}}}));
    let mut obj = json!({"spec": {"r": null, "n": null}});
    prune(&s, &mut obj, false, true);
    assert_eq!(obj["spec"], json!({"n": null}));
    assert_eq!(lines(&s, json!({"r": null})), ["spec.r: Required value"]);
}

#[test]
fn pruning_drops_unknown_fields_recursively() {
    let s = schema(json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "keep": {"type": "object", "properties": {"a": {"type": "string"}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                     "properties": {"inner": {"type": "object", "properties": {"b": {"type": "string"}}}}},
            "list": {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "string"}}}},
            "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"d": {"type": "string"}}}},
            "emb": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}}}}}));
    let mut obj = json!({
        "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n", "labels": {"a": "b"}},
        "status": {"gone": true}, "extra": 1,
        "spec": {
            "extra": 1,
            "keep": {"a": "x", "z": 1},
            "free": {"anything": {"goes": 1}, "inner": {"b": "x", "z": 1}},
            "list": [{"c": "x", "z": 1}],
            "map": {"k": {"d": "x", "z": 1}},
            "emb": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}, "z": 1},
        },
    });
    prune(&s, &mut obj, false, true);
    assert_eq!(
        obj,
        json!({
            "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n", "labels": {"a": "b"}},
            "spec": {
                "keep": {"a": "x"},
                "free": {"anything": {"goes": 1}, "inner": {"b": "x"}},
                "list": [{"c": "x"}],
                "map": {"k": {"d": "x"}},
                "emb": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
            },
        })
    );
}

#[test]
fn values_of_additional_properties_true_keep_no_object_fields_even_where_unknown_fields_are_kept() {
    let s = root(json!({"type": "object", "properties": {
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "additionalProperties": true},
        "map": {"type": "object", "additionalProperties": true}}}));
    let mut obj = json!({"spec": {
        "free": {"scalar": 1, "nested": {"a": 1}, "list": [1, {"b": true}]},
        "map": {"nested": {"a": 1}},
    }});
    prune(&s, &mut obj, false, true);
    assert_eq!(
        obj["spec"],
        json!({"free": {"scalar": 1, "nested": {}, "list": [1, {}]}, "map": {"nested": {}}})
    );
}

#[test]
fn preserve_unknown_fields_root_accepts_anything() {
    let s = schema(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let mut obj = json!({"metadata": {"name": "x"}, "spec": {"size": "big", "n": [1, {"a": null}]}, "status": 3});
    let before = obj.clone();
    prune(&s, &mut obj, false, true);
    assert_eq!(obj, before);
    assert!(validate::object(&s, &obj, None).is_empty());
}

#[test]
fn root_metadata_is_not_judged() {
    let s = schema(
        json!({"type": "object", "properties": {"metadata": {"type": "object",
        "properties": {"name": {"type": "string", "maxLength": 1}}}}}),
    );
    let obj = json!({"metadata": {"name": "long-name"}});
    assert!(validate::object(&s, &obj, None).is_empty());
}

#[test]
fn unchanged_values_are_ratcheted_on_update() {
    let s = root(json!({"type": "object", "properties": {
        "age": {"type": "integer", "minimum": 0}, "name": {"type": "string", "minLength": 2}}}));
    let old = json!({"spec": {"age": -1, "name": "ok"}});
    // The stored bad age stays acceptable while something else changes...
    let new = json!({"spec": {"age": -1, "name": "fine"}});
    assert!(validate::object(&s, &new, Some(&old)).is_empty());
    // ...but a changed value is judged, and a create judges everything.
    let new = json!({"spec": {"age": -2, "name": "x"}});
    assert_eq!(validate::object(&s, &new, Some(&old)).len(), 2);
    assert_eq!(validate::object(&s, &old, None).len(), 1);
}

#[test]
fn crd_schema_errors_name_the_schema_field() {
    let crd = json!({"spec": {"versions": [
        {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "a": {"type": "strin"}, "b": {"type": "string", "pattern": "("}}}}}]}});
    let errs = crd_schemas(&crd).unwrap_err();
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(
        errs[0].field,
        "spec.validation.openAPIV3Schema.properties[a].type"
    );
    assert_eq!(
        errs[0].message,
        r#"Unsupported value: "strin": supported values: "array", "boolean", "integer", "number", "object", "string""#
    );
    assert_eq!(
        errs[1].field,
        "spec.validation.openAPIV3Schema.properties[b].pattern"
    );
    assert!(
        errs[1]
            .message
            .starts_with(r#"Invalid value: "(": must be a valid regular expression, but isn't: error parsing regexp: "#),
        "{}",
        errs[1].message
    );
    // Versions of different schemas are named each by its own path, as kube names them.
    let two = json!({"spec": {"versions": [
        {"name": "v1", "schema": {"openAPIV3Schema": {"type": "strin"}}},
        {"name": "v2", "schema": {"openAPIV3Schema": {"type": "objec"}}}]}});
    let fields: Vec<String> = crd_schemas(&two)
        .unwrap_err()
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(
        fields,
        [
            "spec.versions[0].schema.openAPIV3Schema.type",
            "spec.versions[1].schema.openAPIV3Schema.type"
        ]
    );
    let ok = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
    assert_eq!(crd_schemas(&ok).unwrap().len(), 1);
}

/// The example CRDs must take their sample objects and every status field their plugins write
/// unchanged: the host skips a status write only when the stored status equals the desired one,
/// so a field pruned here would be written again on every reconcile.
#[test]
fn example_crds_keep_samples_and_plugin_statuses_intact() {
    let cases = [
        (
            include_str!("../../../../examples/postgres-writer/crd.yaml"),
            include_str!("../../../../examples/postgres-writer/sample.yaml"),
            json!({"phase": "Invalid", "table": "", "id": "", "message": "spec.age required",
                   "observedGeneration": 2}),
        ),
        (
            include_str!("../../../../examples/virtualmachine/crd.yaml"),
            include_str!("../../../../examples/virtualmachine/test-vm.yaml"),
            json!({"phase": "Active", "reason": "x",
                   "server": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"},
                   "observedGeneration": 1, "lastUpdateTime": "2026-01-01T00:00:00Z"}),
        ),
        (
            include_str!("../../../../examples/workspace/crd.yaml"),
            include_str!("../../../../examples/workspace/sample.yaml"),
            json!({"phase": "Running", "podIP": "10.0.0.7", "nodeName": "node-1", "observedGeneration": 3,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "PodRunning",
                                   "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
                                   "observedGeneration": 3}]}),
        ),
    ];
    for (crd, sample, status) in cases {
        let crd: Value = serde_yaml::from_str(crd).unwrap();
        let name = crd["metadata"]["name"].as_str().unwrap().to_string();
        let schemas = crd_schemas(&crd).unwrap();
        let s = schemas.values().next().unwrap();
        let mut obj: Value = serde_yaml::from_str(sample).unwrap();
        obj["status"] = status;
        let before = obj.clone();
        prune(s, &mut obj, false, true);
        assert_eq!(obj, before, "{name}: pruning changed the object");
        let causes = validate::object(s, &obj, None);
        assert!(causes.is_empty(), "{name}: {causes:?}");
    }
}

/// A CRD with one version whose root schema is `schema`.
fn crd_with(schema: Value) -> Value {
    json!({"metadata": {"name": "xs.example.com"}, "spec": {"group": "example.com",
        "names": {"plural": "xs", "kind": "X"}, "scope": "Namespaced",
        "versions": [{"name": "v1", "served": true, "storage": true,
                      "schema": {"openAPIV3Schema": schema}}]}})
}

/// The `field: message` lines of the causes a CRD's `spec` schema's defaults are refused with.
fn default_lines(spec_schema: Value) -> Vec<String> {
    let crd = crd_with(json!({"type": "object", "properties": {"spec": spec_schema}}));
    assert!(crd_schemas(&crd).is_ok());
    crd_default_errors(&crd, None)
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

const SIZE: &str = "spec.validation.openAPIV3Schema.properties[spec].properties[size].default";

#[test]
fn a_default_outside_its_bounds_is_refused_as_kube_words_it() {
    let lines = default_lines(json!({"type": "object", "properties": {
        "size": {"type": "integer", "minimum": 1, "default": 0}}}));
    assert_eq!(
        lines,
        [format!(
            "{SIZE}: Invalid value: 0:  in body should be greater than or equal to 1"
        )]
    );
}

#[test]
fn a_default_of_the_wrong_type_not_in_the_enum_or_not_matching_the_pattern_is_refused() {
    let spec = |size: Value| json!({"type": "object", "properties": {"size": size}});
    assert_eq!(
        default_lines(spec(json!({"type": "integer", "default": "big"}))),
        [format!(
            r#"{SIZE}: Invalid value: "string":  in body must be of type integer: "string""#
        )]
    );
    assert_eq!(
        default_lines(spec(
            json!({"type": "string", "enum": ["S", "M"], "default": "XL"})
        )),
        [format!(
            r#"{SIZE}: Unsupported value: "XL": supported values: "S", "M""#
        )]
    );
    assert_eq!(
        default_lines(spec(
            json!({"type": "string", "pattern": "^[a-z]+$", "default": "X1"})
        )),
        [format!(
            r#"{SIZE}: Invalid value: "X1":  in body should match '^[a-z]+$'"#
        )]
    );
    assert_eq!(
        default_lines(spec(
            json!({"type": "string", "maxLength": 2, "default": "abc"})
        )),
        [format!("{SIZE}: Too long: may not be more than 2 bytes")]
    );
}

#[test]
fn an_object_default_is_checked_field_by_field_and_nulls_need_nullable() {
    let lines = default_lines(json!({"type": "object", "default": {"name": null, "n": -1},
        "properties": {"name": {"type": "string"}, "n": {"type": "integer", "minimum": 0}}}));
    let at = "spec.validation.openAPIV3Schema.properties[spec].default";
    assert_eq!(
        lines,
        [
            format!("{at}.n: Invalid value: -1: n in body should be greater than or equal to 0"),
            format!(
                r#"{at}.name: Invalid value: "null": name in body must be of type string: "null""#
            ),
        ]
    );
    assert!(
        default_lines(json!({"type": "object", "default": {"name": null},
            "properties": {"name": {"type": "string", "nullable": true}}}))
        .is_empty()
    );
    // `default: null` is no default at all once Go has decoded it.
    assert!(default_lines(json!({"type": "string", "default": null})).is_empty());
}

#[test]
fn a_default_with_fields_its_schema_prunes_is_refused() {
    let lines = default_lines(
        json!({"type": "object", "default": {"known": 1, "extra": "x"},
        "properties": {"known": {"type": "integer"}}}),
    );
    assert_eq!(
        lines,
        [
            r#"spec.validation.openAPIV3Schema.properties[spec].default: Invalid value: map[string]interface {}{"extra":"x", "known":1}: must not have unknown fields"#
        ]
    );
    // Where unknown fields are kept, they are no reason to refuse.
    assert!(
        default_lines(json!({"type": "object", "default": {"extra": "x"},
            "x-kubernetes-preserve-unknown-fields": true}))
        .is_empty()
    );
}

#[test]
fn a_default_breaking_a_cel_rule_of_its_subtree_is_refused() {
    let lines = default_lines(json!({"type": "object", "properties": {"size": {
        "type": "integer", "default": 3,
        "x-kubernetes-validations": [{"rule": "self % 2 == 0", "message": "must be even"}]}}}));
    assert_eq!(
        lines,
        [format!(r#"{SIZE}: Invalid value: "integer": must be even"#)]
    );
}

#[test]
fn valid_defaults_are_accepted() {
    let lines = default_lines(
        json!({"type": "object", "default": {"size": 2}, "properties": {
        "size": {"type": "integer", "minimum": 1, "maximum": 9, "default": 4,
                 "x-kubernetes-validations": [{"rule": "self % 2 == 0"}]},
        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
        "tags": {"type": "array", "items": {"type": "string"}, "default": ["x", "x"],
                 "x-kubernetes-list-type": "set"}}}),
    );
    assert!(lines.is_empty(), "{lines:?}");
}

#[test]
fn defaults_are_forbidden_where_kube_forbids_them() {
    let crd = crd_with(json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "n"}}},
        "spec": {"type": "object", "properties": {"embedded": {"type": "object",
            "x-kubernetes-embedded-resource": true, "properties": {"metadata": {"type": "object",
                "properties": {"annotations": {"type": "object",
                    "additionalProperties": {"type": "string", "default": "a"}}}}}}}}}}));
    let fields: Vec<String> = crd_default_errors(&crd, None)
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    let root = "spec.validation.openAPIV3Schema";
    assert_eq!(
        fields,
        [
            format!(
                "{root}.properties[metadata].properties[name].default: Forbidden: must not be set in top-level metadata"
            ),
            format!(
                "{root}.properties[spec].properties[embedded].properties[metadata].properties[annotations].additionalProperties.default: Forbidden: must not be set inside additionalProperties applying to object metadata"
            ),
        ]
    );
    let mut preserving = crd_with(json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}}}}));
    preserving["spec"]["preserveUnknownFields"] = json!(true);
    let causes = crd_default_errors(&preserving, None);
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].field, "spec.preserveUnknownFields");
    assert_eq!(
        causes[0].message,
        "Invalid value: true: must be false in order to use defaults in the schema"
    );
}

#[test]
fn an_update_may_keep_the_unpruned_defaults_its_crd_had() {
    let unpruned = crd_with(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "default": {"extra": 1}}}}),
    );
    assert_eq!(crd_default_errors(&unpruned, None).len(), 1);
    assert!(crd_default_errors(&unpruned, Some(&unpruned)).is_empty());
}

#[test]
fn a_huge_default_is_checked_in_one_bounded_pass() {
    let items: Vec<Value> = (0..50_000).map(|i| json!(i)).collect();
    let lines = default_lines(json!({"type": "array", "maxItems": 10,
        "items": {"type": "integer", "minimum": 0}, "default": items}));
    assert_eq!(
        lines,
        [
            "spec.validation.openAPIV3Schema.properties[spec].default: Too many: 50000: must have at most 10 items"
        ]
    );
}
