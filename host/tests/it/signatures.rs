//! Signed plugins: `wasmctrl push --sign` / `wasmctrl sign` write cosign's keyed signature
//! format, and a plugin resource with `spec.verify.keys` (or any, under `--require-signatures`)
//! loads only a digest signed by one of its keys. Unsigned, signed by another key, or signed
//! over another digest: `Verified=False`, and the version serving keeps serving.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use common::process::Cluster;
use common::registry::Registry;
use wasmctrl::plugins::oci::sign::{self, SigningKey};

/// A fresh ECDSA P-256 key: its private PEM file and its public PEM.
fn keypair(dir: &Path, name: &str) -> (PathBuf, String) {
    use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair};
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(
        &ECDSA_P256_SHA256_ASN1_SIGNING,
        &ring::rand::SystemRandom::new(),
    )
    .unwrap();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
    );
    let path = dir.join(format!("{name}.key"));
    std::fs::write(&path, &pem).unwrap();
    let public = SigningKey::from_pem(&pem).unwrap().public_key().to_pem();
    (path, public)
}

/// Runs `wasmctrl <args>`; it must succeed. Its stdout.
fn wasmctrl(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "wasmctrl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Pushes `component` to `plugins/thing:v`, signed with `key` if given; its digest.
fn push(registry: &Registry, component: &[u8], label: &str, key: Option<&Path>) -> String {
    let file = registry.dir().join(format!("{label}.wasm"));
    std::fs::write(&file, component).unwrap();
    let reference = format!("{}/plugins/thing:v", registry.addr);
    let mut args = vec![
        "push",
        file.to_str().unwrap(),
        &reference,
        "--insecure-registry",
        &registry.addr,
    ];
    if let Some(key) = key {
        args.extend(["--sign", key.to_str().unwrap()]);
    }
    wasmctrl(&args);
    registry.tag_digest("plugins/thing", "v")
}

/// Waits until `name`'s `Verified` has `reason`, with a message naming `digest`; the message.
async fn verified(cluster: &Cluster, name: &str, reason: &str, digest: &str) -> String {
    let what = format!("{name} Verified {reason} for {digest}");
    common::eventually(90, &what, || async {
        let (_, found, message) = cluster.condition(&["clusterwasmplugin", name], "Verified")?;
        (found == reason && message.contains(digest)).then_some(message)
    })
    .await
}

/// The digest serving, once `Ready` is True.
fn serving(cluster: &Cluster, name: &str) -> String {
    let (ready, _, message) = cluster
        .condition(&["clusterwasmplugin", name], "Ready")
        .unwrap();
    assert_eq!(ready, "True", "{message}");
    let status = cluster.get_json(&["clusterwasmplugin", name]).unwrap()["status"].clone();
    status["digest"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_digest_signed_by_a_given_key_loads_and_what_serves_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start();
    let (key, public) = keypair(dir.path(), "team");
    let (stranger, _) = keypair(dir.path(), "stranger");
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    common::things::install(&client).await;
    cluster.kubectl_ok(&["apply", "-f", "examples/deploy/crds.yaml"]);
    // The key in a Secret of the host's namespace (outside a Pod: `default`).
    let public_file = dir.path().join("cosign.pub");
    std::fs::write(&public_file, &public).unwrap();
    let from = format!("--from-file=cosign.pub={}", public_file.display());
    cluster.kubectl_ok(&[
        "create", "secret", "generic", "keys", "-n", "default", &from,
    ]);

    let trivial = common::plugin_bytes("trivial");
    let variant = |label: &str| {
        common::with_custom_section(&trivial, "wasmctrl-test-variant", label.as_bytes())
    };
    let signed = push(&registry, &trivial, "v1", Some(&key));
    let module = format!("oci://{}/plugins/thing:v", registry.addr);
    cluster.apply_yaml(&format!(
        "apiVersion: wasmctrl.io/v1alpha1\nkind: ClusterWasmPlugin\nmetadata:\n  name: thing\nspec:\n  module: {module}\n  refreshInterval: 1s\n  verify:\n    keys:\n    - secretRef:\n        name: keys\n"
    ));
    // Under --require-signatures, a resource naming no keys loads nothing.
    cluster.apply_yaml(&format!(
        "apiVersion: wasmctrl.io/v1alpha1\nkind: ClusterWasmPlugin\nmetadata:\n  name: unkeyed\nspec:\n  module: oci://{}/plugins/thing@{signed}\n",
        registry.addr
    ));
    let absent = dir.path().join("absent");
    let _host = cluster.run_host(
        &absent,
        &[
            "--plugin-resources",
            "--insecure-registry",
            &registry.addr,
            "--require-signatures",
        ],
        &[],
    );

    verified(&cluster, "thing", "Verified", &signed).await;
    common::eventually(60, "thing Ready", || async {
        (cluster
            .condition(&["clusterwasmplugin", "thing"], "Ready")?
            .0
            == "True")
            .then_some(())
    })
    .await;
    assert_eq!(serving(&cluster, "thing"), signed);
    let (_, reason, _) = common::eventually(60, "unkeyed refused", || async {
        cluster
            .condition(&["clusterwasmplugin", "unkeyed"], "Verified")
            .filter(|c| c.0 == "False")
    })
    .await;
    assert_eq!(reason, "KeysRequired");
    assert_eq!(
        cluster
            .condition(&["clusterwasmplugin", "unkeyed"], "Ready")
            .unwrap()
            .0,
        "False"
    );

    // Unsigned: refused, the signed version serving on.
    let unsigned = push(&registry, &variant("2"), "v2", None);
    verified(&cluster, "thing", "SignatureMissing", &unsigned).await;
    assert_eq!(serving(&cluster, "thing"), signed);

    // Signed by another key: refused.
    let wrong_key = push(&registry, &variant("3"), "v3", Some(&stranger));
    verified(&cluster, "thing", "SignatureInvalid", &wrong_key).await;
    assert_eq!(serving(&cluster, "thing"), signed);

    // Signed by the right key, but over another digest (the first one's signature, copied).
    let copied = push(&registry, &variant("4"), "v4", None);
    let options = wasmctrl::plugins::oci::Options {
        insecure: vec![registry.addr.clone()],
        ..wasmctrl::plugins::oci::Options::default()
    };
    let client = wasmctrl::plugins::oci::Registry::new(&options).unwrap();
    let repository = format!("{}/plugins/thing", registry.addr);
    let payload = sign::payload(&repository, &signed);
    let signing = SigningKey::from_pem(&std::fs::read_to_string(&key).unwrap()).unwrap();
    let signature = signing.sign(&payload).unwrap();
    client
        .push_signature(&module, &copied, payload, signature)
        .await
        .unwrap();
    verified(&cluster, "thing", "SignatureInvalid", &copied).await;
    assert_eq!(serving(&cluster, "thing"), signed);
    // Meanwhile the serving version reconciles.
    common::things::create_reconciled(&cluster, "meanwhile").await;

    // Signed properly with `wasmctrl sign`: it loads.
    let at = format!("{}/plugins/thing@{copied}", registry.addr);
    wasmctrl(&[
        "sign",
        &at,
        "--key",
        key.to_str().unwrap(),
        "--insecure-registry",
        &registry.addr,
    ]);
    verified(&cluster, "thing", "Verified", &copied).await;
    common::eventually(60, "the signed version serving", || async {
        let status = cluster.get_json(&["clusterwasmplugin", "thing"])?["status"].clone();
        (status["digest"] == copied.as_str()).then_some(())
    })
    .await;
}
