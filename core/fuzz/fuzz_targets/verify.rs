//! verify with arbitrary signature and secret bytes never panics, and a
//! signature we make always verifies.
#![no_main]

use arbitrary::Arbitrary;
use callpost_core::{sign, verify, Secret};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    body: &'a [u8],
    signature: &'a str,
    secrets: Vec<&'a [u8]>,
}

fuzz_target!(|input: Input<'_>| {
    let secrets: Vec<Secret> = input.secrets.iter().filter_map(|s| Secret::new(s).ok()).collect();
    match verify(input.body, input.signature, &secrets) {
        Ok(_) => assert!(input.signature.len() == 40 && !secrets.is_empty()),
        Err(e) => assert!(!e.code().is_empty()),
    }
    if let Some(key) = input.secrets.iter().find(|s| !s.is_empty()) {
        let sig = sign(key, input.body).unwrap();
        assert_eq!(verify(input.body, &sig, &[Secret::new(key).unwrap()]), Ok(true));
    }
});
