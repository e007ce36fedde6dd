//! No crate of the project has modules that import each other in a cycle: each crate's modules
//! form layers a newcomer can read from the bottom up (the apiserver's are listed in its
//! crate documentation).
//!
//! The imports are read from the sources rather than with a tool (`cargo modules` needs
//! rust-analyzer's crates and the network), but read as the compiler reads them: the files are
//! the ones `mod x;` declarations reach from the crate root (`#[path]` included), a test module
//! (`#[cfg(test)] mod x { ... }`, or `#[cfg(test)] mod x;` and its file) is left out by its
//! extent wherever it stands, comments and string literals are not code, and every
//! `crate::`, `self::` and `super::`... path, `use` groups included, is resolved from the module
//! it is written in (`super::` from `a/b.rs` is `a`, from `a.rs` or `a/mod.rs` the crate root).
//! A name the crate root re-exports (`pub use a::Thing;`, then `crate::Thing`) counts as an
//! import of the module it comes from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates' source directories, from the repository root (`host/tls` is one module).
const CRATES: [&str; 6] = [
    "host/src",
    "host/runtime/src",
    "host/apiserver/src",
    "host/build/src",
    "sdk/src",
    "sdk/core/src",
];

/// Each top-level module of a crate, and the top-level modules it imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// Where an edge of a [`Graph`] was first seen: `(from, to)` -> `file: path` (the file from
/// the crate's source directory).
type Evidence = BTreeMap<(String, String), String>;

/// What the scan keeps of a source file: its words, punctuation and string literals (which
/// `#[path = "..."]` needs); comments, char literals, lifetimes and numbers are dropped.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    /// `::`
    PathSep,
    Punct(char),
}

fn tokens(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    // The end of a string starting at the quote `i`, `hashes` `#`s after its closing quote.
    let string_end = |mut i: usize, raw: bool, hashes: usize| -> usize {
        i += 1;
        while i < c.len() {
            if !raw && c[i] == '\\' {
                i += 2;
            } else if c[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#') {
                return i + 1 + hashes;
            } else {
                i += 1;
            }
        }
        i
    };
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            let end = string_end(i, false, 0);
            out.push(Token::Str(c[i + 1..end.saturating_sub(1)].iter().collect()));
            i = end;
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{7f}', '{') or a lifetime or label ('a).
            if at(i + 1) == '\\' {
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let prefix = matches!(word.as_str(), "r" | "br" | "cr" | "b" | "c");
            let raw = prefix && word.ends_with('r');
            if prefix && at(i) == '"' {
                let end = string_end(i, raw, 0);
                out.push(Token::Str(c[i + 1..end.saturating_sub(1)].iter().collect()));
                i = end;
            } else if raw && at(i) == '#' {
                let hashes = (i..).take_while(|&j| at(j) == '#').count();
                if at(i + hashes) == '"' {
                    let end = string_end(i + hashes, true, hashes);
                    let body = c[i + hashes + 1..end.saturating_sub(1 + hashes)].iter();
                    out.push(Token::Str(body.collect()));
                    i = end;
                } else {
                    // A raw identifier, `r#type`.
                    let start = i + 1;
                    i = start;
                    while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                        i += 1;
                    }
                    out.push(Token::Ident(c[start..i].iter().collect()));
                }
            } else if word == "b" && at(i) == '\'' {
                // A byte literal, b'x' or b'\n': the quote starts a char literal.
            } else {
                out.push(Token::Ident(word));
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token::PathSep);
            i += 2;
        } else {
            out.push(Token::Punct(ch));
            i += 1;
        }
    }
    out
}

fn is_ident(t: Option<&Token>, word: &str) -> bool {
    matches!(t, Some(Token::Ident(w)) if w == word)
}

/// The index just past the bracket matching the opening one at `i`.
fn past_group(t: &[Token], i: usize) -> usize {
    let (open, close) = match t.get(i) {
        Some(Token::Punct('{')) => ('{', '}'),
        Some(Token::Punct('(')) => ('(', ')'),
        Some(Token::Punct('[')) => ('[', ']'),
        _ => return i + 1,
    };
    let mut depth = 0;
    for (j, token) in t.iter().enumerate().skip(i) {
        match token {
            Token::Punct(p) if *p == open => depth += 1,
            Token::Punct(p) if *p == close => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    t.len()
}

/// A path starting at `i` (`a::b::C`, `a::{b, c::{self, D as E}}`, `a::*`): the full
/// segments of each leaf with the name it binds, and the index past the path.
fn path_tree(t: &[Token], mut i: usize, prefix: &[String]) -> (Vec<(Vec<String>, String)>, usize) {
    let mut segments = prefix.to_vec();
    let mut leaves = Vec::new();
    loop {
        match t.get(i) {
            Some(Token::Ident(word)) => segments.push(word.clone()),
            Some(Token::Punct('*')) => {
                segments.push("*".into());
                return (vec![(segments, "*".into())], i + 1);
            }
            Some(Token::Punct('{')) => {
                i += 1;
                while i < t.len() && t[i] != Token::Punct('}') {
                    let (inner, next) = path_tree(t, i, &segments);
                    leaves.extend(inner);
                    i = next;
                    if t.get(i) == Some(&Token::Punct(',')) {
                        i += 1;
                    } else if t.get(i) != Some(&Token::Punct('}')) {
                        // Not a use group after all (`a::b::<{ N }>`): stop here.
                        return (leaves, i);
                    }
                }
                return (leaves, i + 1);
            }
            // A path written as an expression stops at a turbofish (`crate::a::f::<T>()`).
            _ => {
                if segments.len() > prefix.len() {
                    leaves.push((segments, String::new()));
                }
                return (leaves, i);
            }
        }
        i += 1;
        if t.get(i) == Some(&Token::PathSep) {
            i += 1;
            continue;
        }
        let mut name = segments.last().cloned().unwrap_or_default();
        if name == "self" && segments.len() > 1 {
            name = segments[segments.len() - 2].clone();
        }
        if is_ident(t.get(i), "as") {
            if let Some(Token::Ident(alias)) = t.get(i + 1) {
                name = alias.clone();
            }
            i += 2;
        }
        leaves.push((segments, name));
        return (leaves, i);
    }
}

/// A source file to read, as the module at `module` whose `mod x;` files live in `children`.
struct Source {
    file: PathBuf,
    module: Vec<String>,
    children: PathBuf,
}

/// What a crate's sources say, before names are resolved.
#[derive(Default)]
struct Sources {
    /// Top-level modules declared (and not as tests) by the crate root.
    modules: BTreeSet<String>,
    /// Each path written in a module: the module, the path's segments, where it was written.
    paths: Vec<(Vec<String>, Vec<String>, String)>,
    /// The names the crate root imports or re-exports, and the paths they name.
    root_names: BTreeMap<String, Vec<String>>,
    /// The names the crate gives itself (`extern crate self as name;`): `name::a` is `crate::a`.
    crate_names: BTreeSet<String>,
}

/// Reads one file: its `mod` declarations (queued to be read in turn) and its paths.
fn read(source: &Source, queue: &mut Vec<Source>, into: &mut Sources) {
    let text = std::fs::read_to_string(&source.file)
        .unwrap_or_else(|e| panic!("{}: {e}", source.file.display()));
    let t = tokens(&text);
    // The modules open at each `{` (None: a block that is not a module).
    let mut open: Vec<Option<(Vec<String>, PathBuf)>> = Vec::new();
    let mut test_attr = false;
    let mut path_attr: Option<String> = None;
    let mut i = 0;
    while i < t.len() {
        let (module, children) = match open.iter().rev().flatten().next() {
            Some((module, children)) => (module.clone(), children.clone()),
            None => (source.module.clone(), source.children.clone()),
        };
        let before = i.checked_sub(1).map(|b| &t[b]);
        match &t[i] {
            Token::Punct('#') => {
                let start = i + 1 + usize::from(t.get(i + 1) == Some(&Token::Punct('!')));
                let end = past_group(&t, start);
                let attr = t.get(start + 1..end.saturating_sub(1)).unwrap_or(&[]);
                let word = |w: &str| Token::Ident(w.into());
                let cfg_test = [
                    word("cfg"),
                    Token::Punct('('),
                    word("test"),
                    Token::Punct(')'),
                ];
                test_attr |= attr == cfg_test;
                if let [Token::Ident(p), Token::Punct('='), Token::Str(file)] = attr
                    && p == "path"
                {
                    path_attr = Some(file.clone());
                }
                i = end;
                continue;
            }
            Token::Ident(w) if w == "pub" => {
                // `pub(crate)`, `pub(super)`, `pub(in crate::a)` say who sees, not what is used.
                i += 1;
                if t.get(i) == Some(&Token::Punct('(')) {
                    i = past_group(&t, i);
                }
                continue;
            }
            Token::Ident(w) if w == "mod" => {
                if let Some(Token::Ident(name)) = t.get(i + 1) {
                    let declared = [module.as_slice(), std::slice::from_ref(name)].concat();
                    let body = t.get(i + 2) == Some(&Token::Punct('{'));
                    if test_attr {
                        i = if body { past_group(&t, i + 2) } else { i + 3 };
                    } else if body {
                        open.push(Some((declared, children.join(name))));
                        i += 3;
                    } else {
                        let file = match path_attr.take() {
                            Some(path) => source.file.parent().expect("dir").join(path),
                            None => {
                                let leaf = children.join(format!("{name}.rs"));
                                let dir = children.join(name).join("mod.rs");
                                if leaf.exists() { leaf } else { dir }
                            }
                        };
                        let nested = file.file_name().is_some_and(|f| f == "mod.rs");
                        let children = match nested {
                            true => file.parent().expect("dir").to_path_buf(),
                            false => file.with_extension(""),
                        };
                        if declared.len() == 1 {
                            into.modules.insert(name.clone());
                        }
                        queue.push(Source {
                            file,
                            module: declared,
                            children,
                        });
                        i += 3;
                    }
                    test_attr = false;
                    path_attr = None;
                    continue;
                }
            }
            Token::Ident(w) if w == "extern" && is_ident(t.get(i + 2), "self") => {
                if let Some(Token::Ident(name)) = t.get(i + 4) {
                    into.crate_names.insert(name.clone());
                }
                i += 5;
                continue;
            }
            Token::Ident(w) if w == "use" && module.is_empty() => {
                let (leaves, next) = path_tree(&t, i + 1, &[]);
                for (segments, name) in leaves {
                    into.root_names.insert(name, segments);
                }
                i = next;
                test_attr = false;
                continue;
            }
            Token::Ident(w)
                if (matches!(w.as_str(), "crate" | "self" | "super")
                    || into.crate_names.contains(w))
                    && t.get(i + 1) == Some(&Token::PathSep)
                    && before != Some(&Token::PathSep) =>
            {
                let (leaves, next) = path_tree(&t, i, &[]);
                let file = source.file.display().to_string();
                for (segments, _) in leaves {
                    let at = format!("{file}: {}", segments.join("::"));
                    into.paths.push((module.clone(), segments, at));
                }
                i = next;
                test_attr = false;
                continue;
            }
            Token::Punct('{') => open.push(None),
            Token::Punct('}') => {
                open.pop();
            }
            _ => {}
        }
        test_attr = false;
        path_attr = None;
        i += 1;
    }
}

/// The top-level module a path written in `module` leads into, if any.
fn resolve(
    sources: &Sources,
    module: &[String],
    segments: &[String],
    hops: usize,
) -> Option<String> {
    let mut base = module.to_vec();
    let mut rest = segments;
    while let Some((first, tail)) = rest.split_first() {
        let named = rest.len() == segments.len() && sources.crate_names.contains(first);
        match first.as_str() {
            "crate" => base.clear(),
            _ if named => base.clear(),
            "self" => {}
            "super" => {
                base.pop()?;
            }
            _ => break,
        }
        rest = tail;
    }
    if let Some(top) = base.first() {
        return Some(top.clone());
    }
    let name = rest.first()?;
    if sources.modules.contains(name) {
        return Some(name.clone());
    }
    // A name the root imports: where it comes from (a crate's own re-export, a few hops deep).
    let path = sources.root_names.get(name)?;
    if hops > 4 || path.first().is_some_and(|p| p == "super") {
        return None;
    }
    resolve(sources, &[], path, hops + 1)
}

/// The import graph of the crate rooted at `src/lib.rs` (or `src/main.rs`).
fn imports(src: &Path) -> (Graph, Evidence) {
    let root = ["lib.rs", "main.rs"]
        .map(|f| src.join(f))
        .into_iter()
        .find(|f| f.exists())
        .unwrap_or_else(|| panic!("{}: no lib.rs or main.rs", src.display()));
    let mut queue = vec![Source {
        file: root,
        module: Vec::new(),
        children: src.to_path_buf(),
    }];
    let mut sources = Sources::default();
    while let Some(source) = queue.pop() {
        read(&source, &mut queue, &mut sources);
    }
    let mut graph: Graph = (sources.modules.iter())
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    let mut evidence = Evidence::new();
    let within = format!("{}/", src.display());
    for (module, segments, at) in &sources.paths {
        let Some(from) = module.first() else { continue };
        let Some(to) = resolve(&sources, module, segments, 0) else {
            continue;
        };
        if &to != from && sources.modules.contains(&to) {
            graph.get_mut(from).expect("declared").insert(to.clone());
            let at = at.strip_prefix(&within).unwrap_or(at);
            evidence.entry((from.clone(), to)).or_insert(at.to_string());
        }
    }
    (graph, evidence)
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
                let mut component: Vec<String> =
                    self.stack.drain(at..).map(str::to_string).collect();
                component.sort();
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
        let (graph, evidence) = imports(&root.join(src));
        assert!(!graph.is_empty(), "{src}: no modules found");
        for cycle in cycles(&graph) {
            let mut edges = Vec::new();
            for m in &cycle {
                for d in graph[m].iter().filter(|d| cycle.contains(d)) {
                    let at = &evidence[&(m.clone(), d.clone())];
                    edges.push(format!("  {m} -> {d}    ({at})"));
                }
            }
            problems.push(format!("{src}: {}\n{}", cycle.join(", "), edges.join("\n")));
        }
    }
    assert!(
        problems.is_empty(),
        "import cycles:\n{}",
        problems.join("\n")
    );
}

/// The apiserver's crate documentation lists its modules bottom-up; each imports only modules
/// listed before it, so the list is the order to read the crate in.
#[test]
fn the_apiserver_modules_are_in_their_documented_order() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("apiserver/src");
    let (graph, evidence) = imports(&src);
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let docs = lib
        .split("//! Modules, in layers")
        .nth(1)
        .expect("a list of layers");
    let docs = docs.split("\n//!\n").take(2).collect::<Vec<_>>().join("\n");
    let mut order: Vec<&str> = Vec::new();
    for name in docs.split('`').skip(1).step_by(2) {
        if graph.contains_key(name) && !order.contains(&name) {
            order.push(name);
        }
    }
    let place = |m: &str| order.iter().position(|o| *o == m);
    let mut problems: Vec<String> = (graph.keys())
        .filter(|m| place(m).is_none())
        .map(|m| format!("{m} is not listed"))
        .collect();
    for (m, used) in &graph {
        for d in used {
            if let (Some(at), Some(uses)) = (place(m), place(d))
                && uses > at
            {
                let why = &evidence[&(m.clone(), d.clone())];
                problems.push(format!("{m} uses {d}, listed after it ({why})"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "host/apiserver/src/lib.rs lists its modules out of order:\n{}",
        problems.join("\n")
    );
}

/// The scan finds what it is meant to find, in the shapes that once hid a cycle from it: a
/// `#[cfg(test)] mod tests;` declared above a module's imports, a test module with code after
/// it and braces in its strings, `super::` from a `mod.rs` and from a leaf file.
#[test]
fn the_scan_sees_imports_and_only_imports() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "lib.rs",
        "extern crate self as my_lib;\nmod a;\npub(crate) mod b;\nmod c;\nmod d;\nmod e;\n#[path = \"other.rs\"]\nmod f;\nmod h;\n\
         #[cfg(test)]\nmod g;\npub use e::Thing;\n",
    );
    // A leaf file: `super::` is the crate root.
    write("a.rs", "use super::{b, c::Thing as _};\n");
    // A directory module: `super::` from `b/mod.rs` is the root too, from `b/inner.rs` it is `b`.
    write(
        "b/mod.rs",
        "mod inner;\npub(crate) use self::inner::h;\nuse super::super_thing;\n",
    );
    write(
        "b/inner.rs",
        "use super::h as _;\npub(crate) fn h() { crate::a::g(); super::super::c::k(); }\n",
    );
    // Comments, strings and a test module with code after it.
    write(
        "c.rs",
        "//! Unlike [`super::a`].\n/* crate::a */\nconst S: &str = r#\"crate::a\"#;\n\
         fn my_crate() { my_crate::a(); }\n\
         #[cfg(test)]\nmod tests {\n    use crate::a;\n    const T: (&str, char) = (\"}\", '{');\n}\n\
         pub(crate) use super::d;\n",
    );
    // The shape that hid a cycle: a test module's file declared above the imports.
    write(
        "d/mod.rs",
        "mod leaf;\n#[cfg(test)]\nmod tests;\n\nuse super::b::h;\nuse self::leaf::X;\n",
    );
    write("d/leaf.rs", "pub struct X;\n");
    write("d/tests.rs", "use crate::e;\n");
    // A name the root re-exports counts as its module; an inline module resolves `super::`.
    write(
        "e.rs",
        "pub struct Thing;\nmod inner {\n    use super::super::f;\n}\n",
    );
    write("other.rs", "fn k() -> crate::Thing { todo!() }\n");
    write("g.rs", "use crate::a;\n");
    // The crate by the name it gives itself.
    write("h.rs", "use my_lib::a::g;\n");
    // Not declared by any `mod`: not a module of the crate.
    write("stray.rs", "use crate::a;\n");
    let (graph, _) = imports(dir.path());
    let set = |m: &[&str]| m.iter().map(|m| m.to_string()).collect::<BTreeSet<_>>();
    let expected: Graph = [
        ("a", set(&["b", "c"])),
        ("b", set(&["a", "c"])),
        ("c", set(&["d"])),
        ("d", set(&["b"])),
        ("e", set(&["f"])),
        ("f", set(&["e"])),
        ("h", set(&["a"])),
    ]
    .into_iter()
    .map(|(m, s)| (m.to_string(), s))
    .collect();
    assert_eq!(graph, expected);
    assert_eq!(
        cycles(&graph),
        vec![
            vec!["a".to_string(), "b".into(), "c".into(), "d".into()],
            vec!["e".to_string(), "f".into()]
        ]
    );
}
