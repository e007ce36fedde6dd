//! `wasmctrl inspect`: what a plugin declares and the permissions that implies, without running
//! a reconcile, so an operator can review a plugin (or a new version of one) before it serves.
//! Like `kwctl inspect` for Kubewarden policies.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::plugin::{Manifest, wit};
use crate::plugins::loader::{self, PluginConfig};
use crate::runtime::{Config, Plugin, Runtime};
use wasmctrl_core::Gvk;

/// Arguments of `wasmctrl inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin component (`target/plugins/<name>.wasm`), or an artifact in a registry
    /// (`oci://registry/repository:tag` or `@sha256:...`).
    plugin: PathBuf,
    /// The operator config to read it under (settings, namespaces); defaults to the config
    /// beside the plugin (`<name>.toml`/`.yaml`/`.json`), as the host would.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    output: Format,
    /// How to reach the registry of an `oci://` plugin.
    #[command(flatten)]
    registry: super::oci::RegistryArgs,
}

/// How `inspect` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// For people.
    Text,
    /// For tools.
    Json,
}

/// A runtime for loading plugins to review them (one instance at a time, nothing served).
pub(crate) fn review_runtime() -> anyhow::Result<Runtime> {
    let config = Config {
        max_instances: 1,
        ..Config::default()
    };
    Ok(Runtime::new(config)?)
}

/// Loads a plugin as the host would (compiling it and calling its `manifest()`) under its
/// operator config: `config`, else the one beside it. Returns the plugin and the config's path.
pub(crate) fn load(
    runtime: &Runtime,
    path: &Path,
    config: Option<PathBuf>,
) -> anyhow::Result<(Plugin, Option<PathBuf>)> {
    let bytes = loader::files::read(path)
        .with_context(|| format!("cannot read plugin {}", path.display()))?;
    let config_path = match config {
        Some(path) => Some(path),
        None => loader::config_beside(path).map_err(anyhow::Error::msg)?,
    };
    let plugin = load_bytes(
        runtime,
        &path.display().to_string(),
        &bytes,
        config_path.as_deref(),
    )?;
    Ok((plugin, config_path))
}

/// Loads the component `bytes` from `source` as the host would, under the operator config at
/// `config` (none: the defaults).
pub(crate) fn load_bytes(
    runtime: &Runtime,
    source: &str,
    bytes: &[u8],
    config: Option<&Path>,
) -> anyhow::Result<Plugin> {
    let config = match config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config {}", path.display()))?;
            PluginConfig::parse(path, &text)?
        }
        None => PluginConfig::default(),
    };
    let plugin = runtime.load_with(source, bytes, &config.overrides())?;
    config
        .check_narrows(plugin.manifest())
        .map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    Ok(plugin)
}

/// Loads the plugin (compiling it and calling its `manifest()`) and prints its declaration. A
/// plugin named `oci://registry/repository:tag` (or `@sha256:...`) is pulled first, by digest.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = review_runtime()?;
    let name = args.plugin.display().to_string();
    let mut report = if name.starts_with("oci://") {
        let (pulled, component) = super::oci::pull_blocking(&args.registry, &name)?;
        let config = args.config.as_deref();
        let plugin = load_bytes(&runtime, &name, &component, config)?;
        let mut report = report(&plugin, config.map(Path::to_path_buf));
        report["reference"] = json!(pulled.pinned);
        report
    } else {
        let (plugin, config_path) = load(&runtime, &args.plugin, args.config)?;
        report(&plugin, config_path)
    };
    report["file"] = json!(name);
    match args.output {
        Format::Json => super::say(serde_json::to_string_pretty(&report)?),
        Format::Text => super::say(text(&report)),
    }
    Ok(ExitCode::SUCCESS)
}

/// What a loaded plugin declares and the permissions that implies, as data (also the
/// annotation `wasmctrl push` puts on an artifact).
pub(crate) fn report(plugin: &Plugin, config_path: Option<PathBuf>) -> Value {
    let permissions: Vec<String> = (plugin.scope().permissions().iter())
        .map(ToString::to_string)
        .collect();
    json!({
        "plugin": plugin.manifest().name,
        "version": plugin.manifest().version,
        "digest": format!("sha256:{}", plugin.digest()),
        "contract": format!("wasmctrl:plugin@{}", plugin.contract()),
        "config": config_path.map(|p| p.display().to_string()),
        "manifest": declaration(plugin.manifest()),
        "namespaces": match plugin.scope().namespaces().names() {
            None => json!("all"),
            Some(names) => json!(names),
        },
        "permissions": permissions,
    })
}

/// The manifest as data.
fn declaration(m: &Manifest) -> Value {
    let kinds = |kinds: &[Gvk]| -> Vec<String> { kinds.iter().map(Gvk::to_string).collect() };
    json!({
        "watches": {
            "kind": m.kind().to_string(),
            "namespaces": m.namespaces(),
            "labels": m.selector.to_string(),
            "predicates": m.predicates.iter().map(predicate).collect::<Vec<_>>(),
        },
        "owns": kinds(m.owns()),
        "reads": m.reads.iter().map(|r| json!({
            "kind": r.kind.to_string(),
            "namespaces": r.namespaces,
            "labels": r.selector.to_string(),
            "trigger": r.trigger.as_ref().map(mapping),
        })).collect::<Vec<_>>(),
        "writes": kinds(m.writes()),
        "capabilities": m.capabilities(),
    })
}

/// A predicate by its name in the contract.
fn predicate(p: &wit::Predicate) -> &'static str {
    match p {
        wit::Predicate::GenerationChanged => "generation-changed",
        wit::Predicate::LabelsChanged => "labels-changed",
        wit::Predicate::AnnotationsChanged => "annotations-changed",
        wit::Predicate::FinalizersChanged => "finalizers-changed",
    }
}

/// A trigger mapping by its name in the contract.
fn mapping(m: &wit::Mapping) -> String {
    match m {
        wit::Mapping::Owner => "owner".into(),
        wit::Mapping::SameName => "same-name".into(),
        wit::Mapping::Label(l) => format!("label {l}"),
        wit::Mapping::Annotation(a) => format!("annotation {a}"),
        wit::Mapping::Namespace => "namespace".into(),
    }
}

/// The report for people: one line per fact, the permissions last.
fn text(report: &Value) -> String {
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    let list = |v: &Value| {
        let items: Vec<String> = v.as_array().into_iter().flatten().map(s).collect();
        if items.is_empty() {
            "-".into()
        } else {
            items.join(", ")
        }
    };
    let m = &report["manifest"];
    let w = &m["watches"];
    let mut watches = s(&w["kind"]);
    if !w["labels"].as_str().unwrap_or_default().is_empty() {
        watches += &format!(" where {}", s(&w["labels"]));
    }
    if !list(&w["predicates"]).starts_with('-') {
        watches += &format!(" (on {})", list(&w["predicates"]));
    }
    let reads: Vec<String> = m["reads"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let mut line = s(&r["kind"]);
            if !r["labels"].as_str().unwrap_or_default().is_empty() {
                line += &format!(" where {}", s(&r["labels"]));
            }
            if !r["trigger"].is_null() {
                line += &format!(" (triggers by {})", s(&r["trigger"]));
            }
            line
        })
        .collect();
    let mut out = vec![
        format!(
            "plugin:       {} {}",
            s(&report["plugin"]),
            s(&report["version"])
        ),
        format!("file:         {}", s(&report["file"])),
    ];
    if !report["reference"].is_null() {
        out.push(format!("reference:    {}", s(&report["reference"])));
    }
    out.extend([
        format!("digest:       {}", s(&report["digest"])),
        format!("contract:     {}", s(&report["contract"])),
        format!("config:       {}", s(&report["config"])),
        format!(
            "namespaces:   {}",
            s(&report["namespaces"]).replace('"', "")
        ),
        format!("watches:      {watches}"),
        format!("owns:         {}", list(&m["owns"])),
        format!(
            "reads:        {}",
            if reads.is_empty() {
                "-".into()
            } else {
                reads.join(", ")
            }
        ),
        format!("writes:       {}", list(&m["writes"])),
        format!("capabilities: {}", list(&m["capabilities"])),
        "permissions:".into(),
    ]);
    out.extend(
        report["permissions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| format!("  {}", s(p))),
    );
    out.join("\n")
}
