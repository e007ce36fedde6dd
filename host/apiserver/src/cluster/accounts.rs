//! Two of kube-controller-manager's controllers every namespace relies on, for dev mode: the
//! ServiceAccounts controller (a `default` ServiceAccount in each active namespace, made again
//! when deleted) and the root CA publisher (`kube-root-ca.crt`, the server's authority, which
//! Pods' service-account volumes mount), each writing as kube's does, through the same create
//! and update paths as clients.

use serde_json::{Value, json};

use super::{MANAGER, target};
use crate::handlers::Query;
use crate::json::str_at;
use crate::registry::core::{CONFIG_MAP, SERVICE_ACCOUNT};
use crate::store::State;
use crate::write;

/// kube's description of the root CA ConfigMap.
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver \
     when using internal endpoints such as the internal service IP or kubernetes.default.svc. \
     No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Gives every active namespace its `default` ServiceAccount and a current
/// `kube-root-ca.crt`; whether anything was written.
pub(crate) fn ensure(st: &mut State, ca_pem: &str) -> bool {
    let key = (String::new(), "namespaces".to_string());
    let active: Vec<String> = (st.table_of(&key).into_iter())
        .flat_map(|t| t.objects.values())
        .filter(|ns| ns.pointer("/metadata/deletionTimestamp").is_none())
        .filter(|ns| ns.pointer("/status/phase").and_then(Value::as_str) != Some("Terminating"))
        .map(|ns| str_at(ns, "/metadata/name").to_string())
        .collect();
    let mut changed = false;
    for ns in active {
        let accounts = (String::new(), "serviceaccounts".to_string());
        if st.get(&accounts, &ns, "default").is_none()
            && let Some(t) = target(st, "", "serviceaccounts", &ns, None)
        {
            let account = json!({"apiVersion": SERVICE_ACCOUNT.api_version, "kind": SERVICE_ACCOUNT.kind,
                "metadata": {"name": "default", "namespace": ns}});
            changed |= written(write::create_locked(
                st,
                &t,
                &Query::new(),
                account,
                Some(MANAGER),
            ));
        }
        let maps = (String::new(), "configmaps".to_string());
        let Some(t) = target(st, "", "configmaps", &ns, None) else {
            continue;
        };
        let wanted = json!({"ca.crt": ca_pem});
        match st.get(&maps, &ns, "kube-root-ca.crt") {
            None => {
                let map = json!({"apiVersion": CONFIG_MAP.api_version, "kind": CONFIG_MAP.kind,
                    "metadata": {"name": "kube-root-ca.crt", "namespace": ns,
                        "annotations": {"kubernetes.io/description": DESCRIPTION}},
                    "data": wanted});
                changed |= written(write::create_locked(
                    st,
                    &t,
                    &Query::new(),
                    map,
                    Some(MANAGER),
                ));
            }
            Some(map) if map["data"] != wanted => {
                let mut fixed = (*map).clone();
                fixed["data"] = wanted;
                let update = write::update_locked(
                    st,
                    &t,
                    &Query::new(),
                    &map,
                    fixed,
                    write::Via::Put,
                    MANAGER,
                );
                changed |= written(update);
            }
            Some(_) => {}
        }
    }
    changed
}

fn written<T>(result: Result<T, crate::status::ApiError>) -> bool {
    match result {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e.message, "keeping a namespace's ServiceAccount and root CA");
            false
        }
    }
}
