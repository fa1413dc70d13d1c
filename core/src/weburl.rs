//! The WHATWG URL parser (<https://url.spec.whatwg.org/#concept-basic-url-parser>),
//! cut down to what endpoint settings need: absolute `http:` and `https:`
//! URLs, no base URL, no state override.
//!
//! Written here instead of taking the `url` crate: `url` and `idna` were a
//! fifth of the wasm module's code (73 KB of 416 KB) for two calls at
//! configuration time. The cut is where the full parser needs Unicode
//! tables or other schemes:
//!
//! * A scheme other than `http` or `https` is reported as soon as it is
//!   read, whatever follows it.
//! * A host must be ASCII after percent-decoding. Internationalised names
//!   are given in their `xn--` form, which is checked to decode (RFC 3492)
//!   but not against IDNA's Unicode validity tables. The `url` crate as
//!   this workspace configured it (`idna_adapter` 1.0, no tables) refused
//!   non-ASCII hosts too.
//!
//! `tests/url_diff.rs` holds it to the `url` crate over generated URLs.

/// A parsed `http:` or `https:` URL.
#[derive(Debug)]
pub(crate) struct HttpUrl {
    /// The serialization (`href`).
    pub href: String,
    /// A username or password was given.
    pub has_credentials: bool,
    /// A `?` was given (even an empty query).
    pub has_query: bool,
    /// A `#` was given (even an empty fragment).
    pub has_fragment: bool,
}

/// Why a string is not an `http:` or `https:` URL.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum UrlError {
    /// Not a valid URL; the reason, for the error message.
    Invalid(&'static str),
    /// A URL scheme other than http or https (lower-cased).
    Scheme(String),
}

use UrlError::Invalid;

/// Parses `input` as the WHATWG parser would, for http and https.
pub(crate) fn parse(input: &str) -> Result<HttpUrl, UrlError> {
    // Leading and trailing C0 controls and spaces go; tabs and newlines
    // go from anywhere.
    let trimmed = input.trim_matches(|c: char| c <= ' ');
    let cleaned;
    let s = if trimmed.contains(['\t', '\n', '\r']) {
        cleaned = trimmed.replace(['\t', '\n', '\r'], "");
        cleaned.as_str()
    } else {
        trimmed
    };

    let colon = scheme_end(s).ok_or(Invalid("relative URL without a base"))?;
    let scheme = s[..colon].to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err(UrlError::Scheme(scheme)),
    };

    let span = authority(s, colon + 1);
    let (authority, rest) = (&s[span.clone()], &s[span.end..]);

    let (userinfo, host_port) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    // The username is what precedes the first ':', the password what
    // follows; "" and ":" give neither.
    let has_credentials = userinfo.is_some_and(|u| !u.is_empty() && u != ":");

    let mut in_brackets = false;
    let mut split = None;
    for (i, b) in host_port.bytes().enumerate() {
        match b {
            b'[' => in_brackets = true,
            b']' => in_brackets = false,
            b':' if !in_brackets => {
                split = Some(i);
                break;
            }
            _ => {}
        }
    }
    let (host, port) = match split {
        Some(i) => (&host_port[..i], Some(&host_port[i + 1..])),
        None => (host_port, None),
    };
    if host.is_empty() {
        return Err(Invalid("empty host"));
    }
    let host = parse_host(host)?;
    let port = match port {
        None | Some("") => None,
        Some(p) if p.bytes().all(|b| b.is_ascii_digit()) => {
            // Leading zeros are allowed, so saturate rather than overflow.
            let n = p.bytes().fold(0u32, |n, b| {
                n.saturating_mul(10).saturating_add(u32::from(b - b'0'))
            });
            if n > 65535 {
                return Err(Invalid("invalid port number"));
            }
            (n != default_port).then_some(n)
        }
        Some(_) => return Err(Invalid("invalid port number")),
    };

    let (rest, fragment) = match rest.find('#') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (path, query) = match rest.find('?') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };

    let mut href = String::with_capacity(s.len() + 8);
    href.push_str(&scheme);
    href.push_str("://");
    href.push_str(&host);
    if let Some(p) = port {
        href.push(':');
        href.push_str(&p.to_string());
    }
    write_path(path, &mut href);
    if let Some(q) = query {
        href.push('?');
        encode(q, &mut href, |c| QUERY_SET.contains(&c));
    }
    if let Some(f) = fragment {
        href.push('#');
        encode(f, &mut href, |c| FRAGMENT_SET.contains(&c));
    }
    Ok(HttpUrl {
        href,
        has_credentials,
        has_query: query.is_some(),
        has_fragment: fragment.is_some(),
    })
}

/// `url` as logs and answers show it: without userinfo or query
/// ([`crate::ops::shown_url`]).
pub(crate) fn shown(url: &str) -> String {
    let redacted = redact_userinfo(url);
    match redacted.find('?') {
        Some(i) => redacted[..i].to_owned(),
        None => redacted.into_owned(),
    }
}

/// `input` with any userinfo (`user:password@`) replaced by `***@`, for
/// `Debug` and error messages: a refused URL is still shown, but its
/// credentials never are. The authority is found the way [`parse`] finds
/// it; input without a scheme is treated as starting with one.
pub(crate) fn redact_userinfo(input: &str) -> std::borrow::Cow<'_, str> {
    let lead = input.len() - input.trim_start_matches(|c: char| c <= ' ').len();
    let from = scheme_end(&input[lead..]).map_or(lead, |colon| lead + colon + 1);
    let span = authority(input, from);
    match input[span.clone()].rfind('@') {
        Some(at) => format!("{}***{}", &input[..span.start], &input[span.start + at..]).into(),
        None => input.into(),
    }
}

/// Where the authority of a special URL is, given where the text after
/// the scheme's ':' starts: past any run of slashes and backslashes
/// ("http:example.com", "http:\\\\example.com"), up to the first `/`, `\`,
/// `?` or `#`.
fn authority(s: &str, from: usize) -> std::ops::Range<usize> {
    let start = s.len() - s[from..].trim_start_matches(['/', '\\']).len();
    let end = s[start..]
        .find(['/', '\\', '?', '#'])
        .map_or(s.len(), |i| start + i);
    start..end
}

/// Where the scheme's ':' is: an ASCII letter, then letters, digits, `+`,
/// `-` or `.`, then ':'.
fn scheme_end(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if !b.first()?.is_ascii_alphabetic() {
        return None;
    }
    let n = b
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')))?;
    (b[n] == b':').then_some(n)
}

/// ASCII bytes percent-encoded in each component besides C0 controls,
/// DEL and non-ASCII, which every set holds.
const PATH_SET: &[u8] = b" \"#<>?`{}";
const QUERY_SET: &[u8] = b" \"#<>'";
const FRAGMENT_SET: &[u8] = b" \"<>`";

/// Appends `s` with the bytes `extra` picks, C0 controls, DEL and every
/// non-ASCII byte written as `%XX`.
fn encode(s: &str, out: &mut String, extra: impl Fn(u8) -> bool) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for (i, b) in s.bytes().enumerate() {
        if !(0x20..0x7f).contains(&b) || extra(b) {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        } else {
            out.push_str(&s[i..=i]);
        }
    }
}

/// The path state for a special URL: `/` and `\` separate segments, `.`
/// and `..` segments (also written `%2e`) are resolved.
fn write_path(path: &str, out: &mut String) {
    let path = path.strip_prefix(['/', '\\']).unwrap_or(path);
    let mut segments: Vec<String> = Vec::new();
    let mut parts = path.split(['/', '\\']).peekable();
    while let Some(seg) = parts.next() {
        let last = parts.peek().is_none();
        let lower = seg.to_ascii_lowercase();
        if matches!(lower.as_str(), ".." | ".%2e" | "%2e." | "%2e%2e") {
            segments.pop();
            if last {
                segments.push(String::new());
            }
        } else if matches!(lower.as_str(), "." | "%2e") {
            if last {
                segments.push(String::new());
            }
        } else {
            let mut s = String::with_capacity(seg.len());
            encode(seg, &mut s, |c| PATH_SET.contains(&c));
            segments.push(s);
        }
    }
    for s in &segments {
        out.push('/');
        out.push_str(s);
    }
}

/// The host parser for special URLs (not opaque hosts).
fn parse_host(input: &str) -> Result<String, UrlError> {
    if let Some(inner) = input.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or(Invalid("invalid IPv6 address"))?;
        let pieces = parse_ipv6(inner).ok_or(Invalid("invalid IPv6 address"))?;
        return Ok(format!("[{}]", write_ipv6(&pieces)));
    }
    let mut domain = percent_decode(input);
    if !domain.is_ascii() {
        return Err(Invalid(
            "non-ASCII host (give internationalised names in their xn-- form)",
        ));
    }
    domain.make_ascii_lowercase();
    if domain.iter().any(|&b| is_forbidden_domain_byte(b)) {
        return Err(Invalid("invalid domain character"));
    }
    // Every byte is ASCII, so this cannot fail.
    let domain = String::from_utf8(domain).map_err(|_| Invalid("invalid domain character"))?;
    for label in domain.split('.') {
        if let Some(puny) = label.strip_prefix("xn--") {
            if !punycode_label_ok(puny) {
                return Err(Invalid("invalid punycode label"));
            }
        }
    }
    if ends_in_a_number(&domain) {
        let ip = parse_ipv4(&domain).ok_or(Invalid("invalid IPv4 address"))?;
        let [a, b, c, d] = ip.to_be_bytes();
        return Ok(format!("{a}.{b}.{c}.{d}"));
    }
    Ok(domain)
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |j: usize| b.get(j).and_then(|c| char::from(*c).to_digit(16));
        match (b[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Forbidden domain code points, ASCII part.
fn is_forbidden_domain_byte(b: u8) -> bool {
    b <= 0x20 || b == 0x7f || b"#%/:<>?@[\\]^|".contains(&b)
}

/// The punycode part of an `xn--` label decodes (RFC 3492) to a label
/// that IDNA could accept without Unicode tables: no U+FFFD, no joiner in
/// first place, at most 1000 code points (IDNA's bound against quadratic
/// decoding, with 2000 for the input).
fn punycode_label_ok(input: &str) -> bool {
    const BASE: u32 = 36;
    const T_MIN: u32 = 1;
    const T_MAX: u32 = 26;
    if input.is_empty() || input.ends_with('-') || input.len() > 2000 {
        return false;
    }
    let (basic, deltas) = match input.rfind('-') {
        Some(0) | None => ("", input),
        Some(i) => (&input[..i], &input[i + 1..]),
    };
    let mut out: Vec<char> = basic.chars().collect();
    let (mut n, mut i, mut bias) = (0x80u32, 0u32, 72u32);
    let mut digits = deltas.bytes();
    let mut first = true;
    while let Some(mut byte) = digits.next() {
        let old_i = i;
        let mut w = 1u32;
        let mut k = BASE;
        loop {
            let digit = match byte {
                b'a'..=b'z' => u32::from(byte - b'a'),
                b'0'..=b'9' => u32::from(byte - b'0') + 26,
                _ => return false,
            };
            let Some(next) = digit.checked_mul(w).and_then(|p| i.checked_add(p)) else {
                return false;
            };
            i = next;
            let t = if k <= bias {
                T_MIN
            } else if k >= bias + T_MAX {
                T_MAX
            } else {
                k - bias
            };
            if digit < t {
                break;
            }
            let Some(next) = w.checked_mul(BASE - t) else {
                return false;
            };
            w = next;
            k += BASE;
            let Some(b) = digits.next() else {
                return false;
            };
            byte = b;
        }
        let len = out.len() as u32 + 1;
        bias = adapt(i - old_i, len, first);
        first = false;
        let Some(code) = n.checked_add(i / len) else {
            return false;
        };
        n = code;
        i %= len;
        let Some(c) = char::from_u32(n) else {
            return false;
        };
        out.insert(i as usize, c);
        i += 1;
    }
    !out.contains(&'\u{FFFD}')
        && !matches!(out.first(), Some('\u{200C}' | '\u{200D}'))
        && out.len() <= 1000
}

fn adapt(delta: u32, points: u32, first: bool) -> u32 {
    let mut delta = delta / if first { 700 } else { 2 };
    delta += delta / points;
    let mut k = 0;
    while delta > (35 * 26) / 2 {
        delta /= 35;
        k += 36;
    }
    k + (36 * delta) / (delta + 38)
}

/// Whether the last label (ignoring one trailing dot) is a number, which
/// makes the host an IPv4 address or invalid.
fn ends_in_a_number(domain: &str) -> bool {
    let mut labels: Vec<&str> = domain.split('.').collect();
    if labels.last() == Some(&"") {
        if labels.len() == 1 {
            return false;
        }
        labels.pop();
    }
    let last = labels.last().copied().unwrap_or("");
    (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit())) || ipv4_number(last).is_some()
}

/// One IPv4 part: decimal, `0x` hex or `0` octal; `None` if not a number.
fn ipv4_number(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    digits.chars().try_fold(0u64, |n, c| {
        let d = c.to_digit(radix)?;
        // Saturate: any value this large is refused later anyway.
        Some(
            n.saturating_mul(u64::from(radix))
                .saturating_add(u64::from(d)),
        )
    })
}

fn parse_ipv4(domain: &str) -> Option<u32> {
    let mut parts: Vec<&str> = domain.split('.').collect();
    if parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    if parts.len() > 4 {
        return None;
    }
    let numbers = parts
        .iter()
        .map(|p| ipv4_number(p))
        .collect::<Option<Vec<u64>>>()?;
    let (last, init) = numbers.split_last()?;
    if init.iter().any(|&n| n > 255) || *last >= 256u64.pow(5 - numbers.len() as u32) {
        return None;
    }
    let mut ip = *last;
    for (i, &n) in init.iter().enumerate() {
        ip += n << (8 * (3 - i));
    }
    u32::try_from(ip).ok()
}

/// The IPv6 parser, step for step.
fn parse_ipv6(input: &str) -> Option<[u16; 8]> {
    let c = input.as_bytes();
    let at = |p: usize| c.get(p).copied();
    let mut address = [0u16; 8];
    let mut piece = 0usize;
    let mut compress: Option<usize> = None;
    let mut p = 0usize;
    if at(0) == Some(b':') {
        if at(1) != Some(b':') {
            return None;
        }
        p = 2;
        piece = 1;
        compress = Some(1);
    }
    while p < c.len() {
        if piece == 8 {
            return None;
        }
        if c[p] == b':' {
            if compress.is_some() {
                return None;
            }
            p += 1;
            piece += 1;
            compress = Some(piece);
            continue;
        }
        let (mut value, mut length) = (0u16, 0usize);
        while length < 4 {
            let Some(d) = at(p).and_then(|b| char::from(b).to_digit(16)) else {
                break;
            };
            value = value * 16 + d as u16;
            p += 1;
            length += 1;
        }
        match at(p) {
            Some(b'.') => {
                if length == 0 || piece > 6 {
                    return None;
                }
                p -= length;
                let mut seen = 0;
                while p < c.len() {
                    if seen > 0 {
                        if c[p] == b'.' && seen < 4 {
                            p += 1;
                        } else {
                            return None;
                        }
                    }
                    if !at(p)?.is_ascii_digit() {
                        return None;
                    }
                    let mut part: Option<u16> = None;
                    while let Some(d) = at(p).filter(u8::is_ascii_digit) {
                        let d = u16::from(d - b'0');
                        part = match part {
                            None => Some(d),
                            Some(0) => return None,
                            Some(v) => Some(v * 10 + d),
                        };
                        if part > Some(255) {
                            return None;
                        }
                        p += 1;
                    }
                    address[piece] = address[piece] * 0x100 + part?;
                    seen += 1;
                    if seen == 2 || seen == 4 {
                        piece += 1;
                    }
                }
                if seen != 4 {
                    return None;
                }
                break;
            }
            Some(b':') => {
                p += 1;
                if p == c.len() {
                    return None;
                }
            }
            Some(_) => return None,
            None => {}
        }
        address[piece] = value;
        piece += 1;
    }
    match compress {
        Some(start) => {
            let mut swaps = piece - start;
            let mut i = 7;
            while i != 0 && swaps > 0 {
                address.swap(i, start + swaps - 1);
                i -= 1;
                swaps -= 1;
            }
        }
        None if piece != 8 => return None,
        None => {}
    }
    Some(address)
}

/// Lower-case hex pieces, the first longest run of two or more zero
/// pieces written `::`.
fn write_ipv6(a: &[u16; 8]) -> String {
    let (mut best, mut best_len) = (None, 1);
    let mut i = 0;
    while i < 8 {
        let run = a[i..].iter().take_while(|&&x| x == 0).count();
        if run > best_len {
            best = Some(i);
            best_len = run;
        }
        i += run.max(1);
    }
    let mut out = String::with_capacity(39);
    let mut i = 0;
    while i < 8 {
        if Some(i) == best {
            out.push_str(if i == 0 { "::" } else { ":" });
            i += best_len;
            continue;
        }
        out.push_str(&format!("{:x}", a[i]));
        if i < 7 {
            out.push(':');
        }
        i += 1;
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn href(s: &str) -> String {
        parse(s).unwrap().href
    }

    #[test]
    fn normalises_as_browsers_do() {
        for (input, want) in [
            ("HTTP://Example.COM", "http://example.com/"),
            (
                " https://h.example:443/a/./b/../c?q= x ",
                "https://h.example/a/c?q=%20x",
            ),
            ("http:\\\\h\\p", "http://h/p"),
            ("http:h.example", "http://h.example/"),
            ("http://ex%41mple.com:0080", "http://example.com/"),
            ("http://0x7f.1/", "http://127.0.0.1/"),
            ("http://[0:0::1]:8080/", "http://[::1]:8080/"),
            ("http://[::ffff:1.2.3.4]/", "http://[::ffff:102:304]/"),
            ("http://[1:0:0:2:0:0:0:3]/", "http://[1:0:0:2::3]/"),
            ("http://h/é{}`", "http://h/%C3%A9%7B%7D%60"),
            ("http://h/%2e/a/%2E%2e/b", "http://h/b"),
            ("http://@h", "http://h/"),
            ("http://xn--caf-dma.example", "http://xn--caf-dma.example/"),
            ("h\tttp://h\n/x", "http://h/x"),
        ] {
            assert_eq!(href(input), want, "{input}");
        }
    }

    #[test]
    fn credentials_are_redacted_wherever_the_authority_is() {
        for (input, want) in [
            ("https://user:pw@h.example/p@x", "https://***@h.example/p@x"),
            ("http:\\\\u:p@h", "http:\\\\***@h"),
            (" HTTP://a@b@h?q@", " HTTP://***@h?q@"),
            ("u:p@h/x", "u:***@h/x"),
            ("//user:pw@h", "//***@h"),
            ("https://h.example/a@b", "https://h.example/a@b"),
            ("no at sign", "no at sign"),
        ] {
            assert_eq!(redact_userinfo(input), want, "{input}");
        }
    }

    #[test]
    fn refuses_what_browsers_refuse() {
        for input in [
            "//h.example",
            "http://",
            "http://u@",
            "http://h:65536",
            "http://h:8o",
            "http://a b",
            "http://1.2.3.4.5",
            "http://foo.09",
            "http://[::1",
            "http://[1::2::3]",
            "http://caf%C3%A9.example",
            "http://xn--.example",
            "http://xn--a-.example",
            "http://a%2525b",
        ] {
            assert!(matches!(parse(input), Err(Invalid(_))), "{input}");
        }
        assert_eq!(
            parse("ftp://h").unwrap_err(),
            UrlError::Scheme("ftp".into())
        );
        assert!(parse("http://u:p@h/").unwrap().has_credentials);
        assert!(!parse("http://:@h/").unwrap().has_credentials);
        assert!(parse("http://h/#").unwrap().has_fragment);
        assert!(parse("http://h/?").unwrap().has_query);
    }
}
