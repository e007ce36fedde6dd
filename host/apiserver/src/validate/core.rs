//! Services, PersistentVolumeClaims, ConfigMaps and Secrets (`pkg/apis/core/validation`).

use std::collections::BTreeSet;

use base64::Engine as _;
use serde_json::Value;
use wasmctrl_core::validation::{self as rules, FieldError};

use super::{
    Errors, dns_label, dns_subdomain, go, grammar, int, items, label_selector, labels, one_of, pod,
    set, text,
};
use crate::quantity::Quantity;

/// The most bytes a ConfigMap's or Secret's data may take (`core.MaxSecretSize`).
const MAX_SIZE: usize = 1024 * 1024;

/// Whether `ip` is an address as kube's `IsValidIP` reads one.
fn is_ip(ip: &str) -> bool {
    ip.parse::<std::net::IpAddr>().is_ok()
}

/// A Service (`ValidateService`), its causes in kube's order.
pub(crate) fn service(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    let kind = text(spec, "type");
    let cluster_ips = items(spec, "clusterIPs");
    let headless = cluster_ips.first().and_then(Value::as_str) == Some("None");
    let ports = items(spec, "ports");
    if ports.is_empty() && !headless && kind != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    match kind {
        "LoadBalancer" | "NodePort" if headless => errs.push(FieldError::invalid(
            "spec.clusterIPs[0]",
            "None",
            format!("may not be set to 'None' for {kind} services"),
        )),
        "ExternalName" => external_name(spec, errs),
        _ => {}
    }
    service_ports(ports, kind, errs);
    labels(errs, "spec.selector", &spec["selector"]);
    one_of(
        errs,
        "spec.sessionAffinity",
        text(spec, "sessionAffinity"),
        &["ClientIP", "None"],
    );
    if text(spec, "sessionAffinity") == "None" && set(spec, "sessionAffinityConfig") {
        errs.push(FieldError::forbidden(
            "spec.sessionAffinityConfig",
            "must not be set when session affinity is None",
        ));
    }
    service_ips(spec, cluster_ips, errs);
    one_of(
        errs,
        "spec.type",
        kind,
        &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
    );
    // Two ports of one number and protocol.
    let mut seen = std::collections::BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let key = (text(port, "protocol"), int(port, "port").unwrap_or(0));
        if !seen.insert(key) {
            errs.push(FieldError::duplicate(
                format!("spec.ports[{i}]"),
                format!(
                    "core.ServicePort{{Name:\"\", Protocol:\"{}\", AppProtocol:(*string)(nil), Port:{}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
                    key.0, key.1
                ),
            ));
        }
    }
}

/// An `ExternalName` Service: no cluster IPs or IP families, and a DNS name to point at.
fn external_name(spec: &Value, errs: &mut Errors) {
    for key in ["clusterIPs", "ipFamilies"] {
        if !items(spec, key).is_empty() {
            errs.push(FieldError::forbidden(
                format!("spec.{key}"),
                "may not be set for ExternalName services",
            ));
        }
    }
    if set(spec, "ipFamilyPolicy") {
        errs.push(FieldError::forbidden(
            "spec.ipFamilyPolicy",
            "may not be set for ExternalName services",
        ));
    }
    match text(spec, "externalName").trim_end_matches('.') {
        "" => errs.push(FieldError::required("spec.externalName", "")),
        cname => dns_subdomain(errs, "spec.externalName", cname),
    }
}

/// A Service's ports (of a Service of type `kind`): names when there are several, numbers,
/// protocols, target ports, and no node port on a `ClusterIP` Service.
fn service_ports(ports: &[Value], kind: &str, errs: &mut Errors) {
    let mut names = std::collections::BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = format!("spec.ports[{i}]");
        let name = text(port, "name");
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else if !name.is_empty() {
            dns_label(errs, &format!("{p}.name"), name);
            if !names.insert(name) {
                errs.push(FieldError::duplicate(
                    format!("{p}.name"),
                    rules::quote(name),
                ));
            }
        }
        let number = int(port, "port").unwrap_or(0);
        pod::port_number(errs, &format!("{p}.port"), number);
        one_of(
            errs,
            &format!("{p}.protocol"),
            text(port, "protocol"),
            &["SCTP", "TCP", "UDP"],
        );
        match &port["targetPort"] {
            Value::String(s) => grammar(errs, &format!("{p}.targetPort"), s, rules::port_name(s)),
            other => pod::port_number(
                errs,
                &format!("{p}.targetPort"),
                other.as_i64().unwrap_or(0),
            ),
        }
        if kind == "ClusterIP" && int(port, "nodePort").unwrap_or(0) != 0 {
            errs.push(FieldError::forbidden(
                format!("{p}.nodePort"),
                "may not be used when `type` is 'ClusterIP'",
            ));
        }
    }
}

/// A Service's addresses: cluster IPs (the first may be `None`, headless), IP families and
/// their policy, external IPs.
fn service_ips(spec: &Value, cluster_ips: &[Value], errs: &mut Errors) {
    const INVALID_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
    for (i, ip) in cluster_ips.iter().enumerate() {
        let ip = ip.as_str().unwrap_or_default();
        if !(is_ip(ip) || (i == 0 && ip == "None")) {
            errs.push(FieldError::invalid(
                format!("spec.clusterIPs[{i}]"),
                ip,
                INVALID_IP,
            ));
        }
    }
    for (i, family) in items(spec, "ipFamilies").iter().enumerate() {
        let family = family.as_str().unwrap_or_default();
        if !matches!(family, "IPv4" | "IPv6") {
            errs.push(FieldError::not_supported(
                format!("spec.ipFamilies[{i}]"),
                family,
                &["IPv4", "IPv6"],
            ));
        }
    }
    if set(spec, "ipFamilyPolicy") {
        let policy = text(spec, "ipFamilyPolicy");
        let known = ["PreferDualStack", "RequireDualStack", "SingleStack"];
        if !known.contains(&policy) {
            errs.push(FieldError::not_supported(
                "spec.ipFamilyPolicy",
                policy,
                &known,
            ));
        }
    }
    for (i, ip) in items(spec, "externalIPs").iter().enumerate() {
        let ip = ip.as_str().unwrap_or_default();
        if !is_ip(ip) {
            errs.push(FieldError::invalid(
                format!("spec.externalIPs[{i}]"),
                ip,
                INVALID_IP,
            ));
        }
    }
}

/// A Service update (`ValidateServiceUpdate`): the cluster IPs stay once set.
pub(crate) fn service_update(new: &Value, old: &Value, errs: &mut Errors) {
    let (ns, os) = (&new["spec"], &old["spec"]);
    let external = |s: &Value| text(s, "type") == "ExternalName";
    if !external(ns) && !external(os) {
        let (new_ips, old_ips) = (items(ns, "clusterIPs"), items(os, "clusterIPs"));
        for (i, old_ip) in old_ips.iter().enumerate() {
            if new_ips.get(i).is_some_and(|ip| ip != old_ip) || (i == 0 && new_ips.is_empty()) {
                errs.push(FieldError::invalid_printed(
                    format!("spec.clusterIPs[{i}]"),
                    go::strings(&ns["clusterIPs"]),
                    "may not change once set",
                ));
            }
        }
    }
    service(new, errs);
}

/// A PersistentVolumeClaim spec at `path` (`ValidatePersistentVolumeClaimSpec`).
pub(crate) fn claim_spec(spec: &Value, path: &str, errs: &mut Errors) {
    let modes = items(spec, "accessModes");
    if modes.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.accessModes"),
            "at least 1 access mode is required",
        ));
    }
    if set(spec, "selector") {
        label_selector(errs, &format!("{path}.selector"), &spec["selector"]);
    }
    let known = [
        "ReadOnlyMany",
        "ReadWriteMany",
        "ReadWriteOnce",
        "ReadWriteOncePod",
    ];
    let (mut once_pod, mut others) = (false, false);
    for mode in modes {
        let mode = mode.as_str().unwrap_or_default();
        if !known.contains(&mode) {
            errs.push(FieldError::not_supported(
                format!("{path}.accessModes"),
                mode,
                &known,
            ));
        } else if mode == "ReadWriteOncePod" {
            once_pod = true;
        } else {
            others = true;
        }
    }
    if once_pod && others {
        errs.push(FieldError::forbidden(
            format!("{path}.accessModes"),
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    let storage = format!("{path}.resources[storage]");
    match spec
        .pointer("/resources/requests/storage")
        .and_then(Value::as_str)
    {
        None => errs.push(FieldError::required(storage, "")),
        Some(q) => {
            if Quantity::parse(q).is_some_and(|v| v <= Quantity::parse("0").unwrap_or(v)) {
                errs.push(FieldError::invalid(storage, q, "must be greater than zero"));
            }
        }
    }
    let class = text(spec, "storageClassName");
    if !class.is_empty() {
        dns_subdomain(errs, &format!("{path}.storageClassName"), class);
    }
    if set(spec, "volumeMode") {
        let mode = text(spec, "volumeMode");
        if !matches!(mode, "Block" | "Filesystem") {
            errs.push(FieldError::not_supported(
                format!("{path}.volumeMode"),
                mode,
                &["Block", "Filesystem"],
            ));
        }
    }
}

/// A PersistentVolumeClaim.
pub(crate) fn claim(obj: &Value, errs: &mut Errors) {
    claim_spec(&obj["spec"], "spec", errs);
}

/// A claim update (`ValidatePersistentVolumeClaimUpdate`): the spec stays but for a volume
/// name set once, a storage class set where there was none, and a bound claim's requests.
pub(crate) fn claim_update(new: &Value, old: &Value, errs: &mut Errors) {
    claim(new, errs);
    let (mut ns, mut os) = (new["spec"].clone(), old["spec"].clone());
    if text(&os, "volumeName").is_empty() {
        os["volumeName"] = ns["volumeName"].clone();
    }
    let beta_class = old.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class");
    if !set(&os, "storageClassName") && beta_class.is_none() && set(&ns, "storageClassName") {
        os["storageClassName"] = ns["storageClassName"].clone();
    }
    let bound = new.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
    if bound {
        if let Some(storage) = ns.pointer_mut("/resources/requests/storage") {
            *storage = old
                .pointer("/spec/resources/requests/storage")
                .cloned()
                .unwrap_or(Value::Null);
        }
        ns["volumeAttributesClassName"] = os["volumeAttributesClassName"].clone();
    }
    for spec in [&mut ns, &mut os] {
        if let Some(m) = spec.as_object_mut() {
            m.retain(|_, v| !v.is_null());
        }
    }
    if ns != os {
        errs.push(FieldError::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    let size = |o: &Value| {
        o.pointer("/spec/resources/requests/storage")
            .and_then(Value::as_str)
            .and_then(Quantity::parse)
    };
    if let (Some(n), Some(o)) = (size(new), size(old))
        && n < o
    {
        errs.push(FieldError::forbidden(
            "spec.resources.requests.storage",
            "field can not be less than previous value",
        ));
    }
}

/// The keys of `map` at `path` (`IsConfigMapKey`), and their values' bytes (`decode`d).
fn keys(map: &Value, path: &str, decode: bool, errs: &mut Errors) -> usize {
    let mut size = 0;
    for (key, value) in map.as_object().into_iter().flatten() {
        grammar(errs, &format!("{path}[{key}]"), key, rules::config_key(key));
        let value = value.as_str().unwrap_or_default();
        size += if decode {
            base64_len(value)
        } else {
            value.len()
        };
    }
    size
}

/// Base64 `text` decoded as Go's `encoding/base64` decodes JSON bytes: line breaks ignored
/// (YAML writers fold long values); `None` when it is not base64.
fn decode(text: &str) -> Option<Vec<u8>> {
    let joined: String = text.chars().filter(|c| *c != '\n' && *c != '\r').collect();
    base64::engine::general_purpose::STANDARD
        .decode(joined)
        .ok()
}

/// The length of base64 `text` once decoded.
fn base64_len(text: &str) -> usize {
    decode(text).map_or(text.len(), |b| b.len())
}

/// A ConfigMap (`ValidateConfigMap`).
pub(crate) fn config_map(obj: &Value, errs: &mut Errors) {
    let mut size = keys(&obj["data"], "data", false, errs);
    for (key, _) in obj["data"].as_object().into_iter().flatten() {
        if obj["binaryData"].get(key).is_some() {
            errs.push(FieldError::invalid(
                format!("data[{key}]"),
                key,
                "duplicate of key present in binaryData",
            ));
        }
    }
    size += keys(&obj["binaryData"], "binaryData", true, errs);
    if size > MAX_SIZE {
        errs.push(FieldError::too_long("[]", MAX_SIZE));
    }
}

/// What an `immutable` ConfigMap or Secret keeps.
fn immutable_data(new: &Value, old: &Value, fields: &[&str], errs: &mut Errors) {
    if old["immutable"] != true {
        return;
    }
    if new["immutable"] != true {
        errs.push(FieldError::forbidden(
            "immutable",
            "field is immutable when `immutable` is set",
        ));
    }
    for field in fields {
        let present = |o: &Value| {
            o.get(*field)
                .filter(|v| !v.is_null() && v.as_object().is_none_or(|m| !m.is_empty()))
                .cloned()
        };
        if present(new) != present(old) {
            errs.push(FieldError::forbidden(
                *field,
                "field is immutable when `immutable` is set",
            ));
        }
    }
}

/// A ConfigMap update (`ValidateConfigMapUpdate`).
pub(crate) fn config_map_update(new: &Value, old: &Value, errs: &mut Errors) {
    immutable_data(new, old, &["data", "binaryData"], errs);
    config_map(new, errs);
}

/// Go's `json.Unmarshal` into a `map[string]interface{}`, worded as Go words its errors.
fn json_object_error(bytes: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(_) | Value::Null) => None,
        Ok(other) => {
            let kind = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            };
            Some(format!(
                "json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
            ))
        }
        Err(_) => Some(match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            None => "unexpected end of JSON input".into(),
            Some(b) if !b"{[\"-0123456789tfn".contains(b) => {
                format!(
                    "invalid character '{}' looking for beginning of value",
                    *b as char
                )
            }
            Some(_) => "invalid JSON".into(),
        }),
    }
}

/// A Secret (`ValidateSecret`): keys, size, and what its type requires.
pub(crate) fn secret(obj: &Value, errs: &mut Errors) {
    let data = &obj["data"];
    let size = keys(data, "data", true, errs);
    if size > MAX_SIZE {
        errs.push(FieldError::too_long("data", MAX_SIZE));
    }
    let has = |k: &str| data.get(k).is_some();
    let require = |errs: &mut Errors, k: &str| {
        if !has(k) {
            errs.push(FieldError::required(format!("data[{k}]"), ""));
        }
    };
    let decoded = |k: &str| {
        let text = data.get(k).and_then(Value::as_str).unwrap_or_default();
        decode(text).unwrap_or_default()
    };
    match text(obj, "type") {
        "kubernetes.io/service-account-token" => {
            let name = obj.pointer("/metadata/annotations/kubernetes.io~1service-account.name");
            if name.and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(FieldError::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        kind @ ("kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson") => {
            let key = if kind.ends_with("json") {
                ".dockerconfigjson"
            } else {
                ".dockercfg"
            };
            if !has(key) {
                require(errs, key);
            } else if let Some(e) = json_object_error(&decoded(key)) {
                errs.push(FieldError::invalid(
                    format!("data[{key}]"),
                    "<secret contents redacted>",
                    e,
                ));
            }
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            require(errs, "username");
            require(errs, "password");
        }
        "kubernetes.io/ssh-auth" if decoded("ssh-privatekey").is_empty() => {
            errs.push(FieldError::required("data[ssh-privatekey]", ""));
        }
        "kubernetes.io/tls" => {
            require(errs, "tls.crt");
            require(errs, "tls.key");
        }
        _ => {}
    }
}

/// A Secret update (`ValidateSecretUpdate`): its type stays.
pub(crate) fn secret_update(new: &Value, old: &Value, errs: &mut Errors) {
    if new["type"] != old["type"] {
        errs.push(FieldError::invalid_printed(
            "type",
            go::text(&new["type"]),
            "field is immutable",
        ));
    }
    immutable_data(new, old, &["data"], errs);
    secret(new, errs);
}

/// An update through `certificatesigningrequests/{name}/approval`
/// (`ValidateCertificateSigningRequestApprovalUpdate`): each condition typed, Approved, Denied
/// and Failed only `True`, never both Approved and Denied, no type twice; and none of those
/// three taken away once there.
pub(crate) fn approval_update(new: &Value, old: &Value, errs: &mut Errors) {
    const DECISIONS: &[&str] = &["Approved", "Denied", "Failed"];
    let mut seen = BTreeSet::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in items(&new["status"], "conditions").iter().enumerate() {
        let path = format!("status.conditions[{i}]");
        let kind = text(c, "type");
        if kind.is_empty() {
            errs.push(FieldError::required(format!("{path}.type"), ""));
        }
        let allowed: &[&str] = if DECISIONS.contains(&kind) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        match text(c, "status") {
            "" => errs.push(FieldError::required(format!("{path}.status"), "")),
            s if !allowed.contains(&s) => {
                errs.push(FieldError::not_supported(
                    format!("{path}.status"),
                    s,
                    allowed,
                ));
            }
            _ => {}
        }
        let exclusive = match kind {
            "Approved" => {
                approved = true;
                denied
            }
            "Denied" => {
                denied = true;
                approved
            }
            _ => false,
        };
        if exclusive {
            errs.push(FieldError::invalid(
                format!("{path}.type"),
                kind,
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        if !seen.insert(kind) {
            errs.push(FieldError::duplicate(
                format!("{path}.type"),
                rules::quote(kind),
            ));
        }
    }
    for kind in DECISIONS {
        let had = items(&old["status"], "conditions")
            .iter()
            .any(|c| text(c, "type") == *kind);
        if had && !seen.contains(kind) {
            errs.push(FieldError::forbidden(
                "status.conditions",
                format!(
                    "updates may not remove a condition of type {}",
                    rules::quote(kind)
                ),
            ));
        }
    }
}
