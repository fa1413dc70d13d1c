//! Endpoint URL parsing (the core's own WHATWG subset, src/weburl.rs) never
//! panics, refuses with a settings code, and normalises to a fixed point:
//! an accepted URL's normalised form is ASCII http(s) and parses to itself.
//! (core/tests/url_diff.rs compares it with the `url` crate.)
#![no_main]

use callpost_core::{Batcher, BatcherConfig, EndpointConfig, Webhooks};
use libfuzzer_sys::fuzz_target;

fn normalise(url: &str) -> Result<String, &'static str> {
    Webhooks::new(&[EndpointConfig::new(url)], None)
        .map(|h| h.endpoints()[0].url().to_owned())
        .map_err(|e| e.code().as_str())
}

fuzz_target!(|input: &str| {
    match normalise(input) {
        Ok(href) => {
            // ASCII but for a URL template's placeholder paths, which name
            // keys of the call as they are written.
            let mut outside = String::new();
            let mut rest = href.as_str();
            while let Some(open) = rest.find("{{") {
                outside.push_str(&rest[..open]);
                let Some(close) = rest[open + 2..].find("}}") else { break };
                rest = &rest[open + 2 + close + 2..];
            }
            outside.push_str(rest);
            assert!(outside.is_ascii(), "{href:?}");
            assert!(href.starts_with("http://") || href.starts_with("https://"));
            assert_eq!(normalise(&href).as_deref(), Ok(href.as_str()), "{input:?}");
        }
        Err(code) => assert!(
            ["invalid_url", "unsupported_scheme", "url_credentials", "url_fragment"].contains(&code),
            "{code}"
        ),
    }
    let config = BatcherConfig {
        endpoint: input.to_owned(),
        ..BatcherConfig::new("wk")
    };
    let _ = Batcher::new(config, callpost_core::Timestamp::MIN);
});
