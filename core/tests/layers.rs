//! The core's modules form layers: no module imports, directly or through
//! others, a module that imports it. A loop would mean neither can be read,
//! changed or tested without the other; the registry of codes (`code.rs`)
//! is at the bottom and imports nothing of the crate, and the umbrella
//! `Error` (`error.rs`) is at the top and is imported by no module.
//!
//! The graph is read from the source (`support/graph.rs`, which the
//! relay's layers test reads too).
// Test code: a panic is how it reports.
#![allow(missing_docs, clippy::expect_used, clippy::panic)]

#[path = "support/graph.rs"]
mod graph;

use graph::{code_of, crate_paths, find_cycle, graph, root_items, Graph};
use std::collections::BTreeSet;
use std::path::Path;

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_modules_have_no_import_loop() {
    let g = graph(&src());
    assert!(g.len() > 10, "the graph was not read: {g:?}");
    if let Some(cycle) = find_cycle(&g) {
        panic!("an import loop in core: {}", cycle.join(" → "));
    }
}

#[test]
fn the_registry_imports_nothing_and_nothing_imports_the_umbrella() {
    let g = graph(&src());
    assert_eq!(
        g["code"],
        BTreeSet::new(),
        "code.rs must import nothing of the crate"
    );
    let users: Vec<_> = g
        .iter()
        .filter(|(m, deps)| *m != "error" && deps.contains("error"))
        .map(|(m, _)| m.as_str())
        .collect();
    assert!(
        users.is_empty(),
        "modules that import the umbrella Error: {users:?}"
    );
}

#[test]
fn the_reader_sees_paths_groups_and_root_items() {
    let code = code_of(
        "use crate::json::Value; // crate::ignored\nuse crate::{call::Call, retry::{A, B}};\nfn f() -> crate::Error {}\n#[cfg(test)]\nuse crate::tested;",
    );
    assert_eq!(crate_paths(&code), ["json", "call", "retry", "Error"]);
    let items = root_items("pub use error::Error;\npub use call::{\n    Call, CallKind,\n};");
    assert_eq!(items["Error"], "error");
    assert_eq!(items["CallKind"], "call");
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert_eq!(find_cycle(&g), None);
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(find_cycle(&g).map(|c| c.len()), Some(4));
}
