//! Label and field selectors as the list and watch query parameters spell them.
//!
//! Label selectors use the one parser the host and the SDK share (`wasmctrl_core::selector`); field
//! selectors are written here, over the fields kube-apiserver lets each kind be selected by.

use serde_json::Value;

use super::catalog::Resource;
use super::status::ApiError;
use wasmctrl_core::selector::LabelSelector;
use wasmctrl_core::shard;

/// Everything a list, watch or collection delete selects by: labels, fields, and KEP-5866's
/// shard ranges.
#[derive(Debug, Clone, Default)]
pub struct Selectors {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `shardSelector`, as given (echoed in a list's `metadata.shardInfo`) and parsed.
    pub shards: Option<(String, shard::ShardSelector)>,
}

impl Selectors {
    /// Parses the `labelSelector`, `fieldSelector` and `shardSelector` query parameters of a
    /// list or watch of `res`, whose kind can further be selected by `kind_fields` (its
    /// strategy's).
    pub fn parse(
        labels: Option<&str>,
        fields: Option<&str>,
        shards: Option<&str>,
        res: &Resource,
        kind_fields: &[Field],
    ) -> Result<Self, ApiError> {
        let shards = match shards.filter(|s| !s.is_empty()) {
            Some(text) => {
                let parsed = shard::ShardSelector::parse(text)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
                Some((text.to_string(), parsed))
            }
            None => None,
        };
        Ok(Self {
            labels: parse_labels(labels.unwrap_or(""))?,
            fields: FieldSelector::parse(fields.unwrap_or(""), res, kind_fields)?,
            shards,
        })
    }

    /// Whether `obj` satisfies every selector. A shard range hashes the object's uid or its
    /// namespace (empty for a cluster-scoped object), as kube-apiserver's.
    pub fn matches(&self, obj: &Value) -> bool {
        let in_shard = self.shards.as_ref().is_none_or(|(_, s)| {
            let field = match s.field() {
                shard::Field::Uid => &obj["metadata"]["uid"],
                shard::Field::Namespace => &obj["metadata"]["namespace"],
            };
            s.selects(field.as_str().unwrap_or(""))
        });
        in_shard && self.labels.matches_json(&obj["metadata"]["labels"]) && self.fields.matches(obj)
    }

    /// The list metadata's `shardInfo`, when a shard selector filtered the list.
    pub fn shard_info(&self) -> Option<Value> {
        let (text, _) = self.shards.as_ref()?;
        Some(serde_json::json!({ "selector": text }))
    }
}

/// Parses the `labelSelector` query parameter (the shared grammar, `wasmctrl_core::selector`).
fn parse_labels(s: &str) -> Result<LabelSelector, ApiError> {
    LabelSelector::parse(s)
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))
}

/// A parsed field selector: `metadata.name` and `metadata.namespace` everywhere, the fields
/// kube-apiserver selects each built-in kind by (core Events by what they are about, so that
/// `kubectl describe` finds an object's Events; Pods by node and phase; ...), and a custom
/// resource's `selectableFields`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<Term>);

/// One `field=value` or `field!=value` requirement.
#[derive(Debug, Clone, PartialEq)]
struct Term {
    /// JSON pointer of the field in the stored object.
    pointer: String,
    /// The value an absent field has (kube's Go zero value: `false` for a bool).
    absent: &'static str,
    equal: bool,
    value: String,
}

/// A selectable field of a built-in kind: `(field label, JSON pointer, value when absent)`.
pub(crate) type Field = (&'static str, &'static str, &'static str);

/// The selectable fields every resource has.
const META_FIELDS: &[Field] = &[
    ("metadata.name", "/metadata/name", ""),
    ("metadata.namespace", "/metadata/namespace", ""),
];

/// core/v1 Events' further selectable fields, as kube-apiserver's Event strategy defines them
/// (`source` is the source's component, `reportingComponent` the reporting controller).
pub(crate) const EVENT_FIELDS: &[Field] = &[
    ("involvedObject.kind", "/involvedObject/kind", ""),
    ("involvedObject.namespace", "/involvedObject/namespace", ""),
    ("involvedObject.name", "/involvedObject/name", ""),
    ("involvedObject.uid", "/involvedObject/uid", ""),
    (
        "involvedObject.apiVersion",
        "/involvedObject/apiVersion",
        "",
    ),
    (
        "involvedObject.resourceVersion",
        "/involvedObject/resourceVersion",
        "",
    ),
    ("involvedObject.fieldPath", "/involvedObject/fieldPath", ""),
    ("reason", "/reason", ""),
    ("reportingComponent", "/reportingComponent", ""),
    ("source", "/source/component", ""),
    ("type", "/type", ""),
];

/// Pods' further selectable fields (kube's Pod strategy): what kubelets, `kubectl drain` and
/// `kubectl describe node` select by.
pub(crate) const POD_FIELDS: &[Field] = &[
    ("spec.nodeName", "/spec/nodeName", ""),
    ("spec.restartPolicy", "/spec/restartPolicy", ""),
    ("spec.schedulerName", "/spec/schedulerName", ""),
    ("spec.serviceAccountName", "/spec/serviceAccountName", ""),
    ("spec.hostNetwork", "/spec/hostNetwork", "false"),
    ("status.phase", "/status/phase", ""),
    ("status.podIP", "/status/podIP", ""),
    ("status.nominatedNodeName", "/status/nominatedNodeName", ""),
];

pub(crate) const NAMESPACE_FIELDS: &[Field] = &[("status.phase", "/status/phase", "")];

pub(crate) const SECRET_FIELDS: &[Field] = &[("type", "/type", "")];

pub(crate) const NODE_FIELDS: &[Field] = &[("spec.unschedulable", "/spec/unschedulable", "false")];

/// ReplicaSets' and ReplicationControllers'.
pub(crate) const REPLICAS_FIELDS: &[Field] = &[("status.replicas", "/status/replicas", "0")];

pub(crate) const JOB_FIELDS: &[Field] = &[("status.successful", "/status/succeeded", "0")];

pub(crate) const SERVICE_FIELDS: &[Field] = &[
    ("spec.clusterIP", "/spec/clusterIP", ""),
    ("spec.type", "/spec/type", ""),
];

pub(crate) const CSR_FIELDS: &[Field] = &[("spec.signerName", "/spec/signerName", "")];

/// PersistentVolumes' and PersistentVolumeClaims' (a legacy spelling of `metadata.name`).
pub(crate) const VOLUME_FIELDS: &[Field] = &[("name", "/metadata/name", "")];

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter for a list or watch of `res`; fields it
    /// cannot select by are a 400 like kube-apiserver's.
    pub fn parse(s: &str, res: &Resource, kind_fields: &[Field]) -> Result<Self, ApiError> {
        let mut out = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(out));
        }
        for part in s.split(',') {
            let (k, equal, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let k = k.trim();
            let known = META_FIELDS
                .iter()
                .chain(kind_fields)
                .find(|(label, ..)| *label == k)
                .map(|&(_, pointer, absent)| (pointer.to_string(), absent))
                .or_else(|| {
                    res.selectable
                        .iter()
                        .find(|(label, _)| label == k)
                        .map(|(_, pointer)| (pointer.clone(), ""))
                });
            let Some((pointer, absent)) = known else {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {k}"
                )));
            };
            out.push(Term {
                pointer,
                absent,
                equal,
                value: v.trim().to_string(),
            });
        }
        Ok(Self(out))
    }

    /// Whether the object (as stored) satisfies every term. Numbers and bools compare by
    /// their JSON text, as kube's field sets hold them.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|t| {
            let got = match obj.pointer(&t.pointer) {
                Some(Value::String(s)) => s.into(),
                Some(v @ (Value::Bool(_) | Value::Number(_))) => v.to_string().into(),
                _ => std::borrow::Cow::Borrowed(t.absent),
            };
            (got == t.value.as_str()) == t.equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::catalog::Catalog;
    use super::*;
    use serde_json::json;

    /// A field selector parsed for `res`, with its kind's fields as its strategy gives them.
    fn parse_for(s: &str, res: &Resource) -> Result<FieldSelector, ApiError> {
        FieldSelector::parse(s, res, crate::registry::of(res).selectable_fields())
    }

    #[test]
    fn label_selector_operators() {
        let o = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing,app=web", true),
            ("app in (db),tier", false),
            ("", true),
        ] {
            assert_eq!(
                parse_labels(sel)
                    .unwrap()
                    .matches_json(&o["metadata"]["labels"]),
                want,
                "{sel}"
            );
        }
        let e = parse_labels("a b c").unwrap_err();
        assert_eq!(e.code, 400, "{e:?}");
    }

    #[test]
    fn field_selector() {
        let catalog = Catalog::default();
        let configmaps = catalog.get("", "v1", "configmaps").unwrap();
        let parse = |s| parse_for(s, &configmaps);
        let o = json!({"metadata": {"name": "x", "namespace": "ns"}});
        assert!(parse("metadata.name=x").unwrap().matches(&o));
        assert!(!parse("metadata.namespace!=ns").unwrap().matches(&o));
        assert_eq!(parse("spec.x=1").unwrap_err().code, 400);
        assert_eq!(parse("involvedObject.name=x").unwrap_err().code, 400);
    }

    #[test]
    fn pods_select_by_node_phase_and_the_zero_value_of_an_absent_bool() {
        let catalog = Catalog::default();
        let pods = catalog.get("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "node1", "restartPolicy": "Always"},
            "status": {"phase": "Running", "podIP": "10.0.0.7"}});
        // What `kubectl describe node node1` asks for.
        let on_node = "spec.nodeName=node1,status.phase!=Succeeded,status.phase!=Failed";
        for (sel, want) in [
            (on_node, true),
            ("spec.nodeName=node2", false),
            ("status.podIP=10.0.0.7", true),
            ("spec.hostNetwork=false", true),
            ("spec.hostNetwork=true", false),
            ("status.nominatedNodeName=", true),
        ] {
            assert_eq!(parse_for(sel, &pods).unwrap().matches(&pod), want, "{sel}");
        }
        let host = json!({"spec": {"hostNetwork": true}});
        assert!(
            parse_for("spec.hostNetwork=true", &pods)
                .unwrap()
                .matches(&host)
        );
        let secrets = catalog.get("", "v1", "secrets").unwrap();
        let tls = json!({"type": "kubernetes.io/tls"});
        assert!(
            parse_for("type=kubernetes.io/tls", &secrets)
                .unwrap()
                .matches(&tls)
        );
        assert_eq!(
            parse_for("spec.nodeName=x", &secrets).unwrap_err().code,
            400
        );
    }

    #[test]
    fn each_builtin_kind_selects_by_the_fields_kube_registers_for_it() {
        let catalog = Catalog::default();
        for (group, plural, object, selector, want) in [
            (
                "",
                "nodes",
                json!({"spec": {}}),
                "spec.unschedulable=false",
                true,
            ),
            (
                "",
                "nodes",
                json!({"spec": {"unschedulable": true}}),
                "spec.unschedulable=true",
                true,
            ),
            (
                "apps",
                "replicasets",
                json!({"status": {"replicas": 3}}),
                "status.replicas=3",
                true,
            ),
            ("apps", "replicasets", json!({}), "status.replicas=0", true),
            (
                "",
                "replicationcontrollers",
                json!({"status": {"replicas": 1}}),
                "status.replicas!=1",
                false,
            ),
            (
                "batch",
                "jobs",
                json!({"status": {"succeeded": 2}}),
                "status.successful=2",
                true,
            ),
            (
                "",
                "services",
                json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.9"}}),
                "spec.type=NodePort,spec.clusterIP=10.96.0.9",
                true,
            ),
            (
                "",
                "persistentvolumeclaims",
                json!({"metadata": {"name": "data"}}),
                "name=data",
                true,
            ),
            (
                "certificates.k8s.io",
                "certificatesigningrequests",
                json!({"spec": {"signerName": "example.com/x"}}),
                "spec.signerName=example.com/x",
                true,
            ),
        ] {
            let res = catalog
                .get(group, "v1", plural)
                .unwrap_or_else(|| panic!("{plural}"));
            let parsed = parse_for(selector, &res)
                .unwrap_or_else(|e| panic!("{plural} {selector}: {}", e.message));
            assert_eq!(parsed.matches(&object), want, "{plural} {selector}");
        }
        let deployments = catalog.get("apps", "v1", "deployments").unwrap();
        let refused = parse_for("status.replicas=1", &deployments).unwrap_err();
        assert_eq!(
            (refused.code, refused.message.as_str()),
            (400, "field label not supported: status.replicas")
        );
    }

    #[test]
    fn custom_resources_select_by_their_crd_s_selectable_fields() {
        let crd = json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "selectableFields": [{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"}]}]}});
        let widgets = super::super::catalog::crd_resource(&crd).unwrap();
        let w = json!({"spec": {"color": "red", "size": 3}});
        for (sel, want) in [
            ("spec.color=red", true),
            ("spec.color!=red", false),
            ("spec.size=3", true),
            ("spec.size=4", false),
        ] {
            assert_eq!(parse_for(sel, &widgets).unwrap().matches(&w), want, "{sel}");
        }
        assert_eq!(
            parse_for("spec.shape=round", &widgets).unwrap_err().code,
            400
        );
    }

    #[test]
    fn core_events_select_by_what_they_are_about() {
        let catalog = Catalog::default();
        let core = catalog.get("", "v1", "events").unwrap();
        let ev = json!({"metadata": {"name": "vm.1", "namespace": "default"},
            "involvedObject": {"kind": "VirtualMachine", "namespace": "default", "name": "vm", "uid": "u-1"},
            "reason": "Active", "type": "Normal", "reportingComponent": "wasmctrl",
            "source": {"component": "kubelet"}});
        // What `kubectl describe vm vm` asks for.
        let describe = "involvedObject.name=vm,involvedObject.namespace=default,\
                        involvedObject.kind=VirtualMachine,involvedObject.uid=u-1";
        assert!(parse_for(describe, &core).unwrap().matches(&ev));
        for (sel, want) in [
            ("involvedObject.name=other", false),
            ("reason=Active,type!=Warning", true),
            ("reportingComponent=wasmctrl", true),
            ("source=kubelet", true),
            ("involvedObject.fieldPath=", true),
        ] {
            assert_eq!(parse_for(sel, &core).unwrap().matches(&ev), want, "{sel}");
        }
        // events.k8s.io serves the same objects but, as kube-apiserver, selects by name only.
        let v1 = catalog.get("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(
            parse_for("involvedObject.name=vm", &v1).unwrap_err().code,
            400
        );
    }
}
