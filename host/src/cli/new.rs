//! `wasmctrl new`: a standalone plugin to start from, as `kubebuilder create api` gives a Go
//! operator one, in Rust (a crate), Python or TypeScript (`--lang`). It builds, tests and runs as
//! written: a reconciler that applies an owned child and reports a `Ready` condition, native
//! tests, its CRD (in Rust generated from its types, a test keeping it current), a sample object
//! and a README with the commands.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use wasmctrl_core::Gvk;

/// Arguments of `wasmctrl new`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin's name: the crate's and the manifest's (`wasmctrl/<name>` is its field
    /// manager). Lowercase letters, digits and '-', starting with a letter.
    name: String,
    /// API group of the custom resource it reconciles (`apps.example.com`).
    #[arg(long)]
    group: String,
    /// Its API version.
    #[arg(long, default_value = "v1alpha1")]
    version: String,
    /// Its kind, UpperCamelCase (`Website`).
    #[arg(long)]
    kind: String,
    /// Its plural resource name; by default the lowercase kind made plural (`websites`).
    #[arg(long)]
    plural: Option<String>,
    /// A kind of child it owns, as `group/version/Kind` (`apps/v1/Deployment`; `v1/ConfigMap`
    /// for the core group). Repeatable; the first is the child the reconciler applies.
    /// Default: `v1/ConfigMap`.
    #[arg(long = "owns", value_name = "GROUP/VERSION/KIND")]
    owns: Vec<String>,
    /// Take the SDK from a checkout of wasmctrl's `sdk/` at this path instead of the package
    /// registry's release: `wasmctrl-sdk` there, its `python/src` for Python, its `typescript`
    /// for TypeScript.
    #[arg(long)]
    sdk_path: Option<PathBuf>,
    /// The language to write the plugin in.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    lang: Lang,
    /// Where to write the crate; by default `./<name>`. It must not exist or be empty.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// The languages `wasmctrl new` writes plugins in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A cdylib crate on `wasmctrl-sdk` (built by cargo).
    Rust,
    /// A project on the `wasmctrl` Python package (built by componentize-py).
    Python,
    /// An npm project on the `wasmctrl` npm package (built by componentize-js).
    Typescript,
}

const SAMPLE_YAML: &str = include_str!("new/sample.yaml.tmpl");

/// Each file written for `lang`, as a path in the project (`__CRATE_IDENT__` filled in too)
/// and its template.
fn templates(lang: Lang) -> &'static [(&'static str, &'static str)] {
    match lang {
        Lang::Rust => &[
            ("Cargo.toml", include_str!("new/Cargo.toml.tmpl")),
            ("src/lib.rs", include_str!("new/lib.rs.tmpl")),
            ("crd.yaml", include_str!("new/crd.yaml.tmpl")),
            ("sample.yaml", SAMPLE_YAML),
            ("README.md", include_str!("new/README.md.tmpl")),
        ],
        Lang::Python => &[
            (
                "pyproject.toml",
                include_str!("new/python/pyproject.toml.tmpl"),
            ),
            (
                "__CRATE_IDENT__.py",
                include_str!("new/python/plugin.py.tmpl"),
            ),
            (
                "tests/test___CRATE_IDENT__.py",
                include_str!("new/python/test_plugin.py.tmpl"),
            ),
            ("crd.yaml", include_str!("new/python/crd.yaml.tmpl")),
            ("sample.yaml", SAMPLE_YAML),
            ("README.md", include_str!("new/python/README.md.tmpl")),
        ],
        Lang::Typescript => &[
            (
                "package.json",
                include_str!("new/typescript/package.json.tmpl"),
            ),
            (
                "tsconfig.json",
                include_str!("new/typescript/tsconfig.json.tmpl"),
            ),
            (
                "tsconfig.test.json",
                include_str!("new/typescript/tsconfig.test.json.tmpl"),
            ),
            (".gitignore", include_str!("new/typescript/gitignore.tmpl")),
            (
                "src/controller.ts",
                include_str!("new/typescript/src/controller.ts.tmpl"),
            ),
            (
                "src/index.ts",
                include_str!("new/typescript/src/index.ts.tmpl"),
            ),
            (
                "test/controller.test.ts",
                include_str!("new/typescript/test/controller.test.ts.tmpl"),
            ),
            ("crd.yaml", include_str!("new/typescript/crd.yaml.tmpl")),
            ("sample.yaml", SAMPLE_YAML),
            ("README.md", include_str!("new/typescript/README.md.tmpl")),
        ],
    }
}

/// A `group/version/Kind` from the command line (`--owns`).
fn parse_kind(text: &str) -> anyhow::Result<Gvk> {
    let parts: Vec<&str> = text.split('/').collect();
    let (group, version, kind) = match parts[..] {
        [version, kind] => ("", version, kind),
        [group, version, kind] => (group, version, kind),
        _ => bail!("--owns {text:?}: expected group/version/Kind (v1/Kind for the core group)"),
    };
    check_group(group).with_context(|| format!("--owns {text:?}"))?;
    check_version(version).with_context(|| format!("--owns {text:?}"))?;
    check_kind(kind).with_context(|| format!("--owns {text:?}"))?;
    Ok(Gvk::new(group, version, kind))
}

/// The Rust expression that makes `kind` in a plugin.
fn gvk_expr(kind: &Gvk) -> String {
    format!(
        "wasmctrl_sdk::Gvk::new({:?}, {:?}, {:?})",
        kind.group, kind.version, kind.kind
    )
}

fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        bail!(
            "plugin name {name:?}: use lowercase letters, digits and '-', starting with a letter (at most 63)"
        );
    }
    Ok(())
}

fn check_group(group: &str) -> anyhow::Result<()> {
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if group.len() > 253 || (!group.is_empty() && !group.split('.').all(label)) {
        bail!("group {group:?} is not a DNS subdomain (lowercase, dot-separated labels)");
    }
    Ok(())
}

fn check_version(version: &str) -> anyhow::Result<()> {
    let rest = version.strip_prefix('v').unwrap_or("");
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let tail = &rest[digits..];
    let ok = digits > 0
        && (tail.is_empty()
            || ["alpha", "beta"].iter().any(|stage| {
                tail.strip_prefix(stage)
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            }));
    if !ok {
        bail!("version {version:?}: expected v1, v2beta1, v1alpha3, ...");
    }
    Ok(())
}

fn check_kind(kind: &str) -> anyhow::Result<()> {
    let ok = kind.starts_with(|c: char| c.is_ascii_uppercase())
        && kind.chars().all(|c| c.is_ascii_alphanumeric())
        && kind.len() <= 63;
    if !ok {
        bail!("kind {kind:?}: expected UpperCamelCase letters and digits (Website)");
    }
    Ok(())
}

/// The usual English plural of a lowercase kind, as Kubernetes' own resources have it.
fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|s| lower.ends_with(s))
    {
        return format!("{lower}es");
    }
    format!("{lower}s")
}

/// Writes the plugin; prints its directory and the next commands.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (plural, owns) = checked(&args)?;
    let dir = empty_dir(&args)?;
    let mut values = placeholders(&args, &plural, &owns);
    values.extend(match args.lang {
        Lang::Rust => rust_placeholders(&owns, &sdk_dependency(&args)?),
        Lang::Python => python_placeholders(&owns, &sdk_checkout(&args, "python/src")?),
        Lang::Typescript => typescript_placeholders(&owns, &sdk_checkout(&args, "typescript")?),
    });
    let fill = |template: &str| {
        (values.iter()).fold(template.to_string(), |text, (key, value)| {
            text.replace(key, value)
        })
    };
    for (path, template) in templates(args.lang) {
        write(&dir.join(fill(path)), &fill(template))?;
    }
    super::say(dir.display());
    let test = match args.lang {
        Lang::Rust => "cargo test",
        Lang::Python => "python -m pytest",
        Lang::Typescript => "npm install && npm test",
    };
    tracing::info!(
        "next: cd {} && {test} && wasmctrl build --dev . --out-dir plugins && wasmctrl test plugins/{}.wasm --object sample.yaml",
        dir.display(),
        args.name
    );
    Ok(ExitCode::SUCCESS)
}

/// The arguments checked as Kubernetes checks names: the kind's plural and the kinds it owns
/// (a ConfigMap unless `--owns` says).
fn checked(args: &Args) -> anyhow::Result<(String, Vec<Gvk>)> {
    check_name(&args.name)?;
    check_group(&args.group)?;
    if args.group.is_empty() {
        bail!("--group: a custom resource needs an API group (apps.example.com)");
    }
    check_version(&args.version)?;
    check_kind(&args.kind)?;
    let plural = args.plural.clone().unwrap_or_else(|| plural(&args.kind));
    let owns = if args.owns.is_empty() {
        vec![parse_kind("v1/ConfigMap")?]
    } else {
        (args.owns.iter())
            .map(|o| parse_kind(o))
            .collect::<anyhow::Result<_>>()?
    };
    Ok((plural, owns))
}

/// The directory to write (`--dir`, or the plugin's name), which must be new or empty.
fn empty_dir(args: &Args) -> anyhow::Result<PathBuf> {
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.exists()
        && std::fs::read_dir(&dir)
            .with_context(|| format!("{} is not a directory", dir.display()))?
            .next()
            .is_some()
    {
        bail!("{} exists and is not empty", dir.display());
    }
    Ok(dir)
}

/// `<--sdk-path>/<part>` (the SDK of a language in a checkout of wasmctrl's `sdk/`), made
/// absolute; none without `--sdk-path`.
fn sdk_checkout(args: &Args, part: &str) -> anyhow::Result<Option<PathBuf>> {
    let Some(path) = &args.sdk_path else {
        return Ok(None);
    };
    let sdk = std::path::absolute(path.join(part))
        .with_context(|| format!("--sdk-path {}", path.display()))?;
    if !sdk.is_dir() {
        bail!("--sdk-path {}: no {part} there", path.display());
    }
    Ok(Some(sdk))
}

/// How the plugin's Cargo.toml names the SDK: a path (`--sdk-path`) or this version.
fn sdk_dependency(args: &Args) -> anyhow::Result<String> {
    Ok(match &args.sdk_path {
        Some(path) => {
            let path = std::path::absolute(path)
                .with_context(|| format!("--sdk-path {}", path.display()))?;
            if !path.join("Cargo.toml").is_file() {
                bail!("--sdk-path {}: no Cargo.toml there", path.display());
            }
            format!("path = {:?}", path.display().to_string())
        }
        None => format!("version = \"{}\"", env!("CARGO_PKG_VERSION")),
    })
}

/// Each template placeholder every language shares and what it becomes. No placeholder is part
/// of another, and no value holds one, so the order of replacement does not matter.
fn placeholders(args: &Args, plural: &str, owns: &[Gvk]) -> Vec<(&'static str, String)> {
    let child = &owns[0];
    let singular = args.kind.to_ascii_lowercase();
    vec![
        ("__CHILD_GROUP__", child.group.clone()),
        ("__CHILD_VERSION__", child.version.clone()),
        ("__CHILD_KIND__", child.kind.clone()),
        ("__CRATE__", args.name.clone()),
        ("__CRATE_IDENT__", args.name.replace('-', "_")),
        ("__NAME__", args.name.clone()),
        ("__GROUP__", args.group.clone()),
        ("__VERSION__", args.version.clone()),
        ("__KIND__", args.kind.clone()),
        ("__PLURAL__", plural.to_string()),
        ("__SINGULAR__", singular.clone()),
        ("__SAMPLE__", format!("{singular}-sample")),
    ]
}

/// The Rust templates' own placeholders: the child's code, the further owned kinds, the SDK
/// dependency.
fn rust_placeholders(owns: &[Gvk], sdk: &str) -> Vec<(&'static str, String)> {
    let child = &owns[0];
    let more_owns: String = owns[1..]
        .iter()
        .map(|k| format!("\n            .owns_kind({})", gvk_expr(k)))
        .collect();
    let (child_use, child_kind_fn, child_build) = child_code(child);
    // A Kubernetes kind is owned by its type; a CRD's by its group, version and kind.
    let child_owns = match crate::kinds::rust_path(&child.group, &child.kind) {
        Some(_) => format!("owns::<{}>()", child.kind),
        None => "owns_kind(child_kind())".to_string(),
    };
    vec![
        ("__CHILD_OWNS__", child_owns),
        ("__MORE_OWNS__", more_owns),
        ("__CHILD_USE__", child_use),
        ("__CHILD_BUILD__", child_build),
        ("__CHILD_KIND_FN__", child_kind_fn),
        ("__SDK__", sdk.to_string()),
    ]
}

/// The Python templates' own placeholders: the further owned kinds, and where the SDK's
/// sources are (`[tool.wasmctrl] sdk-path` and pytest's path) when it is taken from a checkout.
fn python_placeholders(owns: &[Gvk], sdk: &Option<PathBuf>) -> Vec<(&'static str, String)> {
    let more_owns: String = (owns[1..].iter())
        .map(|k| {
            format!(
                "\n            .owns_kind({:?}, {:?})",
                k.api_version(),
                k.kind
            )
        })
        .collect();
    let (sdk_line, test_path) = match sdk {
        Some(path) => (
            format!(
                "# The wasmctrl SDK's sources, bundled into the component (and on pytest's path).\n\
                 sdk-path = {:?}",
                path.display().to_string()
            ),
            format!("\".\", {:?}", path.display().to_string()),
        ),
        None => (
            "# The wasmctrl SDK is bundled from the environment (`pip install wasmctrl`).".into(),
            "\".\"".into(),
        ),
    };
    vec![
        ("__MORE_OWNS_PY__", more_owns),
        ("__SDK_PATH_LINE__", sdk_line),
        ("__TEST_PATH__", test_path),
    ]
}

/// The TypeScript templates' own placeholders: the child's type and body, the further owned
/// kinds, the SDK dependency (`file:` a checkout's, else this version).
fn typescript_placeholders(owns: &[Gvk], sdk: &Option<PathBuf>) -> Vec<(&'static str, String)> {
    let child = &owns[0];
    let child_type = match (child.group.as_str(), child.kind.as_str()) {
        ("", kind @ ("ConfigMap" | "Secret")) => kind.to_string(),
        _ => "KubeObject".to_string(),
    };
    let child_body = if child.group.is_empty() && child.kind == "ConfigMap" {
        "      data: { message: object.spec.message ?? \"\" },\n"
    } else {
        "      // The rest of the desired object (spec, ...) goes here.\n"
    };
    let more_owns: String = (owns[1..].iter())
        .map(|k| {
            format!(
                "\n        .owns(Gvk.of({:?}, {:?}))",
                k.api_version(),
                k.kind
            )
        })
        .collect();
    let sdk = match sdk {
        Some(path) => format!("file:{}", path.display()),
        None => format!("^{}", env!("CARGO_PKG_VERSION")),
    };
    vec![
        ("__CHILD_API_VERSION__", child.api_version()),
        ("__CHILD_TYPE__", child_type),
        ("__CHILD_BODY__", child_body.to_string()),
        ("__MORE_OWNS__", more_owns),
        ("__SDK__", sdk),
    ]
}

/// The import, the kind helper and the statement that build the child: a Kubernetes kind as its
/// `k8s-openapi` type (a ConfigMap carries the message; other kinds start with what the author
/// fills in), any other kind (a CRD's, with no Rust type here) as JSON named by a helper.
fn child_code(child: &Gvk) -> (String, String, String) {
    let Some(path) = crate::kinds::rust_path(&child.group, &child.kind) else {
        let kind_fn = format!(
            "/// The kind of the child it owns.
pub fn child_kind() -> wasmctrl_sdk::Gvk {{
    {}
}}

",
            gvk_expr(child)
        );
        let build = "        let child = serde_json::json!({
            \"apiVersion\": child_kind().api_version(),
            \"kind\": child_kind().kind,
            \"metadata\": {\"name\": name, \"namespace\": object.namespace()},
            // The rest of the desired object (spec, ...) goes here.
        });
";
        return (String::new(), kind_fn, build.into());
    };
    let body = if child.group.is_empty() && child.kind == "ConfigMap" {
        "            data: Some([(\"message\".to_string(), object.spec.message.clone())].into()),\n"
    } else {
        "            // The rest of the desired object (spec, ...) goes here.\n"
    };
    let build = format!(
        "        let child = {kind} {{
            metadata: wasmctrl_sdk::kube::child_meta(&object, &name),
{body}            ..Default::default()
        }};
",
        kind = child.kind
    );
    let import = format!("use wasmctrl_sdk::k8s_openapi::{path};\n");
    (import, String::new(), build)
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_follow_kubernetes_resources() {
        for (kind, expected) in [
            ("Website", "websites"),
            ("Policy", "policies"),
            ("Gateway", "gateways"),
            ("Ingress", "ingresses"),
            ("Box", "boxes"),
            ("Batch", "batches"),
        ] {
            assert_eq!(plural(kind), expected);
        }
    }

    #[test]
    fn names_versions_kinds_and_owned_kinds_are_checked() {
        assert!(check_name("my-plugin").is_ok());
        for bad in ["My", "1st", "a_b", "trailing-", ""] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        for good in ["v1", "v2beta1", "v1alpha3"] {
            assert!(check_version(good).is_ok(), "{good}");
        }
        for bad in ["1", "v", "v1beta", "v1gamma1", "V1"] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
        assert!(check_kind("Website").is_ok());
        assert!(check_kind("website").is_err());
        assert!(check_group("Apps.example.com").is_err());
        assert_eq!(
            parse_kind("apps/v1/Deployment").unwrap(),
            Gvk::new("apps", "v1", "Deployment")
        );
        assert_eq!(parse_kind("v1/ConfigMap").unwrap().group, "");
        assert!(parse_kind("Deployment").is_err());
        assert!(parse_kind("apps/v1/deployment").is_err());
    }
}
