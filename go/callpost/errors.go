package callpost

/*
#include "callpost.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// Code is a stable error code of the core's registry: the same string in
// Go, Rust, Python and JavaScript, and never changed once released. Compare
// against these constants, never against messages.
type Code string

// The registry's codes, each with the class (the sentinel errors.Is
// matches) it belongs to. A test holds this list to the core's registry.
const (
	// CodeInvalidJSON is invalid_json (ErrJSONValue): the text is not JSON.
	CodeInvalidJSON Code = "invalid_json"
	// CodeIntegerOutOfRange is integer_out_of_range (ErrJSONValue): an integer JavaScript would read as another number.
	CodeIntegerOutOfRange Code = "integer_out_of_range"
	// CodeNonFiniteNumber is non_finite_number (ErrJSONValue): NaN or ±Infinity.
	CodeNonFiniteNumber Code = "non_finite_number"
	// CodeTooDeep is too_deep (ErrJSONValue): nesting deeper than 64 levels.
	CodeTooDeep Code = "too_deep"
	// CodeInvalidUnicode is invalid_unicode (ErrJSONValue): invalid UTF-8, or a lone surrogate.
	CodeInvalidUnicode Code = "invalid_unicode"
	// CodeNotJSON is not_json (ErrNotJSON): a host value with no JSON form.
	CodeNotJSON Code = "not_json"
	// CodeCyclicValue is cyclic_value (ErrNotJSON): a host value that contains itself.
	CodeCyclicValue Code = "cyclic_value"
	// CodeNonStringKey is non_string_key (ErrNotJSON): a host object key that is not a string.
	CodeNonStringKey Code = "non_string_key"
	// CodeNotAnObject is not_an_object (ErrInvalidCall): the call is not a JSON object.
	CodeNotAnObject Code = "not_an_object"
	// CodeMissingType is missing_type (ErrInvalidCall): the call has no type.
	CodeMissingType Code = "missing_type"
	// CodeUnknownType is unknown_type (ErrInvalidCall): type is not a known kind.
	CodeUnknownType Code = "unknown_type"
	// CodeInvalidField is invalid_field (ErrInvalidCall): a field has the wrong JSON type.
	CodeInvalidField Code = "invalid_field"
	// CodeInvalidTimestamp is invalid_timestamp (ErrInvalidCall): a timestamp that is not ISO 8601 with a zone, or is out of range.
	CodeInvalidTimestamp Code = "invalid_timestamp"
	// CodeMissingIdentity is missing_identity (ErrInvalidCall): identify, track, page, screen or group without userId or anonymousId.
	CodeMissingIdentity Code = "missing_identity"
	// CodeMissingUserID is missing_user_id (ErrInvalidCall): alias or delete without userId.
	CodeMissingUserID Code = "missing_user_id"
	// CodeMissingEvent is missing_event (ErrInvalidCall): track without event.
	CodeMissingEvent Code = "missing_event"
	// CodeMissingGroupID is missing_group_id (ErrInvalidCall): group without groupId.
	CodeMissingGroupID Code = "missing_group_id"
	// CodeMissingPreviousID is missing_previous_id (ErrInvalidCall): alias without previousId.
	CodeMissingPreviousID Code = "missing_previous_id"
	// CodeNoEndpoints is no_endpoints (ErrSettings): no endpoint.
	CodeNoEndpoints Code = "no_endpoints"
	// CodeTooManyEndpoints is too_many_endpoints (ErrSettings): more than five endpoints.
	CodeTooManyEndpoints Code = "too_many_endpoints"
	// CodeInvalidURL is invalid_url (ErrSettings): an endpoint that is not an absolute URL.
	CodeInvalidURL Code = "invalid_url"
	// CodeUnsupportedScheme is unsupported_scheme (ErrSettings): an endpoint whose scheme is not http or https.
	CodeUnsupportedScheme Code = "unsupported_scheme"
	// CodeURLCredentials is url_credentials (ErrSettings): an endpoint URL with a user name or password.
	CodeURLCredentials Code = "url_credentials"
	// CodeURLFragment is url_fragment (ErrSettings): an endpoint URL with a #fragment.
	CodeURLFragment Code = "url_fragment"
	// CodeInvalidHeaderName is invalid_header_name (ErrSettings): a static header name that is not an HTTP token.
	CodeInvalidHeaderName Code = "invalid_header_name"
	// CodeInvalidHeaderValue is invalid_header_value (ErrSettings): a static header value with a control or non-ASCII character.
	CodeInvalidHeaderValue Code = "invalid_header_value"
	// CodePrivateAddress is private_address (ErrSettings): an endpoint whose host is at a loopback, private or other non-public address, where private networks are not allowed.
	CodePrivateAddress Code = "private_address"
	// CodeReservedHeader is reserved_header (ErrSettings): a static header that replaces one callpost sets.
	CodeReservedHeader Code = "reserved_header"
	// CodeInvalidAuth is invalid_auth (ErrSettings): an endpoint's auth or client certificate that cannot be used.
	CodeInvalidAuth Code = "invalid_auth"
	// CodeInvalidSettings is invalid_settings (ErrSettings): a settings field of the wrong type.
	CodeInvalidSettings Code = "invalid_settings"
	// CodeInvalidAudienceName is invalid_audience_name (ErrSettings): an audience name with no letter or digit.
	CodeInvalidAudienceName Code = "invalid_audience_name"
	// CodeEmptySecret is empty_secret (ErrSignature): an empty secret given to sign or verify.
	CodeEmptySecret Code = "empty_secret"
	// CodeNoSecrets is no_secrets (ErrSignature): verify given no secrets.
	CodeNoSecrets Code = "no_secrets"
	// CodeMalformedSignature is malformed_signature (ErrSignature): a signature that is not 40 hexadecimal characters.
	CodeMalformedSignature Code = "malformed_signature"
	// CodeMissingSignature is missing_signature (ErrSignature): a received request with no signature header.
	CodeMissingSignature Code = "missing_signature"
	// CodeSignatureMismatch is signature_mismatch (ErrSignature): a received body its signature does not match.
	CodeSignatureMismatch Code = "signature_mismatch"
	// CodeFirstEventSignature is first_event_signature (ErrSignature): a received batch whose X-Signature covers only its first event.
	CodeFirstEventSignature Code = "first_event_signature"
	// CodeMalformedSecret is malformed_secret (ErrSignature): a Standard Webhooks secret that is not whsec_ and base64.
	CodeMalformedSecret Code = "malformed_secret"
	// CodeTimestampTooOld is timestamp_too_old (ErrSignature): a webhook-timestamp older than the tolerance (a late or replayed request).
	CodeTimestampTooOld Code = "timestamp_too_old"
	// CodeTimestampTooNew is timestamp_too_new (ErrSignature): a webhook-timestamp further ahead than the tolerance.
	CodeTimestampTooNew Code = "timestamp_too_new"
	// CodeEmptyWriteKey is empty_write_key (ErrConfig): an empty write key.
	CodeEmptyWriteKey Code = "empty_write_key"
	// CodeInvalidEndpoint is invalid_endpoint (ErrConfig): a batch endpoint that is not an absolute http(s) URL without credentials, query or fragment.
	CodeInvalidEndpoint Code = "invalid_endpoint"
	// CodeInvalidConfig is invalid_config (ErrConfig): a numeric client setting out of range.
	CodeInvalidConfig Code = "invalid_config"
	// CodeMessageTooLarge is message_too_large (ErrMessageTooLarge): a message over 32,000 bytes serialized.
	CodeMessageTooLarge Code = "message_too_large"
	// CodeQueueFull is queue_full (ErrQueueFull): the client's queue is full.
	CodeQueueFull Code = "queue_full"
	// CodeClosed is closed (ErrClosed): the client was shut down.
	CodeClosed Code = "closed"
	// CodeInvalidState is invalid_state (ErrState): a saved delivery state that cannot be restored.
	CodeInvalidState Code = "invalid_state"
	// CodeInvalidArgument is invalid_argument (ErrInvalidArgument): an argument of the wrong type or shape.
	CodeInvalidArgument Code = "invalid_argument"
	// CodeWindowExhausted is window_exhausted (ErrDelivery): a delivery's next attempt would start past the 4-hour window.
	CodeWindowExhausted Code = "window_exhausted"
	// CodeAllEndpointsRejected is all_endpoints_rejected (ErrDelivery): every endpoint refused a delivery for good.
	CodeAllEndpointsRejected Code = "all_endpoints_rejected"
	// CodeRejected is rejected (ErrDelivery): the ingest server refused a batch for good.
	CodeRejected Code = "rejected"
	// CodeRetriesExhausted is retries_exhausted (ErrDelivery): a batch's retries ran out.
	CodeRetriesExhausted Code = "retries_exhausted"
	// CodeShutdown is shutdown (ErrDelivery): the client shut down before the messages were delivered.
	CodeShutdown Code = "shutdown"
	// CodeMappedBodyTooLarge is mapped_body_too_large (ErrDelivery): a destination's mapping built a body over 500,000 bytes for a call: not sent there.
	CodeMappedBodyTooLarge Code = "mapped_body_too_large"
	// CodeTokenUnavailable is token_unavailable (ErrDelivery): an OAuth 2.0 endpoint's token could not be had (the token endpoint refused, failed or gave an unusable answer): the attempt is retried.
	CodeTokenUnavailable Code = "token_unavailable"
	// CodeInvalidURLValue is invalid_url_value (ErrDelivery): a URL template's placeholder has no value a URL can take from the call (missing, null, empty, . or ..): not sent.
	CodeInvalidURLValue Code = "invalid_url_value"
	// CodeUnknownRoute is unknown_route (ErrIngest): a path that is not a Tracking API route.
	CodeUnknownRoute Code = "unknown_route"
	// CodeInvalidBatch is invalid_batch (ErrIngest): a body that is not a batch object, or a batch that is not an array.
	CodeInvalidBatch Code = "invalid_batch"
	// CodeBatchTooLarge is batch_too_large (ErrIngest): a request body over 500,000 bytes (decompressed).
	CodeBatchTooLarge Code = "batch_too_large"
	// CodeCallTooLarge is call_too_large (ErrIngest): a call in a request over 32,000 bytes.
	CodeCallTooLarge Code = "call_too_large"
	// CodeTooManyCalls is too_many_calls (ErrIngest): a batch of more than 2,500 calls.
	CodeTooManyCalls Code = "too_many_calls"
	// CodeInvalidCompression is invalid_compression (ErrIngest): a gzip body that is not gzip data.
	CodeInvalidCompression Code = "invalid_compression"
	// CodeUnsupportedEncoding is unsupported_encoding (ErrIngest): a Content-Encoding other than gzip or identity.
	CodeUnsupportedEncoding Code = "unsupported_encoding"
	// CodeUnsupportedMediaType is unsupported_media_type (ErrIngest): a Content-Type that is not JSON or text/plain.
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	// CodeMissingWriteKey is missing_write_key (ErrIngest): a request without a write key.
	CodeMissingWriteKey Code = "missing_write_key"
	// CodeUnknownWriteKey is unknown_write_key (ErrIngest): a write key no source has.
	CodeUnknownWriteKey Code = "unknown_write_key"
	// CodeOverloaded is overloaded (ErrIngest): the relay's storage is behind (backpressure): retry later.
	CodeOverloaded Code = "overloaded"
	// CodeUnavailable is unavailable (ErrIngest): the relay cannot store calls now: retry later.
	CodeUnavailable Code = "unavailable"
	// CodeUnauthorized is unauthorized (ErrRelay): an admin request without the admin token (or a console session).
	CodeUnauthorized Code = "unauthorized"
	// CodeAdminDisabled is admin_disabled (ErrRelay): the admin API is off: the relay has no admin token.
	CodeAdminDisabled Code = "admin_disabled"
	// CodeNotFound is not_found (ErrRelay): no such route, source, stored call or endpoint.
	CodeNotFound Code = "not_found"
	// CodeMethodNotAllowed is method_not_allowed (ErrRelay): a method the route does not take.
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodePayloadTooLarge is payload_too_large (ErrRelay): a request body over the listener's limit.
	CodePayloadTooLarge Code = "payload_too_large"
	// CodeRequestTimeout is request_timeout (ErrRelay): a request body that did not arrive in time.
	CodeRequestTimeout Code = "request_timeout"
	// CodeInvalidBody is invalid_body (ErrRelay): a request body the connection failed to deliver.
	CodeInvalidBody Code = "invalid_body"
	// CodeOriginNotAllowed is origin_not_allowed (ErrRelay): a browser's preflight from an origin the relay does not list.
	CodeOriginNotAllowed Code = "origin_not_allowed"
	// CodeConflict is conflict (ErrRelay): a change that met another made at the same moment (sources, an audience): try again.
	CodeConflict Code = "conflict"
	// CodeNoSecretKey is no_secret_key (ErrRelay): sources kept in the database need CALLPOST_RELAY_SECRET_KEY.
	CodeNoSecretKey Code = "no_secret_key"
	// CodeWrongSecretKey is wrong_secret_key (ErrRelay): a stored source that does not open with the relay's CALLPOST_RELAY_SECRET_KEY.
	CodeWrongSecretKey Code = "wrong_secret_key"
	// CodeDatabaseRefused is database_refused (ErrRelay): the database cannot be used: another relay holds the SQLite file, or its schema is newer than the relay's.
	CodeDatabaseRefused Code = "database_refused"
	// CodeInternal is internal (ErrRelay): a fault of the relay's own: the answer could not be written.
	CodeInternal Code = "internal"
)

// Error is a failure the core reported, with its stable code. Every error
// callpost returns for bad input, a refused webhook or an undelivered
// message is an *Error (use errors.As); errors.Is matches it against the
// sentinel of its class (ErrInvalidCall, ErrSignature, ...).
type Error struct {
	// Code is the registry's code: CodeMissingEvent, CodeSignatureMismatch, ...
	Code Code
	// Message says what went wrong and how to fix it. It never holds a
	// secret or an expected signature.
	Message string
}

// Error returns "callpost: <code>: <message>".
func (e *Error) Error() string {
	return "callpost: " + string(e.Code) + ": " + e.Message
}

// Class is the sentinel of the code's class (ErrInvalidCall, ...), as the
// core's registry names it; nil for a code the registry does not know.
func (e *Error) Class() error {
	return classOf[e.Code]
}

// Is matches the sentinel of the error's class, so that
// errors.Is(err, callpost.ErrSignature) holds for every refused signature.
func (e *Error) Is(target error) bool {
	c := classOf[e.Code]
	return c != nil && c == target
}

// classError is a class sentinel: an error value that errors.Is matches
// against every *Error of the class.
type classError struct {
	name string
	doc  string
}

func (c *classError) Error() string { return "callpost: " + c.doc }

// Name is the class's name in the core's registry (and Python's and
// JavaScript's error classes): "InvalidCallError", ...
func (c *classError) Name() string { return c.name }

// The classes of the core's registry. Test with errors.Is; the *Error
// holds the code.
var (
	// ErrInvalidCall: a call breaks the spec's rules (missing ids, wrong field types, bad timestamp).
	ErrInvalidCall error = &classError{"InvalidCallError", "invalid call"}
	// ErrJSONValue: a value JSON or a JavaScript receiver cannot carry (NaN, unsafe integers, too deep, invalid UTF-8).
	ErrJSONValue error = &classError{"JSONValueError", "value JSON cannot carry"}
	// ErrNotJSON: a Go value with no JSON form (a channel, a function, a cycle).
	ErrNotJSON error = &classError{"NotJSONError", "value with no JSON form"}
	// ErrSettings: bad Webhooks destination settings.
	ErrSettings error = &classError{"SettingsError", "invalid webhooks settings"}
	// ErrSignature: a webhook that did not verify, or a secret that can never verify.
	ErrSignature error = &classError{"SignatureError", "signature refused"}
	// ErrConfig: bad client settings (empty write key, bad endpoint, out-of-range numbers).
	ErrConfig error = &classError{"ConfigError", "invalid client settings"}
	// ErrMessageTooLarge: a message over the core's size limit; nothing was queued.
	ErrMessageTooLarge error = &classError{"MessageTooLargeError", "message too large"}
	// ErrQueueFull: the client's queue is full (the server is slow or down); nothing was queued.
	ErrQueueFull error = &classError{"QueueFullError", "queue full"}
	// ErrClosed: the client was closed.
	ErrClosed error = &classError{"ClosedError", "client closed"}
	// ErrState: a saved delivery state that cannot be restored.
	ErrState error = &classError{"StateError", "invalid saved state"}
	// ErrInvalidArgument: the API was called wrongly.
	ErrInvalidArgument error = &classError{"InvalidArgumentError", "invalid argument"}
	// ErrDelivery: a batch upload or a webhook delivery gave up.
	ErrDelivery error = &classError{"DeliveryError", "delivery gave up"}
	// ErrIngest: a Tracking API request refused as a whole.
	ErrIngest error = &classError{"IngestError", "tracking API request refused"}
	// ErrRelay: a request the relay's admin API or console refuses, or an operation of the relay's that cannot be done.
	ErrRelay error = &classError{"RelayError", "relay refused"}
)

// ErrInternal is a bug in callpost (a panic the library caught at its
// boundary); errors.Is matches it. Please report it.
var ErrInternal = errors.New("callpost: internal error")

type internalError struct{ message string }

func (e *internalError) Error() string        { return e.message }
func (e *internalError) Is(target error) bool { return target == ErrInternal }

// classOf maps each code to its class sentinel, read from the core's
// registry when the package loads.
var classOf = loadRegistry()

func loadRegistry() map[Code]error {
	byName := map[string]error{}
	for _, c := range []error{ErrInvalidCall, ErrJSONValue, ErrNotJSON, ErrSettings, ErrSignature, ErrConfig,
		ErrMessageTooLarge, ErrQueueFull, ErrClosed, ErrState, ErrInvalidArgument, ErrDelivery, ErrIngest,
		ErrRelay} {
		byName[c.(*classError).name] = c
	}
	out := map[Code]error{}
	var code, class C.CallpostStr
	for i := C.size_t(0); C.callpost_code_at(i, &code, &class); i++ {
		out[Code(goString(code))] = byName[goString(class)]
	}
	return out
}

// Codes lists the core's registry: every code and the name of its class,
// in registry order.
func Codes() []CodeInfo {
	var out []CodeInfo
	var code, class C.CallpostStr
	for i := C.size_t(0); C.callpost_code_at(i, &code, &class); i++ {
		out = append(out, CodeInfo{Code: Code(goString(code)), Class: goString(class)})
	}
	return out
}

// CodeInfo is one entry of the core's registry.
type CodeInfo struct {
	// Code is the code.
	Code Code
	// Class is its class's name ("SignatureError", ...).
	Class string
}

// newError is an *Error the Go side raises itself, for what only a Go
// value can get wrong (a value with no JSON form, an API misuse).
func newError(code Code, format string, args ...interface{}) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
