//! Unknown fields of built-in kinds, found by decoding an object into its `k8s-openapi` type (the
//! Go structs kube decodes into, generated from the same OpenAPI) and noting each field the type
//! does not have (`serde_ignored`). kube-apiserver's decoder drops those fields, and its
//! `fieldValidation` refuses them, warns about them or drops them quietly; so does this server
//! (`schema::FieldValidation`).
//!
//! Only unknown fields are judged here: an object the type cannot decode for another reason (a
//! string where kube wants a number) is left to the rest of admission, so a difference between
//! `k8s-openapi`'s decoding and kube's never refuses what kube accepts.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::schema::FieldValidation;
use super::status::ApiResult;

/// One step of a field's path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// The unknown fields of `object`, decoded as a `T`, as paths; `None` when it does not decode.
fn unknown_of<T: DeserializeOwned>(object: &Value) -> Option<Vec<Vec<Step>>> {
    let mut unknown = Vec::new();
    let decoded: Result<T, _> = serde_ignored::deserialize(object, |path| {
        unknown.push(steps(&path));
    });
    decoded.ok().map(|_| unknown)
}

/// A `serde_ignored` path as steps (options and newtypes are not steps of the JSON).
fn steps(path: &serde_ignored::Path<'_>) -> Vec<Step> {
    use serde_ignored::Path;
    let mut out = match path {
        Path::Root => return Vec::new(),
        Path::Seq { parent, .. }
        | Path::Map { parent, .. }
        | Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => steps(parent),
    };
    match path {
        Path::Seq { index, .. } => out.push(Step::Index(*index)),
        Path::Map { key, .. } => out.push(Step::Key(key.clone())),
        _ => {}
    }
    out
}

/// `spec.containers[0].foo`, as kube's strict decoding names a field.
fn display(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Key(k) if out.is_empty() => out.push_str(k),
            Step::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Removes the field at `steps` from `v`.
fn remove(v: &mut Value, steps: &[Step]) {
    let Some((last, parents)) = steps.split_last() else {
        return;
    };
    let mut at = v;
    for step in parents {
        let next = match (step, at) {
            (Step::Key(k), Value::Object(m)) => m.get_mut(k),
            (Step::Index(i), Value::Array(a)) => a.get_mut(*i),
            _ => None,
        };
        let Some(next) = next else { return };
        at = next;
    }
    if let (Step::Key(k), Value::Object(m)) = (last, at) {
        m.remove(k);
    }
}

/// Decodes `object` as the `k8s-openapi` type of `api_version`/`kind`, if one is known: its
/// unknown fields, `None` when there is no type or it does not decode.
fn unknown_fields(api_version: &str, kind: &str, object: &Value) -> Option<Vec<Vec<Step>>> {
    macro_rules! decode {
        ($($ty:path),* $(,)?) => {{
            use k8s_openapi::{Resource, api, apiextensions_apiserver, kube_aggregator};
            $(
                if <$ty as Resource>::API_VERSION == api_version && <$ty as Resource>::KIND == kind {
                    return unknown_of::<$ty>(object);
                }
            )*
            None
        }};
    }
    wasmctrl_core::k8s_resource_types!(decode)
}

/// The OpenAPI v3 schemas of the built-in kinds served at `api_version` (`apps/v1`), as kube
/// publishes them in `components.schemas`: each kind's and every schema it refers to, named as
/// kube names them (`io.k8s.api.apps.v1.Deployment`), the kinds' own marked with
/// `x-kubernetes-group-version-kind`. From `k8s-openapi`'s types, which carry kube's
/// descriptions.
pub(crate) fn schemas(api_version: &str) -> serde_json::Map<String, Value> {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let mut kinds: Vec<(String, &'static str)> = Vec::new();
    macro_rules! generate {
        ($($ty:path),* $(,)?) => {{
            use k8s_openapi::{Resource, api, apiextensions_apiserver, kube_aggregator};
            use schemars::JsonSchema as _;
            $(
                if <$ty as Resource>::API_VERSION == api_version {
                    generator.subschema_for::<$ty>();
                    kinds.push((<$ty>::schema_name().into_owned(), <$ty as Resource>::KIND));
                }
            )*
        }};
    }
    wasmctrl_core::k8s_resource_types!(generate);
    let mut definitions = generator.take_definitions(true);
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    for (name, kind) in kinds {
        if let Some(Value::Object(schema)) = definitions.get_mut(&name) {
            let gvk = serde_json::json!([{"group": group, "version": version, "kind": kind}]);
            schema.insert("x-kubernetes-group-version-kind".into(), gvk);
        }
    }
    definitions
}

/// Judges the unknown fields of a built-in object as `validation` says: refused, or dropped
/// (with a warning each, unless ignored).
pub(crate) fn admit(
    api_version: &str,
    kind: &str,
    version: &str,
    object: &mut Value,
    validation: FieldValidation,
) -> ApiResult<()> {
    let unknown = unknown_fields(api_version, kind, object).unwrap_or_default();
    let named: Vec<String> = unknown.iter().map(|s| display(s)).collect();
    validation.judge(kind, version, &named)?;
    for steps in &unknown {
        remove(object, steps);
    }
    Ok(())
}

/// ObjectMeta's schema and those it refers to, for documents of custom resources only.
pub(crate) fn object_meta_schemas() -> serde_json::Map<String, Value> {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
    generator.take_definitions(true)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_served_version_of_every_builtin_kind_has_its_type() {
        let list: Vec<Value> =
            serde_json::from_str(include_str!("../data/builtin-resources.json")).unwrap();
        for entry in list {
            let group = entry["group"].as_str().unwrap();
            let kind = entry["kind"].as_str().unwrap();
            for version in entry["versions"].as_array().unwrap() {
                let version = version.as_str().unwrap();
                let api_version = if group.is_empty() {
                    version.to_string()
                } else {
                    format!("{group}/{version}")
                };
                let object =
                    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
                assert!(
                    unknown_fields(&api_version, kind, &object).is_some(),
                    "{api_version} {kind} has no type, or a bare object of it does not decode"
                );
            }
        }
    }

    #[test]
    fn schemas_are_kubes_with_their_kinds_marked() {
        let apps = schemas("apps/v1");
        let deployment = &apps["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
        );
        let spec = &apps["io.k8s.api.apps.v1.DeploymentSpec"];
        assert!(
            spec["properties"]["strategy"]["description"].is_string(),
            "{spec}"
        );
        assert!(
            apps.contains_key("io.k8s.api.core.v1.PodTemplateSpec"),
            "referenced schemas too"
        );
        assert!(
            !apps.contains_key("io.k8s.api.batch.v1.Job"),
            "only the group's kinds"
        );
    }

    #[test]
    fn unknown_fields_are_named_as_kube_names_them_and_dropped() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "colour": "red"},
            "spec": {"containers": [{"name": "c", "image": "i", "sidecar": true}], "extra": 1}});
        let unknown = unknown_fields("v1", "Pod", &pod).unwrap();
        let mut named: Vec<String> = unknown.iter().map(|s| display(s)).collect();
        named.sort();
        assert_eq!(
            named,
            [
                "metadata.colour",
                "spec.containers[0].sidecar",
                "spec.extra"
            ]
        );
        admit("v1", "Pod", "v1", &mut pod, FieldValidation::Ignore).unwrap();
        assert_eq!(
            pod,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}})
        );
        let err = admit(
            "v1",
            "Pod",
            "v1",
            &mut json!({"apiVersion": "v1", "kind": "Pod", "bogus": 1}),
            FieldValidation::Strict,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains(r#"strict decoding error: unknown field "bogus""#),
            "{err}"
        );
        // What does not decode is not judged here.
        assert!(unknown_fields("v1", "Pod", &json!({"spec": {"containers": "nope"}})).is_none());
    }
}
