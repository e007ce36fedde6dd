//! Ingresses and NetworkPolicies (`pkg/apis/networking/validation`).

use serde_json::Value;
use wasmctrl_core::validation::{self as rules, FieldError};

use super::{Errors, dns_subdomain, grammar, int, items, label_selector, set, text};

/// Ingress paths may not hold these (`invalidPathSequences`) nor end with `/..` or `/.`.
const BAD_SEQUENCES: &[&str] = &["//", "/./", "/../", "%2f", "%2F"];
const BAD_SUFFIXES: &[&str] = &["/..", "/."];

/// An Ingress (`ValidateIngressSpec`).
pub(crate) fn ingress(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    let rules_list = items(spec, "rules");
    if rules_list.is_empty() && !set(spec, "defaultBackend") {
        errs.push(FieldError::invalid_printed(
            "spec",
            "[]networking.IngressRule(nil)",
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if set(spec, "defaultBackend") {
        backend(&spec["defaultBackend"], "spec.defaultBackend", errs);
    }
    for (i, rule) in rules_list.iter().enumerate() {
        let p = format!("spec.rules[{i}]");
        let host = text(rule, "host");
        if !host.is_empty() {
            if host.parse::<std::net::IpAddr>().is_ok() {
                errs.push(FieldError::invalid(
                    format!("{p}.host"),
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
            grammar(errs, &format!("{p}.host"), host, rules::host_name(host));
        }
        let http = &rule["http"];
        if http.is_null() {
            continue;
        }
        let paths = items(http, "paths");
        if paths.is_empty() {
            errs.push(FieldError::required(format!("{p}.http.paths"), ""));
        }
        for (j, path) in paths.iter().enumerate() {
            http_path(path, &format!("{p}.http.paths[{j}]"), errs);
        }
    }
    for (i, tls) in items(spec, "tls").iter().enumerate() {
        for (j, host) in items(tls, "hosts").iter().enumerate() {
            let host = host.as_str().unwrap_or_default();
            grammar(
                errs,
                &format!("spec.tls[{i}].hosts[{j}]"),
                host,
                rules::host_name(host),
            );
        }
        let secret = text(tls, "secretName");
        if !secret.is_empty() {
            dns_subdomain(errs, &format!("spec.tls[{i}].secretName"), secret);
        }
    }
    if let Some(class) = spec.get("ingressClassName").and_then(Value::as_str) {
        dns_subdomain(errs, "spec.ingressClassName", class);
    }
}

/// One HTTP path (`validateHTTPIngressPath`).
fn http_path(path: &Value, p: &str, errs: &mut Errors) {
    if !set(path, "pathType") {
        errs.push(FieldError::required(
            format!("{p}.pathType"),
            "pathType must be specified",
        ));
        return;
    }
    let value = text(path, "path");
    match text(path, "pathType") {
        "Exact" | "Prefix" => {
            if !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    format!("{p}.path"),
                    value,
                    "must be an absolute path",
                ));
            }
            for bad in BAD_SEQUENCES.iter().filter(|s| value.contains(*s)) {
                errs.push(FieldError::invalid(
                    format!("{p}.path"),
                    value,
                    format!("must not contain '{bad}'"),
                ));
            }
            for bad in BAD_SUFFIXES.iter().filter(|s| value.ends_with(*s)) {
                errs.push(FieldError::invalid(
                    format!("{p}.path"),
                    value,
                    format!("cannot end with '{bad}'"),
                ));
            }
        }
        "ImplementationSpecific" => {
            if !value.is_empty() && !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    format!("{p}.path"),
                    value,
                    "must be an absolute path",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{p}.pathType"),
            other,
            &["Exact", "ImplementationSpecific", "Prefix"],
        )),
    }
    backend(&path["backend"], &format!("{p}.backend"), errs);
}

/// A backend (`validateIngressBackend`): a Service by name and port, or a resource.
fn backend(b: &Value, p: &str, errs: &mut Errors) {
    match (set(b, "resource"), set(b, "service")) {
        (true, true) => errs.push(FieldError::invalid(
            p,
            "",
            "cannot set both resource and service backends",
        )),
        (true, false) => {
            let r = &b["resource"];
            for key in ["kind", "name"] {
                if text(r, key).is_empty() {
                    errs.push(FieldError::required(format!("{p}.resource.{key}"), ""));
                }
            }
        }
        (false, true) => {
            let s = &b["service"];
            match text(s, "name") {
                "" => errs.push(FieldError::required(format!("{p}.service.name"), "")),
                name => grammar(
                    errs,
                    &format!("{p}.service.name"),
                    name,
                    rules::dns1035_label(name),
                ),
            }
            let port = &s["port"];
            let name = text(port, "name");
            let number = int(port, "number").unwrap_or(0);
            match (!name.is_empty(), number != 0) {
                (true, true) => errs.push(FieldError::invalid(
                    p,
                    "",
                    "cannot set both port name & port number",
                )),
                (true, false) => grammar(
                    errs,
                    &format!("{p}.service.port.name"),
                    name,
                    rules::port_name(name),
                ),
                (false, true) => {
                    for m in rules::port_number(number) {
                        errs.push(FieldError::invalid_printed(
                            format!("{p}.service.port.number"),
                            number.to_string(),
                            m,
                        ));
                    }
                }
                (false, false) => {
                    errs.push(FieldError::required(p, "port name or number is required"))
                }
            }
        }
        (false, false) => errs.push(FieldError::invalid(
            p,
            "",
            "resource or service backend is required",
        )),
    }
}

/// A CIDR as kube's `IsValidCIDR` reads one: an address, a slash, a prefix length.
fn cidr(text: &str) -> Option<(std::net::IpAddr, u8)> {
    let (ip, len) = text.split_once('/')?;
    let ip: std::net::IpAddr = ip.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((ip, len))
}

/// The first `len` bits of `ip`, as a number.
fn prefix(ip: std::net::IpAddr, len: u8) -> u128 {
    let (bits, width) = match ip {
        std::net::IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        std::net::IpAddr::V6(v6) => (u128::from(v6), 128),
    };
    if len == 0 {
        0
    } else {
        bits >> (width - u32::from(len))
    }
}

/// An IP block (`ValidateIPBlock`): `except` ranges strictly inside `cidr`.
fn ip_block(b: &Value, p: &str, errs: &mut Errors) {
    let outer = text(b, "cidr");
    if outer.is_empty() {
        errs.push(FieldError::required(format!("{p}.cidr"), ""));
        return;
    }
    const BAD: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";
    let Some((net, len)) = cidr(outer) else {
        errs.push(FieldError::invalid(format!("{p}.cidr"), outer, BAD));
        return;
    };
    for (i, except) in items(b, "except").iter().enumerate() {
        let except = except.as_str().unwrap_or_default();
        let ep = format!("{p}.except[{i}]");
        match cidr(except) {
            None => errs.push(FieldError::invalid(ep, except, BAD)),
            Some((ip, elen)) => {
                let inside = ip.is_ipv4() == net.is_ipv4() && prefix(ip, len) == prefix(net, len);
                if !inside || len >= elen {
                    errs.push(FieldError::invalid(
                        ep,
                        except,
                        "must be a strict subset of `cidr`",
                    ));
                }
            }
        }
    }
}

/// The ports and peers of one rule.
fn rule(r: &Value, p: &str, peers: &str, errs: &mut Errors) {
    for (i, port) in items(r, "ports").iter().enumerate() {
        let pp = format!("{p}.ports[{i}]");
        if set(port, "protocol") {
            let protocol = text(port, "protocol");
            if !matches!(protocol, "TCP" | "UDP" | "SCTP") {
                errs.push(FieldError::not_supported(
                    format!("{pp}.protocol"),
                    protocol,
                    &["TCP", "UDP", "SCTP"],
                ));
            }
        }
        port_range(port, &pp, errs);
    }
    for (i, peer) in items(r, peers).iter().enumerate() {
        let pp = format!("{p}.{peers}[{i}]");
        let mut count = 0;
        for key in ["podSelector", "namespaceSelector"] {
            if set(peer, key) {
                count += 1;
                label_selector(errs, &format!("{pp}.{key}"), &peer[key]);
            }
        }
        if set(peer, "ipBlock") {
            count += 1;
            ip_block(&peer["ipBlock"], &format!("{pp}.ipBlock"), errs);
        }
        if count == 0 {
            errs.push(FieldError::required(pp, "must specify a peer"));
        } else if count > 1 && set(peer, "ipBlock") {
            errs.push(FieldError::forbidden(
                pp,
                "may not specify both ipBlock and another peer",
            ));
        }
    }
}

/// A rule port's `port` and `endPort` (at `pp`): a range only from a numeric port, each a
/// valid port number, the end not below the start.
fn port_range(port: &Value, pp: &str, errs: &mut Errors) {
    let end = int(port, "endPort");
    match &port["port"] {
        Value::Null => {
            if let Some(e) = end {
                errs.push(FieldError::invalid_printed(
                    format!("{pp}.endPort"),
                    e.to_string(),
                    "may not be specified when `port` is not specified",
                ));
            }
        }
        Value::String(name) => {
            if let Some(e) = end {
                errs.push(FieldError::invalid_printed(
                    format!("{pp}.endPort"),
                    e.to_string(),
                    "may not be specified when `port` is non-numeric",
                ));
            }
            grammar(errs, &format!("{pp}.port"), name, rules::port_name(name));
        }
        number => {
            let n = number.as_i64().unwrap_or(0);
            for m in rules::port_number(n) {
                errs.push(FieldError::invalid_printed(
                    format!("{pp}.port"),
                    n.to_string(),
                    m,
                ));
            }
            if let Some(e) = end {
                if e < n {
                    errs.push(FieldError::invalid_printed(
                        format!("{pp}.endPort"),
                        n.to_string(),
                        "must be greater than or equal to `port`",
                    ));
                }
                for m in rules::port_number(e) {
                    errs.push(FieldError::invalid_printed(
                        format!("{pp}.endPort"),
                        e.to_string(),
                        m,
                    ));
                }
            }
        }
    }
}

/// A NetworkPolicy (`ValidateNetworkPolicySpec`).
pub(crate) fn network_policy(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    label_selector(errs, "spec.podSelector", &spec["podSelector"]);
    for (i, r) in items(spec, "ingress").iter().enumerate() {
        rule(r, &format!("spec.ingress[{i}]"), "from", errs);
    }
    for (i, r) in items(spec, "egress").iter().enumerate() {
        rule(r, &format!("spec.egress[{i}]"), "to", errs);
    }
    let types = items(spec, "policyTypes");
    if types.len() > 2 {
        errs.push(FieldError::invalid_printed(
            "spec.policyTypes",
            super::go::strings(&spec["policyTypes"]),
            "may not specify more than two policyTypes",
        ));
        return;
    }
    for (i, t) in types.iter().enumerate() {
        let t = t.as_str().unwrap_or_default();
        if !matches!(t, "Ingress" | "Egress") {
            errs.push(FieldError::not_supported(
                format!("spec.policyTypes[{i}]"),
                t,
                &["Ingress", "Egress"],
            ));
        }
    }
}
