//! The core's endpoint URL parsing (src/weburl.rs) against the `url` crate,
//! through the public settings API: the same normalised URL, or the same
//! refusal, for generated URLs full of the parser's corner cases.
// Test code: a panic is how it reports, and it may print.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]

use callpost_core::{BatcherConfig, EndpointConfig, Webhooks};
use proptest::prelude::*;

/// What the settings say about a URL: its normalised form or an error code.
fn ours(input: &str) -> Result<String, &'static str> {
    Webhooks::new(&[EndpointConfig::new(input)], None)
        .map(|h| h.endpoints()[0].url().to_owned())
        .map_err(|e| e.code().as_str())
}

/// The same rules on top of the `url` crate (what the core used before).
fn reference(input: &str) -> Result<String, &'static str> {
    let u = url::Url::parse(input).map_err(|_| "invalid_url")?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err("unsupported_scheme");
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err("invalid_url");
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err("url_credentials");
    }
    if u.fragment().is_some() {
        return Err("url_fragment");
    }
    Ok(u.as_str().to_owned())
}

fn check(input: &str) -> Result<(), TestCaseError> {
    if input.contains("{{") {
        // A URL template is callpost's own (`{{path}}` placeholders, held
        // by the request vectors and the template tests), not a URL the
        // `url` crate reads.
        return Ok(());
    }
    let (got, want) = (ours(input), reference(input));
    if got == Err("unsupported_scheme") {
        // The core refuses other schemes as soon as it reads them; `url`
        // may instead find the rest invalid for that scheme.
        prop_assert!(
            matches!(want, Err("unsupported_scheme" | "invalid_url")),
            "{input:?}: {want:?}"
        );
    } else {
        prop_assert_eq!(&got, &want, "{:?}", input);
    }
    // The batcher's endpoint rule on the same parse: no credentials,
    // query or fragment.
    let batcher = callpost_core::Batcher::new(
        BatcherConfig {
            endpoint: input.to_owned(),
            ..BatcherConfig::new("wk")
        },
        callpost_core::Timestamp::MIN,
    )
    .is_ok();
    let want_batcher = url::Url::parse(input).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https")
            && u.host_str().is_some_and(|h| !h.is_empty())
            && u.username().is_empty()
            && u.password().is_none()
            && u.query().is_none()
            && u.fragment().is_none()
    });
    prop_assert_eq!(batcher, want_batcher, "batcher {:?}", input);
    Ok(())
}

fn scheme() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => Just("http".to_owned()),
        4 => Just("https".to_owned()),
        1 => Just("HtTpS".to_owned()),
        1 => prop::sample::select(vec!["ftp", "ws", "file", "mailto", "x+y.z", "1http", "", "ht tp"])
            .prop_map(str::to_owned),
    ]
}

fn host() -> impl Strategy<Value = String> {
    let label = "[a-zA-Z0-9_*~!$&'()+,;=-]{0,6}|%[0-9a-fA-F]{2}|[%#/:<>?@\\[\\]^| \\x00\\x7f]";
    prop_oneof![
        // Domains, with escapes and forbidden characters now and then.
        4 => prop::collection::vec(label, 1..4).prop_map(|l| l.join(".")),
        // xn-- labels of punycode digits.
        1 => "xn--[a-z0-9-]{0,8}(\\.[a-z]{1,3})?",
        // IPv4 in its many spellings.
        2 => "(0x[0-9a-fA-F]{0,3}|0[0-7]{0,4}|[0-9]{1,11}|09)(\\.(0x[0-9a-f]{0,2}|[0-9]{1,4})){0,4}\\.?",
        // IPv6, valid and not.
        2 => "\\[[0-9a-fA-F:.]{0,24}\\]?",
        1 => prop::sample::select(vec![
            "[::1]", "[::]", "[1:0:0:2:0:0:0:3]", "[0:0:1:0:0:0:0:0]", "[::ffff:192.168.0.1]",
            "[1:2:3:4:5:6:7:8]", "[1:2:3:4:5:6:7::]", "[::1.2.3.4]", "[1::2:3.4.5.6]",
            "[::01.2.3.4]", "[1:2:3:4:5:6:1.2.3.4]", "[1:2:3:4:5:6:7:1.2.3.4]", "[::1%25e]",
        ])
        .prop_map(str::to_owned),
    ]
}

fn url() -> impl Strategy<Value = String> {
    (
        "[ \\x00\\x1f]{0,1}",
        scheme(),
        prop::sample::select(vec!["//", "//", "/", "", "\\\\", "/\\/", "///"]),
        "([a-z:@%]{0,4}@)?",
        host(),
        "(:[0-9]{0,6}|:[0-9a-z]{1,3}|:)?",
        "([/\\\\][a-zA-Z.%2eE\t\n é{}`\"<>'|^]{0,6}){0,4}",
        "(\\?[a-z =&'\"<>é#]{0,6})?",
        "(#[a-z `é]{0,4})?",
        "[ \\t]{0,1}",
    )
        .prop_map(
            |(lead, s, slashes, user, host, port, path, query, frag, trail)| {
                format!("{lead}{s}:{slashes}{user}{host}{port}{path}{query}{frag}{trail}")
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn endpoint_urls_parse_as_the_url_crate_parses_them(input in url()) {
        check(&input)?;
    }

    #[test]
    fn arbitrary_strings_too(input in "[ -~\t\né]{0,30}") {
        check(&input)?;
    }
}

#[test]
fn the_spec_examples() {
    for input in [
        "https://hooks.example.com/segment",
        "HTTPS://HOOKS.example.com:443/a/../b?x=1",
        "http://127.1:8080",
        "http://[::ffff:7f00:1]/",
        "http://xn--caf-dma.example/",
        "http://xn--ls8h.la/",
        "http://xn---abc.example/",
        "http://xn--zca.example/",
        "http://%5B::1%5D/",
        "http:/\\h/p",
    ] {
        check(input).unwrap();
    }
}
