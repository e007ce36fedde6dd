//! Pulling a plugin from a registry that may be hostile: every response bounded in size, every
//! request in time, the one layer streamed to a file and hashed as it arrives, and nothing the
//! registry sends carried into a message but its JSON error codes and messages, cut short.
//!
//! Written over reqwest here rather than with `oci-client`'s pull, which reads manifests,
//! blobs, token answers and error bodies whole into memory with no bound, follows any
//! redirect, and puts error bodies into its messages: a registry named by a tenant would
//! control the host's memory and could make it read and echo internal endpoints. Pushing
//! (the operator's own CLI, to the operator's registry) stays with `oci-client`.
//!
//! The protocol is the OCI distribution spec's pull: `GET /v2/<name>/manifests/<reference>`,
//! then `GET /v2/<name>/blobs/<digest>`, with the token flow of a `401` challenge (`Bearer`
//! realm, service and scope; or `Basic`) as Docker's and `oci-client`'s.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE, OciImageManifest,
};
use oci_client::secrets::RegistryAuth;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{Method, Response, StatusCode};
use sha2::{Digest as _, Sha256};

use super::sign::{SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, Signature};
use super::{CONFIG_MEDIA_TYPE, Error, LAYER_MEDIA_TYPE, guard};

/// What a pull may take from a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The largest manifest read, in bytes (containerd's bound: 4 MiB).
    pub manifest_bytes: u64,
    /// The largest plugin layer pulled, in bytes (`--max-plugin-size`).
    pub plugin_bytes: u64,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long the registry may send nothing while a response is read.
    pub read_timeout: Duration,
    /// How long one pull (or one resolution of a tag) may take in all (`--registry-timeout`).
    pub timeout: Duration,
    /// Follow a registry to loopback, link-local and private addresses other than its own
    /// (`--allow-private-registry-redirects`).
    pub private_redirects: bool,
}

/// containerd's bound on a manifest.
pub const MANIFEST_BYTES: u64 = 4 << 20;
/// `--max-plugin-size`'s default.
pub const PLUGIN_BYTES: u64 = 64 << 20;
/// `--registry-timeout`'s default.
pub const TIMEOUT: Duration = Duration::from_secs(300);
/// The most read of a token answer, an error body or a signature payload.
const SMALL_BYTES: u64 = 64 << 10;
/// The most signatures of one digest looked at.
const MOST_SIGNATURES: usize = 16;

impl Default for Limits {
    fn default() -> Self {
        Self {
            manifest_bytes: MANIFEST_BYTES,
            plugin_bytes: PLUGIN_BYTES,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            timeout: TIMEOUT,
            private_redirects: false,
        }
    }
}

/// The manifests a plugin artifact may come as.
const MANIFEST_TYPES: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// A verified plugin layer in a temporary file, and what named it.
pub struct Layer {
    /// The manifest's digest.
    pub digest: String,
    /// The component, hashed and checked against the layer's digest.
    pub file: tempfile::NamedTempFile,
    /// The manifest's annotations.
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// One pull's conversation with one registry about one repository.
pub(super) struct Session<'a> {
    http: reqwest::Client,
    /// `scheme://host[:port]`.
    base: String,
    repository: String,
    credentials: RegistryAuth,
    /// What the registry's challenge made of the credentials, once asked.
    authorization: Option<HeaderValue>,
    limits: &'a Limits,
    /// The reference as given, for messages.
    reference: &'a str,
}

impl<'a> Session<'a> {
    /// A session with the registry `registry` (`host[:port]`) over `scheme`.
    pub(super) fn new(
        scheme: &str,
        registry: &str,
        repository: &str,
        credentials: RegistryAuth,
        certificates: &[Vec<u8>],
        limits: &'a Limits,
        reference: &'a str,
    ) -> Result<Self, Error> {
        let host = url::Url::parse(&format!("{scheme}://{registry}/"))
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(limits.connect_timeout)
            .read_timeout(limits.read_timeout)
            .redirect(guard::redirects(limits.private_redirects));
        if !limits.private_redirects {
            builder = builder.dns_resolver(guard::Resolver::new(&host));
        }
        for pem in certificates {
            if let Ok(certificate) = reqwest::Certificate::from_pem(pem) {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let http = builder.build().map_err(|e| Error::Transport {
            reference: reference.to_string(),
            reason: describe(&e),
        })?;
        Ok(Self {
            http,
            base: format!("{scheme}://{registry}"),
            repository: repository.to_string(),
            credentials,
            authorization: None,
            limits,
            reference,
        })
    }

    /// The digest `tag` names now: the registry's `Docker-Content-Digest` when it is a sha256
    /// digest, else the hash of the manifest itself (read within the manifest bound).
    pub(super) async fn resolve(&mut self, tag: &str) -> Result<String, Error> {
        let url = format!("{}/v2/{}/manifests/{tag}", self.base, self.repository);
        // A refused HEAD has no body to say why: the GET below asks again and reads it.
        let header = match self.send(Method::HEAD, &url, Some(MANIFEST_TYPES)).await {
            Ok(response) => (response.headers().get("docker-content-digest"))
                .and_then(|v| v.to_str().ok())
                .filter(|d| is_sha256(d))
                .map(str::to_string),
            Err(Error::Refused { .. } | Error::Unauthorized { .. }) => None,
            Err(e) => return Err(e),
        };
        if let Some(digest) = header {
            return Ok(digest);
        }
        let response = self.send(Method::GET, &url, Some(MANIFEST_TYPES)).await?;
        let body = self
            .read(response, self.limits.manifest_bytes, "the manifest")
            .await?;
        Ok(super::digest_of(&body))
    }

    /// Pulls the artifact whose manifest has `digest`: the manifest checked against it and
    /// read as a plugin artifact's, its layer's declared size checked against the bound before
    /// the download, then streamed into a temporary file in `dir` and checked against the
    /// layer's digest.
    pub(super) async fn pull(&mut self, digest: &str, dir: &Path) -> Result<Layer, Error> {
        let url = format!("{}/v2/{}/manifests/{digest}", self.base, self.repository);
        let response = self.send(Method::GET, &url, Some(MANIFEST_TYPES)).await?;
        let body = self
            .read(response, self.limits.manifest_bytes, "the manifest")
            .await?;
        let actual = super::digest_of(&body);
        if actual != digest {
            return Err(Error::DigestMismatch {
                reference: self.reference.to_string(),
                expected: digest.to_string(),
                actual,
            });
        }
        let manifest = self.manifest(&body)?;
        let [layer] = &manifest.layers[..] else {
            return Err(self.not_a_plugin(format!(
                "{} layers, not one component",
                manifest.layers.len()
            )));
        };
        if layer.media_type != LAYER_MEDIA_TYPE {
            return Err(self.not_a_plugin(format!(
                "its layer is {}, not {LAYER_MEDIA_TYPE}",
                cut(&layer.media_type)
            )));
        }
        if !is_sha256(&layer.digest) {
            return Err(self.not_a_plugin("its layer's digest is not a sha256 digest".into()));
        }
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > self.limits.plugin_bytes {
            return Err(Error::TooLarge {
                reference: self.reference.to_string(),
                what: "the plugin layer",
                size: Some(size),
                limit: self.limits.plugin_bytes,
                flag: "--max-plugin-size",
            });
        }
        let url = format!(
            "{}/v2/{}/blobs/{}",
            self.base, self.repository, layer.digest
        );
        let response = self.send(Method::GET, &url, None).await?;
        let file = self.stream(response, size, &layer.digest, dir).await?;
        Ok(Layer {
            digest: digest.to_string(),
            file,
            annotations: manifest.annotations.unwrap_or_default(),
        })
    }

    /// The signatures under `tag` (cosign's `sha256-<hex>.sig`): none when the tag does not
    /// exist; at most [`MOST_SIGNATURES`] layers of the simple-signing type, each at most
    /// [`SMALL_BYTES`], checked against its digest.
    pub(super) async fn signatures(&mut self, tag: &str) -> Result<Vec<Signature>, Error> {
        let url = format!("{}/v2/{}/manifests/{tag}", self.base, self.repository);
        let response = match self.send(Method::GET, &url, Some(MANIFEST_TYPES)).await {
            Ok(response) => response,
            Err(Error::Refused { status: 404, .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let body = self
            .read(response, self.limits.manifest_bytes, "the manifest")
            .await?;
        let manifest: OciImageManifest = serde_json::from_slice(&body).map_err(|_| {
            self.not_a_plugin("its signature manifest is not an image manifest".into())
        })?;
        let mut signatures = Vec::new();
        let layers = (manifest.layers.iter())
            .filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE)
            .take(MOST_SIGNATURES);
        for layer in layers {
            let signature = (layer.annotations.as_ref())
                .and_then(|a| a.get(SIGNATURE_ANNOTATION))
                .cloned();
            let (Some(signature), true) = (signature, is_sha256(&layer.digest)) else {
                continue;
            };
            let url = format!(
                "{}/v2/{}/blobs/{}",
                self.base, self.repository, layer.digest
            );
            let response = self.send(Method::GET, &url, None).await?;
            let payload = self
                .read(response, SMALL_BYTES, "a signature payload")
                .await?;
            if super::digest_of(&payload) == layer.digest {
                signatures.push(Signature { payload, signature });
            }
        }
        Ok(signatures)
    }

    /// The manifest as a plugin artifact's: an image manifest whose config is a wasm config.
    fn manifest(&self, body: &[u8]) -> Result<OciImageManifest, Error> {
        let value: serde_json::Value = serde_json::from_slice(body)
            .map_err(|_| self.not_a_plugin("its manifest is not JSON".into()))?;
        let media_type = value["mediaType"].as_str().unwrap_or(OCI_IMAGE_MEDIA_TYPE);
        if [OCI_IMAGE_INDEX_MEDIA_TYPE, IMAGE_MANIFEST_LIST_MEDIA_TYPE].contains(&media_type) {
            return Err(self.not_a_plugin("an image index, not a plugin artifact".into()));
        }
        if ![OCI_IMAGE_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE].contains(&media_type) {
            return Err(self.not_a_plugin(format!(
                "its manifest is {}, not an image manifest",
                cut(media_type)
            )));
        }
        let manifest: OciImageManifest = serde_json::from_value(value)
            .map_err(|_| self.not_a_plugin("its manifest is not an image manifest".into()))?;
        if manifest.config.media_type != CONFIG_MEDIA_TYPE {
            return Err(self.not_a_plugin(format!(
                "its config is {}, not {CONFIG_MEDIA_TYPE}",
                cut(&manifest.config.media_type)
            )));
        }
        Ok(manifest)
    }

    fn not_a_plugin(&self, reason: String) -> Error {
        Error::NotAPlugin {
            reference: self.reference.to_string(),
            reason,
        }
    }

    /// Sends a request, answering one `401` challenge with the credentials and sending it
    /// again. Any other status but success is an error with the registry's error codes.
    async fn send(
        &mut self,
        method: Method,
        url: &str,
        accept: Option<&str>,
    ) -> Result<Response, Error> {
        let mut challenged = false;
        loop {
            let mut request = self.http.request(method.clone(), url);
            if let Some(accept) = accept {
                request = request.header(ACCEPT, accept);
            }
            if let Some(authorization) = &self.authorization {
                request = request.header(AUTHORIZATION, authorization.clone());
            }
            let response = request.send().await.map_err(|e| self.transport(&e))?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            if status == StatusCode::UNAUTHORIZED && !challenged {
                challenged = true;
                let challenge = (response.headers().get(WWW_AUTHENTICATE))
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                if let Some(authorization) = self.answer(challenge.as_deref(), &response).await? {
                    self.authorization = Some(authorization);
                    continue;
                }
            }
            return Err(self.refused(response).await);
        }
    }

    /// The `Authorization` that answers `challenge` with the credentials, if any does.
    async fn answer(
        &mut self,
        challenge: Option<&str>,
        refusal: &Response,
    ) -> Result<Option<HeaderValue>, Error> {
        let challenges = challenge
            .and_then(|c| http_auth::parse_challenges(c).ok())
            .unwrap_or_default();
        let param = |c: &http_auth::ChallengeRef<'_>, name: &str| {
            (c.params.iter())
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.to_unescaped())
        };
        if let RegistryAuth::Bearer(token) = &self.credentials {
            return Ok(header(&format!("Bearer {token}")));
        }
        if let Some(bearer) = challenges
            .iter()
            .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
        {
            let Some(realm) = param(bearer, "realm") else {
                return Ok(None);
            };
            let service = param(bearer, "service");
            return self.token(&realm, service.as_deref(), refusal).await;
        }
        let basic = challenges
            .iter()
            .any(|c| c.scheme.eq_ignore_ascii_case("basic"));
        match &self.credentials {
            RegistryAuth::Basic(user, password) if basic => {
                use base64::Engine as _;
                let encoded =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                Ok(header(&format!("Basic {encoded}")))
            }
            _ => Ok(None),
        }
    }

    /// A bearer token for pulling from the repository, from the challenge's realm (a token
    /// service the registry names: the same address rules as its redirects apply).
    async fn token(
        &self,
        realm: &str,
        service: Option<&str>,
        refusal: &Response,
    ) -> Result<Option<HeaderValue>, Error> {
        let unauthorized = |answer: String| Error::Unauthorized {
            reference: self.reference.to_string(),
            answer,
        };
        let Ok(realm) = url::Url::parse(realm) else {
            return Err(unauthorized("its token realm is not a URL".into()));
        };
        let allowed = ["http", "https"].contains(&realm.scheme())
            && (self.limits.private_redirects || guard::allowed(refusal.url(), &realm));
        if !allowed {
            return Err(Error::PrivateAddress {
                reference: self.reference.to_string(),
            });
        }
        let scope = format!("repository:{}:pull", self.repository);
        let mut query = vec![("scope", scope.as_str())];
        if let Some(service) = service {
            query.push(("service", service));
        }
        let mut request = self.http.get(realm).query(&query);
        if let RegistryAuth::Basic(user, password) = &self.credentials {
            request = request.basic_auth(user, Some(password));
        }
        let response = request.send().await.map_err(|e| self.transport(&e))?;
        if !response.status().is_success() {
            let status = response.status();
            let errors = self.errors(response).await;
            return Err(unauthorized(format!(
                "the token service answered {status}{errors}"
            )));
        }
        let body = self.read(response, SMALL_BYTES, "the token answer").await?;
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&body)
            .map_err(|_| unauthorized("the token service's answer is not a token".into()))?;
        let token = token.token.or(token.access_token).unwrap_or_default();
        Ok(header(&format!("Bearer {token}")))
    }

    /// The error for a response that is not a success.
    async fn refused(&self, response: Response) -> Error {
        let status = response.status();
        let errors = self.errors(response).await;
        let answer = format!("HTTP {}{errors}", status.as_u16());
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Error::Unauthorized {
                reference: self.reference.to_string(),
                answer,
            };
        }
        Error::Refused {
            reference: self.reference.to_string(),
            status: status.as_u16(),
            answer,
        }
    }

    /// `: CODE: message; CODE: message` from a registry's JSON error envelope (at most three,
    /// each cut short), or nothing: no other part of a body is ever repeated.
    async fn errors(&self, response: Response) -> String {
        let Ok(body) = self.read(response, SMALL_BYTES, "the error answer").await else {
            return String::new();
        };
        #[derive(serde::Deserialize)]
        struct Envelope {
            errors: Vec<Entry>,
        }
        #[derive(serde::Deserialize)]
        struct Entry {
            #[serde(default)]
            code: String,
            #[serde(default)]
            message: String,
        }
        let Ok(envelope) = serde_json::from_slice::<Envelope>(&body) else {
            return String::new();
        };
        let entries: Vec<String> = (envelope.errors.iter().take(3))
            .map(|e| format!("{}: {}", cut(&e.code), cut(&e.message)))
            .collect();
        if entries.is_empty() {
            String::new()
        } else {
            format!(": {}", entries.join("; "))
        }
    }

    /// A response's body, refused past `limit` bytes (by its declared length before reading).
    async fn read(
        &self,
        mut response: Response,
        limit: u64,
        what: &'static str,
    ) -> Result<Vec<u8>, Error> {
        let too_large = |size| Error::TooLarge {
            reference: self.reference.to_string(),
            what,
            size,
            limit,
            flag: if what == "the manifest" {
                "the manifest bound"
            } else {
                "the bound on a registry's answers"
            },
        };
        let declared = content_length(&response);
        if declared.is_some_and(|n| n > limit) {
            return Err(too_large(declared));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(&e))? {
            if (body.len() + chunk.len()) as u64 > limit {
                return Err(too_large(None));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// Streams the layer into a temporary file in `dir`, hashing it: refused as soon as more
    /// than `size` bytes (its declared size, within the bound) arrive, and unless what arrived
    /// has `digest`.
    async fn stream(
        &self,
        mut response: Response,
        size: u64,
        digest: &str,
        dir: &Path,
    ) -> Result<tempfile::NamedTempFile, Error> {
        let setup = |e: std::io::Error| Error::Setup {
            path: dir.display().to_string(),
            reason: e.to_string(),
        };
        let too_large = || Error::TooLarge {
            reference: self.reference.to_string(),
            what: "the plugin layer",
            size: None,
            limit: size,
            flag: "the size its manifest declares",
        };
        if content_length(&response).is_some_and(|n| n > size) {
            return Err(too_large());
        }
        std::fs::create_dir_all(dir).map_err(setup)?;
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(setup)?;
        let (mut hasher, mut received) = (Sha256::new(), 0u64);
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(&e))? {
            received += chunk.len() as u64;
            if received > size {
                return Err(too_large());
            }
            hasher.update(&chunk);
            file.write_all(&chunk).map_err(setup)?;
        }
        file.flush().map_err(setup)?;
        let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
        if received != size || actual != digest {
            return Err(Error::DigestMismatch {
                reference: self.reference.to_string(),
                expected: digest.to_string(),
                actual,
            });
        }
        Ok(file)
    }

    /// A failed request, without its URL (a redirect's target is the registry's to choose).
    fn transport(&self, error: &reqwest::Error) -> Error {
        let reference = self.reference.to_string();
        let mut source: Option<&dyn std::error::Error> = std::error::Error::source(error);
        while let Some(e) = source {
            if e.is::<guard::PrivateTarget>() {
                return Error::PrivateAddress { reference };
            }
            source = e.source();
        }
        Error::Transport {
            reference,
            reason: describe(error),
        }
    }
}

/// `Content-Length`, when the registry sent one.
fn content_length(response: &Response) -> Option<u64> {
    (response.headers().get(CONTENT_LENGTH))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

fn header(value: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(value).ok()
}

/// `sha256:` and 64 lower-case hex digits.
pub(super) fn is_sha256(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Registry-supplied text as it may appear in a message: printable characters only, at most
/// 128 of them.
pub(super) fn cut(text: &str) -> String {
    const MOST: usize = 128;
    let mut out: String = (text.chars())
        .filter(|c| !c.is_control())
        .take(MOST)
        .collect();
    if text.chars().filter(|c| !c.is_control()).count() > MOST {
        out.push('…');
    }
    out
}

/// A reqwest error and its innermost cause on one line, without any URL.
fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "the registry did not answer in time".into();
    }
    if error.is_redirect() {
        return "the registry redirected too often".into();
    }
    let kind = if error.is_connect() {
        "cannot connect to the registry"
    } else {
        "the request to the registry failed"
    };
    // The innermost cause (connection refused, a TLS failure) is the transport's, not the
    // registry's text.
    let mut innermost = None;
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(error);
    while let Some(e) = source {
        innermost = Some(e.to_string());
        source = e.source();
    }
    match innermost {
        Some(cause) => format!("{kind}: {}", cut(&cause)),
        None => kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_text_is_cut_and_stripped_of_control_characters() {
        assert_eq!(cut("MANIFEST_UNKNOWN"), "MANIFEST_UNKNOWN");
        assert_eq!(cut("a\nb\u{1b}[31m"), "ab[31m");
        let long = "x".repeat(500);
        assert_eq!(cut(&long).chars().count(), 129);
    }

    #[test]
    fn only_sha256_digests_are_digests() {
        assert!(is_sha256(&format!("sha256:{}", "a".repeat(64))));
        assert!(!is_sha256(&format!("sha256:{}", "A".repeat(64))));
        assert!(!is_sha256("sha256:../../etc"));
        assert!(!is_sha256(&format!("sha512:{}", "a".repeat(128))));
    }
}
