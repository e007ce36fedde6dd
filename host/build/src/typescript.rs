//! TypeScript (and JavaScript) plugins: an npm project whose `package.json` names the plugin
//! and depends on the `wasmctrl` SDK, built into a component by the SDK's own build script
//! (type-check with the project's `tsc`, bundle with esbuild, componentize with
//! componentize-js: SpiderMonkey snapshotted after the module's top level ran).
//!
//! ```json
//! { "name": "virtualmachine-ts",              // the component is <name>.wasm
//!   "wasmctrl": { "entry": "src/index.ts" },  // optional; this is the default
//!   "dependencies": { "wasmctrl": "..." } }
//! ```
//!
//! The build runs `node <project>/node_modules/wasmctrl/bin/build.mjs --wit <the host's WIT>
//! --world plugin-with-webhooks --out <file> <project>`, so the project's dependencies must be
//! installed first (`npm ci`). `node` is `$WASMCTRL_NODE`, else the one on `PATH`.

use std::fs;
use std::path::Path;
use std::process::Command;

use serde::Deserialize;

use crate::{Built, Error, WORLD, is_plugin_name};

/// The environment variable naming the `node` to run.
pub const NODE_ENV: &str = "WASMCTRL_NODE";

/// Where the SDK's build script sits in an installed project.
const BUILD_SCRIPT: &str = "node_modules/wasmctrl/bin/build.mjs";

#[derive(Deserialize)]
struct PackageJson {
    name: Option<String>,
}

/// The plugin's name, from `<dir>/package.json`.
pub fn plugin_name(dir: &Path) -> Result<String, Error> {
    let fail = |detail: String| Error::Project {
        dir: dir.to_path_buf(),
        detail,
    };
    let text = fs::read_to_string(dir.join("package.json"))
        .map_err(|e| fail(format!("reading package.json: {e}")))?;
    let package: PackageJson =
        serde_json::from_str(&text).map_err(|e| fail(format!("package.json: {e}")))?;
    let name = package
        .name
        .ok_or_else(|| fail("package.json has no name".into()))?;
    if !is_plugin_name(&name) {
        return Err(fail(format!(
            "package.json: name {name:?} is not a plugin name (lowercase letters, digits, '-' \
             and '_', starting with a letter; no @scope)"
        )));
    }
    Ok(name)
}

/// Builds the npm project in `dir` into `<out_dir>/<name>.wasm` (default
/// `<dir>/target/plugins`). The build script's output goes to stderr as it happens.
pub fn build(dir: &Path, out_dir: Option<&Path>) -> Result<Built, Error> {
    let plugin = plugin_name(dir)?;
    let script = dir.join(BUILD_SCRIPT);
    if !script.is_file() {
        return Err(Error::Project {
            dir: dir.to_path_buf(),
            detail: format!(
                "{BUILD_SCRIPT} is missing: install the project's dependencies first (`npm ci`, \
                 or `npm install`), the `wasmctrl` SDK among them"
            ),
        });
    }
    let out_dir = out_dir.map_or_else(|| dir.join("target").join("plugins"), Path::to_path_buf);
    crate::in_scratch(
        &plugin,
        &out_dir,
        |scratch, component| Ok(build_script(&script, dir, &scratch.wit_dir(), component)),
        |_| "componentize-js".to_string(),
    )
}

fn build_script(script: &Path, dir: &Path, wit: &Path, out: &Path) -> Command {
    let node = std::env::var_os(NODE_ENV).unwrap_or_else(|| "node".into());
    let mut cmd = Command::new(node);
    cmd.arg(script)
        .arg("--wit")
        .arg(wit)
        .args(["--world", WORLD])
        .arg("--out")
        .arg(out)
        .arg(dir)
        .current_dir(dir);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(json: &str) -> Result<String, String> {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("package.json"), json).unwrap();
        plugin_name(dir.path()).map_err(|e| e.to_string())
    }

    #[test]
    fn the_package_name_names_the_plugin() {
        assert_eq!(name_of(r#"{"name": "vm-ts"}"#).unwrap(), "vm-ts");
        for (json, expected) in [
            ("{}", "package.json has no name"),
            (r#"{"name": "@acme/vm"}"#, "is not a plugin name"),
            ("{", "package.json: "),
        ] {
            let err = name_of(json).unwrap_err();
            assert!(err.contains(expected), "{json}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn a_project_without_its_dependencies_says_to_install_them() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("package.json"), r#"{"name": "vm-ts"}"#).unwrap();
        let err = build(dir.path(), None).unwrap_err().to_string();
        assert!(err.contains("npm ci"), "{err}");
    }
}
