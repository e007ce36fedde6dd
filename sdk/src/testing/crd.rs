//! Checking a plugin's CRD file against its Rust types ([`check_crd`]), and the generated CRD
//! against what kube-apiserver accepts: every `default` in its schema must validate against the
//! schema it sits in (kube-apiserver refuses the CRD otherwise), which a bare `#[serde(default)]`
//! on a bounded field breaks (`default: 0` below `minimum: 1`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// Fails unless the file at `path` holds the CRD generated from `K` (feature `kube`), so that a
/// plugin's CRD under `examples/` never drifts from its types. With `WASMCTRL_UPDATE_CRDS=1` in
/// the environment it writes the file instead:
///
/// ```ignore
/// #[test]
/// fn crd_is_generated_from_the_types() {
///     check_crd::<VirtualMachine>(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/vm/crd.yaml"));
/// }
/// ```
///
/// # Panics
///
/// When the file differs or cannot be read or written: the message says how to regenerate it.
pub fn check_crd<K: kube_core::CustomResourceExt>(path: impl AsRef<std::path::Path>) {
    check_generated(
        path.as_ref(),
        &K::crd(),
        std::any::type_name::<K>(),
        "check_crd",
    );
}

/// [`check_crd`] for the CRD with its descriptions cut to `max_description_len` characters (0
/// drops them), as kubebuilder's `crd:maxDescLen` does: for a CRD that embeds Kubernetes' own
/// types and so grows past what a plain `kubectl apply` takes (see
/// [`crd_with_descriptions_cut`](crate::kube::crd_with_descriptions_cut)).
///
/// # Panics
///
/// As [`check_crd`].
pub fn check_crd_trimmed<K: kube_core::CustomResourceExt>(
    path: impl AsRef<std::path::Path>,
    max_description_len: usize,
) {
    let crd = crate::kube::crd_with_descriptions_cut::<K>(max_description_len);
    let by = "check_crd_trimmed";
    check_generated(path.as_ref(), &crd, std::any::type_name::<K>(), by);
}

/// [`check_crd`] for a kind served at several versions, each its own Rust type: their CRDs
/// merged into one (kube's `merge_crds`), `storage` the version objects are stored at.
///
/// ```ignore
/// check_crd_versions(
///     concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/memcached/crd.yaml"),
///     vec![Memcached::crd(), v1beta1::Memcached::crd()],
///     "v1alpha1",
/// );
/// ```
///
/// # Panics
///
/// As [`check_crd`], and when the CRDs are not versions of one kind.
pub fn check_crd_versions(
    path: impl AsRef<std::path::Path>,
    crds: Vec<CustomResourceDefinition>,
    storage: &str,
) {
    let name = crds
        .first()
        .and_then(|c| c.metadata.name.clone())
        .unwrap_or_default();
    let crd = match kube_core::crd::merge_crds(crds, storage) {
        Ok(crd) => crd,
        Err(e) => panic!("merging the versions of {name}: {e}"),
    };
    let what = format!("the versions of {name}");
    check_generated(path.as_ref(), &crd, &what, "check_crd_versions");
}

fn check_generated(
    path: &std::path::Path,
    crd: &CustomResourceDefinition,
    type_name: &str,
    by: &str,
) {
    // Cargo sets the package name for the tests it runs; it names the command to regenerate.
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "<plugin crate>".into());
    let regenerate = format!("WASMCTRL_UPDATE_CRDS=1 cargo test -p {package}");
    let mut crd = match serde_json::to_value(crd) {
        Ok(crd) => crd,
        Err(e) => panic!("serializing the CRD of {type_name}: {e}"),
    };
    let problems = invalid_defaults(&crd);
    if !problems.is_empty() {
        panic!(
            "the CRD generated from {type_name} has defaults that do not validate against their \
             own schema; kube-apiserver refuses such a CRD:\n  {}\n{DEFAULTS_HELP}",
            problems.join("\n  ")
        );
    }
    integral_bounds(&mut crd);
    let yaml = match serde_yaml::to_string(&crd) {
        Ok(yaml) => yaml,
        Err(e) => panic!("serializing the CRD of {type_name}: {e}"),
    };
    let generated = format!(
        "# Generated from {type_name} by wasmctrl_sdk::testing::{by}; do not edit.\n\
         # Regenerate with: {regenerate}\n{yaml}"
    );
    if std::env::var_os("WASMCTRL_UPDATE_CRDS").is_some_and(|v| v == "1") {
        if let Err(e) = std::fs::write(path, &generated) {
            panic!("writing {}: {e}", path.display());
        }
        return;
    }
    let current = std::fs::read_to_string(path).unwrap_or_default();
    if current != generated {
        let first = current
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| current.lines().count().min(generated.lines().count()));
        panic!(
            "{} is not the CRD generated from {type_name} (first difference at line {}).\n\
             Regenerate it with: {regenerate}",
            path.display(),
            first + 1
        );
    }
}

/// How to write a default that validates, quoted when one does not.
const DEFAULTS_HELP: &str = "A bare #[serde(default)] gives the field its type's Default \
(0, \"\", false) as the schema's default. On a bounded field, name a function that returns a \
valid value, #[serde(default = \"default_size\")] with fn default_size() -> i32 { 1 } \
(kubebuilder's +kubebuilder:default=1), or make it optional without a default: \
Option<i32> with #[serde(default, skip_serializing_if = \"Option::is_none\")] \
(kubebuilder's +optional).";

/// Every `default` in the CRD's version schemas that its own schema refuses, as
/// `<path>.default: <value>: <why>` (paths as kube-apiserver names them).
fn invalid_defaults(crd: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
    for (i, version) in versions.into_iter().flatten().enumerate() {
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            walk_defaults(schema, &path, &mut problems);
        }
    }
    problems
}

fn walk_defaults(schema: &Value, path: &str, problems: &mut Vec<String>) {
    // `default: null` is no default at all to kube (Go decodes it to nil), so not checked.
    if let Some(default) = schema.get("default").filter(|d| !d.is_null()) {
        let mut why = Vec::new();
        validate(default, schema, "", &mut why);
        for reason in why {
            problems.push(format!("{path}.default: {default}: {reason}"));
        }
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            walk_defaults(child, &format!("{path}.properties[{name}]"), problems);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        walk_defaults(items, &format!("{path}.items"), problems);
    }
    if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        walk_defaults(
            additional,
            &format!("{path}.additionalProperties"),
            problems,
        );
    }
}

/// Checks `value` against the structural schema keywords kube validates (type, nullable, bounds,
/// lengths, counts, enum, pattern, required, and the same inside objects and lists), appending
/// one reason per violation, worded as kube-apiserver words them.
fn validate(value: &Value, schema: &Value, at: &str, why: &mut Vec<String>) {
    let field = |reason: String| {
        if at.is_empty() {
            reason
        } else {
            format!("{at}: {reason}")
        }
    };
    if value.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true)) && schema.get("type").is_some() {
            why.push(field(
                "must not be null (the schema is not nullable)".into(),
            ));
        }
        return;
    }
    if let Some(ty) = schema.get("type").and_then(Value::as_str)
        && !has_type(value, ty, schema)
    {
        why.push(field(format!("must be of type {ty}")));
        return;
    }
    if let Some(n) = value.as_f64() {
        number_bounds(n, schema, &field, why);
    }
    let length = value.as_str().map(|s| s.chars().count());
    let items = value.as_array().map(Vec::len);
    let properties = value.as_object().map(serde_json::Map::len);
    let counts = [
        (length, "minLength", "maxLength", "characters"),
        (items, "minItems", "maxItems", "items"),
        (properties, "minProperties", "maxProperties", "properties"),
    ];
    for (count, min, max, what) in counts {
        let Some(count) = count else { continue };
        let limit = |key: &str| schema.get(key).and_then(Value::as_u64);
        if let Some(min) = limit(min).filter(|&m| (count as u64) < m) {
            why.push(field(format!("should have at least {min} {what}")));
        }
        if let Some(max) = limit(max).filter(|&m| (count as u64) > m) {
            why.push(field(format!("may not have more than {max} {what}")));
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let allowed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        why.push(field(format!("supported values: {}", allowed.join(", "))));
    }
    if let (Some(text), Some(pattern)) = (
        value.as_str(),
        schema.get("pattern").and_then(Value::as_str),
    ) && regex::Regex::new(pattern).is_ok_and(|re| !re.is_match(text))
    {
        why.push(field(format!("should match '{pattern}'")));
    }
    nested(value, schema, at, why);
}

fn has_type(value: &Value, ty: &str, schema: &Value) -> bool {
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    match ty {
        "integer" => value.is_i64() || value.is_u64() || (int_or_string && value.is_string()),
        "number" => value.is_number(),
        "string" => value.is_string() || (int_or_string && (value.is_i64() || value.is_u64())),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    }
}

fn number_bounds(n: f64, schema: &Value, field: &dyn Fn(String) -> String, why: &mut Vec<String>) {
    let get = |key: &str| schema.get(key).and_then(Value::as_f64);
    let exclusive = |key: &str| schema.get(key) == Some(&Value::Bool(true));
    if let Some(min) = get("minimum") {
        match exclusive("exclusiveMinimum") {
            true if n <= min => why.push(field(format!("should be greater than {min}"))),
            false if n < min => {
                why.push(field(format!("should be greater than or equal to {min}")));
            }
            _ => {}
        }
    }
    if let Some(max) = get("maximum") {
        match exclusive("exclusiveMaximum") {
            true if n >= max => why.push(field(format!("should be less than {max}"))),
            false if n > max => why.push(field(format!("should be less than or equal to {max}"))),
            _ => {}
        }
    }
    if let Some(m) = get("multipleOf").filter(|m| *m > 0.0)
        && (n / m).fract() != 0.0
    {
        why.push(field(format!("should be a multiple of {m}")));
    }
}

/// The keywords of an object's properties and a list's items, checked inside.
fn nested(value: &Value, schema: &Value, at: &str, why: &mut Vec<String>) {
    let join = |child: &str| {
        if at.is_empty() {
            child.to_string()
        } else {
            format!("{at}.{child}")
        }
    };
    if let Some(object) = value.as_object() {
        let required = schema.get("required").and_then(Value::as_array);
        for name in required.into_iter().flatten().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                why.push(format!("{}: Required value", join(name)));
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties").filter(|a| a.is_object());
        for (name, child) in object {
            let child_schema = properties.and_then(|p| p.get(name)).or(additional);
            if let Some(child_schema) = child_schema {
                validate(child, child_schema, &join(name), why);
            }
        }
    }
    if let (Some(list), Some(items)) = (value.as_array(), schema.get("items")) {
        for (i, item) in list.iter().enumerate() {
            validate(item, items, &format!("{at}[{i}]"), why);
        }
    }
}

/// Writes whole-number bounds (`minimum`, `maximum`, `multipleOf`) as integers: k8s-openapi
/// holds them as `f64`, which YAML would print `1.0` where kubebuilder's CRDs say `1`.
fn integral_bounds(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let bound = matches!(key.as_str(), "minimum" | "maximum" | "multipleOf");
                match child.as_f64() {
                    Some(n) if bound && n.fract() == 0.0 && n.abs() < 9.0e15 => {
                        *child = Value::from(n as i64);
                    }
                    _ => integral_bounds(child),
                }
            }
        }
        Value::Array(list) => list.iter_mut().for_each(integral_bounds),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(schema: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": schema}}}}]}})
    }

    fn problems(spec: Value) -> Vec<String> {
        invalid_defaults(&crd(spec))
    }

    #[test]
    fn a_default_below_its_minimum_is_named_with_kube_s_path() {
        let found = problems(json!({"type": "object", "properties": {
            "size": {"type": "integer", "minimum": 1.0, "maximum": 5.0, "default": 0}}}));
        assert_eq!(
            found,
            [
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].default: 0: \
              should be greater than or equal to 1"
            ]
        );
    }

    #[test]
    fn each_keyword_refuses_a_default_that_breaks_it() {
        let cases = [
            (
                json!({"type": "integer", "maximum": 5, "default": 6}),
                "less than or equal to 5",
            ),
            (
                json!({"type": "integer", "minimum": 1, "exclusiveMinimum": true, "default": 1}),
                "greater than 1",
            ),
            (
                json!({"type": "integer", "multipleOf": 2, "default": 3}),
                "multiple of 2",
            ),
            (
                json!({"type": "string", "default": 0}),
                "must be of type string",
            ),
            (
                json!({"type": "string", "minLength": 1, "default": ""}),
                "at least 1 characters",
            ),
            (
                json!({"type": "string", "maxLength": 2, "default": "abc"}),
                "more than 2 characters",
            ),
            (
                json!({"type": "string", "enum": ["a", "b"], "default": "c"}),
                r#"supported values: "a", "b""#,
            ),
            (
                json!({"type": "string", "pattern": "^[a-z]+$", "default": "A"}),
                "should match '^[a-z]+$'",
            ),
            (
                json!({"type": "object", "properties": {"n": {"type": "string"}},
                    "default": {"n": null}}),
                "n: must not be null (the schema is not nullable)",
            ),
            (
                json!({"type": "array", "minItems": 1, "items": {"type": "string"}, "default": []}),
                "at least 1 items",
            ),
            (
                json!({"type": "array", "items": {"type": "integer", "minimum": 0}, "default": [1, -1]}),
                "[1]: should be greater than or equal to 0",
            ),
            (
                json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}, "default": {}}),
                "a: Required value",
            ),
            (
                json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "default": {"n": 0}}),
                "n: should be greater than or equal to 1",
            ),
        ];
        for (schema, expected) in cases {
            let found = problems(json!({"type": "object", "properties": {"f": schema.clone()}}));
            assert!(
                found.len() == 1 && found[0].ends_with(expected),
                "{schema}: expected one problem ending {expected:?}, found {found:?}"
            );
        }
    }

    #[test]
    fn valid_defaults_pass() {
        let spec = json!({"type": "object", "properties": {
            "size": {"type": "integer", "minimum": 1, "default": 1},
            "name": {"type": "string", "nullable": true, "default": null},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "port": {"x-kubernetes-int-or-string": true, "type": "string", "default": 80},
            "tags": {"type": "array", "items": {"type": "string"}, "default": []},
            "conditions": {"type": "array", "default": [], "items": {"type": "object",
                "required": ["reason"], "properties": {"reason": {"type": "string", "minLength": 1}}}},
        }});
        assert_eq!(problems(spec), Vec::<String>::new());
    }

    /// A newcomer's Memcached: `size` bounded below by 1 with a bare `#[serde(default)]`.
    #[derive(
        crate::CustomResource,
        Debug,
        Clone,
        Default,
        serde::Deserialize,
        serde::Serialize,
        schemars::JsonSchema,
    )]
    #[kube(
        group = "cache.example.com",
        version = "v1alpha1",
        kind = "Memcached",
        namespaced,
        crates(
            kube_core = "::wasmctrl_sdk::kube_core",
            k8s_openapi = "::wasmctrl_sdk::k8s_openapi",
            schemars = "::wasmctrl_sdk::schemars"
        )
    )]
    struct MemcachedSpec {
        #[serde(default)]
        #[schemars(range(min = 1, max = 3))]
        size: i32,
    }

    #[test]
    #[should_panic(expected = "properties[size].default: 0: should be greater than or equal to 1")]
    fn check_crd_fails_on_a_bare_default_below_the_minimum_and_says_how_to_write_it() {
        // Never read nor written: the defaults are checked first.
        let path = std::path::Path::new("/nonexistent/crd.yaml");
        let outcome = std::panic::catch_unwind(|| super::check_crd::<Memcached>(path));
        let message = outcome.unwrap_err();
        let message = message.downcast_ref::<String>().unwrap();
        assert!(
            message.contains("kube-apiserver refuses such a CRD"),
            "{message}"
        );
        assert!(message.contains("#[serde(default = "), "{message}");
        panic!("{message}");
    }

    /// Every row of the crate docs' kubebuilder-marker table, generated (`lib.rs`, "CRDs from
    /// types").
    #[derive(
        crate::CustomResource,
        Debug,
        Clone,
        Default,
        serde::Deserialize,
        serde::Serialize,
        schemars::JsonSchema,
    )]
    #[kube(
        group = "x.example.com",
        version = "v1",
        kind = "Marked",
        namespaced,
        shortname = "mk",
        status = "MarkedStatus",
        scale(
            spec_replicas_path = ".spec.replicas",
            status_replicas_path = ".status.replicas"
        ),
        printcolumn = r#"{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}"#,
        crates(
            kube_core = "::wasmctrl_sdk::kube_core",
            k8s_openapi = "::wasmctrl_sdk::k8s_openapi",
            schemars = "::wasmctrl_sdk::schemars"
        )
    )]
    #[serde(rename_all = "camelCase")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.replicas < 10"}]))]
    struct MarkedSpec {
        #[schemars(range(min = 1, max = 5))]
        replicas: i32,
        #[schemars(range(min = 0), extend("exclusiveMinimum" = true))]
        ratio: f64,
        #[schemars(length(min = 1, max = 63))]
        name: String,
        #[schemars(length(min = 1))]
        items: Vec<String>,
        #[schemars(pattern(r"^[a-z]+$"))]
        word: String,
        mode: Mode,
        #[schemars(extend("format" = "date-time"))]
        at: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        optional: Option<i32>,
        #[serde(default = "one")]
        defaulted: i32,
        #[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
        free: serde_json::Value,
        #[schemars(extend("x-kubernetes-list-type" = "set"))]
        tags: Vec<String>,
    }

    #[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
    enum Mode {
        #[default]
        A,
        B,
    }

    #[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
    struct MarkedStatus {
        replicas: i32,
    }

    fn one() -> i32 {
        1
    }

    #[test]
    fn the_marker_table_s_rust_makes_what_its_kubebuilder_markers_make() {
        use kube_core::CustomResourceExt as _;
        let crd = serde_json::to_value(Marked::crd()).unwrap();
        assert_eq!(invalid_defaults(&crd), Vec::<String>::new());
        let version = &crd["spec"]["versions"][0];
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let field = |name: &str| &spec["properties"][name];
        let expect = [
            (field("replicas"), json!({"minimum": 1.0, "maximum": 5.0})),
            (
                field("ratio"),
                json!({"minimum": 0.0, "exclusiveMinimum": true}),
            ),
            (field("name"), json!({"minLength": 1, "maxLength": 63})),
            (field("items"), json!({"minItems": 1})),
            (field("word"), json!({"pattern": "^[a-z]+$"})),
            (field("mode"), json!({"enum": ["A", "B"]})),
            (field("at"), json!({"format": "date-time"})),
            (field("optional"), json!({"nullable": true})),
            (field("defaulted"), json!({"default": 1})),
            (
                field("free"),
                json!({"x-kubernetes-preserve-unknown-fields": true}),
            ),
            (field("tags"), json!({"x-kubernetes-list-type": "set"})),
            (
                spec,
                json!({"x-kubernetes-validations": [{"rule": "self.replicas < 10"}]}),
            ),
        ];
        for (schema, wanted) in expect {
            for (key, value) in wanted.as_object().unwrap() {
                assert_eq!(&schema[key], value, "{key} in {schema:#}");
            }
        }
        let required: Vec<&str> = (spec["required"].as_array().unwrap().iter())
            .filter_map(Value::as_str)
            .collect();
        assert!(
            required.contains(&"replicas") && !required.contains(&"optional"),
            "{required:?}"
        );
        assert_eq!(crd["spec"]["names"]["shortNames"], json!(["mk"]));
        assert_eq!(version["subresources"]["status"], json!({}));
        assert_eq!(
            version["subresources"]["scale"]["specReplicasPath"],
            ".spec.replicas"
        );
        assert_eq!(version["additionalPrinterColumns"][0]["name"], "Replicas");
    }

    #[test]
    fn whole_number_bounds_are_written_as_integers() {
        let mut schema = json!({"properties": {"size": {"minimum": 1.0, "maximum": 2.5,
            "default": 3.0, "multipleOf": 2.0}}});
        integral_bounds(&mut schema);
        assert_eq!(
            schema,
            json!({"properties": {"size": {"minimum": 1, "maximum": 2.5, "default": 3.0,
                "multipleOf": 2}}})
        );
    }
}
