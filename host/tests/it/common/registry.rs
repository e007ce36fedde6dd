//! A real OCI registry on loopback: Debian's build of the CNCF distribution registry
//! (`docker-registry`, installed by `make deps`), with its storage in a temporary directory the
//! tests can look into.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running registry, stopped when dropped.
pub struct Registry {
    /// `127.0.0.1:<port>`.
    pub addr: String,
    /// Over HTTPS: the PEM of the authority that signed its certificate.
    pub ca: Option<String>,
    dir: tempfile::TempDir,
    child: Child,
}

/// The user of [`Registry::start_secure`].
pub const USER: &str = "wasmctrl";
/// Its password.
pub const PASSWORD: &str = "s3cret";
/// [`PASSWORD`]'s bcrypt hash, as `htpasswd -B` writes it (the registry reads only bcrypt).
const PASSWORD_HASH: &str = "$2b$12$oQ3baUZXR9HoG5Q9tUyYP.SvF4aW.8hWrexP5AKeeQLcK6KFDVwp2";

impl Registry {
    /// Starts a registry over plain HTTP, anonymous, and waits until it answers `/v2/`.
    pub fn start() -> Self {
        Self::launch(false)
    }

    /// Starts a registry over HTTPS, with a certificate of its own authority, that takes only
    /// [`USER`] with [`PASSWORD`] (HTTP basic auth, from an htpasswd file).
    pub fn start_secure() -> Self {
        Self::launch(true)
    }

    fn launch(secure: bool) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        let storage = dir.path().join("storage");
        let mut text = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  \
             delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
            storage.display()
        );
        let ca = secure.then(|| {
            let certs = dir.path().join("certs");
            let ca = super::certificates(&certs);
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{USER}:{PASSWORD_HASH}\n")).expect("htpasswd");
            text += &format!(
                "  tls:\n    certificate: {}\n    key: {}\nauth:\n  htpasswd:\n    realm: test\n    \
                 path: {}\n",
                certs.join("tls.crt").display(),
                certs.join("tls.key").display(),
                htpasswd.display()
            );
            ca
        });
        std::fs::write(&config, text).expect("write registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log file");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("docker-registry is installed (make deps)");
        let registry = Self {
            addr,
            ca,
            dir,
            child,
        };
        // A registry still starting may accept a connection and reset it: not an answer yet.
        super::process::wait_for(30, "the registry to answer /v2/", || match &registry.ca {
            // Without credentials: 401, and the realm to ask for them.
            Some(ca) => super::http::try_get_tls(&registry.addr, "/v2/", None, Some(ca))
                .is_ok_and(|(code, _, _)| code == 401),
            None => super::http::try_get(&registry.addr, "/v2/").is_ok_and(|code| code == 200),
        });
        registry
    }

    /// The registry's own record of the manifest digest a tag points to.
    pub fn tag_digest(&self, repository: &str, tag: &str) -> String {
        let link = self
            .storage()
            .join("docker/registry/v2/repositories")
            .join(repository)
            .join("_manifests/tags")
            .join(tag)
            .join("current/link");
        std::fs::read_to_string(&link)
            .unwrap_or_else(|e| panic!("{}: {e}", link.display()))
            .trim()
            .to_string()
    }

    /// Where the blob of `digest` (`sha256:...`) is stored.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.storage()
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    fn storage(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    /// The registry's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Stops the registry (its storage stays until it is dropped); nothing answers at its
    /// address afterwards.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The temporary directory (for files a test writes beside the registry's).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
