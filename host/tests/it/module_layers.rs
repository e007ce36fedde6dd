//! No crate of the project has modules that import each other in a cycle: each crate's modules
//! form layers a newcomer can read from the bottom up (the apiserver's are listed in its
//! crate documentation).
//!
//! The imports are read from the sources rather than with a tool: `cargo modules` needs
//! rust-analyzer's crates and the network, and the project's imports are plain paths
//! (`crate::a::B`, `super::a`, `use super::{a, b}`), which a scan of the text finds. A
//! module's own tests (`#[cfg(test)] mod tests`, at its end) and comments are not imports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates' source directories, from the repository root (`host/tls` is one module).
const CRATES: [&str; 6] = [
    "host/src",
    "host/runtime/src",
    "host/apiserver/src",
    "host/build/src",
    "sdk/src",
    "sdk/scope/src",
];

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The source without its tests and comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let lines = text.lines().map(|line| match line.find("//") {
        Some(at) => &line[..at],
        None => line,
    });
    lines.collect::<Vec<_>>().join("\n")
}

/// Lowercase identifiers following `prefix` (`crate::`, `super::`), and the first segment of
/// each path in a `prefix{...}` group.
fn paths_after(code: &str, prefix: &str, out: &mut BTreeSet<String>) {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices(prefix) {
        let preceded_by_path = code[..at].ends_with("::");
        if preceded_by_path {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(group.split(',').map(|p| ident(p.trim())));
        } else {
            out.insert(ident(rest));
        }
    }
}

/// Each top-level module of the crate at `src`, and the top-level modules it imports.
fn imports(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let relative = file.strip_prefix(src).expect("under src");
        let parts: Vec<_> = relative.iter().map(|p| p.to_string_lossy()).collect();
        let module = match parts.as_slice() {
            [file] => file.trim_end_matches(".rs").to_string(),
            [dir, ..] => dir.to_string(),
            [] => continue,
        };
        if module == "lib" || module == "main" {
            continue;
        }
        // `super::` from `a.rs` or `a/mod.rs` names the crate root; from `a/b.rs`, `a`.
        let depth = parts.len() - usize::from(parts.last().is_some_and(|p| p == "mod.rs"));
        let text = std::fs::read_to_string(&file).expect("source file");
        let code = code(&text);
        let mut used = BTreeSet::new();
        paths_after(&code, "crate::", &mut used);
        paths_after(&code, &"super::".repeat(depth), &mut used);
        used.remove(&module);
        graph.entry(module).or_default().extend(used);
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for used in graph.values_mut() {
        used.retain(|m| modules.contains(m));
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            for w in &self.graph[v] {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let at = self
                    .stack
                    .iter()
                    .position(|m| *m == v)
                    .expect("on the stack");
                let component: Vec<String> = self.stack.drain(at..).map(str::to_string).collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_crate_has_an_import_cycle_among_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut problems = Vec::new();
    for src in CRATES {
        let graph = imports(&root.join(src));
        assert!(!graph.is_empty(), "{src}: no modules found");
        for cycle in cycles(&graph) {
            let edges: Vec<String> = (cycle.iter())
                .map(|m| {
                    let within: Vec<_> = graph[m].iter().filter(|d| cycle.contains(d)).collect();
                    format!("{m} -> {within:?}")
                })
                .collect();
            problems.push(format!("{src}: {}", edges.join(", ")));
        }
    }
    assert!(
        problems.is_empty(),
        "import cycles:\n{}",
        problems.join("\n")
    );
}

/// The scan finds what it is meant to find: a cycle through a `use super::{...}` group and a
/// `crate::` path, and none through a comment or a test module.
#[test]
fn the_scan_sees_imports_and_only_imports() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    };
    write("lib.rs", "mod a;\nmod b;\nmod c;\n");
    write("a.rs", "use super::{b, c::Thing};\n");
    write("b/mod.rs", "mod inner;\n");
    write("b/inner.rs", "fn f() { crate::a::g() }\n");
    write(
        "c.rs",
        "//! Unlike [`super::a`].\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n",
    );
    let graph = imports(dir.path());
    assert_eq!(graph["a"], BTreeSet::from(["b".into(), "c".into()]));
    assert_eq!(graph["b"], BTreeSet::from(["a".into()]));
    assert!(graph["c"].is_empty(), "{graph:?}");
    assert_eq!(cycles(&graph), vec![vec!["a".to_string(), "b".to_string()]]);
}
