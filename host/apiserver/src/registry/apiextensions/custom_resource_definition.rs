//! CustomResourceDefinitions: checked as kube checks them (name, group, structural schemas,
//! their defaults), their status worked out by the server, and the catalog kept in step: a
//! stored CRD serves its resource at once, a removed one takes its objects with it.

use serde_json::{Value, json};

use crate::catalog::{crd_resource, crd_status};
use crate::json::str_at;
use crate::registry::Strategy;
use crate::schema::{crd_default_errors, crd_schemas};
use crate::status::{ApiError, ApiResult, Cause};
use crate::store::State;
use crate::validate;

/// The strategy of `apiextensions.k8s.io/CustomResourceDefinition`.
pub(crate) struct CustomResourceDefinition;

impl Strategy for CustomResourceDefinition {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("apiextensions.k8s.io", "CustomResourceDefinition")
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn allows_unconditional_update(&self) -> bool {
        false
    }

    /// kube's v1 defaults: no conversion (`strategy: None`), and a conversion webhook's
    /// Service on port 443.
    fn default(&self, _st: &State, obj: &mut Value, _old: Option<&Value>) {
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        let conversion = spec
            .entry("conversion")
            .or_insert_with(|| json!({"strategy": "None"}));
        if let Some(service) = conversion.pointer_mut("/webhook/clientConfig/service")
            && service.is_object()
            && service.get("port").is_none_or(Value::is_null)
        {
            service["port"] = json!(443);
        }
    }

    fn prepare_for_create(&self, st: &State, obj: &mut Value, now: &str) -> ApiResult<()> {
        check(st, obj, None)?;
        obj["status"] = crd_status(obj, now);
        Ok(())
    }

    fn prepare_for_update(
        &self,
        st: &State,
        new: &mut Value,
        old: &Value,
        now: &str,
    ) -> ApiResult<()> {
        check(st, new, Some(old))?;
        let mut status = crd_status(new, now);
        // Condition timestamps stay stable across unrelated updates.
        if let Some(c) = old.pointer("/status/conditions") {
            status["conditions"] = c.clone();
        }
        new["status"] = status;
        Ok(())
    }

    fn storing(&self, st: &mut State, obj: &Value) {
        st.catalog_mut().register_crd(obj);
        st.default_custom_objects(Some(obj));
    }

    fn removing(&self, st: &mut State, obj: &Value) -> ApiResult<()> {
        let Some(r) = crd_resource(obj) else {
            return Ok(());
        };
        let key = (r.group.clone(), r.plural.clone());
        let names: Vec<(String, String)> = (st.table_of(&key))
            .map(|tab| tab.objects.keys().cloned().collect())
            .unwrap_or_default();
        for (namespace, name) in names {
            st.remove(&key, &namespace, &name)?;
        }
        st.catalog_mut().unregister_crd(obj);
        Ok(())
    }
}

/// A CRD must be named `plural.group`, not take over a built-in group, and have schemas the
/// server can enforce (known types, patterns that compile, defaults that validate).
fn check(st: &State, crd: &Value, old: Option<&Value>) -> ApiResult<()> {
    let name = str_at(crd, "/metadata/name");
    let invalid = |f: &str, m: String| {
        ApiError::invalid(
            "CustomResourceDefinition",
            "apiextensions.k8s.io",
            name,
            &[(f.into(), m)],
        )
    };
    let Some(r) = crd_resource(crd) else {
        return Err(invalid(
            "spec",
            "Invalid value: spec must name a group, names.plural, names.kind and a served version"
                .into(),
        ));
    };
    if name != format!("{}.{}", r.plural, r.group) {
        return Err(invalid(
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if old.is_none()
        && let Some(existing) = st.catalog().get(&r.group, &r.versions[0], &r.plural)
        && !existing.custom
    {
        return Err(invalid(
            "spec.group",
            "Invalid value: group is served by a built-in API".into(),
        ));
    }
    let mut causes = match crd_schemas(crd) {
        Err(causes) => causes,
        // As kube: defaults are checked once the schemas are structural.
        Ok(_) => crd_default_errors(crd, old),
    };
    let mut errs = Vec::new();
    validate::apiextensions::conversion(&crd["spec"], &mut errs);
    causes.extend(errs.into_iter().map(|e| Cause {
        reason: e.kind.reason(),
        message: e.body(),
        field: e.field,
    }));
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_causes(
        "CustomResourceDefinition",
        "apiextensions.k8s.io",
        name,
        &causes,
    ))
}
