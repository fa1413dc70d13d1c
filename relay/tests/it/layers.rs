//! The relay's modules form layers, read bottom up in the order of
//! [`LAYERS`]: a module may use only those before it. The graph is read
//! from the source by the core's reader (`core/tests/support/graph.rs`),
//! so an import the wrong way (the delivery workers reaching into the
//! composition root, the store into the API) fails here, not in review.

#[path = "../../../core/tests/support/graph.rs"]
mod graph;

use graph::{find_cycle, Graph};
use std::path::Path;

/// The relay's modules, bottom up: leaf helpers and the settings, the
/// store, what records and reports, the receivers' guards, the shared
/// state, the delivery workers, the operations, the chores, the HTTP
/// listeners, the composition root, the command line.
const LAYERS: &[&str] = &[
    "clock",
    "seal",
    "config",
    "tls",
    "store",
    "metrics",
    "notify",
    "trace",
    "guards",
    "state",
    "deliver",
    "ops",
    "housekeeping",
    "api",
    "app",
    "cli",
];

/// Every edge that goes up (or sideways into a module not listed).
fn upward(g: &Graph) -> Vec<String> {
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut wrong = Vec::new();
    for (module, uses) in g {
        for used in uses {
            match (rank(module), rank(used)) {
                (Some(a), Some(b)) if b < a => {}
                _ => wrong.push(format!("{module} → {used}")),
            }
        }
    }
    wrong
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let mut g = graph::graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The binary's entry point, beside the library: it calls `cli::main`.
    g.remove("main");
    let modules: Vec<&str> = g.keys().map(String::as_str).collect();
    let mut listed = LAYERS.to_vec();
    listed.sort_unstable();
    assert_eq!(
        modules, listed,
        "every module of src/ has its place in LAYERS"
    );
    let wrong = upward(&g);
    assert!(
        wrong.is_empty(),
        "imports against the layers: {}",
        wrong.join(", ")
    );
    assert_eq!(find_cycle(&g), None);
}

#[test]
fn an_edge_upward_is_found() {
    let mut g = Graph::new();
    g.entry("deliver".into())
        .or_default()
        .insert("state".into());
    assert!(upward(&g).is_empty());
    g.entry("state".into())
        .or_default()
        .insert("deliver".into());
    assert_eq!(upward(&g), ["state → deliver"]);
    g.entry("store".into())
        .or_default()
        .insert("nowhere".into());
    assert_eq!(upward(&g).len(), 2);
}
