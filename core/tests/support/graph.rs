//! Reads a crate's module graph from its source, for the layers tests
//! (`core/tests/layers.rs`, and the relay's `relay/tests/it/layers.rs`,
//! which includes this file): every `crate::…` path outside comments and
//! `#[cfg(test)]` blocks, with the crate root's re-exports (`crate::Call`)
//! resolved to the module they come from. A module is a top-level file or
//! directory of `src/`; a directory's files may use each other freely
//! (`super::`), as one module's parts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module, and the modules of the crate it uses.
pub(crate) type Graph = BTreeMap<String, BTreeSet<String>>;

/// `src` with comments and everything from the first `#[cfg(test)]` on
/// removed (test modules sit at the end of each file).
pub(crate) fn code_of(src: &str) -> String {
    let src = src.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = String::new();
    for line in src.lines() {
        let line = match line.find("//") {
            // A `//` inside a string literal ("http://…") is not a comment,
            // and cuts no `crate::` path a line of code could hold after it.
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The identifiers right after each `crate::`, including every first
/// segment of a `crate::{a::X, b}` group.
pub(crate) fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Only the group's top level names modules: split at commas
            // outside nested braces, up to the brace that closes the group.
            let mut depth = 0;
            let mut start = 0;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth > 0 => depth -= 1,
                    ',' | '}' if depth == 0 => {
                        out.push(ident(group[start..j].trim()));
                        start = j + 1;
                        if c == '}' {
                            break;
                        }
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident(rest));
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The crate root's re-exports: item name → the module it comes from.
pub(crate) fn root_items(lib: &str) -> BTreeMap<String, String> {
    let mut items = BTreeMap::new();
    let code = code_of(lib);
    for stmt in code.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        for name in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !name.is_empty() {
                items.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    items
}

pub(crate) fn graph(src: &Path) -> Graph {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
    let items = root_items(&lib);
    let mut g = Graph::new();
    let mut files = vec![src.to_path_buf()];
    while let Some(p) = files.pop() {
        if p.is_dir() {
            for e in std::fs::read_dir(&p).expect("readable src/") {
                files.push(e.expect("a directory entry").path());
            }
            continue;
        }
        if p.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = p.strip_prefix(src).expect("under src/");
        let first = rel.iter().next().expect("a path").to_string_lossy();
        let module = first.trim_end_matches(".rs").to_owned();
        if module == "lib" {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&p).expect("a readable file"));
        let deps = g.entry(module.clone()).or_default();
        for name in crate_paths(&code) {
            let target = items.get(&name).cloned().unwrap_or(name);
            if target != module {
                deps.insert(target);
            }
        }
    }
    g
}

/// One cycle through `g`, if there is any.
pub(crate) fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in g.get(node).into_iter().flatten() {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(g, n, &mut Vec::new(), &mut done))
}
