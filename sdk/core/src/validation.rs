//! Kubernetes' own rules for names and object metadata, worded as kube-apiserver words them
//! (apimachinery's `util/validation`, `api/validation` and `api/validation/path`; the Event rules
//! of `pkg/apis/core/validation/events.go`).
//!
//! One implementation shared by the embedded API server (which answers 422 `Invalid` with these
//! causes), the host (which refuses an action whose object a real server would refuse, before
//! anything is sent) and the SDK's native harness, so a plugin's `cargo test`, `wasmctrl dev`
//! and a real cluster refuse the same objects with the same words.
//!
//! Hand-written rather than taken from a crate: no maintained crate carries apimachinery's
//! grammars with its messages, and the messages are what users and tests compare.
//!
//! ```
//! use wasmctrl_core::validation::{NameRule, object_meta};
//! let meta = serde_json::json!({"generateName": "test-vm.", "namespace": "default"});
//! let errors = object_meta(&meta, true, NameRule::Subdomain);
//! assert_eq!(errors[0].field, "metadata.generateName");
//! assert!(errors[0].to_string().starts_with("metadata.generateName: Invalid value: \"test-vm.\""));
//! ```

use std::fmt;

use serde_json::Value;

/// The most bytes all of an object's annotations (keys and values) may take.
pub const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;
/// The most characters an Event's `reason` and `action` may have.
pub const EVENT_REASON_MAX: usize = 128;
/// The most characters an Event's `reportingInstance` may have.
pub const EVENT_INSTANCE_MAX: usize = 128;
/// The most characters an Event's `note` (core: `message`) may have.
pub const EVENT_NOTE_MAX: usize = 1024;

/// What is wrong with a field: apimachinery's `field.ErrorType`, which a 422's cause carries as
/// its `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// `FieldValueInvalid`.
    Invalid,
    /// `FieldValueRequired`.
    Required,
    /// `FieldValueForbidden`.
    Forbidden,
    /// `FieldValueTooLong`.
    TooLong,
    /// `FieldValueNotFound`.
    NotFound,
    /// `FieldValueDuplicate`.
    Duplicate,
    /// `FieldValueNotSupported`.
    NotSupported,
    /// `FieldValueTooMany`.
    TooMany,
}

impl ErrorType {
    /// The cause reason of a 422 (`FieldValueInvalid`, ...).
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::TooMany => "FieldValueTooMany",
        }
    }

    fn text(self) -> &'static str {
        match self {
            ErrorType::Invalid => "Invalid value",
            ErrorType::Required => "Required value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::NotFound => "Not found",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::TooMany => "Too many",
        }
    }
}

/// One refused field: apimachinery's `field.Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: ErrorType,
    /// The field's path (`metadata.labels`).
    pub field: String,
    /// The refused value as Go prints it (`"a."`, `-1`), for the kinds that print one.
    pub value: Option<String>,
    /// Why.
    pub detail: String,
}

impl FieldError {
    /// `Invalid value: "<value>": <detail>`.
    pub fn invalid(field: impl Into<String>, value: &str, detail: impl Into<String>) -> Self {
        Self::invalid_printed(field, quote(value), detail)
    }

    /// Invalid, with a value already printed as Go prints it (numbers, structures).
    pub fn invalid_printed(
        field: impl Into<String>,
        value: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind: ErrorType::Invalid,
            field: field.into(),
            value: Some(value.into()),
            detail: detail.into(),
        }
    }

    /// `Required value[: <detail>]`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::other(ErrorType::Required, field, detail)
    }

    /// `Forbidden: <detail>`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::other(ErrorType::Forbidden, field, detail)
    }

    /// `Too long: may not be more than <max> bytes`.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self::other(
            ErrorType::TooLong,
            field,
            format!("may not be more than {max} bytes"),
        )
    }

    /// `Not found: "<value>"`.
    pub fn not_found(field: impl Into<String>, value: &str) -> Self {
        Self::valued(ErrorType::NotFound, field, quote(value), "")
    }

    /// `Duplicate value: <value>`, the value printed as Go prints it (`"a"`, `80`).
    pub fn duplicate(field: impl Into<String>, value: impl Into<String>) -> Self {
        Self::valued(ErrorType::Duplicate, field, value, "")
    }

    /// `Unsupported value: "<value>": supported values: "a", "b"`.
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        Self::not_supported_printed(field, quote(value), supported)
    }

    /// Unsupported, with a value already printed as Go prints it.
    pub fn not_supported_printed(
        field: impl Into<String>,
        value: impl Into<String>,
        supported: &[&str],
    ) -> Self {
        let quoted: Vec<String> = supported.iter().map(|v| quote(v)).collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self::valued(ErrorType::NotSupported, field, value, detail)
    }

    /// `Too many: <actual>: must have at most <max> items`.
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        Self::valued(
            ErrorType::TooMany,
            field,
            actual.to_string(),
            format!("must have at most {max} items"),
        )
    }

    fn valued(
        kind: ErrorType,
        field: impl Into<String>,
        value: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            field: field.into(),
            value: Some(value.into()),
            detail: detail.into(),
        }
    }

    fn other(kind: ErrorType, field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// The message without the field, as a 422's cause carries it (`ErrorBody`).
    pub fn body(&self) -> String {
        let mut s = self.kind.text().to_string();
        if let Some(v) = &self.value {
            s.push_str(": ");
            s.push_str(v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

impl std::error::Error for FieldError {}

/// A string as Go's `%q` prints it (close enough: JSON's escapes for what names may contain).
pub fn quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// apimachinery's `RegexError`, its doubled spaces included (`'a',  or 'b', regex ...`).
fn regex_error(msg: &str, regex: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{regex}')",
        examples.join(" or ")
    )
}

fn max_len_error(max: usize) -> String {
    format!("must be no more than {max} characters")
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, without a length limit.
fn is_label_chars(s: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|&b| alnum(b) || b == b'-')
        }
        _ => false,
    }
}

fn is_subdomain_chars(s: &str) -> bool {
    s.split('.').all(is_label_chars)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_qualified_chars(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// An RFC 1123 label (namespace names): apimachinery's `IsDNS1123Label`.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !is_label_chars(value) {
        if is_subdomain_chars(value) {
            errors.push("must not contain dots".into());
        } else {
            errors.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errors
}

/// An RFC 1123 subdomain (most object names): apimachinery's `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push(max_len_error(253));
    }
    if !is_subdomain_chars(value) {
        errors.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errors
}

/// An RFC 1035 label (Service names): apimachinery's `IsDNS1035Label`.
pub fn dns1035_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !(is_label_chars(value) && value.as_bytes()[0].is_ascii_lowercase()) {
        errors.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errors
}

/// `[prefix/]name` (label and annotation keys, finalizers, Events' `reportingController`):
/// apimachinery's `IsQualifiedName`.
pub fn qualified_name(value: &str) -> Vec<String> {
    let regex = || {
        regex_error(
            QUALIFIED_NAME_MSG,
            QUALIFIED_NAME_FMT,
            &["MyName", "my.name", "123-abc"],
        )
    };
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".into());
            } else {
                errors.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        _ => {
            errors.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex()
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errors.push(format!("name part {}", max_len_error(63)));
    }
    if !is_qualified_chars(name) {
        errors.push(format!("name part {}", regex()));
    }
    errors
}

/// A label value (empty, or a qualified name's name part): apimachinery's `IsValidLabelValue`.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !value.is_empty() && !is_qualified_chars(value) {
        errors.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// A ConfigMap or Secret key: apimachinery's `IsConfigMapKey`.
pub fn config_key(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push(max_len_error(253));
    }
    let valid = !value.is_empty()
        && (value.bytes()).all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !valid {
        errors.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            "[-._a-zA-Z0-9]+",
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    match value {
        "." => errors.push("must not be '.'".into()),
        ".." => errors.push("must not be '..'".into()),
        v if v.starts_with("..") => errors.push("must not start with '..'".into()),
        _ => {}
    }
    errors
}

/// A port name (IANA_SVC_NAME): apimachinery's `IsValidPortName`.
pub fn port_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 15 {
        errors.push(max_len_error(15));
    }
    if value.is_empty()
        || !(value.bytes()).all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errors
            .push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !value.bytes().any(|b| b.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)".into());
    }
    if value.contains("--") {
        errors.push("must not contain consecutive hyphens".into());
    }
    if value.starts_with('-') || value.ends_with('-') {
        errors.push("must not begin or end with a hyphen".into());
    }
    errors
}

/// A port number: apimachinery's `IsValidPortNum`.
pub fn port_number(value: i64) -> Vec<String> {
    if (1..=65535).contains(&value) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

/// apimachinery's `InclusiveRangeError`.
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

/// An environment variable's name as kube 1.32 checks it (`RelaxedEnvironmentVariableValidation`,
/// on by default): apimachinery's `IsRelaxedEnvVarName`.
pub fn env_var_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if !value
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'=')
    {
        errors.push(
            "a valid environment variable name must consist only of printable ASCII characters other than '='"
                .into(),
        );
    }
    errors
}

/// A DNS subdomain that may start with `*.` (Ingress hosts): apimachinery's
/// `IsWildcardDNS1123Subdomain` for those, `IsDNS1123Subdomain` for the rest.
pub fn host_name(value: &str) -> Vec<String> {
    let Some(rest) = value.strip_prefix("*.") else {
        return dns1123_subdomain(value);
    };
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push(max_len_error(253));
    }
    if !is_subdomain_chars(rest) {
        errors.push(regex_error(
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character",
            "\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
            &["*.example.com"],
        ));
    }
    errors
}

/// Which grammar a kind's object names follow (kube's `ValidateNameFunc` per strategy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// An RFC 1123 subdomain: most kinds, custom resources, events.k8s.io Events.
    Subdomain,
    /// An RFC 1123 label: Namespaces.
    Label,
    /// An RFC 1035 label: Services.
    Dns1035Label,
    /// Anything usable as one URL path segment: RBAC kinds, core/v1 Events.
    PathSegment,
}

impl NameRule {
    /// The rule kube-apiserver applies to names of `kind` in `group` (served through that
    /// group: an Event is a path segment through core/v1 and a subdomain through
    /// events.k8s.io).
    pub fn of(group: &str, kind: &str) -> Self {
        match (group, kind) {
            ("", "Namespace") => NameRule::Label,
            ("", "Service") => NameRule::Dns1035Label,
            ("", "Event") | ("rbac.authorization.k8s.io", _) => NameRule::PathSegment,
            _ => NameRule::Subdomain,
        }
    }

    /// What is wrong with `name`; `prefix`: it is a `generateName`, to which five characters
    /// will be appended (a trailing `-` is then fine).
    pub fn check(self, name: &str, prefix: bool) -> Vec<String> {
        if self == NameRule::PathSegment {
            return path_segment(name, prefix);
        }
        // apimachinery's maskTrailingDash, character for character (it replaces the last two).
        let masked;
        let name = if prefix && name.len() > 1 && name.ends_with('-') {
            masked = format!("{}a", &name[..name.len() - 2]);
            masked.as_str()
        } else {
            name
        };
        match self {
            NameRule::Subdomain => dns1123_subdomain(name),
            NameRule::Label => dns1123_label(name),
            NameRule::Dns1035Label => dns1035_label(name),
            NameRule::PathSegment => unreachable!("handled above"),
        }
    }
}

/// apimachinery's `ValidatePathSegmentName`.
fn path_segment(name: &str, prefix: bool) -> Vec<String> {
    if !prefix && (name == "." || name == "..") {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .into_iter()
        .filter(|bad| name.contains(bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

fn str_of<'a>(meta: &'a Value, key: &str) -> &'a str {
    meta.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn string_map(meta: &Value, key: &str) -> Vec<(String, String)> {
    let Some(map) = meta.get(key).and_then(Value::as_object) else {
        return Vec::new();
    };
    map.iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// An object's metadata on create, as `ValidateObjectMetaAccessor` checks it once the name is
/// generated: `generateName` and `name` by the kind's rule, the namespace (required on a
/// namespaced kind, forbidden on a cluster-scoped one), `generation`, labels, annotations,
/// owner references and finalizers.
pub fn object_meta(meta: &Value, namespaced: bool, rule: NameRule) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let generate = str_of(meta, "generateName");
    if !generate.is_empty() {
        for m in rule.check(generate, true) {
            errors.push(FieldError::invalid("metadata.generateName", generate, m));
        }
    }
    errors.extend(sent_meta(meta, rule));
    let namespace = str_of(meta, "namespace");
    match (namespaced, namespace.is_empty()) {
        (true, true) => errors.push(FieldError::required("metadata.namespace", "")),
        (true, false) => {
            for m in NameRule::Label.check(namespace, false) {
                errors.push(FieldError::invalid("metadata.namespace", namespace, m));
            }
        }
        (false, false) => errors.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        )),
        (false, true) => {}
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
        && g < 0
    {
        errors.push(FieldError::invalid_printed(
            "metadata.generation",
            g.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    errors
}

/// The metadata of an object sent whole (server-side apply, a plugin's child) before the server
/// settles its namespace: what [`object_meta`] checks but the namespace and `generateName`.
pub fn sent_meta(meta: &Value, rule: NameRule) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = str_of(meta, "name");
    if name.is_empty() {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for m in rule.check(name, false) {
            errors.push(FieldError::invalid("metadata.name", name, m));
        }
    }
    errors.extend(common(meta));
    errors.extend(finalizers(meta));
    errors
}

/// What create and update both check: labels, annotations and owner references.
fn common(meta: &Value) -> Vec<FieldError> {
    let mut errors = labels(meta);
    errors.extend(annotations(meta));
    errors.extend(owner_references(meta));
    errors
}

/// `metadata.labels`: qualified-name keys, label values.
pub fn labels(meta: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (k, v) in string_map(meta, "labels") {
        for m in qualified_name(&k) {
            errors.push(FieldError::invalid("metadata.labels", &k, m));
        }
        for m in label_value(&v) {
            errors.push(FieldError::invalid("metadata.labels", &v, m));
        }
    }
    errors
}

/// `metadata.annotations`: qualified-name keys (case aside) and at most 256 KiB in all.
pub fn annotations(meta: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let annotations = string_map(meta, "annotations");
    for (k, _) in &annotations {
        for m in qualified_name(&k.to_lowercase()) {
            errors.push(FieldError::invalid("metadata.annotations", k, m));
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > ANNOTATIONS_MAX_BYTES {
        errors.push(FieldError::too_long(
            "metadata.annotations",
            ANNOTATIONS_MAX_BYTES,
        ));
    }
    errors
}

/// `metadata.ownerReferences`: apiVersion (with a version), kind, name and uid required, no
/// core Event as owner, at most one controller.
pub fn owner_references(meta: &Value) -> Vec<FieldError> {
    const FIELD: &str = "metadata.ownerReferences";
    let mut errors = Vec::new();
    let Some(refs) = meta.get("ownerReferences").and_then(Value::as_array) else {
        return errors;
    };
    let mut controller: Option<String> = None;
    for r in refs {
        let api_version = str_of(r, "apiVersion");
        let kind = str_of(r, "kind");
        // schema.FromAPIVersionAndKind: `group/version`, or a bare version; more slashes
        // leave no version.
        let version = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [version] | [_, version] => *version,
            _ => "",
        };
        let group = api_version.split_once('/').map_or("", |(g, _)| g);
        for (key, value, what) in [
            ("apiVersion", version, "version"),
            ("kind", kind, "kind"),
            ("name", str_of(r, "name"), "name"),
            ("uid", str_of(r, "uid"), "uid"),
        ] {
            if value.is_empty() {
                let shown = if key == "apiVersion" {
                    api_version
                } else {
                    value
                };
                errors.push(FieldError::invalid(
                    format!("{FIELD}.{key}"),
                    shown,
                    format!("{what} must not be empty"),
                ));
            }
        }
        if (group, version, kind) == ("", "v1", "Event") {
            errors.push(FieldError::invalid_printed(
                FIELD,
                r.to_string(),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let this = format!("{kind}/{}", str_of(r, "name"));
            match &controller {
                Some(first) => errors.push(FieldError::invalid_printed(
                    FIELD,
                    Value::Array(refs.clone()).to_string(),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"
                    ),
                )),
                None => controller = Some(this),
            }
        }
    }
    errors
}

/// `metadata.finalizers`: qualified names, not both `orphan` and `foregroundDeletion`.
pub fn finalizers(meta: &Value) -> Vec<FieldError> {
    const FIELD: &str = "metadata.finalizers";
    let mut errors = Vec::new();
    let Some(list) = meta.get("finalizers").and_then(Value::as_array) else {
        return errors;
    };
    let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
    for f in &names {
        for m in qualified_name(f) {
            errors.push(FieldError::invalid(FIELD, f, m));
        }
    }
    if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
        // Printed as Go prints a []string.
        let quoted: Vec<String> = names.iter().map(|n| quote(n)).collect();
        errors.push(FieldError::invalid_printed(
            FIELD,
            format!("[]string{{{}}}", quoted.join(", ")),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errors
}

/// An object's metadata on update, after the server has carried over what the client may not
/// change (`rest.BeforeUpdate`): what `ValidateObjectMetaAccessorUpdate` still refuses. `new`
/// and `old` are `metadata` objects.
pub fn object_meta_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for key in ["uid", "deletionTimestamp", "deletionGracePeriodSeconds"] {
        let (n, o) = (new.get(key), old.get(key));
        if n.filter(|v| !v.is_null()) != o.filter(|v| !v.is_null()) {
            let shown = match n {
                // A time, printed as Go prints a time.Time (`2030-01-01 00:00:00 +0000 UTC`).
                Some(Value::String(s)) if key == "deletionTimestamp" => go_time(s),
                Some(Value::String(s)) => quote(s),
                Some(v) if !v.is_null() => v.to_string(),
                _ => "null".into(),
            };
            errors.push(FieldError::invalid_printed(
                format!("metadata.{key}"),
                shown,
                "field is immutable",
            ));
        }
    }
    errors.extend(common(new));
    // Finalizer names are checked again on every update (ValidateObjectMetaAccessor runs on
    // the new object too), like labels.
    errors.extend(finalizers(new));
    errors
}

/// An Event in its core/v1 form (as kube validates its internal form), created through
/// `events.k8s.io` when `events_v1`, else through core/v1: kube's `ValidateEventCreate`.
/// Field paths are the core names kube reports (`message`, `involvedObject`).
pub fn event(event: &Value, events_v1: bool) -> Vec<FieldError> {
    let mut errors = legacy_event(event, events_v1);
    if !events_v1 {
        return errors;
    }
    errors.extend(event_series(event));
    if str_of(event, "eventTime").is_empty() {
        errors.push(FieldError::required("eventTime", ""));
    }
    let type_ = str_of(event, "type");
    if type_ != "Normal" && type_ != "Warning" {
        errors.push(FieldError::invalid(
            "type",
            "",
            format!("has invalid value: {type_}"),
        ));
    }
    for key in ["firstTimestamp", "lastTimestamp"] {
        if !str_of(event, key).is_empty() {
            errors.push(FieldError::invalid(key, "", "needs to be unset"));
        }
    }
    if event
        .get("count")
        .and_then(Value::as_i64)
        .is_some_and(|c| c != 0)
    {
        errors.push(FieldError::invalid("count", "", "needs to be unset"));
    }
    let source = &event["source"];
    if !str_of(source, "component").is_empty() || !str_of(source, "host").is_empty() {
        errors.push(FieldError::invalid("source", "", "needs to be unset"));
    }
    errors
}

/// What every Event must pass, through either group (`legacyValidateEvent`).
fn legacy_event(event: &Value, events_v1: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let namespace = str_of(&event["metadata"], "namespace");
    let involved_namespace = str_of(&event["involvedObject"], "namespace");
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            involved_namespace,
            "does not match event.namespace",
        )
    };
    if str_of(event, "eventTime").is_empty() {
        // An old-style Event: its namespace is its object's ("default" for cluster objects).
        let agrees = if involved_namespace.is_empty() {
            namespace.is_empty() || namespace == "default"
        } else {
            namespace == involved_namespace
        };
        if !agrees {
            errors.push(mismatch());
        }
    } else {
        if involved_namespace.is_empty() && namespace != "default" && namespace != "kube-system" {
            errors.push(mismatch());
        }
        let controller_field = if events_v1 {
            "reportingController"
        } else {
            "reportingComponent"
        };
        let controller = str_of(event, "reportingComponent");
        if controller.is_empty() {
            errors.push(FieldError::required(controller_field, ""));
        }
        for m in qualified_name(controller) {
            errors.push(FieldError::invalid(controller_field, controller, m));
        }
        let limited = [
            ("reportingInstance", EVENT_INSTANCE_MAX, true),
            ("action", EVENT_REASON_MAX, true),
            ("reason", EVENT_REASON_MAX, true),
            ("message", EVENT_NOTE_MAX, false),
        ];
        for (key, max, required) in limited {
            let value = str_of(event, key);
            if required && value.is_empty() {
                errors.push(FieldError::required(key, ""));
            }
            if value.len() > max {
                errors.push(FieldError::invalid(
                    key,
                    "",
                    format!("can have at most {max} characters"),
                ));
            }
        }
    }
    for m in dns1123_subdomain(namespace) {
        errors.push(FieldError::invalid("namespace", namespace, m));
    }
    errors
}

fn event_series(event: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(series) = event.get("series").filter(|s| !s.is_null()) else {
        return errors;
    };
    if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
        errors.push(FieldError::invalid(
            "series.count",
            "",
            "should be at least 2",
        ));
    }
    if str_of(series, "lastObservedTime").is_empty() {
        errors.push(FieldError::required("series.lastObservedTime", ""));
    }
    errors
}

/// An update of an Event (core form, as [`event`]): through `events.k8s.io`, what a
/// recorder may change is the series; everything that says what happened is immutable
/// (`ValidateEventUpdate`).
pub fn event_update(new: &Value, old: &Value, events_v1: bool) -> Vec<FieldError> {
    let mut errors = legacy_event(new, events_v1);
    if !events_v1 {
        return errors;
    }
    if new.get("series") != old.get("series") {
        errors.extend(event_series(new));
    }
    for key in [
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "count",
        "type",
        "action",
        "related",
        "reportingComponent",
        "reportingInstance",
    ] {
        let (n, o) = (new.get(key), old.get(key));
        if n.filter(|v| !v.is_null()) != o.filter(|v| !v.is_null()) {
            let field = if key == "reportingComponent" {
                "reportingController"
            } else {
                key
            };
            let shown = n.map_or_else(|| "null".to_string(), Value::to_string);
            errors.push(FieldError::invalid_printed(
                field,
                shown,
                "field is immutable",
            ));
        }
    }
    if micros(str_of(new, "eventTime")) != micros(str_of(old, "eventTime")) {
        errors.push(FieldError::invalid(
            "eventTime",
            str_of(new, "eventTime"),
            "field is immutable",
        ));
    }
    errors
}

/// An RFC 3339 UTC time as Go's `time.Time` prints itself; other text as it is.
fn go_time(time: &str) -> String {
    match time.strip_suffix('Z').and_then(|t| t.split_once('T')) {
        Some((date, clock)) => format!("{date} {clock} +0000 UTC"),
        None => time.to_owned(),
    }
}

/// An RFC 3339 time to microseconds, as kube compares `eventTime`s (sub-microsecond
/// differences are tolerated); the text itself when it does not parse.
fn micros(time: &str) -> String {
    match time.split_once('.') {
        Some((seconds, fraction)) => {
            let digits: String = fraction.chars().take_while(char::is_ascii_digit).collect();
            let zone = &fraction[digits.len()..];
            let mut six: String = digits.chars().take(6).collect();
            while six.len() < 6 {
                six.push('0');
            }
            format!("{seconds}.{six}{zone}")
        }
        None => time.replace('Z', ".000000Z"),
    }
}

#[cfg(test)]
mod tests;
