//! The host's container image (`make image`, scripts/image.sh) end to end: its config is what a
//! Pod spec relies on (non-root user, entrypoint, ports, labels), its root filesystem holds the
//! binary and what it needs, and its entrypoint, run from that root filesystem alone (a chroot,
//! as the image's user), reconciles the VirtualMachine example against a separate API server.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::process::{Cluster, Process, plugin_dir, wait_for};
use serde_json::{Value, json};

/// Where `make image` writes the archive: under CARGO_TARGET_DIR (relative to the repository
/// root, where make runs cargo) as the Makefile's TARGET_DIR, else target/.
fn archive() -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| "target".into(), PathBuf::from);
    common::repo_root().join(target).join("image/wasmctrl.tar")
}

/// Writes a line past the test harness's output capture, so that `make test` shows it whether
/// the test passes or not: the archive's size, or why the test was skipped.
fn report(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "image test: {line}");
}

fn installed(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Runs `command`, which must succeed; its stdout.
fn run(command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The image's root filesystem as a runtime would see it, unpacked under `dir` by umoci.
fn unpack(archive: &Path, dir: &Path) -> PathBuf {
    let layout = dir.join("oci");
    let bundle = dir.join("bundle");
    let layout_ref = format!("{}:wasmctrl", layout.display());
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        &format!("oci-archive:{}", archive.display()),
        &format!("oci:{layout_ref}"),
    ]));
    run(Command::new("umoci")
        .args(["unpack", "--image", &layout_ref])
        .arg(&bundle));
    bundle.join("rootfs")
}

/// Checks what the root filesystem must hold for the binary to run as user 65532 in a Pod.
fn check_rootfs(rootfs: &Path) {
    let binary = std::fs::metadata(rootfs.join("usr/local/bin/wasmctrl")).unwrap();
    assert!(binary.is_file() && binary.mode() & 0o111 == 0o111);
    let certs = std::fs::read_to_string(rootfs.join("etc/ssl/certs/ca-certificates.crt")).unwrap();
    assert!(certs.contains("-----BEGIN CERTIFICATE-----"));
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert!(
        passwd.lines().any(|l| l.starts_with("root:x:0:0:")),
        "{passwd}"
    );
    assert!(
        passwd
            .lines()
            .any(|l| l.starts_with("nonroot:x:65532:65532:")),
        "{passwd}"
    );
    let group = std::fs::read_to_string(rootfs.join("etc/group")).unwrap();
    assert!(group.lines().any(|l| l == "nonroot:x:65532:"), "{group}");
    let tmp = std::fs::metadata(rootfs.join("tmp")).unwrap();
    assert!(tmp.is_dir());
    assert_eq!(tmp.permissions().mode() & 0o7777, 0o1777);
    let plugins = std::fs::read_dir(rootfs.join("plugins")).unwrap();
    assert_eq!(
        plugins.count(),
        0,
        "/plugins is mounted at run time, so empty"
    );
}

/// The image's entrypoint (as its config gives it), run in a chroot of `rootfs` as its user with
/// its environment only, against `cluster`.
fn start_entrypoint(config: &Value, rootfs: &Path, cluster: &Cluster, log: PathBuf) -> Process {
    // The kubeconfig a Pod would have mounted, owned by the image's user so that it can read it.
    let kubeconfig = rootfs.join("kubeconfig");
    std::fs::copy(&cluster.kubeconfig, &kubeconfig).unwrap();
    std::os::unix::fs::chown(&kubeconfig, Some(65532), Some(65532)).unwrap();

    // Found on the test's PATH: the child's is the image's, which has no chroot.
    let chroot = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join("chroot"))
        .find(|path| path.is_file())
        .expect("chroot (coreutils) on PATH");
    let mut command = Command::new(chroot);
    command
        .arg(format!("--userspec={}", config["User"].as_str().unwrap()))
        .arg(rootfs)
        .args(
            config["Entrypoint"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap()),
        )
        .args(["--kubeconfig", "/kubeconfig"])
        .args(["--health-probe-bind-address", "127.0.0.1:0"])
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .args(["--webhook-bind-address", "127.0.0.1:0"])
        .env_clear()
        .envs(
            config["Env"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap().split_once('=').unwrap()),
        )
        .env("RUST_LOG", "info,wasmctrl::reconcile::controller=debug");
    Process::spawn(command, log)
}

#[test]
fn image_entrypoint_reconciles_the_virtualmachine_example_as_nonroot() {
    let archive = archive();
    let tools = ["umoci", "skopeo"].into_iter().all(installed);
    if !archive.exists() {
        if !tools {
            report(&format!(
                "skipped: {} was not built and umoci/skopeo are not installed \
                 (make deps installs them on Debian; make image builds the archive)",
                archive.display()
            ));
            return;
        }
        panic!(
            "{} is missing: run `make image` (make test does)",
            archive.display()
        );
    }
    assert!(tools, "umoci and skopeo unpack the image: run `make deps`");
    assert_eq!(
        std::fs::metadata("/proc/self").unwrap().uid(),
        0,
        "the image test unpacks the image and runs it in a chroot, which needs root"
    );
    // Reported, not asserted: the goal is under 60 MB.
    let size = std::fs::metadata(&archive).unwrap().len();
    report(&format!(
        "{} is {:.1} MB",
        archive.display(),
        size as f64 / 1e6
    ));

    let image = format!("oci-archive:{}", archive.display());
    let config: Value = serde_json::from_str(&run(
        Command::new("skopeo").args(["inspect", "--config", &image])
    ))
    .unwrap();
    let config = &config["config"];
    assert_eq!(config["User"], "65532:65532");
    assert_eq!(
        config["Entrypoint"],
        json!(["/usr/local/bin/wasmctrl", "run", "--plugins", "/plugins"])
    );
    assert_eq!(
        config["ExposedPorts"],
        json!({"8443/tcp": {}, "8081/tcp": {}})
    );
    assert_eq!(
        config["Labels"]["org.opencontainers.image.title"],
        "wasmctrl"
    );
    assert_eq!(
        config["Labels"]["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );

    let dir = tempfile::tempdir().unwrap();
    let rootfs = unpack(&archive, dir.path());
    check_rootfs(&rootfs);

    let cluster = Cluster::start(dir.path());
    plugin_dir(&rootfs, &[("virtualmachine", None)]);
    let mut host = start_entrypoint(config, &rootfs, &cluster, dir.path().join("image-host.log"));

    cluster.kubectl_ok(&["apply", "-f", "examples/virtualmachine/crd.yaml"]);
    wait_for(30, "the CRD to be served", || {
        cluster.kubectl(&["get", "vm"]).0
    });
    cluster.kubectl_ok(&["apply", "-f", "examples/virtualmachine/test-vm.yaml"]);
    wait_for(60, "test-vm reconciled to phase Active", || {
        assert!(
            host.running(),
            "the image's entrypoint exited:\n{}",
            host.log()
        );
        cluster.get_json(&["vm", "test-vm"]).is_some_and(|vm| {
            vm["status"]["phase"] == "Active" && vm["status"]["server"]["cpu"] == 2
        })
    });

    // It ran as the image's user, not as the root that started the chroot.
    let status = std::fs::read_to_string(format!("/proc/{}/status", host.pid().unwrap())).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert_eq!(
        uid.split_whitespace().collect::<Vec<_>>(),
        ["Uid:", "65532", "65532", "65532", "65532"]
    );
    host.assert_quiet("image entrypoint");
}
