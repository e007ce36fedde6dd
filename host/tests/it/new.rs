//! `wasmctrl new` as a user runs it, in each language: the plugin it writes (SDK by path, in a
//! temporary directory) passes its own tests (`cargo test`, CRD drift included; pytest; `npm
//! test`), builds into a component, and `wasmctrl test` on its sample applies the owned child
//! and reports a Ready condition.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::repo_root().join("target"))
}

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("run a command");
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn wasmctrl(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wasmctrl"));
    command.args(args);
    command
}

#[test]
fn a_new_plugin_crate_tests_builds_and_reconciles_its_sample_as_generated() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("website");
    let dir_arg = dir.to_str().unwrap();
    new_in("rust", &dir);
    for file in [
        "Cargo.toml",
        "src/lib.rs",
        "crd.yaml",
        "sample.yaml",
        "README.md",
    ] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    // Writing over it again is refused.
    let again = wasmctrl(&[
        "new", "website", "--group", "a.b", "--kind", "W", "--dir", dir_arg,
    ])
    .output()
    .unwrap();
    assert!(!again.status.success());

    // The workspace's lock file pins the same dependency versions the SDK is tested with.
    std::fs::copy(
        common::repo_root().join("Cargo.lock"),
        dir.join("Cargo.lock"),
    )
    .unwrap();
    // Its own target directory: the workspace's is locked while `cargo test` runs this test.
    let native = target_dir().join("new-plugin-test");
    run(Command::new(env!("CARGO"))
        .args(["test", "--quiet"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &native)
        .env_remove("WASMCTRL_UPDATE_CRDS"));

    // Built as its README says (`--dev`), into the workspace's wasm target, where `make
    // test-plugins` built std for that profile already.
    let plugins = tmp.path().join("plugins");
    let out = run(wasmctrl(&[
        "build",
        "--dev",
        dir_arg,
        "--out-dir",
        plugins.to_str().unwrap(),
    ])
    .env("CARGO_TARGET_DIR", target_dir()));
    let wasm = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert_eq!(wasm, plugins.join("website.wasm"));

    reconciles_its_sample(&wasm, &dir.join("sample.yaml"));
    embedding_kubernetes_types_needs_only_the_sdk(&dir, &native);
}

/// `wasmctrl test` of the plugin `new` wrote, on its sample: it applies the owned ConfigMap
/// with the sample's message and reports `Ready`.
fn reconciles_its_sample(wasm: &Path, sample: &Path) {
    let report = common::process::wasmctrl_test_report(&[
        wasm.to_str().unwrap(),
        "--object",
        sample.to_str().unwrap(),
    ]);
    assert_eq!(report["plugin"], "website", "{report:#}");
    let actions = report["actions"].as_array().unwrap();
    let apply = actions
        .iter()
        .find(|a| a["action"] == "apply")
        .expect("an apply");
    assert_eq!(apply["object"]["kind"], "ConfigMap");
    assert_eq!(
        apply["object"]["data"]["message"],
        "hello from website-sample"
    );
    assert_eq!(
        apply["object"]["metadata"]["ownerReferences"][0]["kind"],
        "Website"
    );
    let status = actions
        .iter()
        .find(|a| a["action"] == "updateStatus")
        .expect("a status update");
    let ready = &status["status"]["conditions"][0];
    assert_eq!(
        (&ready["type"], &ready["status"]),
        (&"Ready".into(), &"True".into())
    );
}

/// `wasmctrl new --lang <lang>` of the Website plugin owning a ConfigMap and a Deployment, on
/// the checkout's SDK, into `dir`.
fn new_in(lang: &str, dir: &Path) {
    let sdk = common::repo_root().join("sdk");
    let dir_arg = dir.to_str().unwrap();
    let out = run(&mut wasmctrl(&[
        "new",
        "website",
        "--group",
        "apps.example.com",
        "--kind",
        "Website",
        "--owns",
        "v1/ConfigMap",
        "--owns",
        "apps/v1/Deployment",
        "--sdk-path",
        sdk.to_str().unwrap(),
        "--lang",
        lang,
        "--dir",
        dir_arg,
    ]));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), dir_arg);
}

/// Builds the plugin in `dir` into `<tmp>/plugins/website.wasm` with `wasmctrl build`.
fn build(dir: &Path, tmp: &Path, envs: &[(&str, PathBuf)]) -> PathBuf {
    let plugins = tmp.join("plugins");
    let mut command = wasmctrl(&[
        "build",
        dir.to_str().unwrap(),
        "--out-dir",
        plugins.to_str().unwrap(),
    ]);
    command.envs(envs.iter().map(|(k, v)| (k, v)));
    let wasm = PathBuf::from(String::from_utf8_lossy(&run(&mut command).stdout).trim());
    assert_eq!(wasm, plugins.join("website.wasm"));
    wasm
}

#[test]
fn a_new_python_plugin_tests_builds_and_reconciles_its_sample_as_generated() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("website");
    new_in("python", &dir);
    for file in [
        "pyproject.toml",
        "website.py",
        "tests/test_website.py",
        "crd.yaml",
    ] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    // `make deps` installs pytest and componentize-py there.
    let python = target_dir().join("tools/python/bin");
    run(Command::new(python.join("python"))
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .current_dir(&dir));
    let componentize = python.join("componentize-py");
    let wasm = build(
        &dir,
        tmp.path(),
        &[("WASMCTRL_COMPONENTIZE_PY", componentize)],
    );
    reconciles_its_sample(&wasm, &dir.join("sample.yaml"));
}

#[test]
fn a_new_typescript_plugin_tests_builds_and_reconciles_its_sample_as_generated() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("website");
    new_in("typescript", &dir);
    for file in [
        "package.json",
        "src/controller.ts",
        "test/controller.test.ts",
        "crd.yaml",
    ] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    // From npm's cache only: `make deps` installed the same TypeScript and Node types for the
    // repository's TypeScript plugins, and tests do not reach beyond loopback.
    let npm = |args: &[&str]| {
        run(Command::new("npm").args(args).current_dir(&dir));
    };
    npm(&[
        "install",
        "--offline",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
    ]);
    npm(&["test", "--silent"]);
    let wasm = build(&dir, tmp.path(), &[]);
    reconciles_its_sample(&wasm, &dir.join("sample.yaml"));
}

/// Kubebuilder's CronJob embeds a `JobTemplateSpec`: the crate as generated (the SDK its only
/// Kubernetes dependency) takes one, its CRD generated with the Pod template's descriptions is
/// too large for a plain `kubectl apply`, and trimmed (`check_crd_trimmed`) it applies.
fn embedding_kubernetes_types_needs_only_the_sdk(dir: &Path, native: &Path) {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
    for crate_name in ["schemars", "k8s-openapi", "kube"] {
        let dependency = format!("\n{crate_name} =");
        assert!(
            !manifest.contains(&dependency),
            "{crate_name} in {manifest}"
        );
    }
    let lib = dir.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).expect("src/lib.rs");
    let with_jobs = source
        .replacen(
            "    pub message: String,\n",
            "    pub message: String,\n    /// The Jobs it runs.\n    #[serde(default)]\n    \
             pub job_template: Option<wasmctrl_sdk::k8s_openapi::api::batch::v1::JobTemplateSpec>,\n",
            1,
        )
        .replacen(
            "wasmctrl_sdk::testing::check_crd::<Website>(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/crd.yaml\"));",
            "wasmctrl_sdk::testing::check_crd::<Website>(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/crd-full.yaml\"));\n        \
             wasmctrl_sdk::testing::check_crd_trimmed::<Website>(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/crd.yaml\"), 0);",
            1,
        );
    assert!(with_jobs.contains("job_template") && with_jobs.contains("check_crd_trimmed"));
    std::fs::write(&lib, with_jobs).expect("src/lib.rs");
    let test = |update: bool| {
        let mut cargo = Command::new(env!("CARGO"));
        cargo
            .args(["test", "--quiet", "crd_yaml_is_generated_from_the_types"])
            .current_dir(dir)
            .env("CARGO_TARGET_DIR", native)
            .env_remove("WASMCTRL_UPDATE_CRDS");
        if update {
            cargo.env("WASMCTRL_UPDATE_CRDS", "1");
        }
        run(&mut cargo);
    };
    test(true);
    test(false);
    let full = std::fs::read_to_string(dir.join("crd-full.yaml")).expect("crd-full.yaml");
    let trimmed = std::fs::read_to_string(dir.join("crd.yaml")).expect("crd.yaml");
    assert!(full.contains("jobTemplate") && trimmed.contains("jobTemplate"));
    assert!(!trimmed.contains("description:"), "descriptions dropped");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let server = rt.block_on(async { wasmctrl::apiserver::ApiServer::builder().build() });
    let server = server.expect("an API server");
    let http = rt.block_on(server.serve(([127, 0, 0, 1], 0).into()));
    let http = http.expect("serving on loopback");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, http.kubeconfig()).expect("kubeconfig");
    let apply = |file: &str| {
        let path = dir.join(file);
        common::process::kubectl(&kubeconfig, &["apply", "-f", &path.display().to_string()])
    };
    let (ok, out) = apply("crd-full.yaml");
    assert!(
        !ok && out.contains("Too long"),
        "{full_len} bytes applied: {out}",
        full_len = full.len()
    );
    let (ok, out) = apply("crd.yaml");
    assert!(ok, "{out}");
}
