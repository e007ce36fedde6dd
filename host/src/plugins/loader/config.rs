//! The operator's config beside a plugin: `<stem>.toml` (or `.yaml`, `.yml`, `.json`) next to
//! `<stem>.wasm`. It hands the plugin its settings and narrows what the host gives it; it can
//! never widen what the plugin's manifest declares.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::identity::Account;
use crate::plugin::Manifest;
use crate::runtime::Overrides;

/// Config file extensions, in the order they are looked for beside a `.wasm`.
pub const EXTENSIONS: [&str; 4] = ["toml", "yaml", "yml", "json"];

/// One plugin's operator config. Unknown keys are errors so that a typo (`concurency = 4`) is
/// reported instead of silently falling back to a default.
///
/// ```toml
/// concurrency = 4
/// namespaces = ["prod"]
/// deadline_ms = 500
/// name = "vm-team-a"   # serve it under this name instead of its manifest's
///
/// [settings]
/// mode = "strict"
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// The `[settings]` table, handed to the plugin's `manifest()` and every reconcile as JSON.
    /// `Null` when absent, which the SDK reads as "no settings" (every field at its default).
    #[serde(default)]
    pub settings: serde_json::Value,
    /// Workers for this plugin; `None` leaves it to the controller's default.
    pub concurrency: Option<usize>,
    /// Watch only these namespaces; must be a subset of the manifest's when it names any.
    pub namespaces: Option<Vec<String>>,
    /// Per-call deadline in milliseconds; `None` keeps the runtime's.
    pub deadline_ms: Option<u64>,
    /// Permissions (as `wasmctrl inspect` prints them) a new version of the plugin may add to
    /// what the version it replaces had. A new version asking for anything else is refused.
    #[serde(default)]
    pub approve: Vec<String>,
    /// Serve the plugin under this name (a DNS-1123 label) instead of the one its manifest
    /// declares, so that one plugin file can be loaded several times (copies with different
    /// settings or namespaces). The name is its identity: queue, metrics, field manager, RBAC.
    pub name: Option<String>,
    /// The memory cap of one instance, in MiB; it can only lower the host's `--memory-mib`.
    pub memory_mib: Option<usize>,
    /// Set for a tenant's plugin (a namespaced `WasmPlugin`), never from a file: the namespace
    /// it is confined to.
    #[serde(skip)]
    pub tenant: Option<String>,
    /// Set for a tenant's plugin, never from a file: the ServiceAccount (of the tenant's
    /// namespace) whose rights every request for it uses.
    #[serde(skip)]
    pub account: Option<Account>,
}

/// A config file that could not be read or does not describe a valid config.
#[derive(Debug, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct ConfigError {
    /// The config file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

impl PluginConfig {
    /// Parses `text`, the content of `path`, in the format its extension names.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let fail = |reason: String| ConfigError {
            path: path.to_path_buf(),
            reason,
        };
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let config: Self = match ext {
            "toml" => toml::from_str(text).map_err(|e| fail(e.to_string()))?,
            "yaml" | "yml" => serde_yaml::from_str(text).map_err(|e| fail(e.to_string()))?,
            "json" => serde_json::from_str(text).map_err(|e| fail(e.to_string()))?,
            other => return Err(fail(format!("unknown config format {other:?}"))),
        };
        config.validate().map_err(fail)?;
        Ok(config)
    }

    /// The settings as the plugin receives them: JSON, or empty for "no settings".
    pub fn settings_json(&self) -> String {
        if self.settings.is_null() {
            String::new()
        } else {
            self.settings.to_string()
        }
    }

    /// The per-call deadline, if the operator set one.
    pub fn deadline(&self) -> Option<Duration> {
        self.deadline_ms.map(Duration::from_millis)
    }

    /// What the runtime needs of this config to load the plugin under it.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            settings: self.settings_json(),
            namespaces: self.namespaces.clone(),
            deadline: self.deadline(),
            name: self.name.clone(),
            confine: self.tenant.clone(),
            memory_limit: self.memory_mib.map(|m| m << 20),
        }
    }

    fn validate(&self) -> Result<(), String> {
        if self.concurrency == Some(0) {
            return Err("concurrency must be at least 1".into());
        }
        if self.memory_mib == Some(0) {
            return Err("memory_mib must be at least 1".into());
        }
        if self.deadline_ms == Some(0) {
            return Err("deadline_ms must be at least 1".into());
        }
        if let Some(namespaces) = &self.namespaces {
            if namespaces.is_empty() {
                // An empty list would read as "all namespaces" downstream: the opposite of
                // what someone narrowing to nothing meant.
                return Err("namespaces must not be empty; omit it to keep the plugin's".into());
            }
            if namespaces.iter().any(|n| n.is_empty()) {
                return Err("namespaces must not contain an empty name".into());
            }
        }
        Ok(())
    }

    /// Checks that the config only narrows the manifest: its namespaces must be among the ones
    /// the plugin declared (when the plugin declared any; none means all).
    pub fn check_narrows(&self, manifest: &Manifest) -> Result<(), String> {
        let (Some(wanted), false) = (&self.namespaces, manifest.namespaces().is_empty()) else {
            return Ok(());
        };
        let outside: Vec<&str> = wanted
            .iter()
            .filter(|n| !manifest.namespaces().contains(n))
            .map(String::as_str)
            .collect();
        if outside.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "namespaces {outside:?} are outside the ones plugin {} watches ({:?}); \
                 the config can only narrow them",
                manifest.name,
                manifest.namespaces()
            ))
        }
    }
}

/// The config file beside `wasm` (same directory, same name without `.wasm` or `.wasm.gz`), if
/// any. More than one is an error:
/// which one wins would otherwise depend on a lookup order the operator cannot see.
pub fn beside(wasm: &Path) -> Result<Option<PathBuf>, String> {
    let (Some(dir), Some(stem)) = (wasm.parent(), super::files::stem(wasm)) else {
        return Ok(None);
    };
    let found: Vec<PathBuf> = EXTENSIONS
        .iter()
        .map(|ext| dir.join(format!("{stem}.{ext}")))
        // `is_file` follows symlinks: ConfigMap keys are symlinks into `..data`.
        .filter(|p| p.is_file())
        .collect();
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        many => Err(format!(
            "more than one config for {}: {}",
            wasm.display(),
            many.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn toml_yaml_and_json_read_the_same() {
        let toml =
            "concurrency = 2\nnamespaces = [\"a\"]\ndeadline_ms = 50\n[settings]\nmode = \"x\"\n";
        let yaml = "concurrency: 2\nnamespaces: [a]\ndeadline_ms: 50\nsettings:\n  mode: x\n";
        let json =
            r#"{"concurrency":2,"namespaces":["a"],"deadline_ms":50,"settings":{"mode":"x"}}"#;
        let expected = PluginConfig {
            settings: json!({"mode": "x"}),
            concurrency: Some(2),
            namespaces: Some(vec!["a".into()]),
            deadline_ms: Some(50),
            approve: Vec::new(),
            name: None,
            memory_mib: None,
            ..PluginConfig::default()
        };
        for (file, text) in [("p.toml", toml), ("p.yaml", yaml), ("p.json", json)] {
            assert_eq!(
                PluginConfig::parse(Path::new(file), text).unwrap(),
                expected
            );
        }
        assert_eq!(expected.settings_json(), r#"{"mode":"x"}"#);
    }

    #[test]
    fn empty_config_means_no_settings() {
        let config = PluginConfig::parse(Path::new("p.toml"), "").unwrap();
        assert_eq!(config, PluginConfig::default());
        assert_eq!(config.settings_json(), "");
    }

    #[test]
    fn typos_and_nonsense_are_errors_naming_the_file() {
        let err = PluginConfig::parse(Path::new("/plugins/vm.toml"), "concurency = 4").unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with("/plugins/vm.toml: "), "{message}");
        assert!(message.contains("concurency"), "{message}");
        for bad in ["concurrency = 0", "deadline_ms = 0", "namespaces = []"] {
            assert!(
                PluginConfig::parse(Path::new("vm.toml"), bad).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn namespaces_can_only_narrow_the_manifest() {
        let manifest = Manifest::placeholder();
        let config = |ns: &[&str]| PluginConfig {
            namespaces: Some(ns.iter().map(|n| n.to_string()).collect()),
            ..PluginConfig::default()
        };
        // The plugin watches all namespaces: any narrowing is fine.
        assert!(config(&["a"]).check_narrows(&manifest).is_ok());
        // The WIT types deserialize from their serde form (kebab-case records).
        let declared: crate::plugin::wit::Manifest = serde_json::from_value(serde_json::json!({
            "name": "p", "version": "1",
            "watches": {"kind": {"group": "example.com", "version": "v1", "kind": "Thing"},
                "selector": {"namespaces": ["a", "b"], "labels": ""}, "predicates": []},
            "owns": [], "reads": [], "writes": [], "capabilities": []}))
        .unwrap();
        let manifest = Manifest::from_wit(&declared).unwrap();
        assert!(config(&["b"]).check_narrows(&manifest).is_ok());
        let err = config(&["a", "c"]).check_narrows(&manifest).unwrap_err();
        assert!(err.contains(r#"["c"]"#), "{err}");
        assert!(PluginConfig::default().check_narrows(&manifest).is_ok());
    }
}
