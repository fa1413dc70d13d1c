//! The benches' shared fixtures (`benches/fixtures/`, written by
//! `generate.py`): Segment-spec calls of realistic shapes, each as
//! `JSON.stringify` writes it and as Python's `json.dumps` writes it by
//! default. The criterion benches, `compare_python.py` and
//! `compare_node.mjs` all read these files.
// A fixture that does not parse is a broken bench, which may panic.
#![allow(clippy::panic)]

use callpost_core::Call;

/// One fixture.
#[derive(Debug, Clone, Copy)]
pub struct Fixture {
    /// The file's stem.
    pub name: &'static str,
    /// As `JSON.stringify` writes it.
    pub compact: &'static str,
    /// As Python's `json.dumps` writes it by default.
    pub dumps: &'static str,
}

macro_rules! fixtures {
    ($($name:literal),+ $(,)?) => {
        /// Every fixture, smallest shapes first.
        pub const FIXTURES: &[Fixture] = &[$(Fixture {
            name: $name,
            compact: include_str!(concat!("../fixtures/", $name, ".json")),
            dumps: include_str!(concat!("../fixtures/", $name, ".dumps.json")),
        }),+];
    };
}

fixtures!(
    "track_423",
    "track_4k",
    "identify_200_traits",
    "unicode_text",
    "number_arrays",
    "product_list_32k",
    "order_completed",
);

/// The fixture named `name`.
pub fn fixture(name: &str) -> Fixture {
    *FIXTURES
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no fixture {name}"))
}

/// The 423-byte track call every table in BENCHMARKS.md starts from.
pub fn track() -> Call {
    Call::from_json_str(fixture("track_423").compact).unwrap_or_else(|e| panic!("fixture: {e}"))
}
