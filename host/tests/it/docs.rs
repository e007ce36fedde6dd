//! The documentation holds together: every relative link in the README and `docs/` names a file
//! that exists and, with a `#fragment`, a heading of that page (GitHub's anchors); the README
//! stays a page a newcomer reads in minutes; every `docs/` page has a title and, when it has
//! sections, a table of contents. Links to the web are not followed (tests stay on loopback).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common;

/// The README's length limit, in lines.
const README_LINES: usize = 250;

/// The pages: the README and every `docs/*.md`.
fn pages() -> Vec<PathBuf> {
    let root = common::repo_root();
    let mut pages = vec![root.join("README.md")];
    let docs = std::fs::read_dir(root.join("docs")).expect("docs/ exists");
    let mut docs: Vec<PathBuf> = (docs.map(|e| e.expect("entry").path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The text outside fenced code blocks and inline code.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            // Inline code spans: drop what is between backticks.
            let kept: String = (line.split('`').enumerate())
                .filter(|(i, _)| i % 2 == 0)
                .map(|(_, part)| part)
                .collect::<Vec<_>>()
                .join(" ");
            out.push_str(&kept);
            out.push('\n');
        }
    }
    out
}

/// GitHub's anchor for a heading: lowercase, punctuation other than `-` and `_` dropped, spaces
/// as hyphens.
fn anchor(heading: &str) -> String {
    (heading.trim().to_lowercase().chars())
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// Every `](target)` in the page's prose.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut out = Vec::new();
    for (at, _) in prose.match_indices("](") {
        let rest = &prose[at + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].trim().to_string());
        }
    }
    out
}

/// What is wrong with `link` on the page at `page`, if anything.
fn broken(page: &Path, link: &str) -> Option<String> {
    if link.contains("://") || link.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = match link.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (link, None),
    };
    let target = if path.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().expect("in a directory").join(path)
    };
    if !target.exists() {
        return Some(format!("{link}: no {}", target.display()));
    }
    let fragment = fragment?;
    if target.extension().is_none_or(|x| x != "md") {
        return None;
    }
    let text = std::fs::read_to_string(&target).expect("a readable page");
    (!anchors(&text).contains(fragment)).then(|| format!("{link}: no heading #{fragment}"))
}

#[test]
fn every_relative_link_resolves_to_a_file_and_a_heading() {
    let mut problems = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a readable page");
        for link in links(&text) {
            if let Some(problem) = broken(&page, &link) {
                problems.push(format!("{}: {problem}", page.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_readme_is_short_and_every_page_has_a_title_and_contents() {
    let readme = std::fs::read_to_string(common::repo_root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= README_LINES, "README.md has {lines} lines");
    for page in pages().into_iter().skip(1) {
        let text = std::fs::read_to_string(&page).unwrap();
        assert!(text.starts_with("# "), "{} has no title", page.display());
        let sections = prose(&text)
            .lines()
            .filter(|l| l.starts_with("## "))
            .count();
        if sections > 1 {
            assert!(
                text.contains("**Contents**"),
                "{} has {sections} sections and no contents",
                page.display()
            );
        }
    }
}

/// The checker finds what it is meant to find.
#[test]
fn the_checker_sees_broken_files_and_anchors_and_ignores_code() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("a.md");
    let text = "# A\n\n## Two `words`, here\n\n[ok](#two-words-here) [gone](b.md) \
                [bad](#nothing)\n\n```\n[in code](missing.md)\n```\n`[inline](missing.md)`\n";
    std::fs::write(&page, text).unwrap();
    let found: Vec<String> = (links(text).iter())
        .filter_map(|l| broken(&page, l))
        .collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("b.md: no "), "{found:?}");
    assert_eq!(found[1], "#nothing: no heading #nothing");
    assert_eq!(anchor("What `make dev` shows"), "what-make-dev-shows");
}
