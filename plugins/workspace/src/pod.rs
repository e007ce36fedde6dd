//! The Pod a Workspace runs in: its desired shape, the spec hash that tells a stale Pod from a
//! current one, and the spec validation that keeps a bad Workspace from ever reaching the API
//! server as a Pod.

use std::collections::BTreeMap;

use serde_json::Value;
use wasmctrl_sdk::k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodSpec, ResourceRequirements,
};
use wasmctrl_sdk::k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub use wasmctrl_sdk::k8s_openapi::api::core::v1::Pod;

use wasmctrl_sdk::ResourceExt;

use crate::Workspace;

/// Annotation carrying the hash of the Pod spec the Pod was created from.
pub const SPEC_HASH: &str = "ide.wasmctrl.io/spec-hash";

/// Label naming the Workspace a Pod belongs to.
pub const WORKSPACE_LABEL: &str = "ide.wasmctrl.io/workspace";

/// The name of the IDE container.
pub const CONTAINER: &str = "ide";

/// What the controller reads of a cached Pod.
pub trait Cached {
    /// The spec hash the Pod was created with, if it carries one.
    fn spec_hash(&self) -> Option<&str>;
    /// The uid of the Pod's controller owner.
    fn controller_uid(&self) -> Option<&str>;
    /// Whether the Pod is being deleted.
    fn deleting(&self) -> bool;
}

impl Cached for Pod {
    fn spec_hash(&self) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()?
            .get(SPEC_HASH)
            .map(String::as_str)
    }

    fn controller_uid(&self) -> Option<&str> {
        self.metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true))
            .map(|r| r.uid.as_str())
    }

    fn deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

/// Checks the Workspace spec; the message names the offending field.
pub fn validate(ws: &Workspace) -> Result<(), String> {
    let spec = &ws.spec;
    let image = spec.image.trim();
    if image.is_empty() {
        return Err("spec.image must not be empty".into());
    }
    if image.contains(char::is_whitespace) {
        return Err(format!("spec.image must not contain spaces, got {image:?}"));
    }
    if !(1..=65535).contains(&spec.port) {
        return Err(format!(
            "spec.port must be between 1 and 65535, got {}",
            spec.port
        ));
    }
    for (field, value) in spec.resources.fields() {
        if let Some(value) = value
            && !is_quantity(value)
        {
            return Err(format!(
                "spec.resources.{field} is not a Kubernetes quantity: {value:?}"
            ));
        }
    }
    // The name is also a label value (WORKSPACE_LABEL), and those are limited to 63 characters.
    let name = ws.name_any();
    if name.len() > 63 {
        return Err(format!(
            "metadata.name must be at most 63 characters to label its Pod, got {}",
            name.len()
        ));
    }
    Ok(())
}

/// The Pod `ws` should run in, annotated with its spec hash, and that hash. Assumes [`validate`]
/// passed.
pub fn desired(ws: &Workspace) -> (Pod, String) {
    let limits: BTreeMap<String, Quantity> = ws
        .spec
        .resources
        .fields()
        .into_iter()
        .filter_map(|(field, value)| {
            let key = if field == "storage" {
                "ephemeral-storage"
            } else {
                field
            };
            Some((key.to_owned(), Quantity(value?.to_owned())))
        })
        .collect();
    let container = Container {
        name: CONTAINER.into(),
        image: Some(ws.spec.image.trim().into()),
        image_pull_policy: Some("IfNotPresent".into()),
        // Protocol is part of the ports list's merge key, so server-side apply needs it spelled out.
        ports: Some(vec![ContainerPort {
            name: Some("http".into()),
            // validate() keeps the port within 1..=65535.
            container_port: i32::try_from(ws.spec.port).unwrap_or_default(),
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        resources: (!limits.is_empty()).then(|| ResourceRequirements {
            limits: Some(limits),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    };
    let spec = PodSpec {
        containers: vec![container],
        ..PodSpec::default()
    };
    // Hashed as JSON, as the Pod was hashed when it was built as JSON: the same Pods keep their hash.
    let hash = spec_hash(&serde_json::to_value(&spec).unwrap_or_default());
    let name = ws.name_any();
    let mut metadata = wasmctrl_sdk::kube::child_meta(ws, &name);
    metadata.labels = Some(BTreeMap::from([
        ("app.kubernetes.io/name".into(), "workspace".into()),
        ("app.kubernetes.io/managed-by".into(), "wasmctrl".into()),
        (WORKSPACE_LABEL.into(), name),
    ]));
    metadata.annotations = Some(BTreeMap::from([(SPEC_HASH.into(), hash.clone())]));
    let pod = Pod {
        metadata,
        spec: Some(spec),
        ..Pod::default()
    };
    (pod, hash)
}

/// A hash of a Pod spec that depends only on its content: keys are hashed in sorted order, so
/// neither serde_json's map ordering nor the order the spec was built in can change it (a change
/// would needlessly replace every Pod after a plugin upgrade).
pub fn spec_hash(spec: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(spec, &mut canonical);
    // FNV-1a: tiny, dependency-free and plenty to detect a changed spec (this is not security).
    let hash = canonical.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by_key(|(k, _)| *k);
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A non-negative Kubernetes quantity: a decimal number with an optional binary suffix (`Ki` ..
/// `Ei`), decimal suffix (`n`, `u`, `m`, `k`, `M` .. `E`) or exponent (`1e3`).
pub fn is_quantity(value: &str) -> bool {
    const BINARY: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    const DECIMAL: [char; 9] = ['n', 'u', 'm', 'k', 'M', 'G', 'T', 'P', 'E'];
    let number = if let Some(number) = BINARY.iter().find_map(|s| value.strip_suffix(s)) {
        number
    } else if let Some((number, _)) = value
        .split_once(['e', 'E'])
        .filter(|(_, exponent)| is_exponent(exponent))
    {
        number
    } else {
        value.strip_suffix(DECIMAL).unwrap_or(value)
    };
    is_decimal(number)
}

fn is_exponent(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn is_decimal(s: &str) -> bool {
    let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
    (!whole.is_empty() || !fraction.is_empty())
        && whole.bytes().all(|b| b.is_ascii_digit())
        && fraction.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        for ok in [
            "500m",
            "1",
            "0.5",
            ".5",
            "5.",
            "1Gi",
            "2Ei",
            "1E",
            "1e3",
            "1E-3",
            "128974848",
            "129M",
        ] {
            assert!(is_quantity(ok), "{ok} is a quantity");
        }
        for bad in [
            "", ".", "lots", "1GB", "-1", "1.2.3", "Gi", "e3", "1e", "1 Gi", "1gi",
        ] {
            assert!(!is_quantity(bad), "{bad} is not a quantity");
        }
    }

    #[test]
    fn spec_hash_depends_on_content_not_key_order() {
        let a: Value = serde_json::from_str(r#"{"a": 1, "b": [{"x": "1", "y": 2}]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b": [{"y": 2, "x": "1"}], "a": 1}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"a": 1, "b": [{"x": "1", "y": 3}]}"#).unwrap();
        assert_eq!(spec_hash(&a), spec_hash(&b));
        assert_ne!(spec_hash(&a), spec_hash(&c));
        assert_eq!(spec_hash(&a).len(), 16);
    }
}
