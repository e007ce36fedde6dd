//! Who is asking and may they: bearer-token authentication, impersonation, and kube's RBAC
//! authorizer over the Roles, ClusterRoles and bindings stored in the server.
//!
//! - **Tokens.** The admin token (written into the server's kubeconfig) authenticates as
//!   `wasmctrl-admin` in `system:masters`, which every request is allowed to. ServiceAccount
//!   tokens come from the TokenRequest API (`POST .../serviceaccounts/<name>/token`, what
//!   `kubectl create token` calls); they are signed (HMAC-SHA256) with the server's key, carry
//!   the account's uid and an expiry, and stop working when the account is deleted. Both the
//!   admin token and the key live in the data directory when there is one, so tokens survive a
//!   restart. No token: `system:anonymous` in `system:unauthenticated`. A token that does not
//!   verify: 401. A TokenReview asks the same question of a token ([`Auth::verify`]).
//! - **Impersonation** (`Impersonate-User`, `Impersonate-Group`; `kubectl --as`), checked as
//!   kube checks it: the `impersonate` verb on `users`, `groups` or `serviceaccounts`.
//! - **RBAC** as kube's authorizer: ClusterRoleBindings grant their ClusterRole's rules
//!   everywhere, RoleBindings grant a Role's or ClusterRole's rules in their namespace; verbs,
//!   apiGroups, resources (`*`, `res/sub`, `*/sub`), resourceNames and nonResourceURLs
//!   (`/path`, `/prefix*`) match as kube matches them. `system:masters` bypasses RBAC. The
//!   bootstrap policy (`cluster-admin`, `system:discovery`, `system:basic-user`,
//!   `system:public-info-viewer` and their bindings) is seeded as objects, so it can be read and
//!   changed with kubectl. ClusterRole aggregation is not implemented.

use std::path::Path;

use hmac::{Hmac, Mac};
use http::HeaderMap;
use serde_json::{Value, json};
use sha2::Sha256;

use super::status::ApiError;
use super::store::State;

/// An authenticated (or anonymous) user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// `wasmctrl-admin`, `system:serviceaccount:<ns>:<name>`, `system:anonymous`, ...
    pub name: String,
    /// Groups, `system:authenticated` or `system:unauthenticated` among them.
    pub groups: Vec<String>,
    /// A ServiceAccount's uid; empty for other users.
    pub uid: String,
}

/// The audience every token this server knows is for: kube-apiserver's default
/// `--api-audiences` (its service-account issuer) as kubeadm and kind set it.
pub const AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";
const SA_PREFIX: &str = "system:serviceaccount:";
const TOKEN_PREFIX: &str = "wasmctrl-sa.";

impl User {
    /// The server's administrator.
    pub fn admin() -> Self {
        Self {
            name: "wasmctrl-admin".into(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
            uid: String::new(),
        }
    }

    fn anonymous() -> Self {
        Self {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            uid: String::new(),
        }
    }

    /// User `name` in `groups`; a ServiceAccount given no groups is in its fixed ones, as
    /// kube's authenticator and impersonation filter put it (impersonation with groups named
    /// keeps exactly those), and everyone but the anonymous user is authenticated.
    fn named(name: &str, mut groups: Vec<String>) -> Self {
        if groups.is_empty()
            && let Some((ns, _)) = name.strip_prefix(SA_PREFIX).and_then(|r| r.split_once(':'))
        {
            groups.push("system:serviceaccounts".into());
            groups.push(format!("system:serviceaccounts:{ns}"));
        }
        if name != "system:anonymous" && !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        Self {
            name: name.into(),
            groups,
            uid: String::new(),
        }
    }

    fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }
}

/// `resource` or `resource/subresource`, as RBAC rules name them.
fn combined(resource: &str, subresource: &str) -> String {
    if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    }
}

/// What a request asks to do, as the authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    /// A request for objects.
    Resource {
        /// get, list, watch, create, update, patch, delete, deletecollection, impersonate.
        verb: String,
        /// API group (`""` for core).
        group: String,
        /// Plural resource.
        resource: String,
        /// Subresource (`status`), or empty.
        subresource: String,
        /// Namespace, or empty at the cluster scope.
        namespace: String,
        /// Object name, or empty.
        name: String,
    },
    /// A request for a path (discovery, version, health).
    NonResource {
        /// The HTTP method, lowercased (`get`, `post`).
        verb: String,
        /// The path.
        path: String,
    },
}

impl Attributes {
    /// A resource request's attributes.
    pub fn resource(
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        Self::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// kube-apiserver's 403: `configmaps "x" is forbidden: User "u" cannot patch resource
    /// "configmaps" in API group "" in the namespace "default"`.
    pub fn forbidden(&self, user: &User) -> ApiError {
        let who = &user.name;
        match self {
            Attributes::NonResource { verb, path } => ApiError::new(
                403,
                "Forbidden",
                format!("forbidden: User {who:?} cannot {verb} path {path:?}"),
            ),
            Attributes::Resource {
                verb,
                group,
                resource,
                subresource,
                namespace,
                name,
            } => {
                let combined = combined(resource, subresource);
                let scope = if namespace.is_empty() {
                    "at the cluster scope".to_string()
                } else {
                    format!("in the namespace {namespace:?}")
                };
                let why = format!(
                    "User {who:?} cannot {verb} resource {combined:?} in API group {group:?} {scope}"
                );
                let qualified = if group.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}.{group}")
                };
                let message = if name.is_empty() {
                    format!("{qualified} is forbidden: {why}")
                } else {
                    format!("{qualified} {name:?} is forbidden: {why}")
                };
                ApiError::new(403, "Forbidden", message).with_details(name, group, resource)
            }
        }
    }
}

/// The server's credentials: the admin token and the key ServiceAccount tokens are signed with.
#[derive(Debug)]
pub struct Auth {
    admin_token: String,
    key: Vec<u8>,
}

fn random_hex(bytes: usize) -> String {
    let data: Vec<u8> = (0..bytes).map(|_| rand::random::<u8>()).collect();
    hex::encode(data)
}

/// Reads `dir/name`, or writes a fresh random secret there (owner-only) and returns it.
fn secret_file(dir: &Path, name: &str) -> std::io::Result<String> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => return Ok(text.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let secret = random_hex(32);
    let tmp = path.with_extension("tmp");
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(secret.as_bytes())?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    Ok(secret)
}

impl Auth {
    /// Fresh credentials, or those kept in `data_dir`.
    pub fn new(data_dir: Option<&Path>) -> std::io::Result<Self> {
        let (admin_token, key) = match data_dir {
            Some(dir) => (
                secret_file(dir, "admin-token")?,
                secret_file(dir, "token-key")?,
            ),
            None => (random_hex(32), random_hex(32)),
        };
        Ok(Self {
            admin_token,
            key: key.into_bytes(),
        })
    }

    /// The token the admin kubeconfig carries.
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    fn sign(&self, payload: &[u8]) -> String {
        // An HMAC takes a key of any length: this cannot fail.
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!());
        mac.update(payload);
        hex::encode(mac.finalize().into_bytes())
    }

    /// A token for ServiceAccount `namespace/name` (uid `uid`) valid until `expires` (Unix
    /// seconds).
    pub fn mint(&self, namespace: &str, name: &str, uid: &str, expires: i64) -> String {
        let payload =
            json!({"namespace": namespace, "name": name, "uid": uid, "exp": expires}).to_string();
        let signature = self.sign(payload.as_bytes());
        format!("{TOKEN_PREFIX}{}.{signature}", hex::encode(payload))
    }

    /// The user a request's `Authorization` header names (anonymous without one), then whoever
    /// it impersonates, if allowed. 401 for a token that does not verify, 403 for an
    /// impersonation not allowed.
    pub fn authenticate(&self, headers: &HeaderMap, state: &State) -> Result<User, ApiError> {
        let user = self.user(headers, state)?;
        impersonated(user, headers, state)
    }

    fn user(&self, headers: &HeaderMap, state: &State) -> Result<User, ApiError> {
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            return Ok(User::anonymous());
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or_else(unauthorized)?;
        self.verify(token, state).ok_or_else(unauthorized)
    }

    /// Who `token` is: the admin, or a ServiceAccount whose token verifies, has not expired
    /// and names the account as it is now. `None` for any other token. (What a request's
    /// bearer token and a TokenReview are both answered by.)
    pub fn verify(&self, token: &str, state: &State) -> Option<User> {
        if token == self.admin_token {
            return Some(User::admin());
        }
        let (payload, signature) = token.strip_prefix(TOKEN_PREFIX)?.split_once('.')?;
        let payload = hex::decode(payload).ok()?;
        if self.sign(&payload) != signature {
            return None;
        }
        let claims: Value = serde_json::from_slice(&payload).ok()?;
        let (namespace, name, uid) = (
            claims["namespace"].as_str().unwrap_or_default(),
            claims["name"].as_str().unwrap_or_default(),
            claims["uid"].as_str().unwrap_or_default(),
        );
        if claims["exp"].as_i64().unwrap_or(0) <= chrono::Utc::now().timestamp() {
            return None;
        }
        // A token outlives nothing: a deleted (or recreated) account's tokens stop working.
        let key = (String::new(), "serviceaccounts".to_string());
        let account = state.get(&key, namespace, name)?;
        if account["metadata"]["uid"] != uid {
            return None;
        }
        let user = User::named(&format!("{SA_PREFIX}{namespace}:{name}"), Vec::new());
        Some(User {
            uid: uid.to_string(),
            ..user
        })
    }
}

fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

/// Applies `Impersonate-User` / `Impersonate-Group` when `user` may impersonate them.
fn impersonated(user: User, headers: &HeaderMap, state: &State) -> Result<User, ApiError> {
    let Some(target) = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
    else {
        if headers.contains_key("impersonate-group") {
            return Err(ApiError::new(
                400,
                "BadRequest",
                "requested impersonation of groups without a user",
            ));
        }
        return Ok(user);
    };
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect();
    let mut checks = vec![match target
        .strip_prefix(SA_PREFIX)
        .and_then(|r| r.split_once(':'))
    {
        Some((ns, name)) => {
            Attributes::resource("impersonate", "", "serviceaccounts", "", ns, name)
        }
        None => Attributes::resource("impersonate", "", "users", "", "", target),
    }];
    checks.extend(
        (groups.iter()).map(|g| Attributes::resource("impersonate", "", "groups", "", "", g)),
    );
    for check in &checks {
        if !authorize(state, &user, check).allowed {
            return Err(check.forbidden(&user));
        }
    }
    Ok(User::named(target, groups))
}

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Which binding allowed it (empty when denied), as kube's RBAC reports it.
    pub reason: String,
}

fn strings(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn has(list: &Value, wanted: &str) -> bool {
    strings(list).any(|s| s == "*" || s == wanted)
}

/// Whether `rule` (a PolicyRule) grants `attrs`.
fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    match attrs {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let combined = combined(resource, subresource);
            let resource_ok = strings(&rule["resources"]).any(|r| {
                r == "*"
                    || r == combined
                    || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
            });
            let names = &rule["resourceNames"];
            let name_ok = strings(names).next().is_none()
                || (!name.is_empty() && strings(names).any(|n| n == name));
            has(&rule["verbs"], verb) && has(&rule["apiGroups"], group) && resource_ok && name_ok
        }
        Attributes::NonResource { verb, path } => {
            let url_ok = strings(&rule["nonResourceURLs"]).any(|u| match u.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => u == path,
            });
            has(&rule["verbs"], verb) && url_ok
        }
    }
}

/// Whether a binding's subject is `user`; `namespace` is the binding's (ServiceAccount
/// subjects without one default to it).
fn subject_is(subject: &Value, user: &User, namespace: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => user.name == name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let ns = subject["namespace"]
                .as_str()
                .filter(|s| !s.is_empty())
                .unwrap_or(namespace);
            user.name == format!("{SA_PREFIX}{ns}:{name}")
        }
        _ => false,
    }
}

const RBAC: &str = "rbac.authorization.k8s.io";

/// The RBAC objects of `plural` in `namespace` (`""`: the cluster-scoped ones). Tables are
/// ordered by (namespace, name), so this reads only that namespace's, not every binding.
fn objects<'a>(
    state: &'a State,
    plural: &str,
    namespace: &'a str,
) -> impl Iterator<Item = &'a Value> {
    let key = (RBAC.to_string(), plural.to_string());
    let from = (namespace.to_string(), String::new());
    (state.table_of(&key).into_iter())
        .flat_map(move |t| t.objects.range(from.clone()..))
        .take_while(move |((ns, _), _)| ns == namespace)
        .map(|(_, o)| o.as_ref())
}

fn allowed(reason: String) -> Decision {
    Decision {
        allowed: true,
        reason,
    }
}

/// kube's RBAC authorizer (with `system:masters` allowed everything first).
pub fn authorize(state: &State, user: &User, attrs: &Attributes) -> Decision {
    if user.is_master() {
        return allowed(format!("{MASTERS} may do anything"));
    }
    let role = |kind: &str, namespace: &str, name: &str| -> Option<std::sync::Arc<Value>> {
        let (ns, plural) = match kind {
            "ClusterRole" => ("", "clusterroles"),
            "Role" => (namespace, "roles"),
            _ => return None,
        };
        state.get(&(RBAC.to_string(), plural.to_string()), ns, name)
    };
    let allows = |binding: &Value, namespace: &str| -> Option<String> {
        let applies = (binding["subjects"].as_array().into_iter().flatten())
            .any(|s| subject_is(s, user, namespace));
        if !applies {
            return None;
        }
        let kind = binding["roleRef"]["kind"].as_str().unwrap_or_default();
        let name = binding["roleRef"]["name"].as_str().unwrap_or_default();
        let role = role(kind, namespace, name)?;
        let granted =
            (role["rules"].as_array().into_iter().flatten()).any(|r| rule_allows(r, attrs));
        granted.then(|| format!("{kind} {name:?}"))
    };
    for binding in objects(state, "clusterrolebindings", "") {
        if let Some(role) = allows(binding, "") {
            let name = binding["metadata"]["name"].as_str().unwrap_or_default();
            return allowed(format!(
                "RBAC: allowed by ClusterRoleBinding {name:?} of {role} to {:?}",
                user.name
            ));
        }
    }
    if let Attributes::Resource { namespace, .. } = attrs
        && !namespace.is_empty()
    {
        for binding in objects(state, "rolebindings", namespace) {
            if let Some(role) = allows(binding, namespace) {
                let name = binding["metadata"]["name"].as_str().unwrap_or_default();
                return allowed(format!(
                    "RBAC: allowed by RoleBinding {name:?} of {role} to {:?} in {namespace:?}",
                    user.name
                ));
            }
        }
    }
    Decision {
        allowed: false,
        reason: String::new(),
    }
}

/// The rules `user` holds in `namespace` (cluster-wide bindings' and that namespace's), as a
/// SelfSubjectRulesReview lists them: resource rules and non-resource rules.
/// `system:masters` holds everything, as its `cluster-admin` binding says on a cluster.
pub fn rules(state: &State, user: &User, namespace: &str) -> (Vec<Value>, Vec<Value>) {
    if user.is_master() {
        return (
            vec![serde_json::json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
            vec![serde_json::json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
        );
    }
    let (mut resource, mut non_resource) = (Vec::new(), Vec::new());
    let mut take = |binding: &Value, binding_namespace: &str| {
        let applies = (binding["subjects"].as_array().into_iter().flatten())
            .any(|s| subject_is(s, user, binding_namespace));
        if !applies {
            return;
        }
        let (ns, plural) = match binding["roleRef"]["kind"].as_str() {
            Some("ClusterRole") => ("", "clusterroles"),
            Some("Role") => (binding_namespace, "roles"),
            _ => return,
        };
        let name = binding["roleRef"]["name"].as_str().unwrap_or_default();
        let Some(role) = state.get(&(RBAC.to_string(), plural.to_string()), ns, name) else {
            return;
        };
        for rule in role["rules"].as_array().into_iter().flatten() {
            if rule.get("nonResourceURLs").is_some() {
                non_resource.push(serde_json::json!({
                    "verbs": rule["verbs"], "nonResourceURLs": rule["nonResourceURLs"],
                }));
            } else {
                let mut out = serde_json::json!({"verbs": rule["verbs"]});
                for field in ["apiGroups", "resources", "resourceNames"] {
                    if let Some(v) = rule.get(field) {
                        out[field] = v.clone();
                    }
                }
                resource.push(out);
            }
        }
    };
    for binding in objects(state, "clusterrolebindings", "") {
        take(binding, "");
    }
    if !namespace.is_empty() {
        for binding in objects(state, "rolebindings", namespace) {
            take(binding, namespace);
        }
    }
    (resource, non_resource)
}

/// The bootstrap policy kube-apiserver creates, reduced to what this server serves: the
/// objects to seed when absent, each ClusterRole followed by its bindings.
pub fn bootstrap_policy() -> Vec<(&'static str, Value)> {
    let meta = |name: &str| {
        json!({"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
    };
    let mut out = Vec::new();
    for (role, rules, bindings) in bootstrap_roles() {
        out.push((
            "clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": meta(role), "rules": rules}),
        ));
        for (name, group) in bindings {
            out.push((
                "clusterrolebindings",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": meta(name),
                    "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
                    "subjects": [{"apiGroup": RBAC, "kind": "Group", "name": group}]}),
            ));
        }
    }
    out
}

/// A bootstrap ClusterRole: its name, its rules, and the bindings (name, group) that grant it.
type BootstrapRole = (&'static str, Value, Vec<(&'static str, &'static str)>);

/// The bootstrap ClusterRoles.
fn bootstrap_roles() -> [BootstrapRole; 5] {
    [
        (
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
            vec![("cluster-admin", MASTERS)],
        ),
        (
            "system:monitoring",
            json!([
                {"nonResourceURLs": ["/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz",
                    "/livez/*", "/readyz/*", "/healthz/*"], "verbs": ["get"]},
            ]),
            vec![("system:monitoring", "system:monitoring")],
        ),
        (
            "system:discovery",
            json!([
                {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                    "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]},
            ]),
            vec![("system:discovery", AUTHENTICATED)],
        ),
        (
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                // `kubectl auth whoami` with no grant at all, as kube's basicUserRules.
                {"apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ]),
            vec![("system:basic-user", AUTHENTICATED)],
        ),
        (
            "system:public-info-viewer",
            json!([
                {"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                    "verbs": ["get"]},
            ]),
            vec![
                ("system:public-info-viewer", "system:unauthenticated"),
                ("system:public-info-viewer-authenticated", AUTHENTICATED),
            ],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_as_kube_matches_them() {
        let get_status = Attributes::resource("patch", "example.com", "things", "status", "a", "x");
        let rule = |r: Value| rule_allows(&r, &get_status);
        assert!(rule(
            json!({"apiGroups": ["example.com"], "resources": ["things/status"], "verbs": ["patch"]})
        ));
        assert!(rule(
            json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]})
        ));
        assert!(
            !rule(
                json!({"apiGroups": ["example.com"], "resources": ["things"], "verbs": ["patch"]})
            ),
            "the resource does not grant its subresources"
        );
        assert!(!rule(
            json!({"apiGroups": [""], "resources": ["things/status"], "verbs": ["patch"]})
        ));
        assert!(rule(
            json!({"apiGroups": ["example.com"], "resources": ["things/status"], "verbs": ["patch"], "resourceNames": ["x"]})
        ));
        assert!(!rule(
            json!({"apiGroups": ["example.com"], "resources": ["things/status"], "verbs": ["patch"], "resourceNames": ["y"]})
        ));
        let create = Attributes::resource("create", "", "configmaps", "", "a", "");
        assert!(
            !rule_allows(
                &json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"], "resourceNames": ["x"]}),
                &create
            ),
            "resourceNames never match a request without a name"
        );
        let path = |p: &str| Attributes::NonResource {
            verb: "get".into(),
            path: p.into(),
        };
        let discovery = json!({"nonResourceURLs": ["/apis", "/apis/*"], "verbs": ["get"]});
        assert!(rule_allows(&discovery, &path("/apis/apps/v1")));
        assert!(!rule_allows(&discovery, &path("/api")));
    }

    #[test]
    fn non_resource_urls_are_granted_by_cluster_role_bindings_only_as_kube_grants_them() {
        let store = super::super::store::Store::new(100, None);
        let mut state = store.lock();
        let mut put = |plural: &str, object: Value| {
            let key = (RBAC.to_string(), plural.to_string());
            state.put(&key, object).unwrap();
        };
        put(
            "clusterroles",
            json!({"metadata": {"name": "metrics-reader"},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
        );
        let role_ref = json!({"apiGroup": RBAC, "kind": "ClusterRole", "name": "metrics-reader"});
        let account = |name: &str| json!([{"kind": "ServiceAccount", "name": name, "namespace": "monitoring"}]);
        put(
            "clusterrolebindings",
            json!({"metadata": {"name": "scrape"}, "roleRef": role_ref, "subjects": account("prometheus")}),
        );
        put(
            "rolebindings",
            json!({"metadata": {"name": "scrape", "namespace": "monitoring"}, "roleRef": role_ref,
                "subjects": account("other")}),
        );
        let request = |verb: &str, path: &str| Attributes::NonResource {
            verb: verb.into(),
            path: path.into(),
        };
        let prometheus = User::named("system:serviceaccount:monitoring:prometheus", Vec::new());
        let decision = authorize(&state, &prometheus, &request("get", "/metrics"));
        assert!(decision.allowed);
        assert!(
            decision
                .reason
                .contains(r#"ClusterRoleBinding "scrape" of ClusterRole "metrics-reader""#),
            "{}",
            decision.reason
        );
        assert!(!authorize(&state, &prometheus, &request("post", "/metrics")).allowed);
        assert!(!authorize(&state, &prometheus, &request("get", "/metrics/x")).allowed);
        let other = User::named("system:serviceaccount:monitoring:other", Vec::new());
        assert!(
            !authorize(&state, &other, &request("get", "/metrics")).allowed,
            "a RoleBinding grants no non-resource URLs"
        );
    }

    #[test]
    fn forbidden_messages_read_as_kube_apiserver_writes_them() {
        let user = User::named("system:serviceaccount:wasmctrl:wasmctrl", Vec::new());
        assert!(
            user.groups
                .contains(&"system:serviceaccounts:wasmctrl".to_string())
        );
        let e =
            Attributes::resource("patch", "", "configmaps", "", "default", "x").forbidden(&user);
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            r#"configmaps "x" is forbidden: User "system:serviceaccount:wasmctrl:wasmctrl" cannot patch resource "configmaps" in API group "" in the namespace "default""#
        );
        let e = Attributes::resource("list", "example.com", "things", "", "", "").forbidden(&user);
        assert_eq!(
            e.message,
            r#"things.example.com is forbidden: User "system:serviceaccount:wasmctrl:wasmctrl" cannot list resource "things" in API group "example.com" at the cluster scope"#
        );
    }
}
