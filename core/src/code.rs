//! The registry of stable error codes.
//!
//! Every failure callpost reports, in any language, carries one [`Code`]:
//! a snake_case string that never changes once released. Each code belongs
//! to one [`ErrorClass`], which names the exception (Python) or error
//! (JavaScript) it is raised as and the built-in it also derives from. The
//! bindings read both from here ([`Code::ALL`], [`Code::class`]) instead of
//! keeping a table of their own, and each language's test suite walks the
//! registry (after pydantic-core's `error_types!`).
//!
//! This module imports nothing of the crate: every module's error enum
//! names its codes from here, so anything it imported would import itself
//! (`core/tests/layers.rs` keeps it so).

use std::fmt;

/// The exception or error class a code is raised as. Python defines these
/// classes in `callpost/_errors.py`, all deriving from `CallpostError`;
/// JavaScript sets `error.name` to [`ErrorClass::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// A call that breaks the spec's rules.
    InvalidCall,
    /// A value JSON, or a JavaScript receiver, cannot carry as it is.
    JsonValue,
    /// A host value with no JSON form at all.
    NotJson,
    /// Bad Webhooks destination settings.
    Settings,
    /// A signature or secret that can never verify.
    Signature,
    /// Bad batching-client settings.
    Config,
    /// A message over the size limit.
    MessageTooLarge,
    /// The client's queue is full.
    QueueFull,
    /// The client was closed.
    Closed,
    /// A saved delivery state that cannot be restored.
    State,
    /// The API was called wrongly: an argument of the wrong type or shape.
    InvalidArgument,
    /// A delivery or an upload that gave up.
    Delivery,
    /// A Tracking API request the service refuses as a whole.
    Ingest,
    /// A request the relay's admin API or console refuses, or an operation
    /// of the relay's that cannot be done.
    Relay,
}

impl ErrorClass {
    /// Every class, in registry order.
    pub const ALL: [Self; 14] = [
        Self::InvalidCall,
        Self::JsonValue,
        Self::NotJson,
        Self::Settings,
        Self::Signature,
        Self::Config,
        Self::MessageTooLarge,
        Self::QueueFull,
        Self::Closed,
        Self::State,
        Self::InvalidArgument,
        Self::Delivery,
        Self::Ingest,
        Self::Relay,
    ];

    /// The class name in Python and JavaScript.
    pub const fn name(self) -> &'static str {
        match self {
            Self::InvalidCall => "InvalidCallError",
            Self::JsonValue => "JSONValueError",
            Self::NotJson => "NotJSONError",
            Self::Settings => "SettingsError",
            Self::Signature => "SignatureError",
            Self::Config => "ConfigError",
            Self::MessageTooLarge => "MessageTooLargeError",
            Self::QueueFull => "QueueFullError",
            Self::Closed => "ClosedError",
            Self::State => "StateError",
            Self::InvalidArgument => "InvalidArgumentError",
            Self::Delivery => "DeliveryError",
            Self::Ingest => "IngestError",
            Self::Relay => "RelayError",
        }
    }

    /// The built-in the class also derives from: Python's `ValueError` for
    /// bad values and `TypeError` for values of the wrong type, so code
    /// that catches those keeps working. In JavaScript, `TypeError` classes
    /// are `TypeError` instances and the rest plain `Error`s.
    pub const fn base(self) -> Option<&'static str> {
        match self {
            Self::NotJson | Self::InvalidArgument => Some("TypeError"),
            Self::QueueFull | Self::Closed | Self::Delivery | Self::Relay => None,
            _ => Some("ValueError"),
        }
    }

    /// What the class covers, for generated docs.
    pub const fn doc(self) -> &'static str {
        match self {
            Self::InvalidCall => "a call breaks the spec's rules (missing ids, wrong field types, bad timestamp)",
            Self::JsonValue => "a value JSON or a JavaScript receiver cannot carry: NaN, unsafe integers, too deep, lone surrogates",
            Self::NotJson => "a host value with no JSON form (set, bytes, custom class, cycle, non-string key); the message names its path",
            Self::Settings => "bad Webhooks settings: endpoints, URLs, headers, audience names",
            Self::Signature => "a webhook that did not verify (missing, malformed or mismatched signature), or a secret that can never verify",
            Self::Config => "bad client settings: empty write key, bad endpoint, out-of-range numbers",
            Self::MessageTooLarge => "a message over 32,000 bytes serialized; nothing was queued",
            Self::QueueFull => "the client's queue is full (the server is slow or down); nothing was queued",
            Self::Closed => "the client was closed",
            Self::State => "a saved delivery state that cannot be restored",
            Self::InvalidArgument => "the API was called wrongly: an argument of the wrong type or shape",
            Self::Delivery => "a webhook delivery or a batch upload gave up",
            Self::Ingest => "a Tracking API request the relay refuses as a whole: route, size, encoding, write key, batch shape",
            Self::Relay => "a request the relay's admin API or console refuses (token, route, body), or an operation it cannot do (an unknown source, a lost race, its database)",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

macro_rules! codes {
    ($( $(#[doc = $doc:literal])+ $variant:ident = $code:literal => $class:ident, )+) => {
        /// A stable error code. Its string ([`Code::as_str`]) is what every
        /// language exposes as `.code`; tests compare against it, never
        /// against messages.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Code {
            $( $(#[doc = $doc])+ $variant, )+
        }

        impl Code {
            /// Every code, in registry order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),+];

            /// The snake_case string.
            pub const fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)+ }
            }

            /// The class it is raised as.
            pub const fn class(self) -> ErrorClass {
                match self { $(Code::$variant => ErrorClass::$class,)+ }
            }

            /// The code whose string is `s`.
            pub fn parse(s: &str) -> Option<Code> {
                Code::ALL.iter().copied().find(|c| c.as_str() == s)
            }
        }
    };
}

codes! {
    // JSON values (json::JsonError).
    /// The text is not JSON.
    InvalidJson = "invalid_json" => JsonValue,
    /// An integer JavaScript would read as another number.
    IntegerOutOfRange = "integer_out_of_range" => JsonValue,
    /// NaN or ±Infinity.
    NonFiniteNumber = "non_finite_number" => JsonValue,
    /// Nesting deeper than 64 levels.
    TooDeep = "too_deep" => JsonValue,
    /// Invalid UTF-8, or a lone surrogate.
    InvalidUnicode = "invalid_unicode" => JsonValue,
    /// A host value with no JSON form.
    NotJson = "not_json" => NotJson,
    /// A host value that contains itself.
    CyclicValue = "cyclic_value" => NotJson,
    /// A host object key that is not a string.
    NonStringKey = "non_string_key" => NotJson,
    // Calls (call::CallError).
    /// The call is not a JSON object.
    NotAnObject = "not_an_object" => InvalidCall,
    /// The call has no `type`.
    MissingType = "missing_type" => InvalidCall,
    /// `type` is not a known kind.
    UnknownType = "unknown_type" => InvalidCall,
    /// A field has the wrong JSON type.
    InvalidField = "invalid_field" => InvalidCall,
    /// A timestamp that is not ISO 8601 with a zone, or is out of range.
    InvalidTimestamp = "invalid_timestamp" => InvalidCall,
    /// identify, track, page, screen or group without `userId` or `anonymousId`.
    MissingIdentity = "missing_identity" => InvalidCall,
    /// alias or delete without `userId`.
    MissingUserId = "missing_user_id" => InvalidCall,
    /// track without `event`.
    MissingEvent = "missing_event" => InvalidCall,
    /// group without `groupId`.
    MissingGroupId = "missing_group_id" => InvalidCall,
    /// alias without `previousId`.
    MissingPreviousId = "missing_previous_id" => InvalidCall,
    // Destination settings (webhooks::SettingsError, audience::AudienceError).
    /// No endpoint.
    NoEndpoints = "no_endpoints" => Settings,
    /// More than five endpoints.
    TooManyEndpoints = "too_many_endpoints" => Settings,
    /// An endpoint that is not an absolute URL.
    InvalidUrl = "invalid_url" => Settings,
    /// An endpoint whose scheme is not http or https.
    UnsupportedScheme = "unsupported_scheme" => Settings,
    /// An endpoint URL with a user name or password.
    UrlCredentials = "url_credentials" => Settings,
    /// An endpoint URL with a `#fragment`.
    UrlFragment = "url_fragment" => Settings,
    /// A static header name that is not an HTTP token.
    InvalidHeaderName = "invalid_header_name" => Settings,
    /// A static header value with a control or non-ASCII character.
    InvalidHeaderValue = "invalid_header_value" => Settings,
    /// A static header that replaces one callpost sets.
    ReservedHeader = "reserved_header" => Settings,
    /// An endpoint whose host is at a loopback, private or other non-public address, where private networks are not allowed.
    PrivateAddress = "private_address" => Settings,
    /// An endpoint's auth or client certificate that cannot be used.
    InvalidAuth = "invalid_auth" => Settings,
    /// A settings field of the wrong type.
    InvalidSettings = "invalid_settings" => Settings,
    /// An audience name with no letter or digit.
    InvalidAudienceName = "invalid_audience_name" => Settings,
    // Signatures (signature::SignatureError).
    /// An empty secret given to sign or verify.
    EmptySecret = "empty_secret" => Signature,
    /// verify given no secrets.
    NoSecrets = "no_secrets" => Signature,
    /// A signature that is not 40 hexadecimal characters.
    MalformedSignature = "malformed_signature" => Signature,
    /// A received request with no signature header.
    MissingSignature = "missing_signature" => Signature,
    /// A received body its signature does not match.
    SignatureMismatch = "signature_mismatch" => Signature,
    /// A received batch whose `X-Signature` covers only its first event.
    FirstEventSignature = "first_event_signature" => Signature,
    // Standard Webhooks signatures (standard::StandardError).
    /// A Standard Webhooks secret that is not `whsec_` and base64.
    MalformedSecret = "malformed_secret" => Signature,
    /// A `webhook-timestamp` older than the tolerance (a late or replayed request).
    TimestampTooOld = "timestamp_too_old" => Signature,
    /// A `webhook-timestamp` further ahead than the tolerance.
    TimestampTooNew = "timestamp_too_new" => Signature,
    // The batching client (batcher::ConfigError, batcher::EnqueueError).
    /// An empty write key.
    EmptyWriteKey = "empty_write_key" => Config,
    /// A batch endpoint that is not an absolute http(s) URL without credentials, query or fragment.
    InvalidEndpoint = "invalid_endpoint" => Config,
    /// A numeric client setting out of range.
    InvalidConfig = "invalid_config" => Config,
    /// A message over 32,000 bytes serialized.
    MessageTooLarge = "message_too_large" => MessageTooLarge,
    /// The client's queue is full.
    QueueFull = "queue_full" => QueueFull,
    /// The client was shut down.
    Closed = "closed" => Closed,
    // Saved deliveries (delivery::StateError).
    /// A saved delivery state that cannot be restored.
    InvalidState = "invalid_state" => State,
    // API misuse (ApiMisuse).
    /// An argument of the wrong type or shape.
    InvalidArgument = "invalid_argument" => InvalidArgument,
    // Terminal outcomes, reported as events and raised by the hosts.
    /// A delivery's next attempt would start past the 4-hour window.
    WindowExhausted = "window_exhausted" => Delivery,
    /// Every endpoint refused a delivery for good.
    AllEndpointsRejected = "all_endpoints_rejected" => Delivery,
    /// The ingest server refused a batch for good.
    Rejected = "rejected" => Delivery,
    /// A batch's retries ran out.
    RetriesExhausted = "retries_exhausted" => Delivery,
    /// The client shut down before the messages were delivered.
    Shutdown = "shutdown" => Delivery,
    /// A destination's mapping built a body over 500,000 bytes for a call: not sent there.
    MappedBodyTooLarge = "mapped_body_too_large" => Delivery,
    /// An OAuth 2.0 endpoint's token could not be had (the token endpoint refused, failed or gave an unusable answer): the attempt is retried.
    TokenUnavailable = "token_unavailable" => Delivery,
    /// A URL template's placeholder has no value a URL can take from the call (missing, null, empty, . or ..): not sent.
    InvalidUrlValue = "invalid_url_value" => Delivery,
    // The relay's Tracking API (ingest::IngestError).
    /// A path that is not a Tracking API route.
    UnknownRoute = "unknown_route" => Ingest,
    /// A body that is not a batch object, or a batch that is not an array.
    InvalidBatch = "invalid_batch" => Ingest,
    /// A request body over 500,000 bytes (decompressed).
    BatchTooLarge = "batch_too_large" => Ingest,
    /// A call in a request over 32,000 bytes.
    CallTooLarge = "call_too_large" => Ingest,
    /// A batch of more than 2,500 calls.
    TooManyCalls = "too_many_calls" => Ingest,
    /// A gzip body that is not gzip data.
    InvalidCompression = "invalid_compression" => Ingest,
    /// A `Content-Encoding` other than gzip or identity.
    UnsupportedEncoding = "unsupported_encoding" => Ingest,
    /// A `Content-Type` that is not JSON or text/plain.
    UnsupportedMediaType = "unsupported_media_type" => Ingest,
    /// A request without a write key.
    MissingWriteKey = "missing_write_key" => Ingest,
    /// A write key no source has.
    UnknownWriteKey = "unknown_write_key" => Ingest,
    /// The relay's storage is behind (backpressure): retry later.
    Overloaded = "overloaded" => Ingest,
    /// The relay cannot store calls now: retry later.
    Unavailable = "unavailable" => Ingest,
    // The relay's admin API, console and operations (the relay's error enums).
    /// An admin request without the admin token (or a console session).
    Unauthorized = "unauthorized" => Relay,
    /// The admin API is off: the relay has no admin token.
    AdminDisabled = "admin_disabled" => Relay,
    /// No such route, source, stored call or endpoint.
    NotFound = "not_found" => Relay,
    /// A method the route does not take.
    MethodNotAllowed = "method_not_allowed" => Relay,
    /// A request body over the listener's limit.
    PayloadTooLarge = "payload_too_large" => Relay,
    /// A request body that did not arrive in time.
    RequestTimeout = "request_timeout" => Relay,
    /// A request body the connection failed to deliver.
    InvalidBody = "invalid_body" => Relay,
    /// A browser's preflight from an origin the relay does not list.
    OriginNotAllowed = "origin_not_allowed" => Relay,
    /// A change that met another made at the same moment (sources, an audience): try again.
    Conflict = "conflict" => Relay,
    /// Sources kept in the database need `CALLPOST_RELAY_SECRET_KEY`.
    NoSecretKey = "no_secret_key" => Relay,
    /// A stored source that does not open with the relay's `CALLPOST_RELAY_SECRET_KEY` (every relay on one database needs the same key).
    WrongSecretKey = "wrong_secret_key" => Relay,
    /// The database cannot be used: another relay holds the SQLite file, or its schema is newer than the relay's.
    DatabaseRefused = "database_refused" => Relay,
    /// A fault of the relay's own: the answer could not be written.
    Internal = "internal" => Relay,
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Code {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&String> for Code {
    fn eq(&self, other: &&String) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<Code> for &str {
    fn eq(&self, other: &Code) -> bool {
        *self == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_snake_case_and_every_class_is_used() {
        let mut seen = std::collections::HashSet::new();
        for c in Code::ALL {
            let s = c.as_str();
            assert!(seen.insert(s), "{s} twice");
            assert!(
                !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{s}"
            );
            assert_eq!(Code::parse(s), Some(*c));
        }
        for class in ErrorClass::ALL {
            assert!(
                Code::ALL.iter().any(|c| c.class() == class),
                "{class} has no code"
            );
            assert!(class.name().ends_with("Error"));
        }
    }
}
