//! The webhook configurations the plugins imply, as `wasmctrl rbac` derives RBAC from them:
//! one `ValidatingWebhookConfiguration` and one `MutatingWebhookConfiguration` listing a webhook
//! per plugin that validates or defaults (kubebuilder's paths, `sideEffects: None`,
//! `failurePolicy: Fail`, AdmissionReview v1), and for each converting plugin its CRD's
//! `spec.conversion`; reached through the host's Service or a URL, trusted by a CA bundle or by
//! cert-manager's CA injector (`cert-manager.io/inject-ca-from`).

use serde_json::{Value, json};
use wasmctrl_core::Gvk;

use super::{CONVERT, operation_name, path};
use crate::runtime::plugin::bindings::hooks;

/// How the API server reaches the host's webhook server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// Through the host's Service (`namespace`, `name`, `port`), as kubebuilder's
    /// `webhook-service`.
    Service {
        /// The Service's namespace (the host's).
        namespace: String,
        /// Its name.
        name: String,
        /// Its port (443 in kubebuilder's `webhook-service`).
        port: u16,
    },
    /// At this base URL (`https://127.0.0.1:9443`), as `wasmctrl dev` registers its own.
    Url(String),
}

/// How the API server trusts the webhook server's certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// This CA bundle (PEM), written into each `clientConfig.caBundle`.
    CaBundle(Vec<u8>),
    /// cert-manager's CA injector fills the bundles in from this Certificate
    /// (`<namespace>/<name>`).
    CertManager(String),
}

/// What one plugin serves, for the configurations.
#[derive(Debug, Clone)]
pub struct Served {
    /// The plugin's name.
    pub plugin: String,
    /// The kind it reconciles (and serves webhooks for).
    pub kind: Gvk,
    /// The kind's plural.
    pub plural: String,
    /// What it declared.
    pub declaration: hooks::Declaration,
}

/// The configurations: the two webhook configurations (absent when no plugin needs one) and
/// the `spec.conversion` of each converted CRD, as a merge patch naming it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Configurations {
    /// The `ValidatingWebhookConfiguration`.
    pub validating: Option<Value>,
    /// The `MutatingWebhookConfiguration`.
    pub mutating: Option<Value>,
    /// Each converted CRD's `spec.conversion`, as a patch of the CRD.
    pub conversions: Vec<Value>,
}

impl Configurations {
    /// Every object, in the order `kubectl apply` takes them.
    pub fn objects(&self) -> Vec<Value> {
        let mut out: Vec<Value> = self
            .validating
            .iter()
            .chain(&self.mutating)
            .cloned()
            .collect();
        out.extend(self.conversions.iter().cloned());
        out
    }
}

/// The configurations for `served`, reached as `exposure` says and trusted as `trust` says.
pub fn generate(served: &[Served], exposure: &Exposure, trust: &Trust) -> Configurations {
    let hook = |s: &Served, mutating: bool, operations: Vec<&str>| {
        let path = path(mutating, &s.kind);
        let letter = if mutating { "m" } else { "v" };
        let mut hook = json!({
            "name": format!("{letter}{}-{}.{}.wasmctrl.io", s.kind.kind.to_lowercase(), s.kind.version, s.plugin),
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "clientConfig": client_config(exposure, trust, &path),
            "rules": [{
                "operations": operations,
                "apiGroups": [s.kind.group],
                "apiVersions": [s.kind.version],
                "resources": [s.plural],
            }],
        });
        if mutating {
            hook["reinvocationPolicy"] = json!("IfNeeded");
        }
        hook
    };
    let validating: Vec<Value> = (served.iter())
        .filter(|s| !s.declaration.validates.is_empty())
        .map(|s| {
            let ops = s
                .declaration
                .validates
                .iter()
                .map(|o| operation_name(*o))
                .collect();
            hook(s, false, ops)
        })
        .collect();
    let mutating: Vec<Value> = (served.iter())
        .filter(|s| s.declaration.defaults)
        .map(|s| hook(s, true, vec!["CREATE", "UPDATE"]))
        .collect();
    let configuration = |kind: &str, name: &str, hooks: Vec<Value>| {
        (!hooks.is_empty()).then(|| {
            let mut c = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                "metadata": {"name": name}, "webhooks": hooks});
            annotate(&mut c, trust);
            c
        })
    };
    let conversions = (served.iter())
        .filter(|s| !s.declaration.converts.is_empty())
        .map(|s| {
            let mut crd = json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{}.{}", s.plural, s.kind.group)},
                "spec": {"conversion": {"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": client_config(exposure, trust, CONVERT),
                }}},
            });
            annotate(&mut crd, trust);
            crd
        })
        .collect();
    Configurations {
        validating: configuration(
            "ValidatingWebhookConfiguration",
            "wasmctrl-validating-webhook-configuration",
            validating,
        ),
        mutating: configuration(
            "MutatingWebhookConfiguration",
            "wasmctrl-mutating-webhook-configuration",
            mutating,
        ),
        conversions,
    }
}

fn client_config(exposure: &Exposure, trust: &Trust, path: &str) -> Value {
    let mut cc = match exposure {
        Exposure::Service {
            namespace,
            name,
            port,
        } => json!({"service": {"namespace": namespace, "name": name, "port": port, "path": path}}),
        Exposure::Url(base) => json!({"url": format!("{}{path}", base.trim_end_matches('/'))}),
    };
    if let Trust::CaBundle(pem) = trust {
        use base64::Engine as _;
        cc["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(pem));
    }
    cc
}

fn annotate(object: &mut Value, trust: &Trust) {
    if let Trust::CertManager(certificate) = trust {
        object["metadata"]["annotations"] = json!({"cert-manager.io/inject-ca-from": certificate});
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> Vec<Served> {
        vec![Served {
            plugin: "virtualmachine".into(),
            kind: Gvk::new("cloudnative.tw", "v1alpha1", "VirtualMachine"),
            plural: "virtualmachines".into(),
            declaration: hooks::Declaration {
                validates: vec![hooks::Operation::Create, hooks::Operation::Update],
                defaults: true,
                converts: vec!["v1alpha1".into(), "v1beta1".into()],
            },
        }]
    }

    #[test]
    fn kubebuilders_paths_service_and_cert_manager() {
        let exposure = Exposure::Service {
            namespace: "wasmctrl".into(),
            name: "wasmctrl-webhook-service".into(),
            port: 443,
        };
        let trust = Trust::CertManager("wasmctrl/wasmctrl-serving-cert".into());
        let c = generate(&served(), &exposure, &trust);
        let v = c.validating.unwrap();
        assert_eq!(
            v["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "wasmctrl/wasmctrl-serving-cert"
        );
        let hook = &v["webhooks"][0];
        assert_eq!(
            hook["name"],
            "vvirtualmachine-v1alpha1.virtualmachine.wasmctrl.io"
        );
        assert_eq!(
            hook["clientConfig"]["service"]["path"],
            "/validate-cloudnative-tw-v1alpha1-virtualmachine"
        );
        assert_eq!(hook["rules"][0]["operations"], json!(["CREATE", "UPDATE"]));
        assert_eq!(hook["rules"][0]["resources"], json!(["virtualmachines"]));
        let m = c.mutating.unwrap();
        assert_eq!(
            m["webhooks"][0]["clientConfig"]["service"]["path"],
            "/mutate-cloudnative-tw-v1alpha1-virtualmachine"
        );
        let crd = &c.conversions[0];
        assert_eq!(crd["metadata"]["name"], "virtualmachines.cloudnative.tw");
        assert_eq!(
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["path"],
            "/convert"
        );
    }

    #[test]
    fn a_url_and_a_ca_bundle() {
        let trust = Trust::CaBundle(b"PEM".to_vec());
        let c = generate(
            &served(),
            &Exposure::Url("https://127.0.0.1:9443/".into()),
            &trust,
        );
        let cc = &c.validating.unwrap()["webhooks"][0]["clientConfig"];
        assert_eq!(
            cc["url"],
            "https://127.0.0.1:9443/validate-cloudnative-tw-v1alpha1-virtualmachine"
        );
        assert_eq!(cc["caBundle"], "UEVN");
    }
}
