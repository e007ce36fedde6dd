//! Admission webhooks, called as kube-apiserver calls them
//! (`k8s.io/apiserver/pkg/admission/plugin/webhook`): first the mutating webhooks, one after
//! the other in the order of their configurations' names, each seeing what the ones before it
//! patched, and those with `reinvocationPolicy: IfNeeded` once more when a later one changed
//! the object; then, on the object as it will be stored (defaulted and validated), the
//! validating webhooks, all at once.
//!
//! A webhook is called when one of its rules matches the request's operation, group, version,
//! resource and scope (with `matchPolicy: Equivalent`, also another served version of the
//! resource, the object converted to it), its `namespaceSelector` the namespace's labels, its
//! `objectSelector` the new or the old object's labels, and all its `matchConditions` hold. It
//! is sent an AdmissionReview over HTTPS (`call`), and its answer counts only if it is one
//! (`review`). When it cannot be called, answers late or answers nonsense, its
//! `failurePolicy` decides; a dry-run request is refused by a webhook that may have side
//! effects. Its warnings reach the client; its refusal is the request's error, worded as
//! kube's (`admission webhook "<name>" denied the request: <message>`).
//!
//! Webhook configurations and admission policies themselves are never sent to webhooks, so
//! that a broken webhook can always be removed.

mod call;
pub(crate) mod config;
mod conversion;
mod review;

use std::sync::Arc;

use serde_json::{Value, json};

use crate::auth::User;
use crate::catalog::Resource;
use crate::schema::cel::{self, Outcome};
use crate::status::{self, ApiError, ApiResult};
use crate::store::State;
use crate::validate::selects;
use config::{Configurations, Hook};
pub(crate) use conversion::Batch;

/// What a write is, for admission (kube's `admission.Attributes`).
#[derive(Debug, Clone)]
pub(crate) struct Attributes {
    pub(crate) operation: Operation,
    pub(crate) group: String,
    pub(crate) version: String,
    /// The other versions the resource is served at (`matchPolicy: Equivalent` matches them).
    pub(crate) equivalent_versions: Vec<String>,
    /// The resource's plural.
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) kind: String,
    /// Empty for a cluster-scoped object.
    pub(crate) namespace: String,
    /// Empty for a create by `generateName`.
    pub(crate) name: String,
    pub(crate) user: User,
    pub(crate) dry_run: bool,
    /// The request's options (`CreateOptions`, `UpdateOptions`, `PatchOptions`,
    /// `DeleteOptions`).
    pub(crate) options: Value,
    /// A custom resource whose CRD converts through a webhook: what an equivalent version's
    /// webhook is sent is converted by it.
    pub(crate) converted: Option<Resource>,
}

/// An admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }
}

impl Attributes {
    /// The attributes of a write of `res` (at `version`) by `user`; `options_kind` names the
    /// options the request carried (`CreateOptions`, ...), `options` their fields.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        operation: Operation,
        res: &Resource,
        version: &str,
        subresource: Option<&str>,
        namespace: &str,
        name: &str,
        user: &User,
        dry_run: bool,
        options_kind: &str,
        mut options: Value,
    ) -> Self {
        if !options.is_object() {
            options = json!({});
        }
        options["apiVersion"] = json!("meta.k8s.io/v1");
        options["kind"] = json!(options_kind);
        Self {
            operation,
            group: res.group.clone(),
            version: version.to_string(),
            equivalent_versions: (res.versions.iter())
                .filter(|v| *v != version)
                .cloned()
                .collect(),
            resource: res.plural.clone(),
            subresource: subresource.unwrap_or_default().to_string(),
            kind: res.kind.clone(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            user: user.clone(),
            dry_run,
            options,
            converted: res.conversion.is_some().then(|| res.clone()),
        }
    }

    /// Whether admission never sees writes of this kind: the webhook configurations and
    /// policies (kube's `IsExemptAdmissionConfigurationResource`).
    pub(crate) fn exempt(&self) -> bool {
        self.group == config::GROUP
            && matches!(
                self.resource.as_str(),
                "validatingwebhookconfigurations"
                    | "mutatingwebhookconfigurations"
                    | "validatingadmissionpolicies"
                    | "validatingadmissionpolicybindings"
            )
    }
}

/// The webhooks a write may be sent to, found under the store's lock: their rules and
/// namespace selectors match. Nearly always none (no configuration is stored), and then the
/// write runs under one lock as it would without admission.
#[derive(Debug, Default)]
pub(crate) struct Matched {
    mutating: Vec<Invocation>,
    validating: Vec<Invocation>,
}

/// A webhook to call, and the version it is sent the object at: the request's, or with
/// `matchPolicy: Equivalent` the one of its rules that matched (kube's `WebhookInvocation`).
#[derive(Debug)]
struct Invocation {
    hook: Arc<Hook>,
    version: String,
}

impl Matched {
    /// Whether no webhook may be called.
    pub(crate) fn is_empty(&self) -> bool {
        self.mutating.is_empty() && self.validating.is_empty()
    }
}

/// The server's admission webhooks: the configurations as parsed, and the HTTP clients.
#[derive(Debug, Default)]
pub(crate) struct Webhooks {
    configurations: Configurations,
    clients: call::Clients,
}

impl Webhooks {
    /// The webhooks whose rules and namespace selector match `attrs` (`object` the object
    /// written, whose labels a Namespace's own write is selected by). A namespace selector
    /// that needs a namespace that does not exist fails as kube's does (404).
    pub(crate) fn matching(
        &self,
        st: &State,
        attrs: &Attributes,
        object: Option<&Value>,
    ) -> ApiResult<Matched> {
        if attrs.exempt() {
            return Ok(Matched::default());
        }
        let mut out = Matched::default();
        for mutating in [true, false] {
            for hook in self.configurations.hooks(st, mutating) {
                let Some(version) = matching_version(&hook, attrs) else {
                    continue;
                };
                if !namespace_matches(st, &hook.namespace_selector, attrs, object)? {
                    continue;
                }
                let invocation = Invocation { hook, version };
                if mutating {
                    out.mutating.push(invocation);
                } else {
                    out.validating.push(invocation);
                }
            }
        }
        Ok(out)
    }

    /// Runs the mutating webhooks on `object` (`old` the stored object), in order; then, once
    /// more, those with `reinvocationPolicy: IfNeeded` that a later webhook's change followed.
    pub(crate) async fn mutate(
        &self,
        matched: &Matched,
        attrs: &Attributes,
        object: &mut Value,
        old: Option<&Value>,
    ) -> ApiResult<()> {
        let mut reinvoke: Vec<usize> = Vec::new();
        let mut invoked_reinvocable: Vec<usize> = Vec::new();
        for (i, invocation) in matched.mutating.iter().enumerate() {
            if self.call_mutating(invocation, attrs, object, old).await? {
                reinvoke.append(&mut invoked_reinvocable);
            }
            if invocation.hook.reinvoke {
                invoked_reinvocable.push(i);
            }
        }
        reinvoke.sort_unstable();
        reinvoke.dedup();
        for i in reinvoke {
            self.call_mutating(&matched.mutating[i], attrs, object, old)
                .await?;
        }
        Ok(())
    }

    /// Sends `object` to one mutating webhook if its object selector and conditions hold;
    /// whether its patch changed the object.
    async fn call_mutating(
        &self,
        invocation: &Invocation,
        attrs: &Attributes,
        object: &mut Value,
        old: Option<&Value>,
    ) -> ApiResult<bool> {
        let hook = &invocation.hook;
        let current = (attrs.operation != Operation::Delete).then_some(&*object);
        let Some(answer) = self.call(invocation, attrs, current, old, true).await? else {
            return Ok(false);
        };
        let Some(patch) = answer.patch.filter(|p| !p.0.is_empty()) else {
            return Ok(false);
        };
        if attrs.operation == Operation::Delete {
            return Err(ApiError::internal(format!(
                "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
                hook.name
            )));
        }
        let mut patched = self.at_version(attrs, object, &invocation.version).await?;
        json_patch::patch(&mut patched, &patch.0).map_err(|e| ApiError::internal(e.to_string()))?;
        let patched = self.at_version(attrs, &patched, &attrs.version).await?;
        let changed = patched != *object;
        *object = patched;
        Ok(changed)
    }

    /// Sends `object` (`old` the stored object) to every validating webhook at once; the first
    /// refusal, in the webhooks' order, is the error.
    pub(crate) async fn validate(
        &self,
        matched: &Matched,
        attrs: &Attributes,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> ApiResult<()> {
        let calls = matched
            .validating
            .iter()
            .map(|invocation| self.call(invocation, attrs, object, old, false));
        for answered in futures::future::join_all(calls).await {
            answered?;
        }
        Ok(())
    }

    /// Calls one webhook if it applies to `object`: its answer when it allowed the request
    /// (`None` when it was not called, or its call failed and its policy ignores that), else
    /// the error the request fails with.
    async fn call(
        &self,
        invocation: &Invocation,
        attrs: &Attributes,
        object: Option<&Value>,
        old: Option<&Value>,
        mutating: bool,
    ) -> ApiResult<Option<review::Answer>> {
        let hook = &invocation.hook;
        if !object_matches(&hook.object_selector, object, old)
            || !conditions_hold(hook, attrs, object, old)?
        {
            return Ok(None);
        }
        if attrs.dry_run && !hook.dry_run_safe {
            return Err(ApiError::bad_request(format!(
                "admission webhook {:?} does not support dry run",
                hook.name
            )));
        }
        let uid = uuid::Uuid::new_v4().to_string();
        let version = &invocation.version;
        let object = match object {
            Some(o) => Some(self.at_version(attrs, o, version).await?),
            None => None,
        };
        let old = match old {
            Some(o) => Some(self.at_version(attrs, o, version).await?),
            None => None,
        };
        let request = review::request(
            &uid,
            attrs,
            &invocation.version,
            hook.review_v1,
            object.as_ref(),
            old.as_ref(),
        );
        let body = serde_json::to_vec(&request).unwrap_or_default();
        let answered = self
            .clients
            .post(&hook.client, hook.timeout, body, call::MAX_ANSWER)
            .await
            .map_err(|e| format!("failed to call webhook: {e}"))
            .and_then(|body| review::answer(&body, &uid, hook.review_v1, mutating));
        let answer = match answered {
            Ok(a) => a,
            Err(why) if hook.ignore_failures => {
                tracing::warn!(webhook = %hook.name, configuration = %hook.configuration, "failed calling webhook, failing open: {why}");
                return Ok(None);
            }
            Err(why) => {
                tracing::warn!(webhook = %hook.name, configuration = %hook.configuration, "failed calling webhook, failing closed: {why}");
                return Err(ApiError::internal(format!(
                    "failed calling webhook {:?}: {why}",
                    hook.name
                )));
            }
        };
        for w in &answer.warnings {
            status::warn(w.clone());
        }
        if !answer.allowed {
            return Err(review::denied(&hook.name, &answer.status));
        }
        Ok(Some(answer))
    }
}

/// The version a webhook is sent the request at: the request's own when a rule matches it,
/// else (`matchPolicy: Equivalent`) the first other served version a rule matches.
fn matching_version(hook: &Hook, attrs: &Attributes) -> Option<String> {
    if hook
        .rules
        .iter()
        .any(|r| rule_matches(r, attrs, &attrs.version))
    {
        return Some(attrs.version.clone());
    }
    if !hook.equivalent {
        return None;
    }
    hook.rules.iter().find_map(|r| {
        (attrs.equivalent_versions.iter())
            .find(|v| rule_matches(r, attrs, v))
            .cloned()
    })
}

impl Webhooks {
    /// `obj` as the `version` of the resource written: converted by its CRD's webhook when it
    /// has one; else the versions differ only in their `apiVersion` (the built-in kinds this
    /// server serves at several versions, a CRD without a conversion webhook).
    async fn at_version(&self, attrs: &Attributes, obj: &Value, version: &str) -> ApiResult<Value> {
        if let Some(res) = &attrs.converted {
            return self.convert_one(res, version, obj.clone()).await;
        }
        let mut out = obj.clone();
        if obj.get("apiVersion").is_some() {
            out["apiVersion"] = json!(if attrs.group.is_empty() {
                version.to_string()
            } else {
                format!("{}/{version}", attrs.group)
            });
        }
        Ok(out)
    }
}

/// kube's `rules.Matcher`: scope, operation, group, version and resource (with subresource);
/// and, for a policy's rule, the object's name among its `resourceNames`.
pub(crate) fn rule_matches(rule: &config::Rule, attrs: &Attributes, version: &str) -> bool {
    let any = |items: &[String], want: &str| items.iter().any(|i| i == "*" || i == want);
    let is_namespace = attrs.group.is_empty() && attrs.resource == "namespaces";
    let scope = match rule.scope.as_str() {
        "Namespaced" => !is_namespace && !attrs.namespace.is_empty(),
        "Cluster" => is_namespace || attrs.namespace.is_empty(),
        _ => true,
    };
    let resource = rule.resources.iter().any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r, ""));
        (res == "*" || res == attrs.resource) && (sub == "*" || sub == attrs.subresource)
    });
    let named = rule.resource_names.is_empty() || rule.resource_names.contains(&attrs.name);
    scope
        && named
        && any(&rule.operations, attrs.operation.as_str())
        && any(&rule.groups, &attrs.group)
        && any(&rule.versions, version)
        && resource
}

/// kube's namespace matcher: cluster-scoped objects (other than Namespaces) always match; a
/// Namespace's own create or update is judged by its new labels, anything else by its
/// namespace's.
pub(crate) fn namespace_matches(
    st: &State,
    selector: &Value,
    attrs: &Attributes,
    object: Option<&Value>,
) -> ApiResult<bool> {
    let is_namespace = attrs.group.is_empty() && attrs.resource == "namespaces";
    if attrs.namespace.is_empty() && !is_namespace {
        return Ok(true);
    }
    if selector_empty(selector) {
        return Ok(true);
    }
    let labels =
        if is_namespace && attrs.subresource.is_empty() && attrs.operation != Operation::Delete {
            object
                .map(|o| o["metadata"]["labels"].clone())
                .unwrap_or_default()
        } else {
            let name = if is_namespace {
                &attrs.name
            } else {
                &attrs.namespace
            };
            let key = (String::new(), "namespaces".to_string());
            let ns = st
                .get(&key, "", name)
                .ok_or_else(|| ApiError::not_found("", "namespaces", name))?;
            ns["metadata"]["labels"].clone()
        };
    Ok(selects(selector, &labels).unwrap_or(false))
}

/// kube's object matcher: the new or the old object's labels.
pub(crate) fn object_matches(
    selector: &Value,
    object: Option<&Value>,
    old: Option<&Value>,
) -> bool {
    if selector_empty(selector) {
        return true;
    }
    [object, old]
        .into_iter()
        .flatten()
        .any(|o| selects(selector, &o["metadata"]["labels"]) == Some(true))
}

fn selector_empty(selector: &Value) -> bool {
    selector["matchLabels"]
        .as_object()
        .is_none_or(serde_json::Map::is_empty)
        && selector["matchExpressions"]
            .as_array()
            .is_none_or(Vec::is_empty)
}

/// Whether every `matchConditions` expression holds: one that is false skips the webhook;
/// one that fails to evaluate fails the request under `failurePolicy: Fail` (403, as kube
/// answers) and skips the webhook under `Ignore`.
fn conditions_hold(
    hook: &Hook,
    attrs: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<bool> {
    if hook.conditions.is_empty() {
        return Ok(true);
    }
    let null = Value::Null;
    let request = review::request("", attrs, &attrs.version, true, None, None)["request"].clone();
    let variables = [
        ("object", object.unwrap_or(&null)),
        ("oldObject", old.unwrap_or(&null)),
        ("request", &request),
    ];
    let mut errors = Vec::new();
    for (name, program) in &hook.conditions {
        match cel::evaluate(program, &variables) {
            Outcome::Bool(true) => {}
            Outcome::Bool(false) => return Ok(false),
            Outcome::Text(_) | Outcome::Other(_) => {
                errors.push(format!("matchConditions[{name}]: must evaluate to bool"));
            }
            Outcome::Error(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        return Ok(true);
    }
    if hook.ignore_failures {
        return Ok(false);
    }
    let name = if attrs.name.is_empty() {
        ""
    } else {
        &attrs.name
    };
    let resource = if attrs.group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.group)
    };
    let joined = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    Err(ApiError::new(
        403,
        "Forbidden",
        format!("{resource} {name:?} is forbidden: {joined}"),
    ))
}
