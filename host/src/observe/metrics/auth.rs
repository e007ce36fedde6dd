//! Who may read `/metrics` when it is served securely (`--metrics-secure`, the default): what
//! controller-runtime's `filters.WithAuthenticationAndAuthorization` does for kubebuilder's
//! scaffold. The API server is asked who a request's bearer token belongs to (TokenReview) and
//! whether that user may `get` the non-resource URL `/metrics` (SubjectAccessReview), so a
//! scraper needs only a ServiceAccount bound to the `metrics-reader` ClusterRole. No token:
//! 401; a token the API server does not authenticate: 401; a user not allowed: 403; the API
//! server not answering: 500, logged.
//!
//! Answers are cached as controller-runtime's delegating authenticator and authorizer cache
//! them, so that a scrape every few seconds does not cost two API requests each time: a
//! token's review for a minute (either answer), an allowed decision for five minutes, a denied
//! one for 30 seconds. Each cache holds at most [`CAPACITY`] answers, and tokens are kept only
//! as their SHA-256. Failures to reach the API server are not cached.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use http::{HeaderMap, StatusCode, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use sha2::{Digest as _, Sha256};

use wasmctrl_core::sync::lock;

/// How long a token's review is believed (controller-runtime's authenticator `CacheTTL`).
const REVIEWED_TTL: Duration = Duration::from_secs(60);
/// How long an allowed decision is believed (its authorizer's `AllowCacheTTL`).
const ALLOWED_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a denied decision is believed (its authorizer's `DenyCacheTTL`).
const DENIED_TTL: Duration = Duration::from_secs(30);
/// How long a review may take (its authenticator's `TokenAccessReviewTimeout`).
const TIMEOUT: Duration = Duration::from_secs(10);
/// Most answers each cache holds: tokens and users beyond it push out the oldest answers.
pub const CAPACITY: usize = 1024;

/// Why a request for metrics was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No `Authorization: Bearer <token>` header: anonymous scrapes are refused.
    #[error("no bearer token")]
    NoToken,
    /// The API server did not authenticate the token.
    #[error("the token is not authenticated: {0}")]
    Unauthenticated(String),
    /// The token's user may not do this.
    #[error("user {user:?} may not {verb} {path}: {reason}")]
    Denied {
        /// The user the token belongs to.
        user: String,
        /// The lowercased HTTP method.
        verb: String,
        /// The path asked for.
        path: String,
        /// The API server's reason, if it gave one.
        reason: String,
    },
    /// The TokenReview could not be made. (Causes are in the messages, so they are not also
    /// `source()`: a chain printed whole says each once.)
    #[error("reviewing a token: {0}")]
    TokenReview(Call),
    /// The SubjectAccessReview could not be made.
    #[error("reviewing whether user {user:?} may get metrics: {call}")]
    AccessReview {
        /// The user the token belongs to.
        user: String,
        /// What went wrong.
        call: Call,
    },
}

/// How a review request to the API server failed.
#[derive(Debug, thiserror::Error)]
pub enum Call {
    /// The API server answered with an error, or could not be reached.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// An answer without a `status`.
    #[error("the API server answered without a status")]
    NoStatus,
}

impl Error {
    /// The HTTP status the scraper gets.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::NoToken | Error::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            Error::Denied { .. } => StatusCode::FORBIDDEN,
            Error::TokenReview(_) | Error::AccessReview { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What the scraper is told: controller-runtime's words, and where to look when the API
    /// server did not answer (its error names the host's own permissions, so it goes to the
    /// host's log, not to whoever asked).
    pub fn body(&self) -> String {
        match self {
            Error::NoToken | Error::Unauthenticated(_) => "Unauthorized".into(),
            Error::Denied { user, .. } => format!("Authorization denied for user {user}"),
            Error::TokenReview(_) => {
                "Authentication failed: the API server did not answer the TokenReview (the host's log says why)".into()
            }
            Error::AccessReview { user, .. } => format!(
                "Authorization for user {user} failed: the API server did not answer the SubjectAccessReview (the host's log says why)"
            ),
        }
    }
}

/// The token in an `Authorization: Bearer <token>` header, as kube's bearer-token
/// authenticator reads it: the scheme in any case, one space, a non-empty token (anything after
/// a further space is ignored).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let (scheme, token) = (parts.next()?, parts.next()?);
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Answers that expire, at most `capacity` of them: when full, expired answers go first, then
/// the one closest to expiring.
#[derive(Debug)]
struct Cache<K, V> {
    entries: HashMap<K, (V, Instant)>,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> Cache<K, V> {
    fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            capacity,
        }
    }

    fn get(&self, key: &K, now: Instant) -> Option<V> {
        let (value, until) = self.entries.get(key)?;
        (*until > now).then(|| value.clone())
    }

    fn insert(&mut self, key: K, value: V, ttl: Duration, now: Instant) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, until)| *until > now);
            let soonest = (self.entries.iter())
                .min_by_key(|(_, (_, until))| *until)
                .map(|(k, _)| k.clone());
            if let Some(soonest) = soonest.filter(|_| self.entries.len() >= self.capacity) {
                self.entries.remove(&soonest);
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }
}

/// A token's review: who it is, or why not.
type Reviewed = Result<UserInfo, String>;

/// Checks requests for metrics against the API server, caching its answers.
pub struct Filter {
    client: kube::Client,
    /// By the token's SHA-256.
    tokens: Mutex<Cache<[u8; 32], Reviewed>>,
    /// By the SubjectAccessReview's spec (JSON): allowed, or the reason it was denied.
    decisions: Mutex<Cache<String, Result<(), String>>>,
}

impl Filter {
    /// Reviews with `client`, the host's own (it needs `create` on `tokenreviews` and
    /// `subjectaccessreviews`).
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            tokens: Mutex::new(Cache::new(CAPACITY)),
            decisions: Mutex::new(Cache::new(CAPACITY)),
        }
    }

    /// Whether a request with `headers` may `verb` (its lowercased method) `path`.
    pub async fn check(&self, headers: &HeaderMap, verb: &str, path: &str) -> Result<(), Error> {
        let token = bearer_token(headers).ok_or(Error::NoToken)?;
        let user = self.authenticate(token).await?;
        self.authorize(user, verb, path).await
    }

    async fn authenticate(&self, token: &str) -> Result<UserInfo, Error> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let cached = lock(&self.tokens).get(&key, Instant::now());
        let reviewed = match cached {
            Some(reviewed) => reviewed,
            None => {
                let reviewed = self.review_token(token).await?;
                lock(&self.tokens).insert(key, reviewed.clone(), REVIEWED_TTL, Instant::now());
                reviewed
            }
        };
        reviewed.map_err(Error::Unauthenticated)
    }

    async fn review_token(&self, token: &str) -> Result<Reviewed, Error> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.into()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let created = call(api.create(&PostParams::default(), &review)).await;
        let status = (created.map_err(Error::TokenReview)?.status)
            .ok_or(Error::TokenReview(Call::NoStatus))?;
        Ok(match (status.authenticated, status.user) {
            (Some(true), Some(user)) => Ok(user),
            _ => Err(status.error.unwrap_or_default()),
        })
    }

    async fn authorize(&self, user: UserInfo, verb: &str, path: &str) -> Result<(), Error> {
        let name = user.username.clone().unwrap_or_default();
        let spec = SubjectAccessReviewSpec {
            user: user.username,
            groups: user.groups,
            uid: user.uid,
            extra: user.extra,
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.into()),
                verb: Some(verb.into()),
            }),
            resource_attributes: None,
        };
        // Serializing plain strings and maps cannot fail.
        let key = serde_json::to_string(&spec).unwrap_or_default();
        let cached = lock(&self.decisions).get(&key, Instant::now());
        let decision = match cached {
            Some(decision) => decision,
            None => {
                let review = SubjectAccessReview {
                    spec,
                    ..SubjectAccessReview::default()
                };
                let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
                let refused = |call| Error::AccessReview {
                    user: name.clone(),
                    call,
                };
                let created = call(api.create(&PostParams::default(), &review)).await;
                let status = (created.map_err(refused)?.status).ok_or(refused(Call::NoStatus))?;
                let (decision, ttl) = if status.allowed {
                    (Ok(()), ALLOWED_TTL)
                } else {
                    (Err(status.reason.unwrap_or_default()), DENIED_TTL)
                };
                lock(&self.decisions).insert(key, decision.clone(), ttl, Instant::now());
                decision
            }
        };
        decision.map_err(|reason| Error::Denied {
            user: name,
            verb: verb.into(),
            path: path.into(),
            reason,
        })
    }
}

/// A review request, cut off after [`TIMEOUT`].
async fn call<T>(request: impl Future<Output = Result<T, kube::Error>>) -> Result<T, Call> {
    match tokio::time::timeout(TIMEOUT, request).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(Call::Timeout(TIMEOUT)),
    }
}

/// Axum middleware: lets through only the requests `filter` allows; the others get its status
/// and words.
pub async fn guard(State(filter): State<Arc<Filter>>, request: Request, next: Next) -> Response {
    let verb = request.method().as_str().to_ascii_lowercase();
    let path = request.uri().path().to_string();
    match filter.check(request.headers(), &verb, &path).await {
        Ok(()) => next.run(request).await,
        Err(e) => {
            let response = (e.status(), e.body()).into_response();
            if e.status() == StatusCode::INTERNAL_SERVER_ERROR {
                let e = anyhow::Error::from(e);
                tracing::warn!(error = format!("{e:#}"), "cannot check a metrics request");
            } else {
                tracing::debug!(error = %e, "metrics request refused");
            }
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use serde_json::{Value, json};

    use super::*;
    use wasmctrl_apiserver::ApiServer;

    async fn create<K>(api: Api<K>, object: Value)
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize,
        K: serde::de::DeserializeOwned,
    {
        let object: K = serde_json::from_value(object).unwrap();
        api.create(&PostParams::default(), &object).await.unwrap();
    }

    /// The embedded API server with the metrics-reader ClusterRole `wasmctrl rbac` generates,
    /// and tokens of two ServiceAccounts in `monitoring`: `prometheus`, bound to it, and
    /// `nobody`.
    async fn cluster() -> (ApiServer, String, String) {
        let server = ApiServer::new().unwrap();
        let client = server.client();
        let (objects, _) = crate::rbac::generate(&[], &Default::default(), &Default::default());
        let reader = (objects.into_iter())
            .find(|o| o["metadata"]["name"] == "wasmctrl-metrics-reader")
            .unwrap();
        create(Api::<ClusterRole>::all(client.clone()), reader).await;
        create(
            Api::<ClusterRoleBinding>::all(client.clone()),
            json!({"metadata": {"name": "prometheus"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "wasmctrl-metrics-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}]}),
        )
        .await;
        let namespace = json!({"metadata": {"name": "monitoring"}});
        create(Api::<Namespace>::all(client.clone()), namespace).await;
        let mut tokens = Vec::new();
        for name in ["prometheus", "nobody"] {
            let accounts = Api::<ServiceAccount>::namespaced(client.clone(), "monitoring");
            create(accounts, json!({"metadata": {"name": name}})).await;
            let hour = Duration::from_secs(3600);
            tokens.push(server.token("monitoring", name, hour).unwrap());
        }
        let nobody = tokens.pop().unwrap();
        (server, tokens.pop().unwrap(), nobody)
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = format!("Bearer {token}").parse().unwrap();
        headers.insert(header::AUTHORIZATION, value);
        headers
    }

    /// Reviews the API server has been asked for so far.
    fn reviews(server: &ApiServer) -> usize {
        let requests = server.requests();
        (requests.iter())
            .filter(|r| r.resource == "tokenreviews" || r.resource == "subjectaccessreviews")
            .count()
    }

    #[tokio::test]
    async fn only_tokens_allowed_to_get_metrics_pass_and_answers_are_cached() {
        let (server, prometheus, nobody) = cluster().await;
        let filter = Filter::new(server.client());
        let check = |headers: HeaderMap, verb: &'static str| {
            let filter = &filter;
            async move { filter.check(&headers, verb, "/metrics").await }
        };
        let e = check(HeaderMap::new(), "get").await.unwrap_err();
        assert!(matches!(e, Error::NoToken), "{e}");
        assert_eq!(
            (e.status(), e.body().as_str()),
            (StatusCode::UNAUTHORIZED, "Unauthorized")
        );
        let e = check(bearer("bogus"), "get").await.unwrap_err();
        assert!(
            matches!(&e, Error::Unauthenticated(why) if why == "invalid bearer token"),
            "{e}"
        );
        assert_eq!(e.status(), StatusCode::UNAUTHORIZED);
        let e = check(bearer(&nobody), "get").await.unwrap_err();
        assert_eq!(e.status(), StatusCode::FORBIDDEN, "{e}");
        assert_eq!(
            e.body(),
            "Authorization denied for user system:serviceaccount:monitoring:nobody"
        );
        check(bearer(&prometheus), "get").await.unwrap();

        // Each answer was reviewed once: scraping again asks the API server nothing.
        let asked = reviews(&server);
        assert_eq!(asked, 5, "three tokens, two users");
        for _ in 0..3 {
            check(bearer(&prometheus), "get").await.unwrap();
            check(bearer(&nobody), "get").await.unwrap_err();
            check(bearer("bogus"), "get").await.unwrap_err();
        }
        assert_eq!(reviews(&server), asked);
        // Another verb is another question.
        let e = check(bearer(&prometheus), "post").await.unwrap_err();
        assert_eq!(e.status(), StatusCode::FORBIDDEN, "{e}");
        assert_eq!(reviews(&server), asked + 1);
    }

    #[tokio::test]
    async fn a_host_not_allowed_to_review_tokens_answers_500_and_caches_nothing() {
        let (server, prometheus, nobody) = cluster().await;
        // The host's client as a ServiceAccount that may not create TokenReviews.
        let filter = Filter::new(server.client_with_token(&nobody));
        for _ in 0..2 {
            let e = filter.check(&bearer(&prometheus), "get", "/metrics").await;
            let e = e.unwrap_err();
            assert!(matches!(e, Error::TokenReview(Call::Api(_))), "{e}");
            assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
            assert!(
                e.body().starts_with("Authentication failed: "),
                "{}",
                e.body()
            );
        }
        assert_eq!(reviews(&server), 2, "a failed review is not cached");
    }

    #[test]
    fn bearer_tokens_are_read_as_kube_reads_them() {
        let token = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            bearer_token(&headers).map(String::from)
        };
        assert_eq!(token("Bearer abc").as_deref(), Some("abc"));
        assert_eq!(token("bearer abc").as_deref(), Some("abc"));
        assert_eq!(token("  BEARER abc  ").as_deref(), Some("abc"));
        assert_eq!(token("Bearer abc def").as_deref(), Some("abc"));
        assert_eq!(
            token("Bearer  abc"),
            None,
            "an empty token before the second space"
        );
        assert_eq!(token("Bearer"), None);
        assert_eq!(token("Basic dXNlcjpwYXNz"), None);
        assert_eq!(token("abc"), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn answers_expire_and_the_cache_stays_bounded() {
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let mut cache = Cache::new(2);
        cache.insert("a", 1, ALLOWED_TTL, start);
        cache.insert("b", 2, DENIED_TTL, start);
        assert_eq!(cache.get(&"a", start + DENIED_TTL), Some(1));
        assert_eq!(cache.get(&"b", start + DENIED_TTL - second), Some(2));
        assert_eq!(cache.get(&"b", start + DENIED_TTL), None, "expired");

        // Full: an expired answer makes room first...
        cache.insert("c", 3, REVIEWED_TTL, start + DENIED_TTL);
        assert_eq!(cache.entries.len(), 2);
        assert_eq!(cache.get(&"a", start + DENIED_TTL), Some(1));
        // ...then the live one closest to expiring.
        cache.insert("d", 4, REVIEWED_TTL, start + DENIED_TTL);
        assert_eq!(cache.entries.len(), 2);
        assert_eq!(cache.get(&"c", start + DENIED_TTL), None);
        assert_eq!(cache.get(&"a", start + DENIED_TTL), Some(1));
        assert_eq!(cache.get(&"d", start + DENIED_TTL), Some(4));
        // Replacing an answer takes no room.
        cache.insert("d", 5, REVIEWED_TTL, start + DENIED_TTL);
        assert_eq!(cache.get(&"a", start + DENIED_TTL), Some(1));
        assert_eq!(cache.get(&"d", start + DENIED_TTL), Some(5));
    }
}
