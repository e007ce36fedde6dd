//! Python plugins: a project directory whose `pyproject.toml` names the plugin and its
//! reconciler class, built into a component by componentize-py (CPython compiled to wasm, with
//! the plugin's modules imported and the interpreter's memory snapshotted at build time).
//!
//! ```toml
//! [project]
//! name = "virtualmachine-py"          # the component is <name>.wasm
//!
//! [tool.wasmctrl]
//! plugin = "virtualmachine:VirtualMachineController"   # module:class
//! sdk-path = "../../sdk/python/src"   # optional: the `wasmctrl` package, when not installed
//! ```
//!
//! The build writes the contract's WIT and a two-line entry module that exports the class
//! through the SDK's `wasmctrl.guest.export` into a scratch directory, then runs
//! `componentize-py -d <wit> -w plugin-with-webhooks componentize -p <entry> -p <project>
//! [-p <project>/src] [-p <sdk-path>] wasmctrl_entry -o <out>`. componentize-py is
//! `$WASMCTRL_COMPONENTIZE_PY`, else `componentize-py` on `PATH`; it also bundles the pure-Python
//! packages of the environment it runs in (where `pip install wasmctrl` puts the SDK).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use crate::{Built, Error, WORLD, is_plugin_name};

/// The environment variable naming the componentize-py to run.
pub const COMPONENTIZE_PY_ENV: &str = "WASMCTRL_COMPONENTIZE_PY";

/// The module `wasmctrl build` writes, which componentize-py is asked to componentize.
const ENTRY_MODULE: &str = "wasmctrl_entry";

/// What `pyproject.toml` says about the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// `[project] name`: the component is `<name>.wasm`.
    pub name: String,
    /// The module that defines the reconciler class (dotted).
    pub module: String,
    /// The reconciler class.
    pub class: String,
    /// `[tool.wasmctrl] sdk-path`, resolved against the project directory.
    pub sdk_path: Option<PathBuf>,
}

#[derive(Deserialize)]
struct PyProject {
    project: Option<ProjectTable>,
    tool: Option<ToolTable>,
}

#[derive(Deserialize)]
struct ProjectTable {
    name: Option<String>,
}

#[derive(Deserialize)]
struct ToolTable {
    wasmctrl: Option<WasmctrlTable>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct WasmctrlTable {
    plugin: Option<String>,
    sdk_path: Option<PathBuf>,
}

impl Project {
    /// Reads `<dir>/pyproject.toml`.
    pub fn read(dir: &Path) -> Result<Self, Error> {
        let fail = |detail: String| Error::Project {
            dir: dir.to_path_buf(),
            detail,
        };
        let text = fs::read_to_string(dir.join("pyproject.toml"))
            .map_err(|e| fail(format!("reading pyproject.toml: {e}")))?;
        Self::parse(dir, &text).map_err(fail)
    }

    fn parse(dir: &Path, text: &str) -> Result<Self, String> {
        let file: PyProject =
            toml::from_str(text).map_err(|e| format!("pyproject.toml: {}", e.message()))?;
        let name =
            (file.project.and_then(|p| p.name)).ok_or("pyproject.toml has no [project] name")?;
        if !is_plugin_name(&name) {
            return Err(format!(
                "pyproject.toml: [project] name {name:?} is not a plugin name (lowercase \
                 letters, digits, '-' and '_', starting with a letter)"
            ));
        }
        let table = (file.tool.and_then(|t| t.wasmctrl)).ok_or(
            "pyproject.toml has no [tool.wasmctrl] table naming the reconciler \
             (plugin = \"module:Class\")",
        )?;
        let plugin = table
            .plugin
            .ok_or("pyproject.toml: [tool.wasmctrl] has no plugin = \"module:Class\"")?;
        let (module, class) = plugin
            .split_once(':')
            .filter(|(m, c)| m.split('.').all(is_identifier) && is_identifier(c))
            .ok_or_else(|| {
                format!("pyproject.toml: [tool.wasmctrl] plugin {plugin:?} is not \"module:Class\"")
            })?;
        Ok(Self {
            name,
            module: module.to_string(),
            class: class.to_string(),
            sdk_path: table.sdk_path.map(|p| dir.join(p)),
        })
    }

    /// The entry module: the world's two export classes, from the plugin's class.
    fn entry(&self) -> String {
        format!(
            "# Written by `wasmctrl build`: the component's exports, from the plugin's class.\n\
             from wasmctrl.guest import export as _export\n\
             from {} import {} as _Plugin\n\
             Reconciler, Webhooks = _export(_Plugin)\n",
            self.module, self.class
        )
    }
}

/// Builds the Python project in `dir` into `<out_dir>/<name>.wasm` (default
/// `<dir>/target/plugins`). componentize-py's output goes to stderr as it happens.
pub fn build(dir: &Path, out_dir: Option<&Path>) -> Result<Built, Error> {
    let project = Project::read(dir)?;
    let out_dir = out_dir.map_or_else(|| dir.join("target").join("plugins"), Path::to_path_buf);
    crate::in_scratch(
        &project.name,
        &out_dir,
        |scratch, component| {
            let entry = scratch.entry_dir();
            fs::create_dir_all(&entry)?;
            fs::write(entry.join(format!("{ENTRY_MODULE}.py")), project.entry())?;
            Ok(componentize_py(
                &project,
                dir,
                &scratch.wit_dir(),
                &entry,
                component,
            ))
        },
        |component| match crate::immortal::immortalize(component) {
            Ok(Some(done)) => format!(
                "componentize-py, {} snapshot objects immortal",
                done.objects
            ),
            Ok(None) => "componentize-py".to_string(),
            // A saving, not a requirement: a snapshot it cannot read is kept as it was made.
            Err(why) => format!("componentize-py; snapshot objects left mortal: {why}"),
        },
    )
}

/// The componentize-py command line: the project's modules (and `src/`, and the SDK when the
/// project says where it is) on the interpreter's path, the entry module componentized.
fn componentize_py(project: &Project, dir: &Path, wit: &Path, entry: &Path, out: &Path) -> Command {
    let program = std::env::var_os(COMPONENTIZE_PY_ENV).unwrap_or_else(|| "componentize-py".into());
    let mut cmd = Command::new(program);
    cmd.arg("-d").arg(wit).args(["-w", WORLD, "componentize"]);
    let src = dir.join("src");
    let paths = [Some(entry.to_path_buf()), Some(dir.to_path_buf())]
        .into_iter()
        .chain([src.is_dir().then_some(src), project.sdk_path.clone()]);
    for path in paths.flatten() {
        cmd.arg("-p").arg(path);
    }
    cmd.arg(ENTRY_MODULE).arg("-o").arg(out).current_dir(dir);
    cmd
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Project, String> {
        Project::parse(Path::new("/p"), text)
    }

    #[test]
    fn a_project_names_its_plugin_class_and_sdk() {
        let project = parse(
            "[project]\nname = \"vm-py\"\n[tool.wasmctrl]\nplugin = \"pkg.vm:Controller\"\n\
             sdk-path = \"../sdk\"\n",
        )
        .unwrap();
        assert_eq!(
            project,
            Project {
                name: "vm-py".into(),
                module: "pkg.vm".into(),
                class: "Controller".into(),
                sdk_path: Some(PathBuf::from("/p/../sdk")),
            }
        );
        assert!(
            project
                .entry()
                .contains("from pkg.vm import Controller as _Plugin\n")
        );
    }

    #[test]
    fn what_is_missing_or_malformed_is_named() {
        let cases = [
            ("[tool.wasmctrl]\nplugin = \"a:B\"\n", "no [project] name"),
            ("[project]\nname = \"Vm\"\n", "is not a plugin name"),
            ("[project]\nname = \"vm\"\n", "no [tool.wasmctrl] table"),
            (
                "[project]\nname = \"vm\"\n[tool.wasmctrl]\n",
                "has no plugin =",
            ),
            (
                "[project]\nname = \"vm\"\n[tool.wasmctrl]\nplugin = \"os; rm:X\"\n",
                "is not \"module:Class\"",
            ),
            (
                "[project]\nname = \"vm\"\n[tool.wasmctrl]\nplugin = \"a:B\"\nother = 1\n",
                "unknown field `other`",
            ),
            ("[project\n", "pyproject.toml: "),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }
}
