//! ValidatingAdmissionPolicies, enforced as kube-apiserver's `ValidatingAdmissionPolicy`
//! plugin enforces them (`k8s.io/apiserver/pkg/admission/plugin/policy/validating`): a policy
//! whose `matchConstraints` match the write, through each binding whose `matchResources` match
//! it too, with the binding's params, its `matchConditions` holding, evaluates its
//! `variables` and `validations` (CEL, the engine CRD rules use) on `object`, `oldObject`,
//! `request`, `params` and `namespaceObject`. A failed validation denies the write (binding
//! action `Deny`: 422 or the validation's `reason`, worded as kube's), warns (`Warn`), or is
//! only audited (`Audit`, which this server records nowhere). An expression that fails to
//! evaluate, or a binding whose params are missing, follows the policy's `failurePolicy`.
//!
//! Policies run under the store's lock, after the write is validated and before the
//! validating webhooks, as kube orders its admission plugins. Not as kube: no cost limits,
//! no `authorizer` variable, no audit annotations.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::json::str_at;
use crate::schema::cel::{self, Bindings, Outcome, Program};
use crate::status::{self, ApiError, ApiResult};
use crate::store::State;
use crate::validate::selects;
use crate::webhooks::config::{GROUP, Rule, rules};
use crate::webhooks::{self, Attributes};

/// A policy as parsed, with what it needs to be evaluated.
#[derive(Debug)]
struct Policy {
    name: String,
    ignore_failures: bool,
    constraints: Match,
    /// `paramKind`: (apiVersion, kind).
    param_kind: Option<(String, String)>,
    conditions: Vec<(String, Arc<Program>)>,
    variables: Vec<(String, Arc<Program>)>,
    validations: Vec<Validation>,
}

/// `matchConstraints` or a binding's `matchResources`.
#[derive(Debug, Default)]
struct Match {
    rules: Vec<Rule>,
    exclude: Vec<Rule>,
    namespace_selector: Value,
    object_selector: Value,
    equivalent: bool,
}

#[derive(Debug)]
struct Validation {
    expression: String,
    program: Arc<Program>,
    message: Option<String>,
    message_expression: Option<Arc<Program>>,
    reason: Option<String>,
}

/// The policies as parsed, by uid, each with the resourceVersion read.
#[derive(Debug, Default)]
pub(crate) struct Policies {
    parsed: Mutex<HashMap<String, (String, Arc<Policy>)>>,
}

impl Policies {
    /// Judges a write (`object` as it will be stored, `old` as stored) by every policy bound
    /// to it: the error of the first denial, warnings added for `Warn` bindings.
    pub(crate) fn admit(
        &self,
        st: &State,
        attrs: &Attributes,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> ApiResult<()> {
        if attrs.exempt() {
            return Ok(());
        }
        let bindings = objects(st, "validatingadmissionpolicybindings");
        if bindings.is_empty() {
            return Ok(());
        }
        for policy in self.policies(st) {
            if !policy.constraints.matches(st, attrs, object, old)? {
                continue;
            }
            let bound = (bindings.iter()).filter(|b| str_at(b, "/spec/policyName") == policy.name);
            for binding in bound {
                judge(st, &policy, binding, attrs, object, old)?;
            }
        }
        Ok(())
    }

    fn policies(&self, st: &State) -> Vec<Arc<Policy>> {
        let mut parsed = wasmctrl_core::sync::lock(&self.parsed);
        let stored = objects(st, "validatingadmissionpolicies");
        let out = (stored.iter())
            .map(|p| {
                let (uid, rv) = (
                    str_at(p, "/metadata/uid"),
                    str_at(p, "/metadata/resourceVersion"),
                );
                match parsed.get(uid) {
                    Some((seen, policy)) if seen == rv => policy.clone(),
                    _ => {
                        let policy = Arc::new(parse(p));
                        parsed.insert(uid.to_string(), (rv.to_string(), policy.clone()));
                        policy
                    }
                }
            })
            .collect();
        let live: std::collections::HashSet<&str> =
            stored.iter().map(|p| str_at(p, "/metadata/uid")).collect();
        parsed.retain(|uid, _| live.contains(uid.as_str()));
        out
    }
}

fn objects(st: &State, plural: &str) -> Vec<Arc<Value>> {
    st.table_of(&(GROUP.to_string(), plural.to_string()))
        .map(|t| t.objects.values().cloned().collect())
        .unwrap_or_default()
}

fn parse(p: &Value) -> Policy {
    let spec = &p["spec"];
    let compiled = |list: &Value, key: &str| -> Vec<(String, Arc<Program>)> {
        (list.as_array().into_iter().flatten())
            .filter_map(|c| {
                let program = cel::compile(str_at(c, &format!("/{key}"))).ok()?;
                Some((str_at(c, "/name").to_string(), Arc::new(program)))
            })
            .collect()
    };
    let validations = (spec["validations"].as_array().into_iter().flatten())
        .filter_map(|v| {
            let expression = str_at(v, "/expression").trim().to_string();
            let program = Arc::new(cel::compile(&expression).ok()?);
            let text = |k: &str| {
                v[k].as_str()
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            };
            Some(Validation {
                expression,
                program,
                message: text("message"),
                message_expression: text("messageExpression")
                    .and_then(|e| cel::compile(&e).ok())
                    .map(Arc::new),
                reason: text("reason"),
            })
        })
        .collect();
    let param_kind = spec["paramKind"]
        .as_object()
        .map(|k| (str_of(&k["apiVersion"]), str_of(&k["kind"])));
    Policy {
        name: str_at(p, "/metadata/name").to_string(),
        ignore_failures: spec["failurePolicy"] == "Ignore",
        constraints: Match::parse(&spec["matchConstraints"]),
        param_kind,
        conditions: compiled(&spec["matchConditions"], "expression"),
        variables: compiled(&spec["variables"], "expression"),
        validations,
    }
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

impl Match {
    fn parse(m: &Value) -> Self {
        let selector = |v: &Value| if v.is_object() { v.clone() } else { json!({}) };
        Self {
            rules: rules(&m["resourceRules"]),
            exclude: rules(&m["excludeResourceRules"]),
            namespace_selector: selector(&m["namespaceSelector"]),
            object_selector: selector(&m["objectSelector"]),
            equivalent: m["matchPolicy"] != "Exact",
        }
    }

    /// kube's `matching.Matcher`: the selectors, a rule (at the request's version or, with
    /// `Equivalent`, another served one; none given matches all) and no excluding rule.
    fn matches(
        &self,
        st: &State,
        attrs: &Attributes,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> ApiResult<bool> {
        if !webhooks::namespace_matches(st, &self.namespace_selector, attrs, object)?
            || !webhooks::object_matches(&self.object_selector, object, old)
        {
            return Ok(false);
        }
        let versions = std::iter::once(&attrs.version)
            .chain(attrs.equivalent_versions.iter().filter(|_| self.equivalent));
        // No rules (a binding's `matchResources` that only narrows by selector): everything
        // the policy matched.
        let mut matched = self.rules.is_empty();
        for version in versions {
            if self
                .exclude
                .iter()
                .any(|r| webhooks::rule_matches(r, attrs, version))
            {
                return Ok(false);
            }
            matched |= self
                .rules
                .iter()
                .any(|r| webhooks::rule_matches(r, attrs, version));
        }
        Ok(matched)
    }
}

/// One binding of a policy that matched: its own resources, params, conditions, then the
/// validations, each failure acted on as the binding's `validationActions` say.
fn judge(
    st: &State,
    policy: &Policy,
    binding: &Value,
    attrs: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<()> {
    let binding_name = str_at(binding, "/metadata/name");
    let narrowed = &binding["spec"]["matchResources"];
    if narrowed.is_object() && !Match::parse(narrowed).matches(st, attrs, object, old)? {
        return Ok(());
    }
    let actions: Vec<&str> = (binding["spec"]["validationActions"]
        .as_array()
        .into_iter()
        .flatten())
    .filter_map(Value::as_str)
    .collect();
    let judged = Judged {
        policy,
        binding: binding_name,
        actions: &actions,
        attrs,
    };
    let params = match params(st, policy, binding, attrs) {
        Ok(p) => p,
        Err(message) => return judged.failed(format!("failed to configure binding: {message}")),
    };
    let null = Value::Null;
    let request = admission_request(attrs);
    let namespace = namespace_object(st, attrs);
    for param in params {
        let vars = [
            ("object", object.unwrap_or(&null)),
            ("oldObject", old.unwrap_or(&null)),
            ("request", &request),
            ("params", param.as_deref().unwrap_or(&null)),
            ("namespaceObject", &namespace),
        ];
        let bound = Bindings::new(&vars).with_variables(&policy.variables);
        judged.validate(&bound)?;
    }
    Ok(())
}

/// A policy through one binding, judging one write.
struct Judged<'a> {
    policy: &'a Policy,
    binding: &'a str,
    actions: &'a [&'a str],
    attrs: &'a Attributes,
}

impl Judged<'_> {
    /// The error an expression that failed to evaluate gives: none under `failurePolicy:
    /// Ignore`.
    fn failed(&self, message: String) -> ApiResult<()> {
        if self.policy.ignore_failures {
            return Ok(());
        }
        Err(denial(
            self.policy,
            self.binding,
            self.attrs,
            &message,
            None,
        ))
    }

    /// The match conditions, then each validation, with `bound` (one param's variables).
    fn validate(&self, bound: &Bindings) -> ApiResult<()> {
        for (_, condition) in &self.policy.conditions {
            match bound.evaluate(condition) {
                Outcome::Bool(true) => {}
                Outcome::Bool(false) => return Ok(()),
                Outcome::Error(e) => return self.failed(e),
                _ => return self.failed("matchConditions must evaluate to bool".into()),
            }
        }
        for v in &self.policy.validations {
            let message = match bound.evaluate(&v.program) {
                Outcome::Bool(true) => continue,
                Outcome::Bool(false) => failure_message(bound, v),
                Outcome::Error(e) => {
                    self.failed(e)?;
                    continue;
                }
                _ => {
                    let e = format!(
                        "validation expression must evaluate to bool: {}",
                        v.expression
                    );
                    self.failed(e)?;
                    continue;
                }
            };
            if self.actions.contains(&"Warn") {
                status::warn(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {message}",
                    self.policy.name, self.binding
                ));
            }
            if self.actions.contains(&"Deny") {
                let reason = v.reason.as_deref();
                return Err(denial(
                    self.policy,
                    self.binding,
                    self.attrs,
                    &message,
                    reason,
                ));
            }
        }
        Ok(())
    }
}

/// A failed validation's message: its `messageExpression`'s one-line result, else its
/// `message`, else `failed expression: <expression>`.
fn failure_message(bound: &Bindings, v: &Validation) -> String {
    let expressed = v
        .message_expression
        .as_ref()
        .and_then(|p| match bound.evaluate(p) {
            Outcome::Text(s) => Some(s.trim().to_string()),
            _ => None,
        });
    expressed
        .filter(|s| !s.is_empty() && !s.contains('\n') && s.len() <= 5 * 1024)
        .or_else(|| v.message.clone())
        .unwrap_or_else(|| format!("failed expression: {}", v.expression))
}

/// The params a binding gives the policy: none needed (`[None]`), the object its `paramRef`
/// names, or those it selects; missing params deny or allow as `parameterNotFoundAction` says.
fn params(
    st: &State,
    policy: &Policy,
    binding: &Value,
    attrs: &Attributes,
) -> Result<Vec<Option<Arc<Value>>>, String> {
    let Some((api_version, kind)) = &policy.param_kind else {
        return Ok(vec![None]);
    };
    let reference = &binding["spec"]["paramRef"];
    if !reference.is_object() {
        return Err(format!(
            "policy '{}' has paramKind but binding has no paramRef",
            policy.name
        ));
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let found =
        (st.catalog().in_group_version(group, version).into_iter()).find(|r| r.kind == *kind);
    let Some(res) = found else {
        return Err(format!(
            "failed to find resource referenced by paramKind: '{api_version}, Kind={kind}'"
        ));
    };
    let namespace = match reference["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => ns.to_string(),
        _ if res.namespaced => attrs.namespace.clone(),
        _ => String::new(),
    };
    let key = (res.group.clone(), res.plural.clone());
    let found: Vec<Option<Arc<Value>>> = match reference["name"].as_str().filter(|n| !n.is_empty())
    {
        Some(name) => st
            .get(&key, &namespace, name)
            .into_iter()
            .map(Some)
            .collect(),
        None => (st.table_of(&key).into_iter())
            .flat_map(|t| t.objects.values())
            .filter(|o| str_at(o, "/metadata/namespace") == namespace)
            .filter(|o| selects(&reference["selector"], &o["metadata"]["labels"]) == Some(true))
            .map(|o| Some(o.clone()))
            .collect(),
    };
    if !found.is_empty() {
        return Ok(found);
    }
    if reference["parameterNotFoundAction"] == "Allow" {
        return Ok(Vec::new());
    }
    Err("no params found for policy binding with `Deny` parameterNotFoundAction".into())
}

/// The `request` variable: the AdmissionRequest kube builds for CEL.
fn admission_request(attrs: &Attributes) -> Value {
    let mut r = json!({
        "kind": {"group": attrs.group, "version": attrs.version, "kind": attrs.kind},
        "resource": {"group": attrs.group, "version": attrs.version, "resource": attrs.resource},
        "name": attrs.name,
        "namespace": attrs.namespace,
        "operation": attrs.operation.as_str(),
        "userInfo": {"username": attrs.user.name, "groups": attrs.user.groups},
        "dryRun": attrs.dry_run,
        "options": attrs.options,
    });
    if !attrs.subresource.is_empty() {
        r["subResource"] = json!(attrs.subresource);
    }
    r["requestKind"] = r["kind"].clone();
    r["requestResource"] = r["resource"].clone();
    r
}

/// The `namespaceObject` variable: the write's namespace (metadata, spec and status), null
/// for a cluster-scoped object or a Namespace itself.
fn namespace_object(st: &State, attrs: &Attributes) -> Value {
    let is_namespace = attrs.group.is_empty() && attrs.resource == "namespaces";
    if attrs.namespace.is_empty() || is_namespace {
        return Value::Null;
    }
    let key = (String::new(), "namespaces".to_string());
    st.get(&key, "", &attrs.namespace)
        .map_or(Value::Null, |ns| (*ns).clone())
}

/// kube's denial: `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with
/// binding '<binding>' denied request: <message>`, its code the reason's (422 `Invalid` by
/// default).
fn denial(
    policy: &Policy,
    binding: &str,
    attrs: &Attributes,
    message: &str,
    reason: Option<&str>,
) -> ApiError {
    let text = format!(
        "ValidatingAdmissionPolicy '{}' with binding '{binding}' denied request: {message}",
        policy.name
    );
    let resource = if attrs.group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.group)
    };
    let (code, reason) = match reason {
        Some("Forbidden") => (403, "Forbidden"),
        Some("RequestEntityTooLarge") => (413, "RequestEntityTooLarge"),
        _ => (422, "Invalid"),
    };
    let mut e = ApiError::new(
        code,
        reason,
        format!("{resource} {:?} is forbidden: {text}", attrs.name),
    );
    let mut details =
        json!({"name": attrs.name, "kind": attrs.resource, "causes": [{"message": text}]});
    if !attrs.group.is_empty() {
        details["group"] = json!(attrs.group);
    }
    e.details = Some(details);
    e
}
