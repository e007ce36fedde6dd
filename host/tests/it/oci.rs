//! Plugins through a real OCI registry (Debian's CNCF distribution registry on loopback):
//! `wasmctrl push`, `wasmctrl pull` and `wasmctrl inspect oci://`, digests checked on the way.

use crate::common;

use std::process::Output;

use common::registry::Registry;
use serde_json::Value;

/// Runs `wasmctrl <args>` from the repository root.
fn wasmctrl(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(args)
        .current_dir(common::repo_root())
        .output()
        .expect("run wasmctrl")
}

/// `wasmctrl <args>`, which must succeed: its stdout.
fn succeeds(args: &[&str], registry: &Registry) -> String {
    let out = wasmctrl(args);
    assert!(
        out.status.success(),
        "wasmctrl {args:?}: {}\nregistry log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        registry.log()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_plugin_pushed_by_tag_pulls_back_by_digest_and_inspects_as_its_file() {
    let registry = Registry::start();
    let plugin = common::plugin_path("virtualmachine");
    let plugin = plugin.to_str().unwrap();
    let insecure = ["--insecure-registry", registry.addr.as_str()];
    let tagged = format!("oci://{}/plugins/virtualmachine:1.0", registry.addr);

    // Pushed by tag: the reference printed is pinned to the digest the registry recorded.
    let pinned = succeeds(
        &[&["push", plugin, &tagged][..], &insecure].concat(),
        &registry,
    );
    let digest = registry.tag_digest("plugins/virtualmachine", "1.0");
    assert_eq!(
        pinned,
        format!("{}/plugins/virtualmachine@{digest}", registry.addr)
    );

    // Pulled by tag, it is the same component, fetched by that digest.
    let out = registry.dir().join("pulled.wasm");
    let said = succeeds(
        &[
            &["pull", &tagged, "-o", out.to_str().unwrap()][..],
            &insecure,
        ]
        .concat(),
        &registry,
    );
    assert!(said.starts_with(&pinned), "{said}");
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(plugin).unwrap());

    // Inspected in the registry, it declares what the file declares.
    let inspect = |what: &str| -> Value {
        let json = succeeds(
            &[&["inspect", what, "-o", "json"][..], &insecure].concat(),
            &registry,
        );
        serde_json::from_str(&json).unwrap()
    };
    let (remote, local) = (inspect(&format!("oci://{pinned}")), inspect(plugin));
    for field in ["plugin", "version", "digest", "manifest", "permissions"] {
        assert_eq!(remote[field], local[field], "{field}");
    }
    assert_eq!(remote["reference"], pinned.as_str());
    assert!(
        !local["permissions"].as_array().unwrap().is_empty(),
        "{local}"
    );
}

#[test]
fn an_altered_blob_is_refused_by_its_digest() {
    let registry = Registry::start();
    let plugin = common::plugin_path("virtualmachine");
    let insecure = ["--insecure-registry", registry.addr.as_str()];
    let tagged = format!("{}/plugins/vm:1", registry.addr);
    let pinned = succeeds(
        &[&["push", plugin.to_str().unwrap(), &tagged][..], &insecure].concat(),
        &registry,
    );

    // The component's blob, changed in the registry's storage behind its back.
    let component = std::fs::read(&plugin).unwrap();
    let blob = registry.blob_path(&wasmctrl::plugins::oci::digest_of(&component));
    let mut altered = std::fs::read(&blob).unwrap();
    assert_eq!(altered, component);
    let last = altered.len() - 1;
    altered[last] ^= 0xff;
    std::fs::write(&blob, &altered).unwrap();

    let out_path = registry.dir().join("altered.wasm");
    let out = wasmctrl(
        &[
            &["pull", &pinned, "-o", out_path.to_str().unwrap()][..],
            &insecure,
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an altered blob was accepted");
    assert!(stderr.to_lowercase().contains("digest"), "{stderr}");
    assert!(!out_path.exists(), "nothing is written from a bad pull");
}

#[test]
fn references_and_registries_that_cannot_work_are_one_line_errors() {
    // Not a reference.
    let out = wasmctrl(&["pull", "oci://Not A Reference"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("is not an OCI reference"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let nowhere = format!("127.0.0.1:{port}");
    let out = wasmctrl(&[
        "pull",
        &format!("{nowhere}/plugins/vm:1"),
        "--insecure-registry",
        &nowhere,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(&nowhere), "{stderr}");
}

#[test]
fn a_registry_with_its_own_authority_and_basic_auth_takes_docker_config_credentials() {
    use base64::Engine as _;
    use common::registry::{PASSWORD, USER};
    let registry = Registry::start_secure();
    let dir = registry.dir();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, registry.ca.as_deref().unwrap()).unwrap();
    let docker_config = |password: &str| {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
        let path = dir.join(format!("config-{password}.json"));
        let config = serde_json::json!({"auths": {registry.addr.clone(): {"auth": auth}}});
        std::fs::write(&path, config.to_string()).unwrap();
        path.display().to_string()
    };
    let plugin = common::plugin_path("virtualmachine");
    let tagged = format!("{}/plugins/vm:1", registry.addr);
    let push = |config: &str| {
        wasmctrl(&[
            "push",
            plugin.to_str().unwrap(),
            &tagged,
            "--registry-ca",
            ca.to_str().unwrap(),
            "--docker-config",
            config,
        ])
    };

    let refused = push(&docker_config("wrong"));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "wrong credentials were taken");
    assert!(
        stderr.contains("401") || stderr.to_lowercase().contains("unauthorized"),
        "{stderr}"
    );

    let pushed = push(&docker_config(PASSWORD));
    assert!(
        pushed.status.success(),
        "{}\nregistry log:\n{}",
        String::from_utf8_lossy(&pushed.stderr),
        registry.log()
    );
    let pinned = String::from_utf8_lossy(&pushed.stdout).trim().to_string();
    assert_eq!(
        pinned,
        format!(
            "{}/plugins/vm@{}",
            registry.addr,
            registry.tag_digest("plugins/vm", "1")
        )
    );
}
