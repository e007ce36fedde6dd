//! Whose rights a plugin's requests use. The operator's plugins (files, `ClusterWasmPlugin`s)
//! act as the host; a tenant's (`WasmPlugin`) acts as a ServiceAccount of its own namespace,
//! by Kubernetes user impersonation (`Impersonate-User`), as Flux's controllers act for a
//! tenant's `spec.serviceAccountName`. Every request the host makes for such a plugin (its
//! caches' lists and watches, its writes, its events) carries the header, so the API server's
//! RBAC for that account decides, never the host's own rights; the host needs only the right to
//! impersonate the account (`impersonate` on `serviceaccounts` in that namespace).

use std::fmt;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};

/// The group every ServiceAccount is in, and the prefix of each namespace's group.
const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";

/// A ServiceAccount a plugin acts as.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Account {
    namespace: Arc<str>,
    name: Arc<str>,
}

/// A name that cannot be a ServiceAccount's (or its namespace's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a ServiceAccount name (a DNS-1123 subdomain)")]
pub struct NotAnAccount(String);

impl Account {
    /// ServiceAccount `name` of `namespace`; both must be names kube accepts (DNS-1123), which
    /// also makes the username a valid header value.
    pub fn new(namespace: &str, name: &str) -> Result<Self, NotAnAccount> {
        for part in [namespace, name] {
            if !wasmctrl_core::validation::dns1123_subdomain(part).is_empty() {
                return Err(NotAnAccount(part.to_owned()));
            }
        }
        Ok(Self {
            namespace: namespace.into(),
            name: name.into(),
        })
    }

    /// Its namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The username the API server gives it: `system:serviceaccount:<namespace>:<name>`.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// The groups the API server gives it when impersonated without groups (and when it
    /// authenticates with its own token): what a SubjectAccessReview must name to be asked
    /// about the same user.
    pub fn groups(&self) -> Vec<String> {
        vec![
            SERVICE_ACCOUNTS.to_owned(),
            format!("{SERVICE_ACCOUNTS}:{}", self.namespace),
            "system:authenticated".to_owned(),
        ]
    }

    /// A client that sends what `client` would, each request as this account. It shares
    /// `client`'s connections and layers (metrics, tracing): only the header is added.
    pub fn client(&self, client: &kube::Client) -> kube::Client {
        // Checked by `new`: DNS-1123 names and colons are visible ASCII.
        let user = HeaderValue::from_str(&self.username())
            .unwrap_or_else(|_| HeaderValue::from_static("system:anonymous"));
        let base = client.clone();
        let service = tower::service_fn(move |mut request: http::Request<kube::client::Body>| {
            let headers = request.headers_mut();
            // Nothing of the caller's may widen who the request is made as.
            headers.remove(HeaderName::from_static("impersonate-group"));
            headers.remove(HeaderName::from_static("impersonate-uid"));
            headers.insert(HeaderName::from_static("impersonate-user"), user.clone());
            let base = base.clone();
            async move { base.send(request).await }
        });
        kube::Client::new(service, client.default_namespace())
    }
}

impl fmt::Display for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServiceAccount {}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_kube_accepts_make_an_account() {
        let account = Account::new("team-a", "deployer").unwrap();
        assert_eq!(account.username(), "system:serviceaccount:team-a:deployer");
        assert_eq!(
            account.groups(),
            [
                "system:serviceaccounts",
                "system:serviceaccounts:team-a",
                "system:authenticated"
            ]
        );
        for (namespace, name) in [
            ("team-a", "a:b"),
            ("team-a", ""),
            ("Team-A", "x"),
            ("team-a", "x\r\nimpersonate-group: system:masters"),
        ] {
            assert!(Account::new(namespace, name).is_err(), "{namespace}/{name}");
        }
    }

    #[tokio::test]
    async fn a_client_acting_as_an_account_is_that_account_to_the_api_server() {
        use k8s_openapi::api::authentication::v1::SelfSubjectReview;
        use k8s_openapi::api::core::v1::Secret;
        use kube::api::{Api, PostParams};

        let server = wasmctrl_apiserver::ApiServer::new().unwrap();
        let account = Account::new("team-a", "deployer").unwrap();
        let client = account.client(&server.client());
        let reviews: Api<SelfSubjectReview> = Api::all(client.clone());
        let me = (reviews.create(&PostParams::default(), &SelfSubjectReview::default()))
            .await
            .unwrap();
        let user = me.status.unwrap().user_info.unwrap();
        assert_eq!(user.username.as_deref(), Some(account.username().as_str()));
        assert_eq!(user.groups, Some(account.groups()));
        // Its rights, not the administrator's whose client it wraps.
        let secrets: Api<Secret> = Api::namespaced(client, "team-a");
        let refused = secrets.list(&Default::default()).await.unwrap_err();
        assert!(
            matches!(&refused, kube::Error::Api(s) if s.code == 403),
            "{refused}"
        );
        let logged = server.requests();
        assert!(
            logged
                .iter()
                .any(|r| r.resource == "secrets" && r.user == account.username()),
            "{logged:?}"
        );
    }
}
