//! The admin API: status, dead letters, refused calls, delete
//! notifications, audience syncs and replays, behind the admin token.
//!
//! * No `admin_token` configured: every admin route (and `/metrics`) is
//!   403 `admin_disabled`.
//! * `Authorization: Bearer <token>`, compared in constant time, before
//!   the body is read. A request without the right token is counted
//!   (`callpost_relay_admin_auth_failures_total`), logged with its remote
//!   address (never the token it gave; at most one line a second, with the
//!   number held back), and answered 401 only after
//!   [`AUTH_FAILURE_DELAY`], on a connection then closed: each guess costs
//!   a second and a new connection, and the connection cap bounds how many
//!   run at once. (A guess is hopeless anyway: the token is at least
//!   [`MIN_ADMIN_TOKEN_LEN`](crate::config::MIN_ADMIN_TOKEN_LEN)
//!   characters; the delay keeps failures from being a cheap flood.)
//! * Bodies: at most [`MAX_ADMIN_BODY_BYTES`] (413 past it, never read as
//!   empty), a JSON object (400 otherwise), every field type-checked (a
//!   string is not a boolean), unknown fields and query parameters 400.
//! * `limit` (dead letters, refused calls): 1 to [`MAX_LIMIT`], default
//!   [`DEFAULT_LIMIT`].
//! * A replay names what it replays (`messageIds`, a non-empty list;
//!   `source`; `since`; `until`) or says `"all": true`.
//! * `GET /admin/openapi.json`: the OpenAPI 3.1 description of these
//!   routes (`relay/openapi.json`, which a test holds to [`ROUTES`]).

use super::{
    body_failed, body_timeout, closing, header, json, json_value, read_body, refusal, with, Answer,
    Api, BodyError, Throttle,
};
use crate::config::SourceDoc;
use crate::config::MAX_ADMIN_BODY_BYTES;
use crate::ops::{self, sources, OpError};
use crate::store::{Cursor, LogFilter, LogStatus, ReplayFilter, Status};
use bytes::Bytes;
use callpost_core::{Code, Timestamp};
use http::header::{HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderMap, Method, Request};
use hyper::body::Incoming;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq as _;

/// How long a request without the right admin token waits for its 401.
pub const AUTH_FAILURE_DELAY: Duration = Duration::from_secs(1);

/// The most rows `GET /admin/dead-letters` and `GET /admin/rejected`
/// return at once: the answer is built in memory.
pub const MAX_LIMIT: usize = 1000;

/// Rows returned when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 100;

/// What the admin API keeps between requests.
#[derive(Debug, Default)]
pub(crate) struct AdminState {
    failures: Throttle,
}

/// Who an admin API request is, in a deletion's audit record, when it
/// names no `operator`: the API has one token, not one per person.
pub(crate) const API_OPERATOR: &str = "admin-api";

/// The header that says where the next page of an export starts.
pub(crate) const NEXT_CURSOR: &str = "callpost-next-cursor";

/// The admin routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Status,
    DeadLetters,
    Rejected,
    Delete,
    Unsuppress,
    Export,
    Deletions,
    Audiences,
    Replay,
    Reload,
    EnableEndpoint,
    Sources,
    GetSource,
    PutSource,
    PatchSource,
    DeleteSource,
    PutDestination,
    PatchDestination,
    DeleteDestination,
    OpenApi,
    Log,
    LogCall,
    TryMapping,
    #[cfg(feature = "test-clock")]
    TestClock,
}

/// Every admin route as (method, path, route), the one list both
/// [`Route::of`] and the test that holds `relay/openapi.json` to it read,
/// so a route cannot be served and left out of the description (or the
/// other way round). `{name}` stands for the source's name: the rest of
/// the path, checked by [`source_name`] so that a bad name is a 400 that
/// says why rather than a bare 404.
pub(crate) const ROUTES: &[(&str, &str, Route)] = &[
    ("GET", "/admin/status", Route::Status),
    ("GET", "/admin/dead-letters", Route::DeadLetters),
    ("GET", "/admin/rejected", Route::Rejected),
    ("POST", "/admin/delete", Route::Delete),
    ("POST", "/admin/unsuppress", Route::Unsuppress),
    ("GET", "/admin/export", Route::Export),
    ("GET", "/admin/deletions", Route::Deletions),
    ("POST", "/admin/audiences", Route::Audiences),
    ("POST", "/admin/replay", Route::Replay),
    ("POST", "/admin/reload", Route::Reload),
    ("GET", "/admin/sources", Route::Sources),
    // Before the source's routes: their `{name}` takes the rest of the path.
    (
        "PUT",
        "/admin/sources/{name}/destinations/{destination}",
        Route::PutDestination,
    ),
    (
        "PATCH",
        "/admin/sources/{name}/destinations/{destination}",
        Route::PatchDestination,
    ),
    (
        "DELETE",
        "/admin/sources/{name}/destinations/{destination}",
        Route::DeleteDestination,
    ),
    ("GET", "/admin/sources/{name}", Route::GetSource),
    ("PUT", "/admin/sources/{name}", Route::PutSource),
    ("PATCH", "/admin/sources/{name}", Route::PatchSource),
    ("DELETE", "/admin/sources/{name}", Route::DeleteSource),
    ("POST", "/admin/endpoints/enable", Route::EnableEndpoint),
    ("GET", "/admin/openapi.json", Route::OpenApi),
    ("GET", "/admin/log", Route::Log),
    ("GET", "/admin/log/call", Route::LogCall),
    ("POST", "/admin/mappings/try", Route::TryMapping),
    // Test builds only, and left out of the description: no operator
    // ever has it.
    #[cfg(feature = "test-clock")]
    ("POST", "/admin/test/clock", Route::TestClock),
];

/// The OpenAPI 3.1 description of the admin API, served as it is.
pub(crate) const OPENAPI: &str = include_str!("../../openapi.json");

impl Route {
    pub(crate) fn of(method: &Method, path: &str) -> Option<Self> {
        ROUTES
            .iter()
            .find(|(m, template, _)| *m == method.as_str() && matches_template(template, path))
            .map(|(_, _, route)| *route)
    }
}

/// Whether `path` is `template`. A template that ends with its one
/// `{name}` takes the rest of the path there (checked by [`source_name`]);
/// in one with several placeholders, each stands for one non-empty
/// segment.
fn matches_template(template: &str, path: &str) -> bool {
    match template.split_once(NAME) {
        None => template == path,
        Some((before, "")) => path.starts_with(before),
        Some(_) => {
            let (t, p): (Vec<&str>, Vec<&str>) =
                (template.split('/').collect(), path.split('/').collect());
            t.len() == p.len()
                && t.iter().zip(&p).all(|(t, p)| {
                    if t.starts_with('{') {
                        !p.is_empty()
                    } else {
                        t == p
                    }
                })
        }
    }
}

/// The source-name placeholder in [`ROUTES`].
const NAME: &str = "{name}";

/// Checks the admin token, or a console session with the console's header
/// (`console::signed_in`); on failure, the answer to give (after the
/// delay, for a wrong or missing token).
pub(crate) async fn authorize(
    api: &Api,
    headers: &HeaderMap,
    remote: SocketAddr,
) -> Result<(), Answer> {
    let Some(token) = &api.relay.cfg.admin_token else {
        return Err(refusal(
            Code::AdminDisabled,
            "set admin_token to use the admin API",
        ));
    };
    let given = headers
        .get(AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        .and_then(|v| (v.len() >= 7 && v[..7].eq_ignore_ascii_case(b"bearer ")).then(|| &v[7..]))
        .unwrap_or_default();
    if bool::from(given.ct_eq(token.expose().as_bytes())) || super::console::signed_in(api, headers)
    {
        return Ok(());
    }
    api.relay.metrics.admin_auth_failure();
    if let Some(held) = api.admin.failures.allow() {
        tracing::warn!(
            "refused an admin request from {remote}: missing or wrong admin token ({held} more refused since the last warning)"
        );
    }
    tokio::time::sleep(AUTH_FAILURE_DELAY).await;
    Err(closing(with(
        refusal(Code::Unauthorized, "admin token required"),
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer"),
    )))
}

/// Answers an admin request.
pub(crate) async fn handle(
    api: &Api,
    route: Route,
    req: Request<Incoming>,
    remote: SocketAddr,
    headers_in: Instant,
) -> Answer {
    if let Err(a) = authorize(api, req.headers(), remote).await {
        return a;
    }
    let query = req.uri().query().map(str::to_owned);
    let path = req.uri().path().to_owned();
    let fields = match body(api, req, headers_in).await {
        Ok(f) => f,
        Err(a) => return a,
    };
    match run(api, route, &path, query.as_deref(), fields).await {
        Ok(a) => a,
        Err(Refused::Bad(message)) => refusal(Code::InvalidArgument, &message),
        Err(Refused::Op(e)) => refusal(e.code(), &e.to_string()),
    }
}

/// Why an admin request was refused.
enum Refused {
    /// 400 `invalid_argument`.
    Bad(String),
    /// The operation's own status and code.
    Op(OpError),
}

impl From<OpError> for Refused {
    fn from(e: OpError) -> Self {
        Self::Op(e)
    }
}

type Result<T, E = Refused> = std::result::Result<T, E>;

fn bad<T>(message: impl Into<String>) -> Result<T> {
    Err(Refused::Bad(message.into()))
}

/// Reads the body as a JSON object (empty: no fields).
async fn body(api: &Api, req: Request<Incoming>, headers_in: Instant) -> Result<Fields, Answer> {
    let relay = &api.relay;
    let declared =
        header(req.headers(), &CONTENT_LENGTH).and_then(|v| v.trim().parse::<usize>().ok());
    let deadline = headers_in + relay.cfg.limits.body_timeout;
    let raw = match read_body(req.into_body(), MAX_ADMIN_BODY_BYTES, declared, deadline).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return Err(closing(refusal(
                Code::PayloadTooLarge,
                &format!("the request body is over {MAX_ADMIN_BODY_BYTES} bytes"),
            )))
        }
        Err(BodyError::TimedOut) => return Err(body_timeout(relay)),
        Err(BodyError::Failed) => return Err(body_failed()),
    };
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Ok(Fields(Map::new()));
    }
    match serde_json::from_slice::<Value>(&raw) {
        Ok(Value::Object(m)) => Ok(Fields(m)),
        Ok(_) => Err(refusal(
            Code::InvalidArgument,
            "the body must be a JSON object",
        )),
        Err(e) => Err(refusal(
            Code::InvalidArgument,
            &format!("the body is not valid JSON: {e}"),
        )),
    }
}

async fn run(
    api: &Api,
    route: Route,
    path: &str,
    query: Option<&str>,
    mut f: Fields,
) -> Result<Answer> {
    let relay = &api.relay;
    let store = &*relay.store;
    match route {
        Route::Status => {
            no_query(query)?;
            f.done()?;
            let mut report = ops::status(store, &relay.clock).await?;
            report.endpoints = Some(relay.guards.report(relay.clock.now()));
            Ok(json_value(200, &report))
        }
        Route::DeadLetters => {
            let limit = limit(query)?;
            f.done()?;
            let rows = store.dead_letters(limit).await.map_err(OpError::from)?;
            Ok(json_value(200, &rows))
        }
        Route::Rejected => {
            let limit = limit(query)?;
            f.done()?;
            let rows = store.rejected(limit).await.map_err(OpError::from)?;
            Ok(json_value(200, &rows))
        }
        Route::Sources => {
            no_query(query)?;
            f.done()?;
            Ok(json_value(200, &ops::sources_report(&relay.sources())))
        }
        Route::GetSource => {
            no_query(query)?;
            f.done()?;
            let name = source_name(path)?;
            let report = ops::sources_report(&relay.sources())
                .into_iter()
                .find(|s| s.name == name)
                .ok_or_else(|| no_source(&name))?;
            Ok(json_value(200, &report))
        }
        Route::PutSource => {
            no_query(query)?;
            let name = source_name(path)?;
            match f.0.get("name") {
                None => {
                    f.0.insert("name".into(), Value::String(name.clone()));
                }
                Some(Value::String(n)) if *n == name => {}
                Some(_) => return bad("name, when given, must be the name in the path"),
            }
            let doc = SourceDoc::from_value(Value::Object(std::mem::take(&mut f.0)))
                .map_err(|e| Refused::Op(e.into()))?;
            let changes = sources::put_live(relay, doc).await?;
            Ok(source_changed(relay, &name, &changes))
        }
        Route::PatchSource => {
            no_query(query)?;
            let name = source_name(path)?;
            let patch = Value::Object(std::mem::take(&mut f.0));
            let changes = sources::patch_live(relay, &name, &patch).await?;
            Ok(source_changed(relay, &name, &changes))
        }
        Route::DeleteSource => {
            no_query(query)?;
            f.done()?;
            let name = source_name(path)?;
            let changes = sources::remove_live(relay, &name).await?;
            Ok(json_value(200, &json!({ "changes": changes })))
        }
        Route::PutDestination | Route::PatchDestination | Route::DeleteDestination => {
            no_query(query)?;
            let (name, destination) = destination_path(path)?;
            if route == Route::DeleteDestination {
                f.done()?;
            }
            let body = Value::Object(std::mem::take(&mut f.0));
            let change = match route {
                Route::PutDestination => sources::DestinationChange::Put(&body),
                Route::PatchDestination => sources::DestinationChange::Patch(&body),
                _ => sources::DestinationChange::Remove,
            };
            let changes = sources::destination_live(relay, &name, &destination, change).await?;
            Ok(source_changed(relay, &name, &changes))
        }
        Route::EnableEndpoint => {
            no_query(query)?;
            let url = f.string("url")?;
            f.done()?;
            let Some(url) = url.filter(|u| !u.is_empty()) else {
                return bad("url must be an endpoint URL");
            };
            // This relay's guard at once; the database for every relay
            // (each enables it at its next look). A URL only this relay's
            // guard knows (held back, never recorded) is enabled too.
            let here = relay.guards.enable(&url, relay.clock.now());
            match ops::enable_endpoint(store, &relay.clock, &url).await {
                Err(OpError::NotFound(_)) if !here.is_empty() => {}
                other => {
                    other?;
                }
            }
            tracing::info!(
                "endpoint {} enabled by an operator",
                callpost_core::ops::shown_url(&url)
            );
            relay.wake.notify_one();
            Ok(json_value(200, &json!({ "enabled": true })))
        }
        Route::OpenApi => {
            no_query(query)?;
            f.done()?;
            Ok(json(200, Bytes::from_static(OPENAPI.as_bytes())))
        }
        Route::Reload => {
            no_query(query)?;
            f.done()?;
            let reloaded = ops::reload(relay).await?;
            Ok(json_value(200, &reloaded))
        }
        Route::Delete => {
            no_query(query)?;
            let user_id = f.string("userId")?.filter(|s| !s.is_empty());
            let suppress = f.bool("suppress")?;
            let operator = f.string("operator")?;
            f.done()?;
            let Some(user_id) = user_id else {
                return bad("userId must be a non-empty string");
            };
            let operator = operator.unwrap_or_else(|| API_OPERATOR.to_owned());
            let request = ops::DeleteRequest {
                user_id: &user_id,
                suppress,
                operator: &operator,
            };
            let key = relay.sealer.get().map(AsRef::as_ref);
            let deleted =
                ops::delete_user(store, &relay.sources().list, &relay.clock, key, request).await?;
            if suppress {
                // This relay at once; the others within their poll.
                relay.reload_suppressed().await.map_err(OpError::from)?;
            }
            relay.wake.notify_one();
            Ok(json_value(200, &deleted))
        }
        Route::Unsuppress => {
            no_query(query)?;
            let user_id = f.string("userId")?.unwrap_or_default();
            let operator = f.string("operator")?;
            f.done()?;
            let operator = operator.unwrap_or_else(|| API_OPERATOR.to_owned());
            let key = relay.sealer.get().map(AsRef::as_ref);
            let lifted = ops::unsuppress(store, &relay.clock, key, &user_id, &operator).await?;
            relay.reload_suppressed().await.map_err(OpError::from)?;
            Ok(json_value(200, &json!({ "lifted": lifted })))
        }
        Route::Export => {
            f.done()?;
            let mut q = Query::parse(query)?;
            let filter = match (q.take("userId"), q.take("anonymousId")) {
                (Some(u), None) if !u.is_empty() => LogFilter {
                    user_id: Some(u),
                    ..LogFilter::default()
                },
                (None, Some(a)) if !a.is_empty() => LogFilter {
                    anonymous_id: Some(a),
                    ..LogFilter::default()
                },
                _ => return bad("give one of userId and anonymousId"),
            };
            let after = match q.take("cursor") {
                None => None,
                Some(c) => Some(Cursor::parse(&c).ok_or_else(|| {
                    Refused::Bad(
                        "cursor must be the Callpost-Next-Cursor of an earlier page".into(),
                    )
                })?),
            };
            let limit = q.limit()?;
            q.done()?;
            let (lines, next) = ops::export_user(store, filter, after, limit).await?;
            let mut body = lines.join("\n");
            if !body.is_empty() {
                body.push('\n');
            }
            let mut a = json(200, body);
            a.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-ndjson"),
            );
            if let Some(next) = next {
                if let Ok(v) = HeaderValue::from_str(&next.to_string()) {
                    a.headers_mut().insert(NEXT_CURSOR, v);
                }
            }
            Ok(a)
        }
        Route::Deletions => {
            let limit = limit(query)?;
            f.done()?;
            let rows = store.deletions(limit).await.map_err(OpError::from)?;
            Ok(json_value(200, &json!({ "deletions": rows })))
        }
        Route::Audiences => {
            no_query(query)?;
            let source = f.string("source")?;
            let audience = f.string("audience")?;
            let members = f.strings("members")?;
            f.done()?;
            let Some(source) = source.filter(|s| relay.sources().get(s).is_some()) else {
                return bad("source must name a configured source");
            };
            let Some(audience) = audience else {
                return bad("audience must be a string");
            };
            let Some(members) = members else {
                return bad("members must be a list of user ids");
            };
            let n = ops::sync_audience(
                store,
                &relay.sources().list,
                &relay.clock,
                &source,
                &audience,
                members,
            )
            .await;
            let n = n?;
            relay.wake.notify_one();
            Ok(json_value(200, &json!({ "calls": n })))
        }
        Route::Replay => {
            no_query(query)?;
            let (filter, all, dry_run) = replay_filter(&mut f)?;
            let n = ops::replay(store, &relay.clock, filter, all, dry_run).await?;
            if dry_run {
                return Ok(json_value(200, &json!({ "would_replay": n })));
            }
            relay.wake.notify_one();
            Ok(json_value(200, &json!({ "replayed": n })))
        }
        Route::Log => {
            f.done()?;
            let mut q = Query::parse(query)?;
            let (calls, rejected) = log_filter(&mut q)?;
            let after = match q.take("cursor") {
                None => None,
                Some(c) => Some(Cursor::parse(&c).ok_or_else(|| {
                    Refused::Bad("cursor must be the `next` of an earlier page".into())
                })?),
            };
            let limit = q.limit()?;
            q.done()?;
            if rejected {
                let only = calls.source_and_times();
                if only != calls {
                    return bad(
                        "a refused call is searched by source, since and until only: its other \
                         fields were never accepted",
                    );
                }
                let page = store
                    .search_rejected(only, after, limit)
                    .await
                    .map_err(OpError::from)?;
                return Ok(json_value(200, &page_json(&page.rows, page.next)));
            }
            let page = store
                .search(calls, after, limit)
                .await
                .map_err(OpError::from)?;
            Ok(json_value(200, &page_json(&page.rows, page.next)))
        }
        Route::LogCall => {
            f.done()?;
            let mut q = Query::parse(query)?;
            let (Some(source), Some(message_id)) = (q.take("source"), q.take("messageId")) else {
                return bad("give the call's source and messageId");
            };
            let destination = q.take("destination");
            q.done()?;
            let sources = relay.sources();
            match ops::logged_call(store, &sources.list, &source, &message_id, destination).await? {
                Some(report) => Ok(json_value(200, &report)),
                None => Ok(refusal(
                    Code::NotFound,
                    "no stored call has that source and messageId (it may have been purged)",
                )),
            }
        }
        Route::TryMapping => {
            no_query(query)?;
            let Some(source) = f.string("source")? else {
                return bad("give the source whose filters and mapping apply");
            };
            let trial = ops::MappingTrial {
                source,
                destination: f.string("destination")?,
                mapping: f.take("mapping"),
                message_id: f.string("messageId")?,
                call: f.take("call"),
            };
            f.done()?;
            let sources = relay.sources();
            let report = ops::try_mapping(store, &sources.list, relay.clock.now(), trial).await?;
            Ok(json_value(200, &report))
        }
        #[cfg(feature = "test-clock")]
        Route::TestClock => {
            no_query(query)?;
            let offset = f.int("offsetMs")?;
            f.done()?;
            if relay.cfg.test_clock.is_none() {
                return Ok(refusal(
                    Code::NotFound,
                    "start the relay with --test-clock to move its clock",
                ));
            }
            let Some(offset) = offset.filter(|o| *o >= 0) else {
                return bad("offsetMs must be a non-negative integer");
            };
            relay.clock.set_offset(offset);
            relay.wake.notify_one();
            Ok(json_value(
                200,
                &json!({ "offsetMs": offset, "nowMs": relay.clock.now_ms() }),
            ))
        }
    }
}

/// The replay's filter, whether it asks for every dead letter and whether
/// it is a dry run (the rules on what a replay must name are
/// `ops::replay`'s).
fn replay_filter(f: &mut Fields) -> Result<(ReplayFilter, bool, bool)> {
    let message_ids = f.strings("messageIds")?;
    let user_id = f.string("userId")?;
    let anonymous_id = f.string("anonymousId")?;
    let event = f.string("event")?;
    let kind = f.string("type")?;
    let source = f.string("source")?;
    let destination = f.string("destination")?;
    let status = match f.string("status")? {
        None => None,
        Some(name) => Some(Status::named(&name).ok_or_else(|| {
            Refused::Bad(
                "status must be one of dead, delivered, undeliverable (a refused call cannot \
                 be replayed)"
                    .into(),
            )
        })?),
    };
    let since = f.time("since")?;
    let until = f.time("until")?;
    let include_delivered = f.bool("includeDelivered")?;
    let include_undeliverable = f.bool("includeUndeliverable")?;
    let all = f.bool("all")?;
    let dry_run = f.bool("dryRun")?;
    f.done()?;
    Ok((
        ReplayFilter {
            calls: LogFilter {
                message_ids,
                user_id,
                anonymous_id,
                event,
                kind,
                source,
                destination,
                status,
                since,
                until,
                ..LogFilter::default()
            },
            include_delivered,
            include_undeliverable,
        },
        all,
        dry_run,
    ))
}

/// A search's filters, and whether it asks for refused calls.
fn log_filter(q: &mut Query) -> Result<(LogFilter, bool)> {
    let status = q
        .take("status")
        .map(|name| LogStatus::parse(&name).map_err(|e| Refused::Bad(e.to_string())))
        .transpose()?;
    let filter = LogFilter {
        message_ids: q.take("messageId").map(|id| vec![id]),
        user_id: q.take("userId"),
        anonymous_id: q.take("anonymousId"),
        event: q.take("event"),
        kind: q.take("type"),
        source: q.take("source"),
        destination: q.take("destination"),
        status: match status {
            Some(LogStatus::Calls(s)) => Some(s),
            _ => None,
        },
        since: q.time("since")?,
        until: q.time("until")?,
        ..LogFilter::default()
    };
    Ok((filter, status == Some(LogStatus::Rejected)))
}

/// A search's answer: its rows and the cursor of the next page.
fn page_json<T: serde::Serialize>(rows: &[T], next: Option<Cursor>) -> Value {
    json!({ "calls": rows, "next": next.map(|c| c.to_string()) })
}

/// A query string's parameters, percent-decoded (`+` is a space, as forms
/// write it), taken one by one; what is left at the end is unknown. A
/// parameter given twice is refused rather than one of them read.
struct Query(HashMap<String, String>);

impl Query {
    fn parse(query: Option<&str>) -> Result<Self> {
        let decode = |s: &str| {
            let s = s.replace('+', " ");
            percent_encoding::percent_decode_str(&s)
                .decode_utf8()
                .map(std::borrow::Cow::into_owned)
                .map_err(|_| Refused::Bad("the query must be percent-encoded UTF-8".into()))
        };
        let mut map = HashMap::new();
        for pair in query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter(|p| !p.is_empty())
        {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = decode(k)?;
            if map.insert(k.clone(), decode(v)?).is_some() {
                return bad(format!("query parameter {k:?} is given twice"));
            }
        }
        Ok(Self(map))
    }

    /// A parameter; empty is the same as leaving it out.
    fn take(&mut self, name: &str) -> Option<String> {
        self.0.remove(name).filter(|v| !v.is_empty())
    }

    /// An ISO 8601 time, or milliseconds since the epoch.
    fn time(&mut self, name: &str) -> Result<Option<i64>> {
        let Some(v) = self.take(name) else {
            return Ok(None);
        };
        match v.parse::<i64>() {
            Ok(ms) => Ok(Some(ms)),
            Err(_) => match Timestamp::parse(&v) {
                Ok(t) => Ok(Some(t.as_millis())),
                Err(_) => bad(format!("{name} must be an ISO 8601 time or milliseconds")),
            },
        }
    }

    /// `limit`: 1 to [`MAX_LIMIT`], default [`DEFAULT_LIMIT`].
    fn limit(&mut self) -> Result<usize> {
        match self.take("limit") {
            None => Ok(DEFAULT_LIMIT),
            Some(v) => match v.parse::<usize>() {
                Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
                _ => bad(format!("limit must be an integer from 1 to {MAX_LIMIT}")),
            },
        }
    }

    fn done(&self) -> Result<()> {
        match self.0.keys().min() {
            None => Ok(()),
            Some(k) => bad(format!("unknown query parameter {k:?}")),
        }
    }
}

/// Where `/admin/sources/{name}` starts.
const SOURCE_PATH: &str = "/admin/sources/";

/// The source name in the path, percent-decoded.
fn source_name(path: &str) -> Result<String> {
    let raw = path.strip_prefix(SOURCE_PATH).unwrap_or_default();
    match percent_encoding::percent_decode_str(raw).decode_utf8() {
        Ok(name) if !name.is_empty() && !name.contains('/') => Ok(name.into_owned()),
        _ => bad("the path must be /admin/sources/{name}, the name percent-encoded UTF-8"),
    }
}

/// The source and destination names of
/// `/admin/sources/{name}/destinations/{destination}`, percent-decoded.
fn destination_path(path: &str) -> Result<(String, String)> {
    let raw = path.strip_prefix(SOURCE_PATH).unwrap_or_default();
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .ok()
            .map(std::borrow::Cow::into_owned)
            .filter(|n| !n.is_empty())
    };
    match raw.split_once("/destinations/") {
        Some((name, destination)) => match (decode(name), decode(destination)) {
            (Some(n), Some(d)) => Ok((n, d)),
            _ => bad(
                "the path must be /admin/sources/{name}/destinations/{destination}, each name \
                 percent-encoded UTF-8",
            ),
        },
        None => bad("the path must be /admin/sources/{name}/destinations/{destination}"),
    }
}

/// A change's answer: what changed, and the source `name` as now in force
/// (`null` if another relay removed it meanwhile).
fn source_changed(relay: &crate::state::Relay, name: &str, changes: &sources::Changes) -> Answer {
    let report = ops::sources_report(&relay.sources())
        .into_iter()
        .find(|s| s.name == name);
    json_value(200, &json!({ "changes": changes, "source": report }))
}

fn no_source(name: &str) -> Refused {
    Refused::Op(OpError::NotFound(format!(
        "there is no source {name:?} in force"
    )))
}

fn no_query(query: Option<&str>) -> Result<()> {
    match query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find(|p| !p.is_empty())
    {
        None => Ok(()),
        Some(p) => bad(format!(
            "unknown query parameter {:?}",
            p.split_once('=').map_or(p, |(k, _)| k)
        )),
    }
}

/// `?limit=` (1 to [`MAX_LIMIT`], default [`DEFAULT_LIMIT`]).
fn limit(query: Option<&str>) -> Result<usize> {
    let mut limit = DEFAULT_LIMIT;
    for pair in query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k != "limit" {
            return bad(format!("unknown query parameter {k:?}"));
        }
        limit = match v.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => return bad(format!("limit must be an integer from 1 to {MAX_LIMIT}")),
        };
    }
    Ok(limit)
}

/// A request body's fields, taken one by one; what is left at the end is
/// unknown. `null` is the same as leaving a field out.
struct Fields(Map<String, Value>);

impl Fields {
    fn take(&mut self, name: &str) -> Option<Value> {
        self.0.remove(name).filter(|v| !v.is_null())
    }

    fn string(&mut self, name: &str) -> Result<Option<String>> {
        match self.take(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => bad(format!("{name} must be a string")),
        }
    }

    fn strings(&mut self, name: &str) -> Result<Option<Vec<String>>> {
        let Some(v) = self.take(name) else {
            return Ok(None);
        };
        let Value::Array(items) = v else {
            return bad(format!("{name} must be a list of strings"));
        };
        items
            .into_iter()
            .map(|i| match i {
                Value::String(s) => Ok(s),
                _ => bad(format!("{name} must be a list of strings")),
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// A JSON boolean; absent is false. `"false"` is not a boolean.
    fn bool(&mut self, name: &str) -> Result<bool> {
        match self.take(name) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(b),
            Some(_) => bad(format!("{name} must be true or false")),
        }
    }

    #[cfg(feature = "test-clock")]
    fn int(&mut self, name: &str) -> Result<Option<i64>> {
        match self.take(name) {
            None => Ok(None),
            Some(Value::Number(n)) if n.is_i64() => Ok(n.as_i64()),
            Some(_) => bad(format!("{name} must be an integer")),
        }
    }

    /// An ISO 8601 time, or milliseconds since the epoch.
    fn time(&mut self, name: &str) -> Result<Option<i64>> {
        let ms = match self.take(name) {
            None => return Ok(None),
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::String(s)) => Timestamp::parse(&s).ok().map(Timestamp::as_millis),
            Some(_) => None,
        };
        match ms {
            Some(ms) => Ok(Some(ms)),
            None => bad(format!("{name} must be an ISO 8601 time or milliseconds")),
        }
    }

    fn done(&self) -> Result<()> {
        match self.0.keys().next() {
            None => Ok(()),
            Some(k) => bad(format!("unknown field {k:?}")),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Routes of test builds only, which no operator has.
    const UNDESCRIBED: &[&str] = &["/admin/test/clock"];

    const METHODS: &[&str] = &[
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];

    fn description() -> Value {
        serde_json::from_str(OPENAPI).expect("relay/openapi.json is JSON")
    }

    /// (METHOD, path, operation) for each operation the description has.
    fn operations(doc: &Value) -> Vec<(String, String, &Map<String, Value>)> {
        let paths = doc["paths"].as_object().expect("paths is an object");
        let mut out = Vec::new();
        for (path, item) in paths {
            let item = item.as_object().expect("a path item is an object");
            for (key, op) in item {
                if METHODS.contains(&key.as_str()) {
                    let op = op.as_object().expect("an operation is an object");
                    out.push((key.to_uppercase(), path.clone(), op));
                }
            }
        }
        out
    }

    #[test]
    fn the_description_has_exactly_the_routes_served() {
        let doc = description();
        let described: BTreeSet<(String, String)> = operations(&doc)
            .into_iter()
            .map(|(m, p, _)| (m, p))
            .collect();
        let served: BTreeSet<(String, String)> = ROUTES
            .iter()
            .filter(|(_, p, _)| !UNDESCRIBED.contains(p))
            .map(|(m, p, _)| ((*m).to_owned(), (*p).to_owned()))
            .collect();
        assert_eq!(
            served.len(),
            ROUTES.len() - usize::from(cfg!(feature = "test-clock")),
            "a (method, path) twice in ROUTES"
        );
        let missing: Vec<_> = served.difference(&described).collect();
        let extra: Vec<_> = described.difference(&served).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "relay/openapi.json differs from ROUTES: served but not described {missing:?}, \
             described but not served {extra:?}"
        );
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn every_operation_needs_the_token_and_says_what_it_answers_without_it() {
        let doc = description();
        let scheme = &doc["components"]["securitySchemes"]["adminToken"];
        assert_eq!(
            (&scheme["type"], &scheme["scheme"]),
            (&json!("http"), &json!("bearer"))
        );
        let ops = operations(&doc);
        assert!(!ops.is_empty());
        for (method, path, op) in ops {
            let at = format!("{method} {path}");
            let security = op
                .get("security")
                .and_then(Value::as_array)
                .unwrap_or_else(|| panic!("{at}: no security"));
            assert!(
                security.iter().any(|s| s.get("adminToken").is_some()),
                "{at}: the admin token is not its security scheme"
            );
            let responses = op
                .get("responses")
                .and_then(Value::as_object)
                .unwrap_or_else(|| panic!("{at}: no responses"));
            for status in ["200", "400", "401", "403"] {
                assert!(responses.contains_key(status), "{at}: no {status} answer");
            }
            let in_path: Vec<&str> = [
                &doc["paths"][&path]["parameters"],
                op.get("parameters").unwrap_or(&Value::Null),
            ]
            .into_iter()
            .filter_map(Value::as_array)
            .flatten()
            .map(|p| resolve(&doc, p))
            .filter(|p| p["in"] == "path")
            .filter_map(|p| p["name"].as_str())
            .collect();
            let expected: &[&str] = match (path.contains(NAME), path.contains("{destination}")) {
                (true, true) => &["name", "destination"],
                (true, false) => &["name"],
                _ => &[],
            };
            assert_eq!(in_path, expected, "{at}: path parameters");
        }
    }

    /// A `$ref` within the description, followed.
    fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
        match v["$ref"].as_str() {
            Some(r) => doc
                .pointer(r.strip_prefix('#').expect("a local $ref"))
                .unwrap_or_else(|| panic!("{r} is not in the description")),
            None => v,
        }
    }

    #[test]
    fn each_route_is_found_by_its_method_and_path() {
        for (method, template, route) in ROUTES {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            let path = template.replace(NAME, "web%20shop");
            assert_eq!(Route::of(&method, &path), Some(*route), "{method} {path}");
            assert_eq!(Route::of(&Method::OPTIONS, &path), None);
        }
        // A bad source name is the route's own 400, not a 404.
        assert_eq!(
            Route::of(&Method::GET, "/admin/sources/a/b"),
            Some(Route::GetSource)
        );
        assert_eq!(Route::of(&Method::GET, "/admin/status/"), None);
        assert_eq!(Route::of(&Method::GET, "/admin/statu"), None);
        assert_eq!(
            source_name("/admin/sources/web%20shop").ok().as_deref(),
            Some("web shop")
        );
        assert_eq!(
            Route::of(&Method::PATCH, "/admin/sources/shop/destinations/crm"),
            Some(Route::PatchDestination)
        );
        assert_eq!(
            Route::of(&Method::PATCH, "/admin/sources/shop/destinations/crm/x"),
            Some(Route::PatchSource),
            "not a destination's path: the source route's 400"
        );
        assert_eq!(
            destination_path("/admin/sources/web%20shop/destinations/crm").ok(),
            Some(("web shop".to_owned(), "crm".to_owned()))
        );
        assert!(destination_path("/admin/sources/shop/destinations/").is_err());
    }
}
