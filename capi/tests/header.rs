//! The checked-in header is the one generated from the source: a function
//! added or changed without regenerating it fails here.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::Path;

#[test]
fn the_checked_in_header_is_generated_from_the_source() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("the header generates")
        .write(&mut generated);
    let checked_in = std::fs::read(dir.join("include/callpost.h")).expect("include/callpost.h");
    if generated != checked_in {
        panic!(
            "capi/include/callpost.h is not what the source generates; regenerate it with\n  \
             cargo run -p callpost-capi --example header > capi/include/callpost.h"
        );
    }
}
