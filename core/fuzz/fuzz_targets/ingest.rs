//! The relay's ingest path, driven as a host drives it: the route from the
//! path, the headers checked, the body inflated when it is declared gzip,
//! the write key found (header, else the body's top-level scan), then the
//! whole request parsed. Request paths, headers, bodies and gzip streams
//! are arbitrary; the shared vectors (testdata/ingest.json) give the known
//! routes and header sets, with their expected answers.
//!
//! Asserts: no panic; every refusal has a registry code of an ingest,
//! JSON or call class, the status that code calls for, and a JSON answer
//! that parses to that code and message; inflating never gives more than
//! `MAX_REQUEST_BYTES` and gives back exactly what was compressed; every
//! accepted call's message is JSON in `JSON.stringify` form, with unique
//! top-level keys and the `messageId`, `type` and `receivedAt` of the
//! call; a call refused alone fails `Call::from_json_str` with the same
//! code (or breaks the messageId rule); the header's write key wins over
//! the body's; and, checked against serde_json's reading of the body's
//! top level: the scan and the full parse both read the last `writeKey`
//! member (as `JSON.parse` keeps the last of a repeated key), the batch's
//! call count and refusals follow its shape.
#![no_main]

use arbitrary::Arbitrary;
use base64::Engine as _;
use callpost_core::ingest::{
    self, IngestError, Route, MAX_BATCH_CALLS, MAX_CALL_BYTES, MAX_MESSAGE_ID_BYTES, MAX_REQUEST_BYTES,
};
use callpost_core::{Call, Code, ErrorClass, Timestamp, Value};
use libfuzzer_sys::fuzz_target;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::io::Write as _;
use std::sync::OnceLock;

/// A grown body stops just past the request limit: enough to cross it,
/// and anything longer is refused the same way.
const GROW_LIMIT: usize = MAX_REQUEST_BYTES + 4096;

#[derive(Arbitrary, Debug)]
enum Path<'a> {
    /// One of testdata's `routes`, with its expected route.
    Known(u8),
    Any(&'a str),
}

#[derive(Arbitrary, Debug)]
enum Headers<'a> {
    /// One of testdata's `headers` sets, with its expected answer.
    Vector(u8),
    Custom {
        content_type: Option<Text<'a>>,
        content_encoding: Option<Text<'a>>,
        content_length: Option<Length>,
    },
}

#[derive(Arbitrary, Debug)]
enum Text<'a> {
    /// One of the header values the vectors use, and a few near misses.
    Known(u8),
    Any(&'a str),
}

#[derive(Arbitrary, Debug)]
enum Length {
    /// The length of the body as sent.
    Actual,
    Declared(u32),
}

#[derive(Arbitrary, Debug)]
enum Auth<'a> {
    /// One of the `Authorization` values in the vectors.
    Known(u8),
    /// `Basic base64(user:password)`, whose write key is known.
    Basic { user: &'a str, password: &'a str },
    Raw(&'a str),
}

/// The body compressed on the wire by the target (a valid gzip stream,
/// split into two members at `split` when that falls inside the body).
#[derive(Arbitrary, Debug)]
struct Gzip {
    level: u8,
    split: u16,
}

/// `body[at..at + len]` repeated `times` times in place: large batches,
/// long strings and bodies past the limits from a short input. `times` is
/// a byte so that most grown bodies stay well under the limits (a u16
/// took nearly every one past them, to the same refusal, at the cost of
/// half a megabyte each); crossing them takes a longer unit.
#[derive(Arbitrary, Debug)]
struct Grow {
    at: u16,
    len: u16,
    times: u8,
}

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    path: Path<'a>,
    headers: Headers<'a>,
    authorization: Option<Auth<'a>>,
    gzip: Option<Gzip>,
    grow: Option<Grow>,
    received_at: i64,
    ids: u64,
    body: &'a [u8],
}

/// What the vectors give the target.
struct Vectors {
    routes: Vec<(String, Option<String>)>,
    headers: Vec<HeaderVector>,
    texts: Vec<String>,
    authorizations: Vec<String>,
}

struct HeaderVector {
    content_type: Option<String>,
    content_encoding: Option<String>,
    content_length: Option<usize>,
    /// `Ok(gzip)` or `Err((code, status))`.
    expect: Result<bool, (String, u16)>,
}

fn vectors() -> &'static Vectors {
    static VECTORS: OnceLock<Vectors> = OnceLock::new();
    VECTORS.get_or_init(|| {
        let v: serde_json::Value =
            serde_json::from_str(include_str!("../../../testdata/ingest.json")).expect("testdata/ingest.json");
        let s = |v: &serde_json::Value| v.as_str().map(str::to_owned);
        let routes = v["routes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (s(&r[0]).unwrap(), s(&r[1])))
            .collect();
        let headers: Vec<HeaderVector> = v["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| HeaderVector {
                content_type: s(&h["content_type"]),
                content_encoding: s(&h["content_encoding"]),
                content_length: h["content_length"].as_u64().map(|n| n as usize),
                expect: match h["expect"]["gzip"].as_bool() {
                    Some(gzip) => Ok(gzip),
                    None => Err((s(&h["expect"]["code"]).unwrap(), h["expect"]["status"].as_u64().unwrap() as u16)),
                },
            })
            .collect();
        let mut texts: Vec<String> = headers
            .iter()
            .flat_map(|h| [h.content_type.clone(), h.content_encoding.clone()])
            .flatten()
            .collect();
        // Near misses of the accepted values.
        for extra in [
            "", " ", ";", " gzip ", "x-gzip", "deflate", "gzip, identity", "identity;q=1", "application/json;",
            " application/json ; charset=utf-8", "application/jsonp", "text/plain\u{3000}", "\u{3000}gzip", "gzİp",
        ] {
            texts.push(extra.to_owned());
        }
        // The order run.sh's seeds rely on: write_keys', then requests'.
        let mut authorizations: Vec<String> = Vec::new();
        for a in v["write_keys"].as_array().unwrap().iter().chain(v["requests"].as_array().unwrap()) {
            if let Some(a) = s(&a["authorization"]) {
                if !authorizations.contains(&a) {
                    authorizations.push(a);
                }
            }
        }
        Vectors { routes, headers, texts, authorizations }
    })
}

fn pick<T>(list: &[T], i: u8) -> &T {
    &list[usize::from(i) % list.len()]
}

/// Every refusal: a registry code of the classes the ingest path raises,
/// the status that code calls for, `Retry-After` exactly on 503, and a
/// JSON answer holding the code and the message.
fn check_error(e: &IngestError) {
    let code = e.code();
    assert!(Code::ALL.contains(&code), "{code:?} is not in the registry");
    assert_eq!(Code::parse(code.as_str()), Some(code));
    assert!(
        matches!(code.class(), ErrorClass::Ingest | ErrorClass::JsonValue | ErrorClass::InvalidCall),
        "{code:?} is of class {:?}",
        code.class()
    );
    let status = e.status();
    assert!([400, 401, 404, 413, 415, 503].contains(&status), "{code:?}: status {status}");
    let expected: &[u16] = match code {
        Code::UnknownRoute => &[404],
        Code::UnsupportedEncoding | Code::UnsupportedMediaType => &[415],
        Code::MissingWriteKey | Code::UnknownWriteKey => &[401],
        Code::Overloaded | Code::Unavailable => &[503],
        // Over the limit as sent (400, as the vectors say) or as inflated.
        Code::BatchTooLarge => &[400, 413],
        _ => &[400],
    };
    assert!(expected.contains(&status), "{code:?} answered {status}");
    assert_eq!(e.retry_after().is_some(), status == 503, "{code:?}");
    let answer: serde_json::Value = serde_json::from_str(&e.to_json()).expect("the error answer is JSON");
    let answer = answer.as_object().expect("the error answer is an object");
    assert_eq!(answer.len(), 2, "{answer:?}");
    assert_eq!(answer["code"], code.as_str());
    assert_eq!(answer["message"], e.to_string());
}

/// A body's top level as serde_json reads it: every member in order,
/// repeated keys kept, the values of `writeKey` and `batch` kept in the
/// shape that matters here. The reference for the core's scan and split.
#[derive(Debug)]
enum Top {
    NotObject,
    Object(Vec<(String, Member)>),
}

#[derive(Debug)]
enum Member {
    Str(String),
    Array(usize),
    Other,
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            // Other members are only checked for syntax, as the core skips
            // them: no number range or depth rule applies.
            let member = if key == "writeKey" || key == "batch" {
                map.next_value_seed(MemberSeed)?
            } else {
                map.next_value::<IgnoredAny>()?;
                Member::Other
            };
            members.push((key, member));
        }
        Ok(Top::Object(members))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Top, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Top::NotObject)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Top, E> {
        Ok(Top::NotObject)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Top, E> {
        Ok(Top::NotObject)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Top, E> {
        Ok(Top::NotObject)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Top, E> {
        Ok(Top::NotObject)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Top, E> {
        Ok(Top::NotObject)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Top, E> {
        Ok(Top::NotObject)
    }
}

struct MemberSeed;

impl<'de> DeserializeSeed<'de> for MemberSeed {
    type Value = Member;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Member, D::Error> {
        d.deserialize_any(MemberVisitor)
    }
}

struct MemberVisitor;

impl<'de> Visitor<'de> for MemberVisitor {
    type Value = Member;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Member, E> {
        Ok(Member::Str(s.to_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Member, A::Error> {
        let mut n = 0;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            n += 1;
        }
        Ok(Member::Array(n))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Member, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Member::Other)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Member, E> {
        Ok(Member::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Member, E> {
        Ok(Member::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Member, E> {
        Ok(Member::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Member, E> {
        Ok(Member::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Member, E> {
        Ok(Member::Other)
    }
}

impl<'de> serde::Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Top, D::Error> {
        d.deserialize_any(TopVisitor)
    }
}

/// The top-level keys of a JSON object, repeats kept.
struct Keys(Vec<String>);

impl<'de> serde::Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Keys;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some((k, IgnoredAny)) = map.next_entry::<String, IgnoredAny>()? {
                    keys.push(k);
                }
                Ok(Keys(keys))
            }
        }
        d.deserialize_map(V)
    }
}

fn grow(body: &[u8], g: &Grow) -> Vec<u8> {
    let at = usize::from(g.at).min(body.len());
    let len = usize::from(g.len).min(body.len() - at);
    let (head, rest) = body.split_at(at);
    let (unit, tail) = rest.split_at(len);
    let fixed = head.len() + tail.len();
    let times = match len {
        0 => 0,
        _ => usize::from(g.times).min(GROW_LIMIT.saturating_sub(fixed) / len + 1),
    };
    let mut out = Vec::with_capacity(fixed + unit.len() * times);
    out.extend_from_slice(head);
    for _ in 0..times {
        out.extend_from_slice(unit);
    }
    out.extend_from_slice(tail);
    out
}

fn gzip(body: &[u8], g: &Gzip) -> Vec<u8> {
    // Any level on a body of a usual size; on a grown one only the
    // fastest two: deflating those at the higher levels took a third of
    // the fuzzer's time.
    let level = match body.len() {
        0..=65_536 => u32::from(g.level % 10),
        _ => u32::from(g.level % 2),
    };
    let level = flate2::Compression::new(level);
    let split = usize::from(g.split);
    let parts: Vec<&[u8]> = if split > 0 && split < body.len() {
        vec![&body[..split], &body[split..]]
    } else {
        vec![body]
    };
    let mut out = Vec::new();
    for part in parts {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), level);
        e.write_all(part).unwrap();
        out.extend(e.finish().unwrap());
    }
    out
}

fn iso(t: Timestamp) -> String {
    let mut out = Vec::new();
    t.write_iso(&mut out);
    String::from_utf8(out).unwrap()
}

fuzz_target!(|input: Input<'_>| {
    let v = vectors();

    // The route.
    let path = match &input.path {
        Path::Known(i) => pick(&v.routes, *i).0.as_str(),
        Path::Any(p) => p,
    };
    let route = Route::from_path(path);
    match &input.path {
        Path::Known(i) => {
            let expected = pick(&v.routes, *i).1.as_deref();
            let got = route.map(|r| match r {
                Route::Batch => "batch",
                Route::Single(kind) => kind.as_str(),
            });
            assert_eq!(got, expected, "{path}");
        }
        Path::Any(p) => assert!(route.is_none() || p.starts_with("/v1/"), "{p:?}"),
    }

    // The body as sent.
    let mut body = match &input.grow {
        Some(g) => grow(input.body, g),
        None => input.body.to_vec(),
    };
    let wire = match &input.gzip {
        Some(g) => gzip(&body, g),
        None => body.clone(),
    };

    // The headers, before the body is read.
    let (content_type, content_encoding, content_length, expect) = match &input.headers {
        Headers::Vector(i) => {
            let h = pick(&v.headers, *i);
            (h.content_type.as_deref(), h.content_encoding.as_deref(), h.content_length, Some(&h.expect))
        }
        Headers::Custom { content_type, content_encoding, content_length } => {
            fn text<'a>(v: &'a Vectors, t: &Option<Text<'a>>) -> Option<&'a str> {
                t.as_ref().map(|t| match t {
                    Text::Known(i) => pick(&v.texts, *i).as_str(),
                    Text::Any(s) => s,
                })
            }
            let length = content_length.as_ref().map(|l| match l {
                Length::Actual => wire.len(),
                Length::Declared(n) => *n as usize,
            });
            (text(v, content_type), text(v, content_encoding), length, None)
        }
    };
    let checked = ingest::check_headers(content_type, content_encoding, content_length);
    if let Err(e) = &checked {
        check_error(e);
        assert!(
            [Code::UnsupportedMediaType, Code::UnsupportedEncoding, Code::BatchTooLarge].contains(&e.code()),
            "{e:?}"
        );
        if e.code() == Code::BatchTooLarge {
            assert!(content_length.is_some_and(|n| n > MAX_REQUEST_BYTES));
        }
    }
    // A declared length over the limit is refused before the body is read
    // (for that reason or an earlier one).
    assert!(checked.is_err() || content_length.is_none_or(|n| n <= MAX_REQUEST_BYTES));
    if let Some(expect) = expect {
        match (&checked, expect) {
            (Ok(gzip), Ok(want)) => assert_eq!(gzip, want),
            (Err(e), Err((code, status))) => assert_eq!((e.code().as_str(), e.status()), (code.as_str(), *status)),
            (got, want) => panic!("headers {content_type:?} {content_encoding:?} {content_length:?}: {got:?}, want {want:?}"),
        }
    }
    let Ok(gzipped) = checked else { return };

    // The body read (a host reads at most the limit of it) and inflated.
    if gzipped {
        if wire.len() > MAX_REQUEST_BYTES {
            return;
        }
        match ingest::inflate(&wire) {
            Ok(inflated) => {
                assert!(inflated.len() <= MAX_REQUEST_BYTES, "inflated to {}", inflated.len());
                if input.gzip.is_some() {
                    assert_eq!(inflated, body, "inflate gives back what was compressed");
                }
                body = inflated;
            }
            Err(e) => {
                check_error(&e);
                assert!([Code::InvalidCompression, Code::BatchTooLarge].contains(&e.code()), "{e:?}");
                if e.code() == Code::BatchTooLarge {
                    assert_eq!(e.status(), 413);
                }
                if input.gzip.is_some() {
                    assert!(body.len() > MAX_REQUEST_BYTES, "our own gzip of {} bytes refused: {e:?}", body.len());
                    assert_eq!(e.code(), Code::BatchTooLarge);
                }
                return;
            }
        }
    } else {
        body = wire;
    }

    // The write key: the header's user, else the body's, found by a scan
    // that stops at it.
    let scanned = ingest::body_write_key(&body);
    assert_ne!(scanned.as_deref(), Some(""), "an empty key is no key");
    let authorization = input.authorization.as_ref().map(|a| match a {
        Auth::Known(i) => pick(&v.authorizations, *i).clone(),
        Auth::Basic { user, password } => {
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
        }
        Auth::Raw(s) => (*s).to_owned(),
    });
    let key = ingest::write_key(authorization.as_deref(), scanned.as_deref());
    let from_header = ingest::write_key(authorization.as_deref(), None);
    assert_ne!(from_header.as_deref(), Some(""));
    match &from_header {
        // The header wins, whatever the body says.
        Some(user) => assert_eq!(key.as_deref(), Some(user.as_str())),
        None => assert_eq!(key, scanned),
    }
    if let Some(Auth::Basic { user, .. }) = &input.authorization {
        let user = user.split(':').next().unwrap_or_default();
        assert_eq!(from_header.as_deref(), (!user.is_empty()).then_some(user));
    }
    let known = |k: &str| (k == "wk_body" || k == "wk_header").then_some(());
    match ingest::authenticate(authorization.as_deref(), scanned.as_deref(), known) {
        Ok(()) => assert!(key.as_deref().is_some_and(|k| known(k).is_some())),
        Err(e) => {
            check_error(&e);
            let want = if key.is_none() { Code::MissingWriteKey } else { Code::UnknownWriteKey };
            assert_eq!(e.code(), want);
        }
    }

    // The whole request. Route::from_path said no: the host answers 404.
    let Some(route) = route else {
        check_error(&IngestError::UnknownRoute);
        return;
    };
    let received_at = Timestamp::saturating_from_millis(input.received_at);
    let mut n = 0u64;
    let mut random = || {
        n += 1;
        let mut r = [0u8; 16];
        r[..8].copy_from_slice(&input.ids.to_le_bytes());
        r[8..].copy_from_slice(&n.to_le_bytes());
        r
    };
    let parsed = ingest::parse_request(route, &body, received_at, &mut random);
    let text = std::str::from_utf8(&body).ok();
    // serde_json's reading of the top level, when it has one (it refuses a
    // few bodies the core takes: numbers past f64 in a writeKey or batch
    // value, nesting past 128 there).
    let top = text.filter(|_| body.len() <= MAX_REQUEST_BYTES).and_then(|t| serde_json::from_str::<Top>(t).ok());

    // The scan reads the last writeKey member, as JSON.parse keeps the
    // last of a repeated key: a non-empty string is the key, anything else
    // is none.
    let expected_key: Option<&str> = match &top {
        Some(Top::Object(members)) => match members.iter().rev().find(|(k, _)| k == "writeKey") {
            Some((_, Member::Str(s))) if !s.is_empty() => Some(s.as_str()),
            _ => None,
        },
        _ => None,
    };
    if top.is_some() {
        assert_eq!(scanned.as_deref(), expected_key, "the scan reads the last writeKey");
    }

    let parsed = match parsed {
        Err(e) => {
            check_error(&e);
            assert_eq!(e.status(), 400, "{e:?}");
            let code = e.code();
            if body.len() > MAX_REQUEST_BYTES {
                assert_eq!(code, Code::BatchTooLarge);
                return;
            }
            // Refusals that a member's value can cause though its syntax
            // is fine (the batch's sentAt, context, integrations, writeKey,
            // or a single call's fields).
            let value_rule =
                [Code::IntegerOutOfRange, Code::NonFiniteNumber, Code::TooDeep, Code::InvalidUnicode].contains(&code);
            match (&top, route) {
                (Some(Top::NotObject), _) => assert_eq!(code, Code::InvalidBatch, "{e:?}"),
                (Some(Top::Object(members)), Route::Batch) => {
                    let batches: Vec<&Member> =
                        members.iter().filter(|(k, _)| k == "batch").map(|(_, m)| m).collect();
                    let last = match batches.last() {
                        Some(Member::Array(n)) if batches.iter().all(|m| matches!(m, Member::Array(_))) => Some(*n),
                        _ => None,
                    };
                    let allowed = match last {
                        None => code == Code::InvalidBatch,
                        Some(n) if n > MAX_BATCH_CALLS => code == Code::TooManyCalls,
                        Some(_) => code == Code::CallTooLarge,
                    };
                    assert!(allowed || value_rule, "{e:?} for a body of shape {top:?}");
                }
                (Some(Top::Object(_)), Route::Single(_)) => assert!(
                    code == Code::CallTooLarge || matches!(code.class(), ErrorClass::InvalidCall | ErrorClass::JsonValue),
                    "{e:?}"
                ),
                (None, _) => {}
            }
            if code == Code::CallTooLarge {
                assert!(body.len() > MAX_CALL_BYTES);
            }
            return;
        }
        Ok(parsed) => parsed,
    };

    // Accepted: within the limits, every call accounted for in order.
    assert!(body.len() <= MAX_REQUEST_BYTES);
    let text = text.expect("an accepted body is UTF-8");
    assert!(parsed.calls.len() <= MAX_BATCH_CALLS);
    match (&top, route) {
        (Some(Top::NotObject), _) => panic!("a body that is not an object was accepted"),
        (Some(Top::Object(members)), Route::Batch) => {
            let last = members.iter().rev().find(|(k, _)| k == "batch").map(|(_, m)| m);
            match last {
                Some(Member::Array(n)) => assert_eq!(parsed.calls.len(), *n, "one result per call"),
                other => panic!("accepted with batch {other:?}"),
            }
        }
        (_, Route::Single(_)) => assert_eq!(parsed.calls.len(), 1),
        (None, Route::Batch) => {}
    }
    // The full parse reads the same key as the scan.
    if top.is_some() {
        assert_eq!(
            parsed.body_write_key.as_deref().filter(|k| !k.is_empty()),
            expected_key,
            "the full parse reads the key the scan read"
        );
    }

    let received = iso(received_at);
    for (i, call) in parsed.calls.iter().enumerate() {
        match call {
            Ok(a) => {
                assert_eq!(a.index, i);
                let _ = a.webhooks_enabled();
                let id = &a.message_id;
                assert!(!id.is_empty() && id.len() <= MAX_MESSAGE_ID_BYTES, "messageId of {} bytes", id.len());
                assert!(!id.contains('\0'), "messageId with U+0000");
                assert_eq!(a.call.message_id.as_deref(), Some(id.as_str()));
                let message: serde_json::Value = serde_json::from_str(&a.message).expect("the message is JSON");
                assert_eq!(message["messageId"].as_str(), Some(id.as_str()), "{}", a.message);
                assert_eq!(message["type"].as_str(), Some(a.call.kind.as_str()));
                if let Route::Single(kind) = route {
                    assert_eq!(a.call.kind, kind);
                }
                assert_eq!(message["receivedAt"].as_str(), Some(received.as_str()));
                for stamp in ["timestamp", "originalTimestamp", "sentAt"] {
                    if let Some(t) = message.get(stamp) {
                        Timestamp::parse(t.as_str().expect("a time is a string")).expect("a time parses");
                    }
                }
                assert!(message.get("timestamp").is_some());
                let Keys(keys) = serde_json::from_str(&a.message).unwrap();
                let mut unique = keys.clone();
                unique.sort();
                unique.dedup();
                assert_eq!(unique.len(), keys.len(), "repeated keys in {keys:?}");
                let again = Value::from_json_str(&a.message).expect("the core reads its message").to_json_string().unwrap();
                assert_eq!(again, a.message, "the message is in JSON.stringify form");
            }
            Err(r) => {
                assert_eq!(r.index, i);
                assert_eq!(route, Route::Batch, "a single call is refused with its request");
                assert!(matches!(r.error.code().class(), ErrorClass::InvalidCall | ErrorClass::JsonValue));
                assert!(text.contains(&r.text));
                match Call::from_json_str(&r.text) {
                    Err(e) => assert_eq!(e.code(), r.error.code(), "refused alone as it parses alone"),
                    // Valid as a call: only the store's messageId rule refuses it.
                    Ok(c) => {
                        assert_eq!(r.error.code(), Code::InvalidField);
                        let id = c.message_id.unwrap_or_default();
                        assert!(id.len() > MAX_MESSAGE_ID_BYTES || id.contains('\0'));
                    }
                }
            }
        }
    }
});
