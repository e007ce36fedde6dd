//! Where a pull may be sent: the registry the reference names, and any public address it sends
//! the client on to (a redirect to its blob storage, its token service), but no loopback,
//! link-local or private address other than the registry's own, unless the operator allows it.
//! A registry is the tenant's choice; without this rule a redirect would turn the host into a
//! reader of the cloud metadata endpoint, the kubelet's port or any in-cluster service.
//!
//! Two checks, because reqwest resolves names itself: the redirect policy refuses address
//! literals (and `localhost`), and the resolver drops private addresses of every name but the
//! registry's own.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

/// Why a request was not sent: its target is a private address the registry sent us to.
#[derive(Debug, thiserror::Error)]
#[error(
    "the registry sent the pull on to a loopback, link-local or private address, which is refused \
     (--allow-private-registry-redirects allows it)"
)]
pub struct PrivateTarget;

/// Whether `ip` is loopback, link-local, private, shared (carrier-grade NAT), unspecified or
/// otherwise not a public unicast address.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
                || v6.is_multicast()
                || v6.to_ipv4_mapped().is_some_and(is_private_v4)
        }
    }
}

fn is_private_v4(v4: Ipv4Addr) -> bool {
    let [a, b, ..] = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || a == 0
        // 100.64.0.0/10, shared address space.
        || (a == 100 && (64..128).contains(&b))
}

/// Scheme, host and port alike.
fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// Whether a request to `target`, which the registry at `origin` named, may be sent: always to
/// the registry itself; elsewhere not to an address literal that is private, nor `localhost`.
/// Names are checked again when resolved ([`Resolver`]).
pub fn allowed(origin: &Url, target: &Url) -> bool {
    if same_origin(origin, target) {
        return true;
    }
    match target.host() {
        Some(Host::Ipv4(ip)) => !is_private(ip.into()),
        Some(Host::Ipv6(ip)) => !is_private(ip.into()),
        Some(Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            name != "localhost" && !name.ends_with(".localhost")
        }
        None => false,
    }
}

/// The redirect policy of a pull from the registry at the first URL: at most ten hops, each
/// [`allowed`] unless `private` allows all. (reqwest itself drops credentials on a hop to
/// another origin.)
pub fn redirects(private: bool) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        let Some(origin) = attempt.previous().first().cloned() else {
            return attempt.follow();
        };
        if attempt.previous().len() > 10 {
            attempt.error("too many redirects")
        } else if private || allowed(&origin, attempt.url()) {
            attempt.follow()
        } else {
            attempt.error(PrivateTarget)
        }
    })
}

/// Resolves names as the system does, dropping private addresses of every name but
/// `registry`'s (the host the operator or tenant named, which may well be in-cluster).
#[derive(Debug, Clone)]
pub struct Resolver {
    registry: Arc<str>,
}

impl Resolver {
    /// For pulls from the registry host `registry` (without port).
    pub fn new(registry: &str) -> Self {
        Self {
            registry: registry.trim_end_matches('.').to_ascii_lowercase().into(),
        }
    }
}

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let registry = self.registry.clone();
        Box::pin(async move {
            let host = name.as_str().trim_end_matches('.').to_ascii_lowercase();
            let found: Vec<_> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept: Vec<_> = if host == *registry {
                found
            } else {
                found.into_iter().filter(|a| !is_private(a.ip())).collect()
            };
            if kept.is_empty() {
                return Err(Box::new(PrivateTarget) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_ranges_are_private() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:169.254.169.254",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "140.82.112.3", "2606:4700::1111", "100.128.0.1"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn a_registry_may_send_the_client_to_itself_or_to_public_hosts_only() {
        let origin = Url::parse("http://127.0.0.1:5000/v2/a/manifests/x").unwrap();
        let ok = |u: &str| allowed(&origin, &Url::parse(u).unwrap());
        assert!(ok("http://127.0.0.1:5000/v2/a/blobs/y"));
        assert!(ok("https://storage.example.com/blob"));
        assert!(ok("https://8.8.8.8/blob"));
        assert!(!ok("http://127.0.0.1:5001/"));
        assert!(!ok("http://169.254.169.254/latest/meta-data/"));
        assert!(!ok("http://[::1]:5000/"));
        assert!(!ok("http://localhost:10255/pods"));
        assert!(!ok("http://a.localhost./"));
        assert!(
            !ok("https://127.0.0.1:5000/"),
            "another scheme is another origin"
        );
    }
}
