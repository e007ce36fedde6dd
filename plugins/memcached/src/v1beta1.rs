//! `cache.example.com/v1beta1`: the Memcached of `v1alpha1` with `size` renamed `replicas`,
//! served beside it. Objects stay stored as `v1alpha1` (the hub); this plugin's conversion
//! webhook converts between the two, as kubebuilder's multi-version tutorial lays it out
//! (`Hub` on the stored version, `Convertible` on the other).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasmctrl_sdk::CustomResource;
use wasmctrl_sdk::webhooks::Spoke;

use crate::MemcachedStatus;

/// What a Memcached asks for, at `v1beta1`.
#[derive(CustomResource, Debug, Default, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "cache.example.com",
    version = "v1beta1",
    kind = "Memcached",
    namespaced,
    status = "MemcachedStatus",
    doc = "Memcached is the Schema for the memcacheds API",
    printcolumn = r#"{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}"#,
    printcolumn = r#"{"name": "Available", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Available\")].status"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    crates(
        kube_core = "::wasmctrl_sdk::kube_core",
        k8s_openapi = "::wasmctrl_sdk::k8s_openapi"
    )
)]
pub struct MemcachedSpec {
    /// The number of memcached Pods (1 to 3; 1 when absent): `v1alpha1`'s `size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3))]
    pub replicas: Option<i32>,
}

impl Spoke<crate::Memcached> for Memcached {
    fn to_hub(self) -> Result<crate::Memcached, String> {
        Ok(crate::Memcached {
            metadata: self.metadata,
            spec: crate::MemcachedSpec {
                size: self.spec.replicas,
            },
            status: self.status,
        })
    }

    fn from_hub(hub: crate::Memcached) -> Result<Self, String> {
        Ok(Memcached {
            metadata: hub.metadata,
            spec: MemcachedSpec {
                replicas: hub.spec.size,
            },
            status: hub.status,
        })
    }
}
