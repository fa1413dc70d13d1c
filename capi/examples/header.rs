//! Writes the C header generated from this crate's source to stdout:
//! `cargo run -p callpost-capi --example header > capi/include/callpost.h`.

#![allow(clippy::expect_used, clippy::print_stdout)] // a developer's tool

use std::io::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut header = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("the header generates")
        .write(&mut header);
    std::io::stdout().write_all(&header).expect("stdout");
}
