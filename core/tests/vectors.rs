//! The shared vectors in `testdata/`, which the Python and JS suites read too.
// Test code: a panic is how it reports, and it may print.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]

use callpost_core::standard::{self, StandardError, StandardSecret};
use callpost_core::{
    audience::trait_name, sign, verify, AudienceSync, Call, Map, Secret, Timestamp, Value, Webhooks,
};

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms).unwrap()
}

fn load(text: &str) -> Value {
    // Our own parser keeps key order, which the vectors depend on.
    Value::from_json_str(text).unwrap()
}

fn get<'a>(v: &'a Value, k: &str) -> &'a Value {
    v.as_object().unwrap().get(k).unwrap_or(&Value::Null)
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    get(v, k)
        .as_str()
        .unwrap_or_else(|| panic!("{k} is not a string"))
}

fn arr<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    match get(v, k) {
        Value::Array(a) => a,
        other => panic!("{k} is not an array: {other:?}"),
    }
}

fn num(v: &Value, k: &str) -> f64 {
    match get(v, k) {
        Value::Number(n) => *n,
        other => panic!("{k} is not a number: {other:?}"),
    }
}

fn call_of(case: &Value) -> Result<Call, callpost_core::CallError> {
    match get(case, "call_json") {
        Value::String(text) => Call::from_json_str(text),
        _ => Call::from_value(get(case, "call")),
    }
}

#[test]
fn webhook_requests() {
    let cases = load(include_str!("../../testdata/webhook_requests.json"));
    let Value::Array(cases) = cases else { panic!() };
    assert!(cases.len() >= 30);
    for case in &cases {
        let name = s(case, "name");
        let hooks = Webhooks::from_value(get(case, "settings")).unwrap();
        let call = call_of(case).unwrap_or_else(|e| panic!("{name}: {e}"));
        let now = Timestamp::from_millis(num(case, "now") as i64).unwrap();
        let req = hooks
            .request(&call, num(case, "endpoint") as usize, now)
            .unwrap();
        let want = get(case, "expect");
        assert_eq!(
            std::str::from_utf8(&req.body).unwrap(),
            s(want, "body"),
            "{name}: body"
        );
        assert_eq!(req.method, s(want, "method"), "{name}");
        assert_eq!(req.url, s(want, "url"), "{name}: url");
        let headers: Vec<(String, String)> = arr(want, "headers")
            .iter()
            .map(|h| match h {
                Value::Array(p) => (
                    p[0].as_str().unwrap().to_owned(),
                    p[1].as_str().unwrap().to_owned(),
                ),
                _ => panic!(),
            })
            .collect();
        let got: Vec<(&str, &str)> = req.headers.iter().map(|(k, v)| (&**k, &**v)).collect();
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (&**k, &**v)).collect();
        assert_eq!(got, headers, "{name}: headers");
        // What a receiver does: the body survives JSON.stringify(JSON.parse(body)).
        let reparsed = Value::from_json_slice(&req.body)
            .unwrap()
            .to_json_string()
            .unwrap();
        assert_eq!(reparsed.as_bytes(), &req.body[..], "{name}: re-stringify");
    }
}

#[test]
fn stringify_vectors() {
    let Value::Array(cases) = load(include_str!("../../testdata/stringify.json")) else {
        panic!()
    };
    for case in &cases {
        let v = Value::from_json_str(s(case, "input")).unwrap();
        assert_eq!(
            v.to_json_string().unwrap(),
            s(case, "expected"),
            "{}",
            s(case, "input")
        );
    }
}

#[test]
fn rfc2202_and_sign_vectors() {
    let all = load(include_str!("../../testdata/signatures.json"));
    let rfc = arr(&all, "rfc2202");
    assert_eq!(rfc.len(), 7);
    for case in rfc {
        let key = hex::decode(s(case, "key_hex")).unwrap();
        let data = hex::decode(s(case, "data_hex")).unwrap();
        assert_eq!(sign(&key, &data).unwrap(), s(case, "digest"));
    }
    for case in arr(&all, "sign") {
        assert_eq!(
            sign(s(case, "secret"), s(case, "body")).unwrap(),
            s(case, "signature")
        );
    }
    for case in arr(&all, "verify") {
        let name = s(case, "name");
        let secrets: Result<Vec<Secret>, _> = arr(case, "secrets")
            .iter()
            .map(|k| Secret::new(k.as_str().unwrap()))
            .collect();
        let got = secrets
            .and_then(|secrets| verify(s(case, "body").as_bytes(), s(case, "signature"), &secrets));
        match get(case, "error") {
            Value::String(code) => assert_eq!(got.unwrap_err().code(), code, "{name}"),
            _ => assert_eq!(
                got.unwrap(),
                get(case, "expect") == &Value::Bool(true),
                "{name}"
            ),
        }
    }
}

#[test]
fn error_table() {
    let all = load(include_str!("../../testdata/errors.json"));
    for case in arr(&all, "calls") {
        let name = s(case, "name");
        let got = match get(case, "call_json_nest") {
            Value::Number(n) => {
                // A track call whose properties nest `n` more objects deep.
                let n = *n as usize;
                let text = format!(
                    r#"{{"type":"track","userId":"u","event":"e","properties":{}1{}}}"#,
                    r#"{"a":"#.repeat(n),
                    "}".repeat(n)
                );
                Call::from_json_str(&text)
            }
            _ => call_of(case),
        };
        match get(case, "code") {
            Value::String(code) => {
                let err = got.unwrap_err();
                assert_eq!(err.code(), code, "{name}");
                if let Value::String(message) = get(case, "message") {
                    assert_eq!(&err.to_string(), message, "{name}");
                }
            }
            _ => assert!(got.is_ok(), "{name}: {got:?}"),
        }
    }
    for case in arr(&all, "settings") {
        let name = s(case, "name");
        let got = Webhooks::from_value(get(case, "settings"));
        match get(case, "code") {
            Value::String(code) => assert_eq!(got.unwrap_err().code(), code, "{name}"),
            _ => assert!(got.is_ok(), "{name}: {got:?}"),
        }
    }
    for case in arr(&all, "stringify") {
        let n: f64 = s(case, "number").parse().unwrap();
        let got = Value::Number(n).to_json_string();
        assert_eq!(got.unwrap_err().code(), s(case, "code"));
    }
}

#[test]
fn audience_vectors() {
    let all = load(include_str!("../../testdata/audiences.json"));
    for pair in arr(&all, "trait_names") {
        let Value::Array(p) = pair else { panic!() };
        assert_eq!(
            trait_name(p[0].as_str().unwrap()).unwrap(),
            p[1].as_str().unwrap()
        );
    }
    for name in arr(&all, "invalid_names") {
        assert_eq!(
            trait_name(name.as_str().unwrap()).unwrap_err().code(),
            "invalid_audience_name"
        );
    }
    for sync in arr(&all, "syncs") {
        let mut state = AudienceSync::new(s(sync, "audience")).unwrap();
        let trait_key = state.trait_name().to_owned();
        for step in arr(sync, "steps") {
            let now = Timestamp::from_millis(num(step, "now") as i64).unwrap();
            state.handle_sync(
                now,
                arr(step, "members").iter().map(|m| m.as_str().unwrap()),
            );
            let got: Vec<(String, bool)> = std::iter::from_fn(|| state.poll_call())
                .map(|c| {
                    assert_eq!(c.timestamp, Some(now));
                    let member =
                        c.traits.as_ref().unwrap().to_map()[&trait_key] == Value::Bool(true);
                    (c.user_id.unwrap(), member)
                })
                .collect();
            let want: Vec<(String, bool)> = arr(step, "calls")
                .iter()
                .map(|c| match c {
                    Value::Array(p) => {
                        (p[0].as_str().unwrap().to_owned(), p[1] == Value::Bool(true))
                    }
                    _ => panic!(),
                })
                .collect();
            assert_eq!(got, want);
        }
    }
}

fn outcome_of(reply: &Value) -> callpost_core::Outcome {
    use callpost_core::Outcome;
    match get(reply, "kind").as_str() {
        Some("timeout") => Outcome::Timeout,
        Some("connection") => Outcome::connection("vector"),
        Some("tls") => Outcome::tls("vector"),
        _ => Outcome::Response {
            status: num(reply, "status") as u16,
            retry_after: get(reply, "retry_after").as_str().map(str::to_owned),
        },
    }
}

#[test]
fn retry_vectors() {
    use callpost_core::retry::{classify_status, parse_retry_after};
    use callpost_core::{Delivery, DeliveryConfig, DeliveryOutcome, EndpointConfig, Mode, Verdict};
    const START: i64 = 1_795_341_845_123;
    let all = load(include_str!("../../testdata/retry.json"));
    let verdict = |v: &str| match v {
        "success" => Verdict::Success,
        "retry" => Verdict::Retry,
        "reject" => Verdict::Reject,
        _ => panic!("{v}"),
    };
    for pair in arr(&all, "statuses") {
        let Value::Array(p) = pair else { panic!() };
        let Value::Number(status) = p[0] else {
            panic!()
        };
        assert_eq!(
            classify_status(status as u16),
            verdict(p[1].as_str().unwrap()),
            "{status}"
        );
    }
    for pair in arr(&all, "outcomes") {
        let Value::Array(p) = pair else { panic!() };
        let mut reply = Map::new();
        reply.insert("kind".into(), p[0].clone());
        assert_eq!(
            outcome_of(&Value::Object(reply)).verdict(),
            verdict(p[1].as_str().unwrap())
        );
    }
    for case in arr(&all, "retry_after") {
        let want = match get(case, "ms") {
            Value::Number(n) => Some(*n as u64),
            _ => None,
        };
        assert_eq!(
            parse_retry_after(s(case, "value"), at(num(case, "now") as i64)),
            want,
            "{}",
            s(case, "value")
        );
    }
    for case in arr(&all, "deliveries") {
        let name = s(case, "name");
        let n = num(case, "endpoints") as usize;
        let eps: Vec<_> = (0..n)
            .map(|i| EndpointConfig::new(format!("https://r{i}.example/")))
            .collect();
        let mode = Mode::parse(s(case, "mode")).unwrap();
        let hooks = Webhooks::with_mode(&eps, Some(b"k"), mode).unwrap();
        let mut call = Call::from_json_str(r#"{"type":"track","userId":"u","event":"e"}"#).unwrap();
        call.integrations = get(case, "integrations").as_object().cloned();
        let cfg = DeliveryConfig::new(num(case, "seed") as u64);
        let mut d = Delivery::new(&hooks, &call, at(START), cfg).unwrap();
        let replies: Vec<&[Value]> = arr(case, "replies")
            .iter()
            .map(|r| match r {
                Value::Array(a) => a.as_slice(),
                _ => panic!(),
            })
            .collect();
        // The runner (testdata/README.md): send every request due now,
        // then answer them at once in the order they were sent; a
        // `timeout` reply never answers, so the core's timer fires.
        let mut used = vec![0usize; n];
        let mut now = START;
        for _ in 0..1000 {
            let mut sent = vec![];
            while let Some(a) = d.poll_request(at(now)) {
                let list = replies[a.endpoint];
                let reply = &list[used[a.endpoint].min(list.len() - 1)];
                used[a.endpoint] += 1;
                sent.push((a.attempt, outcome_of(reply)));
            }
            let answered = !sent.is_empty();
            for (attempt, o) in sent {
                if o != callpost_core::Outcome::Timeout {
                    d.handle_response(at(now), attempt, o);
                }
            }
            if answered {
                continue;
            }
            match d.poll_timeout() {
                Some(t) => {
                    now = t.as_millis();
                    d.handle_timeout(t);
                }
                None => break,
            }
        }
        let want = get(case, "expect");
        let got: Vec<(i64, usize, String, u32)> = d
            .log()
            .iter()
            .map(|r| {
                (
                    r.sent_at.as_millis() - START,
                    r.endpoint,
                    r.outcome.code(),
                    r.round,
                )
            })
            .collect();
        let want_attempts: Vec<(i64, usize, String, u32)> = arr(want, "attempts")
            .iter()
            .map(|a| match a {
                Value::Array(p) => (
                    p[0].as_f64().unwrap() as i64,
                    p[1].as_f64().unwrap() as usize,
                    p[2].as_str().unwrap().to_owned(),
                    p[3].as_f64().unwrap() as u32,
                ),
                _ => panic!(),
            })
            .collect();
        assert_eq!(got, want_attempts, "{name}");
        match (d.poll_outcome().unwrap(), s(want, "outcome")) {
            (DeliveryOutcome::Delivered { endpoint, .. }, "delivered") => {
                assert_eq!(endpoint, num(want, "endpoint") as usize, "{name}");
            }
            (DeliveryOutcome::GaveUp { reason, .. }, "gave_up") => {
                assert_eq!(reason.code(), s(want, "reason"), "{name}");
            }
            (DeliveryOutcome::Disabled, "disabled") => {}
            (got, want) => panic!("{name}: got {got:?}, want {want}"),
        }
    }
}

#[test]
fn batch_vectors() {
    use callpost_core::{Batcher, BatcherConfig, Outcome};
    let Value::Array(cases) = load(include_str!("../../testdata/batches.json")) else {
        panic!()
    };
    for case in &cases {
        let name = s(case, "name");
        let c = get(case, "config");
        let cfg = BatcherConfig {
            endpoint: s(c, "endpoint").to_owned(),
            flush_at: num(c, "flushAt") as usize,
            library_name: s(c, "libraryName").to_owned(),
            library_version: s(c, "libraryVersion").to_owned(),
            ..BatcherConfig::new(s(c, "writeKey"))
        };
        let mut b = Batcher::new(cfg, at(0)).unwrap();
        for item in arr(case, "calls") {
            let random: [u8; 16] = hex::decode(s(item, "random")).unwrap().try_into().unwrap();
            let call = Call::from_value(get(item, "call")).unwrap();
            b.handle_call(at(num(item, "now") as i64), call, random)
                .unwrap();
        }
        let flush_at = at(num(case, "flushAt") as i64);
        b.flush(flush_at);
        let want = get(case, "expect");
        let mut bodies = vec![];
        while let Some(req) = b.poll_request(flush_at) {
            assert_eq!(req.request.url, s(want, "url"), "{name}");
            let headers: Vec<Value> = req
                .request
                .headers
                .iter()
                .map(|(k, v)| Value::Array(vec![Value::from(k.as_ref()), Value::from(v.as_ref())]))
                .collect();
            assert_eq!(&headers[..], arr(want, "headers"), "{name}");
            bodies.push(String::from_utf8(req.request.body.clone()).unwrap());
            b.handle_response(flush_at, req.batch_id, Outcome::status(200));
        }
        let want_bodies: Vec<&str> = arr(want, "bodies")
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(bodies, want_bodies, "{name}");
    }
}

#[test]
fn byte_and_enqueue_error_vectors() {
    use callpost_core::{Batcher, BatcherConfig};
    let all = load(include_str!("../../testdata/errors.json"));
    for case in arr(&all, "call_bytes") {
        let bytes = hex::decode(s(case, "hex")).unwrap();
        let got = Value::from_json_slice(&bytes)
            .map_err(callpost_core::CallError::from)
            .and_then(|v| Call::from_value(&v));
        match get(case, "code") {
            Value::String(code) => assert_eq!(got.unwrap_err().code(), code, "{}", s(case, "name")),
            _ => assert!(got.is_ok(), "{}", s(case, "name")),
        }
    }
    for case in arr(&all, "enqueue") {
        let mut b = Batcher::new(BatcherConfig::new("wk"), at(0)).unwrap();
        // Built natively: the batcher itself must apply the rules.
        let mut call = Call::new(callpost_core::CallKind::Track);
        call.event = Some("e".into());
        if get(case, "drop_user") != &Value::Bool(true) {
            call.user_id = Some("u".into());
        }
        let mut props = Map::new();
        props.insert(
            "pad".into(),
            Value::String("x".repeat(num(case, "pad") as usize)),
        );
        call.properties = Some(props.into());
        let got = b.handle_call(at(0), call, [0; 16]);
        match get(case, "code") {
            Value::String(code) => assert_eq!(got.unwrap_err().code(), code, "{}", s(case, "name")),
            _ => assert!(got.is_ok(), "{}", s(case, "name")),
        }
    }
}

/// The bodies `testdata/ingest.json`'s error cases describe by size (see
/// testdata/README.md), so the file stays small.
fn ingest_error_body(case: &Value) -> Vec<u8> {
    let text = |k: &str| match get(case, k) {
        Value::Number(n) => Some(*n as usize),
        _ => None,
    };
    if let Value::String(hex) = get(case, "body_hex") {
        return hex::decode(hex).unwrap();
    }
    if let Some(n) = text("body_call_pad") {
        let shell = r#"{"type":"track","userId":"u","event":"e","properties":{"p":""}}"#;
        let call = shell.replace(
            r#""p":"""#,
            &format!(r#""p":"{}""#, "x".repeat(n - shell.len())),
        );
        assert_eq!(call.len(), n);
        return format!(r#"{{"batch":[{call}]}}"#).into_bytes();
    }
    if let Some(n) = text("body_batch_pad") {
        let shell = r#"{"batch":[],"pad":""}"#;
        return format!(r#"{{"batch":[],"pad":"{}"}}"#, "x".repeat(n - shell.len())).into_bytes();
    }
    if let Some(n) = text("body_batch_count") {
        let calls = vec![r#"{"type":"track","userId":"u","event":"e"}"#; n].join(",");
        return format!(r#"{{"batch":[{calls}]}}"#).into_bytes();
    }
    s(case, "body").as_bytes().to_vec()
}

#[test]
fn ingest_vectors() {
    use callpost_core::ingest::{self, Route};
    let all = load(include_str!("../../testdata/ingest.json"));
    for case in arr(&all, "requests") {
        let name = s(case, "name");
        let randoms: Vec<[u8; 16]> = arr(case, "random")
            .iter()
            .map(|h| {
                hex::decode(h.as_str().unwrap())
                    .unwrap()
                    .try_into()
                    .unwrap()
            })
            .collect();
        let mut next = randoms.into_iter();
        let mut random = || next.next().expect("more random ids than the vector gives");
        let received = Timestamp::parse(s(case, "received_at")).unwrap();
        let route = Route::from_path(s(case, "path")).unwrap();
        let parsed =
            ingest::parse_request(route, s(case, "body").as_bytes(), received, &mut random)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        let auth = get(case, "authorization").as_str();
        let expect = get(case, "expect");
        assert_eq!(
            ingest::write_key(auth, parsed.body_write_key.as_deref()).as_deref(),
            get(expect, "write_key").as_str(),
            "{name}"
        );
        let want = arr(expect, "calls");
        assert_eq!(parsed.calls.len(), want.len(), "{name}");
        for (got, want) in parsed.calls.iter().zip(want) {
            match (got, get(want, "message").as_str()) {
                (Ok(a), Some(message)) => assert_eq!(a.message, message, "{name}"),
                (Err(r), None) => assert_eq!(r.error.code(), s(want, "rejected"), "{name}"),
                (got, _) => panic!("{name}: {got:?} against {want:?}"),
            }
        }
    }
    for case in arr(&all, "errors") {
        let name = s(case, "name");
        let body = ingest_error_body(case);
        let result = Route::from_path(s(case, "path"))
            .ok_or(ingest::IngestError::UnknownRoute)
            .and_then(|route| ingest::parse_request(route, &body, at(0), &mut || [7; 16]));
        match (result, get(case, "code").as_str()) {
            (Ok(_), None) => assert_eq!(num(case, "status"), 200.0, "{name}"),
            (Err(e), Some(code)) => {
                assert_eq!(e.code(), code, "{name}");
                assert_eq!(f64::from(e.status()), num(case, "status"), "{name}");
                let answer = Value::from_json_str(&e.to_json()).unwrap();
                assert_eq!(s(&answer, "code"), code, "{name}");
            }
            (got, want) => panic!("{name}: {got:?} against {want:?}"),
        }
    }
    for case in arr(&all, "headers") {
        let opt = |k: &str| get(case, k).as_str();
        let length = match get(case, "content_length") {
            Value::Number(n) => Some(*n as usize),
            _ => None,
        };
        let got = ingest::check_headers(opt("content_type"), opt("content_encoding"), length);
        let expect = get(case, "expect");
        match (got, get(expect, "code").as_str()) {
            (Ok(gzip), None) => assert_eq!(Value::Bool(gzip), *get(expect, "gzip"), "{case:?}"),
            (Err(e), Some(code)) => {
                assert_eq!(e.code(), code);
                assert_eq!(f64::from(e.status()), num(expect, "status"));
            }
            (got, _) => panic!("{case:?}: {got:?}"),
        }
    }
    for case in arr(&all, "gzip") {
        use base64::Engine as _;
        let name = s(case, "name");
        let body = base64::engine::general_purpose::STANDARD
            .decode(s(case, "body_b64"))
            .unwrap();
        let expect = get(case, "expect");
        match (ingest::inflate(&body), get(expect, "code").as_str()) {
            (Ok(out), None) => match get(expect, "inflated") {
                Value::String(text) => assert_eq!(out, text.as_bytes(), "{name}"),
                _ => assert_eq!(out.len() as f64, num(expect, "inflated_length"), "{name}"),
            },
            (Err(e), Some(code)) => {
                assert_eq!(e.code(), code, "{name}");
                assert_eq!(f64::from(e.status()), num(expect, "status"), "{name}");
            }
            (got, _) => panic!("{name}: {got:?}"),
        }
    }
    for case in arr(&all, "write_keys") {
        let got = ingest::write_key(
            get(case, "authorization").as_str(),
            get(case, "body_key").as_str(),
        );
        assert_eq!(got.as_deref(), get(case, "expect").as_str(), "{case:?}");
    }
    for pair in arr(&all, "routes") {
        let Value::Array(pair) = pair else { panic!() };
        let route = Route::from_path(pair[0].as_str().unwrap());
        let want = pair[1].as_str();
        let got = route.map(|r| match r {
            Route::Batch => "batch",
            Route::Single(kind) => kind.as_str(),
        });
        assert_eq!(got, want, "{pair:?}");
    }
}

#[test]
fn receive_vectors() {
    use callpost_core::{receive, receive_any, Keys, ReceiveOptions};
    let all = load(include_str!("../../testdata/receive.json"));
    let Value::Array(cases) = &all else {
        panic!("receive.json is not an array")
    };
    assert!(cases.len() >= 15);
    for case in cases {
        let name = s(case, "name");
        let secrets: Vec<Secret> = arr(case, "secrets")
            .iter()
            .map(|k| Secret::new(k.as_str().unwrap()).unwrap())
            .collect();
        let headers: Vec<(&str, &str)> = arr(case, "headers")
            .iter()
            .map(|h| match h {
                Value::Array(p) => (p[0].as_str().unwrap(), p[1].as_str().unwrap()),
                _ => panic!("{name}: a header is not a pair"),
            })
            .collect();
        let standard: Vec<StandardSecret> = arr(case, "standard_secrets")
            .iter()
            .map(|k| StandardSecret::parse(k.as_str().unwrap()).unwrap())
            .collect();
        let options = ReceiveOptions {
            allow_first_event_signature: get(get(case, "options"), "allow_first_event_signature")
                == &Value::Bool(true),
            ..Default::default()
        };
        let keys = Keys {
            segment: &secrets,
            standard: &standard,
        };
        let now = at(num(case, "now_ms") as i64);
        let got = receive_any(
            s(case, "body").as_bytes(),
            headers.iter().copied(),
            keys,
            now,
            options,
        );
        // Without Standard secrets, receive_any is receive.
        if standard.is_empty() {
            let alone = receive(
                s(case, "body").as_bytes(),
                headers.iter().copied(),
                &secrets,
                options,
            );
            assert_eq!(alone, got, "{name}");
        }
        let expect = get(case, "expect");
        if let Value::String(code) = get(expect, "error") {
            assert_eq!(got.unwrap_err().code(), code, "{name}");
            continue;
        }
        let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.header, s(expect, "header"), "{name}");
        assert_eq!(got.coverage.as_str(), s(expect, "coverage"), "{name}");
        assert_eq!(Value::Bool(got.is_batch()), *get(expect, "batch"), "{name}");
        assert_eq!(&got.value, get(expect, "value"), "{name}");
        let ids: Vec<Value> = got
            .message_ids()
            .into_iter()
            .map(|id| id.map_or(Value::Null, Value::from))
            .collect();
        assert_eq!(ids.as_slice(), arr(expect, "message_ids"), "{name}");
    }
}

/// `testdata/ids.json`: each case's id in each id field of a call, given
/// as the host value its `form` names (through [`CallBuilder`], as the
/// bindings give it) or, for `json`, as a literal in the call's JSON text.
#[test]
fn id_vectors() {
    use callpost_core::{CallBuilder, Scalar, ID_FIELDS};
    let all = load(include_str!("../../testdata/ids.json"));
    let Value::Object(calls) = get(&all, "calls") else {
        panic!("calls is not an object");
    };
    let fields: Vec<&str> = calls.keys().map(String::as_str).collect();
    assert_eq!(fields, ID_FIELDS, "one call per id field");
    let field_of = |c: &Call, f: &str| -> Option<String> {
        match f {
            "userId" => c.user_id.clone(),
            "anonymousId" => c.anonymous_id.clone(),
            "groupId" => c.group_id.clone(),
            "previousId" => c.previous_id.clone(),
            _ => c.message_id.clone(),
        }
    };
    for case in arr(&all, "cases") {
        let (name, id) = (s(case, "name"), s(case, "id"));
        let only: Vec<&str> = match get(case, "fields") {
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => ID_FIELDS.to_vec(),
        };
        for field in only {
            let got = if s(case, "form") == "json" {
                let text = Value::Object(calls[field].as_object().unwrap().clone())
                    .to_json_string()
                    .unwrap();
                let text = format!("{},\"{field}\":{id}}}", &text[..text.len() - 1]);
                Call::from_json_str(&text)
            } else {
                let mut b = CallBuilder::new();
                for (k, v) in calls[field].as_object().unwrap() {
                    b.scalar(k, Scalar::of(v));
                }
                let float: f64;
                let v = match s(case, "form") {
                    "integer" => Scalar::Integer(id),
                    "string" => Scalar::Str(id),
                    "float" => {
                        float = id.parse().unwrap();
                        Scalar::Float(float)
                    }
                    "bool" => Scalar::Other("boolean"),
                    other => panic!("{name}: unknown form {other}"),
                };
                b.scalar(field, v);
                b.finish()
            };
            match get(case, "code") {
                Value::String(code) => {
                    assert_eq!(got.unwrap_err().code(), code, "{name} in {field}");
                }
                _ => assert_eq!(
                    field_of(&got.unwrap(), field).as_deref(),
                    Some(s(case, "expect")),
                    "{name} in {field}"
                ),
            }
        }
    }
}

/// The secrets of a Standard Webhooks case, or the first one's error.
fn standard_secrets(case: &Value) -> Result<Vec<StandardSecret>, StandardError> {
    arr(case, "secrets")
        .iter()
        .map(|s| StandardSecret::parse(s.as_str().unwrap()))
        .collect()
}

#[test]
fn standard_webhooks_vectors() {
    let all = load(include_str!("../../testdata/standard_webhooks.json"));
    for case in arr(&all, "sign") {
        let name = s(case, "name");
        let secrets = standard_secrets(case).unwrap();
        let seconds = num(case, "timestamp") as i64;
        let headers = standard::sign(
            s(case, "id"),
            at(seconds * 1000 + 999),
            s(case, "body").as_bytes(),
            &secrets,
        )
        .unwrap();
        assert_eq!(
            headers[0],
            ("webhook-id", s(case, "id").to_owned()),
            "{name}"
        );
        assert_eq!(
            headers[1],
            ("webhook-timestamp", seconds.to_string()),
            "{name}"
        );
        assert_eq!(
            headers[2],
            ("webhook-signature", s(case, "signature").to_owned()),
            "{name}"
        );
    }
    for case in arr(&all, "verify") {
        let name = s(case, "name");
        let headers: Vec<(&str, &str)> = arr(case, "headers")
            .iter()
            .map(|pair| match pair {
                Value::Array(p) => (p[0].as_str().unwrap(), p[1].as_str().unwrap()),
                other => panic!("{name}: a header is not a pair: {other:?}"),
            })
            .collect();
        let tolerance = match get(case, "tolerance_ms") {
            Value::Null => standard::DEFAULT_TOLERANCE_MS,
            _ => num(case, "tolerance_ms") as u64,
        };
        let now = at(num(case, "now") as i64 * 1000);
        let got = standard_secrets(case).and_then(|secrets| {
            standard::verify(
                s(case, "body").as_bytes(),
                headers,
                &secrets,
                now,
                tolerance,
            )
        });
        let expect = get(case, "expect");
        match get(expect, "error") {
            Value::Null => {
                let v = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(v.id, s(expect, "id"), "{name}");
                assert_eq!(v.timestamp, num(expect, "timestamp") as i64, "{name}");
            }
            code => {
                let e = got.expect_err(name);
                assert_eq!(e.code().as_str(), code.as_str().unwrap(), "{name}: {e}");
            }
        }
    }
}

/// `testdata/filters.json`: each case's filters decide its call as the
/// generator's JavaScript reading of the rules does (dropped by rule n, or
/// kept with exactly its body), through a delivery as every host starts
/// one; and each refused set of rules is refused when the settings are read.
#[test]
fn filter_vectors() {
    use callpost_core::{Delivery, DeliveryConfig, DeliveryOutcome};
    let all = load(include_str!("../../testdata/filters.json"));
    let settings = |filters: &Value| {
        let mut m = Map::new();
        m.insert(
            "endpoints".into(),
            Value::Array(vec!["https://hooks.example.com/in".into()]),
        );
        m.insert("filters".into(), filters.clone());
        Webhooks::from_value(&Value::Object(m))
    };
    let cases = arr(&all, "cases");
    assert!(cases.len() >= 40);
    for case in cases {
        let name = s(case, "name");
        let hooks = settings(get(case, "filters")).unwrap_or_else(|e| panic!("{name}: {e}"));
        let call = Call::from_json_str(s(case, "call")).unwrap();
        let now = at(num(case, "now") as i64);
        let mut d = Delivery::new(&hooks, &call, now, DeliveryConfig::new(0)).unwrap();
        let expect = get(case, "expect");
        match get(expect, "dropped_by") {
            Value::Number(rule) => {
                assert!(d.poll_request(now).is_none(), "{name}: nothing is sent");
                assert_eq!(
                    d.poll_outcome(),
                    Some(DeliveryOutcome::Filtered { rule: *rule as u32 }),
                    "{name}"
                );
            }
            _ => {
                let attempt = d
                    .poll_request(now)
                    .unwrap_or_else(|| panic!("{name}: kept"));
                let body = std::str::from_utf8(&attempt.request.body).unwrap();
                assert_eq!(body, s(expect, "body"), "{name}");
            }
        }
    }
    for case in arr(&all, "invalid") {
        let name = s(case, "name");
        let e = settings(get(case, "filters")).unwrap_err();
        assert_eq!(e.code(), s(case, "code"), "{name}: {e}");
    }
}

/// `testdata/webhook_batches.json`: calls packed into batches (members,
/// ids and bodies) and skipped as the generator's JavaScript packs them,
/// and a batch's delivery sends its body under its id.
#[test]
fn webhook_batch_vectors() {
    use callpost_core::webhooks::Skip;
    use callpost_core::{Delivery, DeliveryConfig};
    let all = load(include_str!("../../testdata/webhook_batches.json"));
    let Value::Array(cases) = &all else {
        panic!("webhook_batches.json is not an array")
    };
    for case in cases {
        let name = s(case, "name");
        let mut m = Map::new();
        m.insert(
            "endpoints".into(),
            Value::Array(vec!["https://hooks.example.com/in".into()]),
        );
        m.insert("sharedSecret".into(), "s3cret".into());
        m.insert("batch".into(), get(case, "batch").clone());
        if let v @ Value::Array(_) = get(case, "filters") {
            m.insert("filters".into(), v.clone());
        }
        let hooks =
            Webhooks::from_value(&Value::Object(m)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let calls: Vec<Call> = arr(case, "calls")
            .iter()
            .map(|c| Call::from_json_str(c.as_str().unwrap()).unwrap())
            .collect();
        let now = at(num(case, "now") as i64);
        let packed = hooks.pack(&calls, now).unwrap();
        let expect = get(case, "expect");
        let batches = arr(expect, "batches");
        assert_eq!(packed.batches.len(), batches.len(), "{name}");
        for (got, want) in packed.batches.iter().zip(batches) {
            assert_eq!(got.id, s(want, "id"), "{name}");
            assert_eq!(
                std::str::from_utf8(&got.body).unwrap(),
                s(want, "body"),
                "{name}"
            );
            let members: Vec<usize> = arr(want, "members")
                .iter()
                .map(|m| num_of(m) as usize)
                .collect();
            assert_eq!(got.members, members, "{name}");
            let mut d = Delivery::for_batch(&hooks, got, now, DeliveryConfig::new(0)).unwrap();
            let r = d.poll_request(now).unwrap().request;
            assert_eq!(r.body, got.body, "{name}: the batch's body is sent");
            let key = r
                .headers
                .iter()
                .find(|(n, _)| n.as_ref() == "Idempotency-Key");
            assert_eq!(
                key.map(|(_, v)| v.as_ref()),
                Some(got.id.as_str()),
                "{name}"
            );
        }
        let skipped: Vec<Value> = packed
            .skipped
            .iter()
            .map(|(i, why)| {
                let mut v = vec![Value::from(*i as f64)];
                match why {
                    Skip::Disabled => v.push("disabled".into()),
                    Skip::Filtered { rule } => {
                        v.push("filtered".into());
                        v.push(Value::from(f64::from(*rule)));
                    }
                    Skip::MappedBodyTooLarge => v.push("mapped_body_too_large".into()),
                }
                Value::Array(v)
            })
            .collect();
        assert_eq!(skipped.as_slice(), arr(expect, "skipped"), "{name}");
    }
}

fn num_of(v: &Value) -> f64 {
    match v {
        Value::Number(n) => *n,
        _ => panic!("not a number: {v:?}"),
    }
}

/// `testdata/mappings.json`: each case's mapping builds its call's body as
/// the generator's JavaScript reading of the rules does, byte for byte,
/// in the request a delivery sends (as every host starts one) and in a
/// batch; each refused mapping is refused when the settings are read.
#[test]
fn mapping_vectors() {
    use callpost_core::{Delivery, DeliveryConfig};
    let all = load(include_str!("../../testdata/mappings.json"));
    let settings = |mapping: &Value, batch: bool| {
        let mut m = Map::new();
        m.insert(
            "endpoints".into(),
            Value::Array(vec!["https://hooks.example.com/in".into()]),
        );
        m.insert("mapping".into(), mapping.clone());
        if batch {
            m.insert("batch".into(), Value::Object(Map::new()));
        }
        Webhooks::from_value(&Value::Object(m))
    };
    let cases = arr(&all, "cases");
    assert!(cases.len() >= 40);
    for case in cases {
        let name = s(case, "name");
        let hooks = settings(get(case, "mapping"), false).unwrap_or_else(|e| panic!("{name}: {e}"));
        let call = Call::from_json_str(s(case, "call")).unwrap();
        let now = at(num(case, "now") as i64);
        let expect = s(get(case, "expect"), "body");
        let mut d = Delivery::new(&hooks, &call, now, DeliveryConfig::new(0)).unwrap();
        let attempt = d
            .poll_request(now)
            .unwrap_or_else(|| panic!("{name}: sent"));
        assert_eq!(
            std::str::from_utf8(&attempt.request.body).unwrap(),
            expect,
            "{name}"
        );
        let batched = settings(get(case, "mapping"), true).unwrap();
        let packed = batched.pack(std::slice::from_ref(&call), now).unwrap();
        assert_eq!(
            packed.batches[0].body,
            format!("[{expect}]").into_bytes(),
            "{name}: batched"
        );
    }
    for case in arr(&all, "invalid") {
        let name = s(case, "name");
        let e = settings(get(case, "mapping"), false).unwrap_err();
        assert_eq!(e.code(), s(case, "code"), "{name}: {e}");
    }
}

/// A mapping that copies a call past the body limit sends nothing and says
/// so: the delivery gives up before its first attempt, the batch skips the
/// call, and a request is refused, each with `mapped_body_too_large`.
#[test]
fn a_mapped_body_past_the_limit_gives_up_unsent() {
    use callpost_core::webhooks::Skip;
    use callpost_core::{Delivery, DeliveryConfig, DeliveryOutcome, GiveUpReason};
    let copies: Map = (0..20)
        .map(|i| (format!("k{i}"), load(r#"{"@path":"properties"}"#)))
        .collect();
    let hooks = Webhooks::from_value(&load(&format!(
        r#"{{"endpoints":["https://hooks.example.com/in"],"mapping":{}}}"#,
        Value::Object(copies).to_json_string().unwrap()
    )))
    .unwrap();
    let pad = "x".repeat(30_000);
    let big = Call::from_json_str(&format!(
        r#"{{"type":"track","userId":"u","event":"e","messageId":"m","properties":{{"pad":"{pad}"}}}}"#
    ))
    .unwrap();
    let small = Call::from_json_str(r#"{"type":"track","userId":"u","event":"e","messageId":"s"}"#)
        .unwrap();
    let now = at(0);
    let mut d = Delivery::new(&hooks, &big, now, DeliveryConfig::new(0)).unwrap();
    assert!(d.poll_request(now).is_none(), "nothing is sent");
    assert_eq!(
        d.poll_outcome(),
        Some(DeliveryOutcome::GaveUp {
            reason: GiveUpReason::MappedBodyTooLarge,
            attempts: 0,
            last: None
        })
    );
    assert_eq!(
        GiveUpReason::MappedBodyTooLarge.code(),
        "mapped_body_too_large"
    );
    assert_eq!(
        callpost_core::mapping::MAX_BODY_BYTES,
        callpost_core::batcher::MAX_BATCH_BYTES
    );
    let e = hooks.request(&big, 0, now).unwrap_err();
    assert_eq!(e.code(), "mapped_body_too_large");
    let packed = hooks.pack(&[big, small], now).unwrap();
    assert_eq!(packed.skipped, vec![(0, Skip::MappedBodyTooLarge)]);
    assert_eq!(packed.batches.len(), 1);
    assert_eq!(packed.batches[0].members, vec![1]);
}

/// `testdata/mappings.json`'s `url_templates`: each call's URL filled in
/// from the endpoint's template as the generator's JavaScript does (or
/// refused with `invalid_url_value`), in a request and through a delivery,
/// which gives up unsent when it is refused; `invalid_url_templates` are
/// refused when the settings are read.
#[test]
fn url_template_vectors() {
    use callpost_core::{Delivery, DeliveryConfig, DeliveryOutcome, GiveUpReason};
    let all = load(include_str!("../../testdata/mappings.json"));
    let cases = arr(&all, "url_templates");
    assert!(cases.len() >= 12);
    for case in cases {
        let name = s(case, "name");
        let hooks =
            Webhooks::from_value(get(case, "settings")).unwrap_or_else(|e| panic!("{name}: {e}"));
        let call = Call::from_json_str(s(case, "call")).unwrap();
        let now = at(num(case, "now") as i64);
        let expect = get(case, "expect");
        let mut d = Delivery::new(&hooks, &call, now, DeliveryConfig::new(0)).unwrap();
        match get(expect, "url") {
            Value::String(url) => {
                let r = hooks.request(&call, 0, now).unwrap();
                assert_eq!((&r.url, r.method), (url, "PUT"), "{name}");
                let attempt = d
                    .poll_request(now)
                    .unwrap_or_else(|| panic!("{name}: sent"));
                assert_eq!(&attempt.request.url, url, "{name}");
                // A saved delivery keeps the URL it made from the call.
                let again = Delivery::from_json(&d.to_json(), &hooks).unwrap();
                assert!(again.to_json().contains(&format!("{url:?}")), "{name}");
            }
            _ => {
                let e = hooks.request(&call, 0, now).unwrap_err();
                assert_eq!(e.code(), s(expect, "code"), "{name}: {e}");
                assert!(d.poll_request(now).is_none(), "{name}: nothing is sent");
                assert_eq!(
                    d.poll_outcome(),
                    Some(DeliveryOutcome::GaveUp {
                        reason: GiveUpReason::InvalidUrlValue,
                        attempts: 0,
                        last: None
                    }),
                    "{name}"
                );
            }
        }
        assert!(
            hooks.pack(std::slice::from_ref(&call), now).is_err(),
            "{name}: a template sends each call alone"
        );
    }
    for case in arr(&all, "invalid_url_templates") {
        let name = s(case, "name");
        let e = Webhooks::from_value(get(case, "settings")).unwrap_err();
        assert_eq!(e.code(), s(case, "code"), "{name}: {e}");
    }
}
