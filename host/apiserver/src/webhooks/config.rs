//! The webhooks a `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration` declares,
//! read once per stored version of the configuration (with v1's defaults for what it leaves
//! out) and kept until the configuration changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use crate::json::str_at;
use crate::schema::cel;
use crate::store::State;

/// The group of the webhook configurations.
pub(crate) const GROUP: &str = "admissionregistration.k8s.io";

/// One webhook of a configuration (`admissionregistration.k8s.io/v1` `ValidatingWebhook` or
/// `MutatingWebhook`).
#[derive(Debug)]
pub(crate) struct Hook {
    /// The configuration's name (mutating webhooks run in the order of these names), for logs.
    pub(crate) configuration: String,
    /// The webhook's own name, which refusals quote.
    pub(crate) name: String,
    /// The rules: a request matching any of them is sent.
    pub(crate) rules: Vec<Rule>,
    /// `failurePolicy: Ignore` (v1's default is `Fail`).
    pub(crate) ignore_failures: bool,
    /// `matchPolicy: Equivalent` (v1's default), else `Exact`.
    pub(crate) equivalent: bool,
    /// `namespaceSelector` and `objectSelector` (`{}` when absent: everything).
    pub(crate) namespace_selector: Value,
    pub(crate) object_selector: Value,
    /// `sideEffects` is `None` or `NoneOnDryRun`: the webhook may see dry-run requests.
    pub(crate) dry_run_safe: bool,
    /// `timeoutSeconds` (default 10).
    pub(crate) timeout: Duration,
    /// `admissionReviewVersions` includes `v1` (else the webhook is sent `v1beta1`).
    pub(crate) review_v1: bool,
    /// `matchConditions`: name and compiled expression.
    pub(crate) conditions: Vec<(String, Arc<cel::Program>)>,
    /// Where to send the review.
    pub(crate) client: Client,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks only).
    pub(crate) reinvoke: bool,
}

/// One `RuleWithOperations`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rule {
    /// `resourceNames` (policies' rules only; empty: any name).
    pub(crate) resource_names: Vec<String>,
    pub(crate) operations: Vec<String>,
    pub(crate) groups: Vec<String>,
    pub(crate) versions: Vec<String>,
    pub(crate) resources: Vec<String>,
    /// `Cluster`, `Namespaced` or `*` (the default).
    pub(crate) scope: String,
}

/// A webhook's `clientConfig`.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    /// The URL to post to (`url`, or the Service's `https://<name>.<namespace>.svc:<port><path>`).
    pub(crate) url: String,
    /// `caBundle`, PEM; `None` trusts the system's roots.
    pub(crate) ca_bundle: Option<Vec<u8>>,
}

/// The webhooks of the stored configurations, parsed once per configuration version.
#[derive(Debug, Default)]
pub(crate) struct Configurations {
    /// By configuration uid: the resourceVersion parsed and what it declares.
    parsed: Mutex<HashMap<String, Parsed>>,
}

/// A configuration as parsed: the resourceVersion read and its webhooks.
type Parsed = (String, Arc<Vec<Arc<Hook>>>);

impl Configurations {
    /// The mutating (`mutating`) or validating webhooks stored now, in kube's order: by
    /// configuration name, then as each configuration lists them.
    pub(crate) fn hooks(&self, st: &State, mutating: bool) -> Vec<Arc<Hook>> {
        let plural = if mutating {
            "mutatingwebhookconfigurations"
        } else {
            "validatingwebhookconfigurations"
        };
        let Some(table) = st.table_of(&(GROUP.to_string(), plural.to_string())) else {
            return Vec::new();
        };
        if table.objects.is_empty() {
            return Vec::new();
        }
        let mut parsed = wasmctrl_core::sync::lock(&self.parsed);
        let mut out = Vec::new();
        // The table is ordered by (namespace, name): by name for these cluster-scoped kinds.
        for config in table.objects.values() {
            let uid = str_at(config, "/metadata/uid");
            let rv = str_at(config, "/metadata/resourceVersion");
            let hooks = match parsed.get(uid) {
                Some((seen, hooks)) if seen == rv => hooks.clone(),
                _ => {
                    let hooks = Arc::new(parse(config, mutating));
                    parsed.insert(uid.to_string(), (rv.to_string(), hooks.clone()));
                    hooks
                }
            };
            out.extend(hooks.iter().cloned());
        }
        if parsed.len() > 2 * table.objects.len() + 16 {
            let live: std::collections::HashSet<&str> = table
                .objects
                .values()
                .map(|c| str_at(c, "/metadata/uid"))
                .collect();
            parsed.retain(|uid, _| live.contains(uid.as_str()));
        }
        out
    }
}

/// The webhooks of one stored configuration (validated when it was written, so what does not
/// parse here is left at its default).
fn parse(config: &Value, mutating: bool) -> Vec<Arc<Hook>> {
    let configuration = str_at(config, "/metadata/name").to_string();
    let hooks = config["webhooks"].as_array().map(Vec::as_slice);
    (hooks.unwrap_or_default().iter())
        .map(|h| Arc::new(hook(&configuration, h, mutating)))
        .collect()
}

fn hook(configuration: &str, h: &Value, mutating: bool) -> Hook {
    let rules = rules(&h["rules"]);
    let selector = |v: &Value| {
        if v.is_null() {
            serde_json::json!({})
        } else {
            v.clone()
        }
    };
    let conditions = (h["matchConditions"].as_array().into_iter().flatten())
        .filter_map(|c| {
            let program = cel::compile(str_at(c, "/expression")).ok()?;
            Some((str_at(c, "/name").to_string(), Arc::new(program)))
        })
        .collect();
    let timeout = h["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30);
    let versions = strings(&h["admissionReviewVersions"]);

    Hook {
        configuration: configuration.to_string(),
        name: str_at(h, "/name").to_string(),
        rules,
        ignore_failures: h["failurePolicy"] == "Ignore",
        equivalent: h["matchPolicy"] != "Exact",
        namespace_selector: selector(&h["namespaceSelector"]),
        object_selector: selector(&h["objectSelector"]),
        dry_run_safe: matches!(str_at(h, "/sideEffects"), "None" | "NoneOnDryRun"),
        timeout: Duration::from_secs(timeout),
        review_v1: versions.is_empty() || versions.iter().any(|v| v == "v1"),
        conditions,
        client: client(&h["clientConfig"]),
        reinvoke: mutating && h["reinvocationPolicy"] == "IfNeeded",
    }
}

/// The strings of a JSON array (none when it is not one).
fn strings(v: &Value) -> Vec<String> {
    (v.as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// A list of `RuleWithOperations` (or policies' `NamedRuleWithOperations`).
pub(crate) fn rules(list: &Value) -> Vec<Rule> {
    (list.as_array().into_iter().flatten())
        .map(|r| Rule {
            resource_names: strings(&r["resourceNames"]),
            operations: strings(&r["operations"]),
            groups: strings(&r["apiGroups"]),
            versions: strings(&r["apiVersions"]),
            resources: strings(&r["resources"]),
            scope: r["scope"].as_str().unwrap_or("*").to_string(),
        })
        .collect()
}

pub(crate) fn client(cc: &Value) -> Client {
    let ca_bundle = cc["caBundle"]
        .as_str()
        .filter(|b| !b.is_empty())
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    if let Some(url) = cc["url"].as_str() {
        return Client {
            url: url.to_string(),
            ca_bundle,
        };
    }
    let svc = &cc["service"];
    let (ns, name) = (str_at(svc, "/namespace"), str_at(svc, "/name"));
    let port = svc["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(443);
    let path = str_at(svc, "/path");
    Client {
        url: format!("https://{name}.{ns}.svc:{port}{path}"),
        ca_bundle,
    }
}
