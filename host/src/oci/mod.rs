//! Plugins in OCI registries, in the wasm OCI artifact layout of CNCF TAG Runtime (what
//! `wkg oci push` and `oras push` produce, and the Bytecode Alliance's `oci-wasm` implements):
//! a config of media type `application/vnd.wasm.config.v0+json` and one `application/wasm`
//! layer holding the component. The registry protocol is `oci-client`'s; the config is written
//! here rather than with `oci-wasm`, whose `wit-component` is another release than the one
//! wasmtime brings (a second copy of the wasm tooling in every build, for one small JSON file).
//!
//! A tag is resolved to a manifest digest once, and that digest is what is pulled: every blob
//! is checked against its digest (`oci-client` hashes each as it arrives) and the manifest
//! against the digest it was asked by.

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
    /// The registry refused the credentials (or asked for some): HTTP 401, with what the
    /// registry said.
    #[error("{reference}: the registry refused the credentials: {answer}")]
    Unauthorized {
        /// As given.
        reference: String,
        /// The registry's status line and body (its error envelope).
        answer: String,
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
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The manifest's digest it was pulled by.
    pub digest: String,
    /// The reference pinned to it.
    pub pinned: String,
    /// The component.
    pub component: Vec<u8>,
    /// The manifest's annotations.
    pub annotations: BTreeMap<String, String>,
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
        ))
    }

    fn build(
        insecure: Vec<String>,
        certificates: Vec<Vec<u8>>,
        credentials: BTreeMap<String, RegistryAuth>,
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
        }
    }

    /// A client of its own with the same registries and authorities, and `credentials` (by
    /// registry `host[:port]`, as [`parse_docker_config`] returns them) taking precedence over
    /// the docker config's.
    pub fn with_credentials(&self, credentials: BTreeMap<String, RegistryAuth>) -> Self {
        let mut merged = self.credentials.clone();
        merged.extend(credentials);
        Self::build(self.insecure.clone(), self.certificates.clone(), merged)
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
            Err(source) => return Err(self.failed(reference, &auth, source).await),
        };
        let digest = match self.client.fetch_manifest_digest(&target, &auth).await {
            Ok(digest) => digest,
            Err(source) => return Err(self.failed(reference, &auth, source).await),
        };
        tracing::debug!(manifest = %pushed.manifest_url, %digest, "pushed");
        Ok(Pushed {
            pinned: pinned(&target, &digest),
            digest,
        })
    }

    /// Resolves `reference` to its manifest digest (a pinned reference is its own).
    pub async fn resolve(&self, reference: &str) -> Result<String, Error> {
        self.digest(&self::reference(reference)?, reference).await
    }

    /// The manifest digest `target` (parsed from `reference`) names, asked of the registry for
    /// a tag.
    async fn digest(&self, target: &Reference, reference: &str) -> Result<String, Error> {
        if let Some(digest) = target.digest() {
            return Ok(digest.to_string());
        }
        let auth = self.auth(target);
        match self.client.fetch_manifest_digest(target, &auth).await {
            Ok(digest) => Ok(digest),
            Err(source) => Err(self.failed(reference, &auth, source).await),
        }
    }

    /// The error for a failed request about `reference`. A refusal of the credentials is asked
    /// again, plainly, for the registry's own words: `oci-client` reports only the URL.
    async fn failed(
        &self,
        reference: &str,
        auth: &RegistryAuth,
        source: oci_client::errors::OciDistributionError,
    ) -> Error {
        use oci_client::errors::OciDistributionError as E;
        let url = match &source {
            E::UnauthorizedError { url } => url.clone(),
            _ => {
                return Error::Registry {
                    reference: reference.to_string(),
                    source,
                };
            }
        };
        let answer = match self.ask(&url, auth).await {
            Ok(answer) => answer,
            Err(e) => format!("401 Unauthorized at {url} ({e} when asking again)"),
        };
        Error::Unauthorized {
            reference: reference.to_string(),
            answer,
        }
    }

    /// `GET url` with `auth` as HTTP basic or bearer credentials: the status line and the
    /// first 512 bytes of the body.
    async fn ask(&self, url: &str, auth: &RegistryAuth) -> Result<String, reqwest::Error> {
        let mut client = reqwest::Client::builder();
        for pem in &self.certificates {
            if let Ok(certificate) = reqwest::Certificate::from_pem(pem) {
                client = client.add_root_certificate(certificate);
            }
        }
        let request = client.build()?.get(url);
        let request = match auth {
            RegistryAuth::Basic(user, password) => request.basic_auth(user, Some(password)),
            RegistryAuth::Bearer(token) => request.bearer_auth(token),
            _ => request,
        };
        let response = request.send().await?;
        let status = response.status();
        let body = response.text().await?;
        let body = body.trim();
        let body = body.get(..512.min(body.len())).unwrap_or(body);
        Ok(format!("{status}: {body}"))
    }

    /// Pulls the plugin `reference` names: its tag resolved to a digest first, every blob
    /// checked against its digest.
    pub async fn pull(&self, reference: &str) -> Result<Pulled, Error> {
        let target = self::reference(reference)?;
        let digest = self.digest(&target, reference).await?;
        let by_digest = target.clone_with_digest(digest.clone());
        let auth = self.auth(&target);
        let image = match (self.client)
            .pull(&by_digest, &auth, vec![LAYER_MEDIA_TYPE])
            .await
        {
            Ok(image) => image,
            Err(source) => return Err(self.failed(reference, &auth, source).await),
        };
        if let Some(actual) = image.digest.as_ref().filter(|d| **d != digest) {
            return Err(Error::DigestMismatch {
                reference: reference.to_string(),
                expected: digest,
                actual: actual.clone(),
            });
        }
        let not_a_plugin = |reason: String| Error::NotAPlugin {
            reference: reference.to_string(),
            reason,
        };
        if image.config.media_type != CONFIG_MEDIA_TYPE {
            return Err(not_a_plugin(format!(
                "its config is {}, not {CONFIG_MEDIA_TYPE}",
                image.config.media_type
            )));
        }
        let [layer] = <[ImageLayer; 1]>::try_from(image.layers).map_err(|layers| {
            not_a_plugin(format!("{} layers, not one component", layers.len()))
        })?;
        let annotations = (image.manifest)
            .and_then(|m| m.annotations)
            .unwrap_or_default();
        Ok(Pulled {
            pinned: pinned(&target, &digest),
            digest,
            component: layer.data.to_vec(),
            annotations,
        })
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
