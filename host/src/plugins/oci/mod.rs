//! Plugins in OCI registries, in the wasm OCI artifact layout of CNCF TAG Runtime (what
//! `wkg oci push` and `oras push` produce, and the Bytecode Alliance's `oci-wasm` implements):
//! a config of media type `application/vnd.wasm.config.v0+json` and one `application/wasm`
//! layer holding the component. The registry protocol is `oci-client`'s; the config is written
//! here rather than with `oci-wasm`, whose `wit-component` is another release than the one
//! wasmtime brings (a second copy of the wasm tooling in every build, for one small JSON file).
//!
//! A tag is resolved to a manifest digest once, and that digest is what is pulled: the manifest
//! is checked against the digest it was asked by and the layer against its own, every answer
//! bounded in size and time ([`pull`]), and a registry sent on to a private address refused
//! ([`guard`]). Pushing is `oci-client`'s.

mod guard;
mod pull;
pub mod sign;

pub use pull::{Limits, MANIFEST_BYTES, PLUGIN_BYTES, TIMEOUT};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest as _, Sha256};

/// The media type of a wasm artifact's config.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of its one layer, the component.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The annotation holding the plugin's declaration and permissions, as `wasmctrl inspect -o
/// json` prints them (so tools can review an artifact without running it).
pub const DECLARATION_ANNOTATION: &str = "io.wasmctrl.plugin.declaration";

/// How to reach registries.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Registries (`host:port`) spoken to over plain HTTP, for development registries.
    pub insecure: Vec<String>,
    /// PEM certificates trusted besides the system's, for a registry with its own authority.
    pub ca_files: Vec<PathBuf>,
    /// The docker `config.json` to take credentials from; `None`: `$DOCKER_CONFIG/config.json`,
    /// else `~/.docker/config.json`, when it exists.
    pub docker_config: Option<PathBuf>,
    /// What a pull may take from a registry.
    pub limits: Limits,
}

/// Why a registry operation failed, naming the reference.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The reference does not parse.
    #[error("{reference:?} is not an OCI reference (registry/repository[:tag][@sha256:...])")]
    Reference {
        /// As given.
        reference: String,
        /// Why not.
        source: oci_client::ParseError,
    },
    /// The registry answered with an error, or could not be reached.
    #[error("{reference}")]
    Registry {
        /// As given.
        reference: String,
        /// What the registry (or the connection) said.
        source: oci_client::errors::OciDistributionError,
    },
    /// The registry refused the credentials (or asked for some): HTTP 401 or 403, with the
    /// registry's error codes.
    #[error("{reference}: the registry refused the credentials: {answer}")]
    Unauthorized {
        /// As given.
        reference: String,
        /// The status and the registry's error codes and messages (never the rest of a body).
        answer: String,
    },
    /// The registry answered with an error status.
    #[error("{reference}: the registry answered {answer}")]
    Refused {
        /// As given.
        reference: String,
        /// The HTTP status.
        status: u16,
        /// The status and the registry's error codes and messages (never the rest of a body).
        answer: String,
    },
    /// The registry could not be reached, did not answer in time, or sent the client on to
    /// an address refused.
    #[error("{reference}: {reason}")]
    Transport {
        /// As given.
        reference: String,
        /// What failed, without URLs.
        reason: String,
    },
    /// The registry sent the pull on (a redirect, a token realm) to a loopback, link-local or
    /// private address other than its own.
    #[error("{reference}: {}", guard::PrivateTarget)]
    PrivateAddress {
        /// As given.
        reference: String,
    },
    /// The pull took longer than `--registry-timeout`.
    #[error("{reference}: the pull took longer than --registry-timeout ({}s)", limit.as_secs_f64())]
    Timeout {
        /// As given.
        reference: String,
        /// The limit.
        limit: std::time::Duration,
    },
    /// Something the registry sent is larger than it may be.
    #[error(
        "{reference}: {what} is larger than {flag} allows ({limit} bytes){}",
        size.map(|s| format!("; it declares {s} bytes")).unwrap_or_default()
    )]
    TooLarge {
        /// As given.
        reference: String,
        /// What was too large (`the manifest`, `the plugin layer`).
        what: &'static str,
        /// The size it declared, when it declared one.
        size: Option<u64>,
        /// The bound, in bytes.
        limit: u64,
        /// What sets the bound.
        flag: &'static str,
    },
    /// The artifact is not a wasm component artifact.
    #[error("{reference}: not a wasm plugin artifact: {reason}")]
    NotAPlugin {
        /// As given.
        reference: String,
        /// What it is instead.
        reason: String,
    },
    /// What arrived is not what the digest names.
    #[error("{reference}: digest mismatch: asked for {expected}, got {actual}")]
    DigestMismatch {
        /// As given.
        reference: String,
        /// The digest asked for.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// Credentials or certificates could not be read.
    #[error("{path}: {reason}")]
    Setup {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// An artifact in a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The manifest's digest (`sha256:...`).
    pub digest: String,
    /// The reference pinned to it (`registry/repository@sha256:...`).
    pub pinned: String,
}

/// A plugin pulled from a registry.
#[derive(Debug)]
pub struct Pulled {
    /// The manifest's digest it was pulled by.
    pub digest: String,
    /// The reference pinned to it.
    pub pinned: String,
    /// The component, verified, in a temporary file in the directory the pull was asked to
    /// write to: persist it, or read it.
    pub file: tempfile::NamedTempFile,
    /// The manifest's annotations.
    pub annotations: BTreeMap<String, String>,
}

impl Pulled {
    /// The component's bytes (at most `--max-plugin-size`).
    pub fn component(&self) -> Result<Vec<u8>, Error> {
        std::fs::read(self.file.path()).map_err(|e| Error::Setup {
            path: self.file.path().display().to_string(),
            reason: e.to_string(),
        })
    }
}

/// Parses `oci://registry/repository:tag` (or without the scheme; `@sha256:...` pins it).
pub fn reference(text: &str) -> Result<Reference, Error> {
    let bare = text.strip_prefix("oci://").unwrap_or(text);
    bare.parse().map_err(|source| Error::Reference {
        reference: text.to_string(),
        source,
    })
}

/// A client of OCI registries.
///
/// `oci-client` remembers the first credentials used for a registry and reuses them for every
/// later request to it, so one client must never serve two sets of credentials (a tenant's
/// pull would ride on another's login): [`with_credentials`](Self::with_credentials) makes a
/// client of its own.
pub struct Registry {
    client: Client,
    credentials: BTreeMap<String, RegistryAuth>,
    insecure: Vec<String>,
    certificates: Vec<Vec<u8>>,
    limits: Limits,
}

impl Registry {
    /// A client with these options.
    pub fn new(options: &Options) -> Result<Self, Error> {
        // reqwest speaks TLS with rustls and the process's provider: the host's is ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut certificates = Vec::new();
        for path in &options.ca_files {
            let data = std::fs::read(path).map_err(|e| Error::Setup {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            certificates.push(data);
        }
        let credentials = docker_credentials(options.docker_config.as_deref())?;
        Ok(Self::build(
            options.insecure.clone(),
            certificates,
            credentials,
            options.limits.clone(),
        ))
    }

    fn build(
        insecure: Vec<String>,
        certificates: Vec<Vec<u8>>,
        credentials: BTreeMap<String, RegistryAuth>,
        limits: Limits,
    ) -> Self {
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(insecure.clone()),
            extra_root_certificates: (certificates.iter())
                .map(|data| Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: data.clone(),
                })
                .collect(),
            ..ClientConfig::default()
        };
        Self {
            client: Client::new(config),
            credentials,
            insecure,
            certificates,
            limits,
        }
    }

    /// A client of its own with the same registries, authorities and limits, and
    /// `credentials` (by registry `host[:port]`, as [`parse_docker_config`] returns them)
    /// taking precedence over the docker config's, or, without `inherit`, alone: a tenant's
    /// pull never rides on the operator's credentials.
    pub fn with_credentials(
        &self,
        credentials: BTreeMap<String, RegistryAuth>,
        inherit: bool,
    ) -> Self {
        let mut merged = if inherit {
            self.credentials.clone()
        } else {
            BTreeMap::new()
        };
        merged.extend(credentials);
        Self::build(
            self.insecure.clone(),
            self.certificates.clone(),
            merged,
            self.limits.clone(),
        )
    }

    /// The credentials for `reference`'s registry: the docker config's, else anonymous.
    fn auth(&self, reference: &Reference) -> RegistryAuth {
        let registry = reference.resolve_registry();
        self.credentials
            .get(registry)
            .cloned()
            .unwrap_or(RegistryAuth::Anonymous)
    }

    /// Pushes `component` to `reference` as a wasm artifact with these manifest annotations.
    pub async fn push(
        &self,
        reference: &str,
        component: &[u8],
        annotations: BTreeMap<String, String>,
    ) -> Result<Pushed, Error> {
        let target = self::reference(reference)?;
        let layer = ImageLayer::new(component.to_vec(), LAYER_MEDIA_TYPE.to_string(), None);
        let config = Config::new(
            wasm_config(component, &layer.sha256_digest()).into_bytes(),
            CONFIG_MEDIA_TYPE.to_string(),
            None,
        );
        let manifest =
            OciImageManifest::build(std::slice::from_ref(&layer), &config, Some(annotations));
        let auth = self.auth(&target);
        let pushed = match (self.client)
            .push(&target, &[layer], config, &auth, Some(manifest))
            .await
        {
            Ok(pushed) => pushed,
            Err(source) => return Err(Self::failed(reference, source)),
        };
        let digest = match self.client.fetch_manifest_digest(&target, &auth).await {
            Ok(digest) => digest,
            Err(source) => return Err(Self::failed(reference, source)),
        };
        tracing::debug!(manifest = %pushed.manifest_url, %digest, "pushed");
        Ok(Pushed {
            pinned: pinned(&target, &digest),
            digest,
        })
    }

    /// Resolves `reference` to its manifest digest (a pinned reference is its own), within
    /// `--registry-timeout`.
    pub async fn resolve(&self, reference: &str) -> Result<String, Error> {
        let target = self::reference(reference)?;
        if let Some(digest) = target.digest() {
            return Ok(digest.to_string());
        }
        let tag = target.tag().unwrap_or("latest");
        self.bounded(reference, async {
            self.session(&target, reference)?.resolve(tag).await
        })
        .await
    }

    /// Pulls the plugin `reference` names, its tag resolved to a digest first, into a
    /// temporary file in `dir` (beside where it will be kept, so keeping it is a rename): the
    /// manifest checked against the digest and bounded, the layer's declared size bounded
    /// before the download and its bytes while they stream, all within `--registry-timeout`.
    pub async fn pull(&self, reference: &str, dir: &Path) -> Result<Pulled, Error> {
        let target = self::reference(reference)?;
        self.bounded(reference, async {
            let mut session = self.session(&target, reference)?;
            let digest = match target.digest() {
                Some(digest) => digest.to_string(),
                None => session.resolve(target.tag().unwrap_or("latest")).await?,
            };
            if !pull::is_sha256(&digest) {
                return Err(Error::NotAPlugin {
                    reference: reference.to_string(),
                    reason: "only sha256 digests are pulled".into(),
                });
            }
            let layer = session.pull(&digest, dir).await?;
            Ok(Pulled {
                pinned: pinned(&target, &digest),
                digest: layer.digest,
                file: layer.file,
                annotations: layer.annotations,
            })
        })
        .await
    }

    /// The signatures cosign's format keeps for manifest `digest` of `reference`'s repository
    /// (none when its `sha256-<hex>.sig` tag does not exist), every answer bounded as a pull's.
    pub async fn signatures(
        &self,
        reference: &str,
        digest: &str,
    ) -> Result<Vec<sign::Signature>, Error> {
        let target = self::reference(reference)?;
        let tag = sign::signature_tag(digest).ok_or_else(|| Error::NotAPlugin {
            reference: reference.to_string(),
            reason: "only sha256 digests are signed".into(),
        })?;
        self.bounded(reference, async {
            self.session(&target, reference)?.signatures(&tag).await
        })
        .await
    }

    /// Signs the manifest `reference` names (its tag resolved to a digest) with `key`, and
    /// pushes the signature as cosign does; returns the signature's reference.
    pub async fn sign(&self, reference: &str, key: &sign::SigningKey) -> Result<String, Error> {
        let digest = self.resolve(reference).await?;
        let target = self::reference(reference)?;
        let repository = format!("{}/{}", target.registry(), target.repository());
        let payload = sign::payload(&repository, &digest);
        let signature = key.sign(&payload).map_err(|reason| Error::Setup {
            path: reference.to_string(),
            reason,
        })?;
        self.push_signature(reference, &digest, payload, signature)
            .await
    }

    /// Pushes `payload` and its `signature` as the signature of manifest `digest` in
    /// `reference`'s repository (the tag `sha256-<hex>.sig`).
    pub async fn push_signature(
        &self,
        reference: &str,
        digest: &str,
        payload: Vec<u8>,
        signature: String,
    ) -> Result<String, Error> {
        let target = self::reference(reference)?;
        let tag = sign::signature_tag(digest).ok_or_else(|| Error::NotAPlugin {
            reference: reference.to_string(),
            reason: "only sha256 digests are signed".into(),
        })?;
        let at = Reference::with_tag(
            target.registry().to_string(),
            target.repository().to_string(),
            tag,
        );
        let annotations = BTreeMap::from([(sign::SIGNATURE_ANNOTATION.to_string(), signature)]);
        let layer = ImageLayer::new(
            payload,
            sign::SIMPLE_SIGNING_MEDIA_TYPE.to_string(),
            Some(annotations),
        );
        let config = Config::new(
            br#"{"architecture":"","os":"","config":{},"rootfs":{"type":"layers","diff_ids":[]}}"#
                .to_vec(),
            "application/vnd.oci.image.config.v1+json".to_string(),
            None,
        );
        let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
        let auth = self.auth(&target);
        let at_text = at.to_string();
        match (self.client)
            .push(&at, &[layer], config, &auth, Some(manifest))
            .await
        {
            Ok(_) => Ok(at_text),
            Err(source) => Err(Self::failed(&at_text, source)),
        }
    }

    /// One pull's session with `target`'s registry.
    fn session<'a>(
        &'a self,
        target: &Reference,
        reference: &'a str,
    ) -> Result<pull::Session<'a>, Error> {
        let registry = target.resolve_registry();
        let scheme = if self.insecure.iter().any(|r| r == registry) {
            "http"
        } else {
            "https"
        };
        pull::Session::new(
            scheme,
            registry,
            target.repository(),
            self.auth(target),
            &self.certificates,
            &self.limits,
            reference,
        )
    }

    /// `work` within `--registry-timeout`.
    async fn bounded<T>(
        &self,
        reference: &str,
        work: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        tokio::time::timeout(self.limits.timeout, work)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Timeout {
                    reference: reference.to_string(),
                    limit: self.limits.timeout,
                })
            })
    }

    /// The error for a failed push request about `reference` (the operator's own registry;
    /// `oci-client` reports a refusal of the credentials by its URL only).
    fn failed(reference: &str, source: oci_client::errors::OciDistributionError) -> Error {
        use oci_client::errors::OciDistributionError as E;
        match source {
            E::UnauthorizedError { .. } => Error::Unauthorized {
                reference: reference.to_string(),
                answer: "HTTP 401".into(),
            },
            source => Error::Registry {
                reference: reference.to_string(),
                source,
            },
        }
    }
}

/// `registry/repository@digest`.
fn pinned(reference: &Reference, digest: &str) -> String {
    format!(
        "{}/{}@{digest}",
        reference.registry(),
        reference.repository()
    )
}

/// The artifact's config: the layout's required fields and the component's top-level imports
/// and exports (what `wkg oci push` records), read without compiling it.
fn wasm_config(component: &[u8], layer_digest: &str) -> String {
    let (imports, exports) = interface_names(component);
    let created = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    serde_json::json!({
        "created": created,
        "author": null,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
        "component": {"imports": imports, "exports": exports, "target": null},
    })
    .to_string()
}

/// The names a component imports and exports at its top level.
fn interface_names(component: &[u8]) -> (Vec<String>, Vec<String>) {
    use wasmparser::{Parser, Payload};
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    // Nested modules and components each begin with a Version and end with an End payload.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(component) {
        match payload {
            Ok(Payload::Version { .. }) => depth += 1,
            Ok(Payload::End(_)) => depth = depth.saturating_sub(1),
            Ok(Payload::ComponentImportSection(reader)) if depth == 1 => {
                imports.extend(
                    reader
                        .into_iter()
                        .flatten()
                        .map(|i| i.name.full_name().into_owned()),
                );
            }
            Ok(Payload::ComponentExportSection(reader)) if depth == 1 => {
                exports.extend(
                    reader
                        .into_iter()
                        .flatten()
                        .map(|e| e.name.full_name().into_owned()),
                );
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    (imports, exports)
}

/// The sha256 digest of `bytes`, as OCI writes digests.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Credentials by registry from a docker `config.json` (`auths.<registry>.auth`, base64 of
/// `user:password`, or its `username` and `password`; an `identitytoken` is a bearer token).
fn docker_credentials(path: Option<&Path>) -> Result<BTreeMap<String, RegistryAuth>, Error> {
    let path = match path {
        Some(path) => path.to_path_buf(),
        None => {
            let dir = std::env::var_os("DOCKER_CONFIG")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker"))
                });
            match dir.map(|d| d.join("config.json")).filter(|p| p.is_file()) {
                Some(path) => path,
                None => return Ok(BTreeMap::new()),
            }
        }
    };
    let text = std::fs::read_to_string(&path).map_err(|e| Error::Setup {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    parse_docker_config(&text).map_err(|reason| Error::Setup {
        path: path.display().to_string(),
        reason,
    })
}

/// The `auths` of a docker config (also the content of a `kubernetes.io/dockerconfigjson`
/// Secret).
pub fn parse_docker_config(text: &str) -> Result<BTreeMap<String, RegistryAuth>, String> {
    use base64::Engine as _;
    let config: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not a docker config.json: {e}"))?;
    let mut out = BTreeMap::new();
    let auths = config["auths"].as_object().into_iter().flatten();
    for (registry, entry) in auths {
        // Docker writes Docker Hub's as a URL; registries are matched by host[:port].
        let host = registry
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let text = |key: &str| entry[key].as_str().filter(|s| !s.is_empty());
        let auth = if let Some(token) = text("identitytoken") {
            RegistryAuth::Bearer(token.to_string())
        } else if let (Some(user), Some(password)) = (text("username"), text("password")) {
            RegistryAuth::Basic(user.to_string(), password.to_string())
        } else if let Some(encoded) = text("auth") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| format!("auths.{registry}.auth: not base64: {e}"))?;
            let decoded = String::from_utf8(decoded)
                .map_err(|_| format!("auths.{registry}.auth: not UTF-8"))?;
            let (user, password) = decoded
                .split_once(':')
                .ok_or_else(|| format!("auths.{registry}.auth: not user:password"))?;
            RegistryAuth::Basic(user.to_string(), password.to_string())
        } else {
            continue;
        };
        out.insert(host, auth);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_take_the_scheme_or_not() {
        let tagged = reference("oci://127.0.0.1:5000/plugins/vm:1.0").unwrap();
        assert_eq!(tagged.registry(), "127.0.0.1:5000");
        assert_eq!(tagged.repository(), "plugins/vm");
        assert_eq!(tagged.tag(), Some("1.0"));
        let digest = format!("sha256:{}", "a".repeat(64));
        let pinned = reference(&format!("127.0.0.1:5000/plugins/vm@{digest}")).unwrap();
        assert_eq!(pinned.digest(), Some(digest.as_str()));
        assert!(reference("oci://Not A Reference").is_err());
    }

    #[test]
    fn docker_config_credentials() {
        let config = r#"{"auths": {
            "127.0.0.1:5000": {"auth": "YWxpY2U6czNjcmV0"},
            "https://index.docker.io/v1/": {"username": "bob", "password": "pw"},
            "ghcr.io": {"identitytoken": "tok"},
            "empty.example": {}
        }}"#;
        let auths = parse_docker_config(config).unwrap();
        let basic = |u: &str, p: &str| RegistryAuth::Basic(u.into(), p.into());
        assert_eq!(auths["127.0.0.1:5000"], basic("alice", "s3cret"));
        assert_eq!(auths["index.docker.io"], basic("bob", "pw"));
        assert_eq!(auths["ghcr.io"], RegistryAuth::Bearer("tok".into()));
        assert!(!auths.contains_key("empty.example"));
        let bad = r#"{"auths": {"r": {"auth": "not base64!"}}}"#;
        assert!(
            parse_docker_config(bad)
                .unwrap_err()
                .contains("auths.r.auth")
        );
    }

    #[test]
    fn the_config_names_the_components_interfaces() {
        let component = wat::parse_str(
            r#"(component
                (import "wasmctrl:plugin/log@0.3.0" (instance))
                (core module $m)
                (export "wasmctrl:plugin/reconciler@0.3.0" (core module $m)))"#,
        )
        .unwrap();
        let config: serde_json::Value =
            serde_json::from_str(&wasm_config(&component, "sha256:x")).unwrap();
        assert_eq!(config["architecture"], "wasm");
        assert_eq!(config["layerDigests"][0], "sha256:x");
        assert_eq!(
            config["component"]["imports"][0],
            "wasmctrl:plugin/log@0.3.0"
        );
        assert_eq!(
            config["component"]["exports"][0],
            "wasmctrl:plugin/reconciler@0.3.0"
        );
    }
}
