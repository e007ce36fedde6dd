//! Structural schemas of CustomResourceDefinitions, enforced on custom resources as
//! kube-apiserver enforces `apiextensions.k8s.io/v1` schemas: every write (create, update,
//! each patch type, server-side apply, `/status`) first prunes fields the schema does not know,
//! then validates the whole resulting object, collecting every violation as a field cause of a
//! 422 `Invalid` (see [`validate`] for the rules and wording).
//!
//! Hand-written: no Rust crate validates Kubernetes structural schemas (OpenAPI v3.0 with the
//! `x-kubernetes-*` extensions and boolean `exclusiveMinimum`) with kube-apiserver's field paths
//! and error wording, which kubectl shows and clients match on; generic JSON Schema crates
//! implement other dialects and report differently.
//!
//! A schema is parsed once, when its CRD is registered. Supported: `type`, `properties`,
//! `required`, `items`, `additionalProperties`, `enum`, `minimum`/`maximum` (and the boolean
//! exclusive forms), `multipleOf`, `minLength`/`maxLength`, `pattern`, `minItems`/`maxItems`,
//! `minProperties`/`maxProperties`, `nullable`, `x-kubernetes-int-or-string`,
//! `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-embedded-resource`, string `format`s
//! (`format`), `default`s (applied after pruning, before validating, and to stored objects when
//! a CRD changes, as kube defaults what it reads; a CRD whose defaults break their own schema
//! is refused as kube refuses it, `default`), `x-kubernetes-list-type` `set` and `map`
//! (each value or key once), CEL `x-kubernetes-validations` (`cel`, once the rest holds, as
//! kube skips them on an object of the wrong types). Not enforced: `allOf`/`anyOf`/`oneOf`/`not`.

pub(crate) mod cel;
mod default;
mod field;
mod format;
mod validate;

pub(crate) use default::crd_errors as crd_default_errors;
pub(crate) use default::fill as fill_defaults;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::json::str_at;
use super::status::{self, ApiError, ApiResult, Cause};

/// An OpenAPI `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// `object`
    Object,
    /// `array`
    Array,
    /// `string`
    String,
    /// `integer`
    Integer,
    /// `number`
    Number,
    /// `boolean`
    Boolean,
}

/// The type names kube-apiserver accepts, in the order its error lists them.
const TYPES: [(&str, Type); 6] = [
    ("array", Type::Array),
    ("boolean", Type::Boolean),
    ("integer", Type::Integer),
    ("number", Type::Number),
    ("object", Type::Object),
    ("string", Type::String),
];

/// Formats kube-apiserver keeps on a schema (others are stripped before validating), compared
/// without dashes as go-openapi normalises them.
const FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

impl Type {
    /// The OpenAPI name.
    pub fn name(self) -> &'static str {
        TYPES
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("", |(n, _)| n)
    }
}

/// `additionalProperties`: absent, `true`, or the schema of a map's values.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Additional {
    /// Not set (or `false`).
    #[default]
    None,
    /// `true`: values of any schema, kept, but as kube-apiserver keeps them: a value with no
    /// schema of its own keeps none of its objects' fields (see [`prune_untyped`]).
    Any,
    /// The schema every value of the map follows.
    Schema(Box<Schema>),
}

/// A compiled `pattern` (compared by its source, so schemas stay comparable).
#[derive(Debug, Clone)]
pub struct Pattern(pub regex::Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

/// One node of a structural schema.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    /// Allowed types; empty allows any, int-or-string allows two.
    pub types: Vec<Type>,
    /// `nullable`.
    pub nullable: bool,
    /// `format`, when it is one kube-apiserver keeps (it changes type-mismatch messages).
    pub format: String,
    /// `properties`.
    pub properties: BTreeMap<String, Schema>,
    /// `required`.
    pub required: Vec<String>,
    /// `items`.
    pub items: Option<Box<Schema>>,
    /// `additionalProperties`.
    pub additional: Additional,
    /// `x-kubernetes-preserve-unknown-fields`.
    pub preserve_unknown: bool,
    /// `x-kubernetes-embedded-resource`.
    pub embedded: bool,
    /// `enum`.
    pub enumeration: Vec<Value>,
    /// `minimum`, and whether it is exclusive.
    pub minimum: Option<(f64, bool)>,
    /// `maximum`, and whether it is exclusive.
    pub maximum: Option<(f64, bool)>,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `minLength` / `maxLength` (characters).
    pub length: (Option<i64>, Option<i64>),
    /// `minItems` / `maxItems`.
    pub items_count: (Option<i64>, Option<i64>),
    /// `minProperties` / `maxProperties`.
    pub properties_count: (Option<i64>, Option<i64>),
    /// `pattern`.
    pub pattern: Option<Pattern>,
    /// `default`: set where the field is absent (`default::fill`).
    pub default: Option<Value>,
    /// `x-kubernetes-list-type` (and a map's `x-kubernetes-list-map-keys`).
    pub list_type: ListType,
    /// `x-kubernetes-validations`, compiled.
    pub rules: Vec<cel::Rule>,
}

/// How a list's items relate (`x-kubernetes-list-type`): a `set` holds each value once, a
/// `map` each combination of its key fields once.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ListType {
    /// `atomic`, or not said.
    #[default]
    Atomic,
    /// `set`.
    Set,
    /// `map`, keyed by these fields.
    Map(Vec<String>),
}

impl Schema {
    /// Parses a schema node. What kube-apiserver would refuse in a CRD (unknown types, patterns
    /// that do not compile) is appended to `errs` as causes under `path`.
    pub fn parse(v: &Value, path: &str, errs: &mut Vec<Cause>) -> Schema {
        let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
        let int = |k: &str| v.get(k).and_then(Value::as_i64);
        let bound = |k: &str, ex: &str| v.get(k).and_then(Value::as_f64).map(|b| (b, flag(ex)));
        let mut s = Schema {
            nullable: flag("nullable"),
            preserve_unknown: flag("x-kubernetes-preserve-unknown-fields"),
            embedded: flag("x-kubernetes-embedded-resource"),
            minimum: bound("minimum", "exclusiveMinimum"),
            maximum: bound("maximum", "exclusiveMaximum"),
            multiple_of: v.get("multipleOf").and_then(Value::as_f64),
            length: (int("minLength"), int("maxLength")),
            items_count: (int("minItems"), int("maxItems")),
            properties_count: (int("minProperties"), int("maxProperties")),
            // Go decodes `default: null` as no default at all (a nil pointer).
            default: v.get("default").filter(|d| !d.is_null()).cloned(),
            rules: cel::parse(v, path, errs),
            list_type: match v.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => ListType::Set,
                Some("map") => ListType::Map(
                    (v.get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array))
                    .into_iter()
                    .flatten()
                    .filter_map(|k| k.as_str().map(String::from))
                    .collect(),
                ),
                _ => ListType::Atomic,
            },
            ..Schema::default()
        };
        if let Some(t) = v
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            match TYPES.iter().find(|(n, _)| *n == t) {
                Some((_, ty)) => s.types.push(*ty),
                None => {
                    let names: Vec<String> = TYPES.iter().map(|(n, _)| n.to_string()).collect();
                    errs.push(field::not_supported(
                        &format!("{path}.type"),
                        &json!(t),
                        &names,
                    ));
                }
            }
        }
        if flag("x-kubernetes-int-or-string") {
            s.types = vec![Type::Integer, Type::String];
        }
        if let Some(f) = v.get("format").and_then(Value::as_str)
            && FORMATS.contains(&f.replace('-', "").as_str())
        {
            s.format = f.to_string();
        }
        for (k, p) in v
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let child = Schema::parse(p, &format!("{path}.properties[{k}]"), errs);
            s.properties.insert(k.clone(), child);
        }
        s.required = v
            .get("required")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|r| r.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(i) = v.get("items").filter(|i| i.is_object()) {
            s.items = Some(Box::new(Schema::parse(i, &format!("{path}.items"), errs)));
        }
        s.additional = match v.get("additionalProperties") {
            Some(Value::Bool(true)) => Additional::Any,
            Some(a @ Value::Object(_)) => {
                let p = format!("{path}.additionalProperties");
                Additional::Schema(Box::new(Schema::parse(a, &p, errs)))
            }
            _ => Additional::None,
        };
        s.enumeration = v
            .get("enum")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if let Some(p) = v.get("pattern").and_then(Value::as_str) {
            match regex::Regex::new(p) {
                Ok(re) => s.pattern = Some(Pattern(re)),
                Err(e) => {
                    // The regex crate explains over several lines; kube's message is one line.
                    let why = e.to_string();
                    let why = why
                        .lines()
                        .last()
                        .unwrap_or("")
                        .trim_start_matches("error: ");
                    let msg = format!(
                        "must be a valid regular expression, but isn't: error parsing regexp: {why}: `{p}`"
                    );
                    errs.push(field::invalid(&format!("{path}.pattern"), &json!(p), &msg));
                }
            }
        }
        s
    }

    /// Whether `type` allows `t`.
    pub fn allows(&self, t: Type) -> bool {
        self.types.contains(&t)
    }
}

/// The schemas of a CRD's versions, or the causes that make them unusable, with the field
/// paths kube-apiserver reports for the CRD: `spec.validation.openAPIV3Schema` when every
/// version has the same schema (kube's internal form holds it once then), else
/// `spec.versions[i].schema.openAPIV3Schema`.
pub fn crd_schemas(crd: &Value) -> Result<BTreeMap<String, Schema>, Vec<Cause>> {
    let mut out = BTreeMap::new();
    let mut errs = Vec::new();
    let versions = crd_versions(crd);
    let shared =
        shared_schema(&versions).map(|first| Schema::parse(first, SHARED_SCHEMA_PATH, &mut errs));
    for (i, (name, raw)) in versions.iter().enumerate() {
        let schema = match (&shared, raw) {
            (Some(shared), _) => shared.clone(),
            (None, Some(raw)) => Schema::parse(raw, &version_schema_path(i), &mut errs),
            (None, None) => continue,
        };
        out.insert((*name).to_string(), schema);
    }
    if errs.is_empty() { Ok(out) } else { Err(errs) }
}

/// Where kube-apiserver reports a schema every version shares.
const SHARED_SCHEMA_PATH: &str = "spec.validation.openAPIV3Schema";

/// Where kube-apiserver reports the schema of the `i`th version.
fn version_schema_path(i: usize) -> String {
    format!("spec.versions[{i}].schema.openAPIV3Schema")
}

/// A CRD's versions (those with a name) and their raw schemas, in order.
fn crd_versions(crd: &Value) -> Vec<(&str, Option<&Value>)> {
    (crd.pointer("/spec/versions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let name = v.get("name").and_then(Value::as_str)?;
            Some((name, v.pointer("/schema/openAPIV3Schema")))
        })
        .collect()
}

/// The schema every version has, when they all have the same one.
fn shared_schema<'a>(versions: &[(&str, Option<&'a Value>)]) -> Option<&'a Value> {
    match versions.first() {
        Some((_, Some(first))) if versions.iter().all(|(_, s)| *s == Some(*first)) => Some(first),
        _ => None,
    }
}

/// A CRD's distinct raw schemas with the paths kube-apiserver reports them at (as
/// [`crd_schemas`] chooses).
fn crd_schema_sources(crd: &Value) -> Vec<(String, &Value)> {
    let versions = crd_versions(crd);
    if let Some(shared) = shared_schema(&versions) {
        return vec![(SHARED_SCHEMA_PATH.to_string(), shared)];
    }
    (versions.iter().enumerate())
        .filter_map(|(i, (_, raw))| raw.map(|raw| (version_schema_path(i), raw)))
        .collect()
}

/// What a write asks done with fields the schema does not know (`?fieldValidation=`), as
/// kube-apiserver: refuse them, drop them with a warning (the default), or drop them quietly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// 400, naming every unknown field.
    Strict,
    /// Dropped, each named in a `Warning` header.
    #[default]
    Warn,
    /// Dropped.
    Ignore,
}

impl FieldValidation {
    /// The directive of a request's `fieldValidation` parameter (absent: `Warn`).
    pub fn parse(value: Option<&str>) -> ApiResult<Self> {
        match value {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Strict") => Ok(Self::Strict),
            Some("Ignore") => Ok(Self::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Invalid value: {other:?}: fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\""
            ))),
        }
    }

    /// Acts on the `unknown` fields found in an object of `kind` decoded as `version`.
    pub fn judge(self, kind: &str, version: &str, unknown: &[String]) -> ApiResult<()> {
        // The body's duplicate fields (`decode`) with its unknown ones, as kube's strict
        // decoding reports both.
        let duplicates = status::take_duplicate_fields();
        if unknown.is_empty() && duplicates.is_empty() {
            return Ok(());
        }
        let named: Vec<String> = (duplicates.iter())
            .map(|f| format!("duplicate field {f:?}"))
            .chain(unknown.iter().map(|f| format!("unknown field {f:?}")))
            .collect();
        match self {
            Self::Strict => Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                named.join(", ")
            ))),
            Self::Warn => {
                named.into_iter().for_each(status::warn);
                Ok(())
            }
            Self::Ignore => Ok(()),
        }
    }
}

/// Prunes `obj` to `s`, the schema of `kind`'s `version` (unknown fields refused, warned
/// about or dropped as `validation` says), then validates it. `old` is the stored object of an
/// update: values it already had are not judged again (kube-apiserver's validation
/// ratcheting), so tightening a schema does not lock existing objects.
pub(crate) fn admit(
    s: &Schema,
    group: &str,
    kind: &str,
    version: &str,
    obj: &mut Value,
    old: Option<&Value>,
    validation: FieldValidation,
) -> ApiResult<()> {
    let mut unknown = Vec::new();
    prune_at(s, obj, false, true, "", &mut unknown);
    validation.judge(kind, version, &unknown)?;
    default::fill(s, obj);
    let causes = validate::object(s, obj, old);
    if causes.is_empty() {
        return Ok(());
    }
    let name = str_at(obj, "/metadata/name");
    Err(ApiError::invalid_causes(kind, group, name, &causes))
}

/// Prunes a server-side apply configuration, so fields the schema drops are never recorded as
/// owned in managedFields.
pub(crate) fn prune_config(s: &Schema, config: &mut Value) {
    prune(s, config, false, true);
}

/// [`prune`], naming each unknown field it drops in `unknown` (`spec.foo`, `spec.items[0].x`,
/// as kube's strict decoding names them) below `path`. Kube drops more than these while
/// decoding (the nulls of non-nullable fields) without calling them unknown.
fn prune_at(
    s: &Schema,
    v: &mut Value,
    skip: bool,
    embedded: bool,
    path: &str,
    unknown: &mut Vec<String>,
) {
    let skip = skip || s.preserve_unknown;
    let embedded = embedded || s.embedded;
    let at = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        Value::Object(m) => m.retain(|k, val| {
            let prop = s.properties.get(k);
            if val.is_null() && prop.is_some_and(|p| !p.nullable) {
                return false;
            }
            if embedded
                && (k == "metadata" || (val.is_string() && (k == "apiVersion" || k == "kind")))
            {
                return true;
            }
            match (prop, &s.additional) {
                (Some(c), _) => prune_at(c, val, false, false, &at(k), unknown),
                (None, Additional::Schema(a)) => prune_at(a, val, false, false, &at(k), unknown),
                (None, Additional::Any) => untyped_fields(val, &at(k), unknown),
                (None, Additional::None) => {
                    if !skip {
                        unknown.push(at(k));
                    }
                    return skip;
                }
            }
            true
        }),
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for (i, x) in a.iter_mut().enumerate() {
                    prune_at(items, x, skip, false, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        Value::Number(n) if s.allows(Type::Integer) && n.as_i64().is_none() => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18) {
                *v = json!(f as i64);
            }
        }
        _ => {}
    }
}

/// [`prune_untyped`], naming the fields it drops.
fn untyped_fields(v: &mut Value, path: &str, unknown: &mut Vec<String>) {
    match v {
        Value::Object(m) => unknown.extend(m.keys().map(|k| format!("{path}.{k}"))),
        Value::Array(items) => {
            for (i, x) in items.iter_mut().enumerate() {
                untyped_fields(x, &format!("{path}[{i}]"), unknown);
            }
        }
        _ => {}
    }
    prune_untyped(v);
}

/// What kube's pruning leaves of a value that has no schema (a value of
/// `additionalProperties: true`): scalars as they are, arrays with their items so pruned, objects
/// with none of their fields (each is unknown). kube-apiserver 1.32, side by side: `{"nested":
/// {"a": 1}}` under such a map keeps `nested` as `{}`, and `fieldValidation=Strict` refuses
/// `nested.a` as an unknown field.
fn prune_untyped(v: &mut Value) {
    match v {
        Value::Object(m) => m.clear(),
        Value::Array(items) => items.iter_mut().for_each(prune_untyped),
        _ => {}
    }
}

/// Structural pruning (kube's `pruning.Prune` plus `PruneNonNullableNullsWithoutDefaults`):
/// drops object fields the schema does not declare unless unknown fields are preserved (`skip`
/// carries preservation into array items, as kube does), drops `null`s of non-nullable
/// properties, keeps `apiVersion`/`kind`/`metadata` of embedded resources and the root, and
/// stores integral floats of integer fields as integers (Go encodes `3.0` back as `3`).
pub fn prune(s: &Schema, v: &mut Value, skip: bool, embedded: bool) {
    prune_at(s, v, skip, embedded, "", &mut Vec::new());
}
