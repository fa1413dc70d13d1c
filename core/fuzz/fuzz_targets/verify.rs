//! verify with arbitrary signature and secret bytes never panics, and a
//! signature we make always verifies. verify_digests (the host-HMAC path)
//! gives verify's answer for the secrets' digests, and never panics on
//! arbitrary digest bytes. A KeyCache fed the secrets in turn signs as each
//! secret does.
#![no_main]

use arbitrary::Arbitrary;
use callpost_core::{sign, verify, verify_digests, KeyCache, Secret};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    body: &'a [u8],
    signature: &'a str,
    secrets: Vec<&'a [u8]>,
    digests: &'a [u8],
}

fuzz_target!(|input: Input<'_>| {
    let secrets: Vec<Secret> = input.secrets.iter().filter_map(|s| Secret::new(s).ok()).collect();
    match verify(input.body, input.signature, &secrets) {
        Ok(_) => assert!(input.signature.len() == 40 && !secrets.is_empty()),
        Err(e) => assert!(!e.code().as_str().is_empty()),
    }
    let digests: String = secrets.iter().map(|s| s.sign(input.body)).collect();
    assert_eq!(
        verify_digests(digests.as_bytes(), input.signature),
        Some(verify(input.body, input.signature, &secrets))
    );
    if let Some(Ok(_)) = verify_digests(input.digests, input.signature) {
        assert!(input.signature.len() == 40 && input.digests.len() % 40 == 0 && !input.digests.is_empty());
    }
    let mut cache = KeyCache::new();
    for key in &input.secrets {
        let cached = cache.secret(key).map(|s| s.sign(input.body));
        assert_eq!(cached, sign(key, input.body));
    }
    if let Some(key) = input.secrets.iter().find(|s| !s.is_empty()) {
        let sig = sign(key, input.body).unwrap();
        assert_eq!(verify(input.body, &sig, &[Secret::new(key).unwrap()]), Ok(true));
    }
});
