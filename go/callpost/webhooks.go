package callpost

/*
#include "callpost.h"
*/
import "C"

import (
	"runtime"
	"time"
	"unsafe"
)

// ValidateCall checks a call given as JSON text with Segment's keys against
// the spec's rules: the check Enqueue and webhook requests make, with the
// same codes (CodeMissingEvent, CodeInvalidTimestamp, ...).
func ValidateCall(call []byte) error {
	var e C.CallpostError
	return failure(C.callpost_call_validate(view(call), &e), &e)
}

// Stringify is JSON.stringify(JSON.parse(json)), byte for byte as
// JavaScript writes it: key order, number spelling, escapes. It refuses
// what JavaScript would read as another value (CodeIntegerOutOfRange,
// CodeTooDeep, ...).
func Stringify(json []byte) ([]byte, error) {
	var out C.CallpostBytes
	var e C.CallpostError
	if err := failure(C.callpost_stringify(view(json), &out, &e), &e); err != nil {
		return nil, err
	}
	return takeBytes(&out), nil
}

// Sign is the X-Signature value of body under secret: 40 lowercase hex
// digits of HMAC-SHA1 (webhooks-destination.md). An empty secret is
// CodeEmptySecret.
func Sign(secret, body []byte) (string, error) {
	var sig [40]byte
	var e C.CallpostError
	s := C.callpost_sign(view(secret), view(body), (*C.uint8_t)(unsafe.Pointer(&sig[0])), &e)
	if err := failure(s, &e); err != nil {
		return "", err
	}
	return string(sig[:]), nil
}

// VerifySignature checks an X-Signature value over the exact body bytes
// against each secret (several while rotating), in constant time. A
// signature that is not 40 hex digits is CodeMalformedSignature; no
// secrets is CodeNoSecrets. Prefer Receiver, which also picks the header
// and parses the body.
func VerifySignature(body []byte, signature string, secrets ...string) (bool, error) {
	list := newCList(secrets)
	defer list.free()
	var ok C.bool
	var e C.CallpostError
	s := C.callpost_verify(view(body), viewString(signature), list.items, C.size_t(list.count), &ok, &e)
	runtime.KeepAlive(signature)
	if err := failure(s, &e); err != nil {
		return false, err
	}
	return bool(ok), nil
}

// StandardSign is the three Standard Webhooks headers (webhook-id,
// webhook-timestamp, webhook-signature with one v1 entry per secret) for
// body sent with id at at. Secrets are whsec_ and base64
// (CodeMalformedSecret otherwise).
func StandardSign(secrets []string, id string, at time.Time, body []byte) ([]Header, error) {
	list := newCList(secrets)
	defer list.free()
	var out C.CallpostBytes
	var e C.CallpostError
	s := C.callpost_standard_sign(list.items, C.size_t(list.count), viewString(id), millis(at), view(body), &out, &e)
	runtime.KeepAlive(id)
	if err := failure(s, &e); err != nil {
		return nil, err
	}
	return parseHeaderBlock(takeBytes(&out)), nil
}

// StandardVerified is what a verified Standard Webhooks request said about
// itself.
type StandardVerified struct {
	// ID is the verified webhook-id.
	ID string
	// Timestamp is the verified webhook-timestamp.
	Timestamp time.Time
}

// StandardVerify checks a request's Standard Webhooks headers alone: the
// timestamp within tolerance of now (CodeTimestampTooOld,
// CodeTimestampTooNew), then a v1 signature under one of the whsec_
// secrets. Receiver does this and parses the body too.
func StandardVerify(secrets []string, body []byte, headers []Header, now time.Time, tolerance time.Duration) (StandardVerified, error) {
	list := newCList(secrets)
	defer list.free()
	block := make([]byte, 0, 256)
	for _, h := range headers {
		block = headerLines(block, h.Name, h.Value)
	}
	var id C.CallpostBytes
	var ts C.int64_t
	var e C.CallpostError
	s := C.callpost_standard_verify(list.items, C.size_t(list.count), view(body), view(block), millis(now),
		C.uint64_t(tolerance/time.Millisecond), &id, &ts, &e)
	if err := failure(s, &e); err != nil {
		return StandardVerified{}, err
	}
	return StandardVerified{ID: string(takeBytes(&id)), Timestamp: time.Unix(int64(ts), 0)}, nil
}

// Webhooks is a Webhooks destination's settings, validated by the core: it
// builds each call's signed request to an endpoint. Safe for concurrent
// use.
type Webhooks struct {
	h *C.CallpostWebhooks
}

// NewWebhooks validates settings given as JSON, in the form the relay's
// configuration and the other languages use: {"endpoints": [url | {"url",
// "headers"}], "sharedSecret": "...", "mode": "parallel" | "failover",
// "signature": "segment" | "standard" | "both", "signingSecrets": [...]}.
// Errors are the core's settings codes (CodeNoEndpoints, CodeInvalidURL, ...).
func NewWebhooks(settings []byte) (*Webhooks, error) {
	var h *C.CallpostWebhooks
	var e C.CallpostError
	if err := failure(C.callpost_webhooks_new(view(settings), &h, &e), &e); err != nil {
		return nil, err
	}
	w := &Webhooks{h: h}
	runtime.SetFinalizer(w, func(w *Webhooks) { C.callpost_webhooks_free(w.h) })
	return w, nil
}

// Request is the signed request delivering call (JSON text with Segment's
// keys) to endpoint (0-based): the spec's body for the call's kind,
// X-Signature and/or the Standard Webhooks headers, Idempotency-Key. now
// stamps a call without a timestamp.
func (w *Webhooks) Request(call []byte, endpoint int, now time.Time) (Request, error) {
	var r C.CallpostRequest
	var e C.CallpostError
	s := C.callpost_webhooks_request(w.h, view(call), C.size_t(endpoint), millis(now), &r, &e)
	runtime.KeepAlive(w)
	if err := failure(s, &e); err != nil {
		return Request{}, err
	}
	defer C.callpost_request_free(&r)
	return requestOf(&r), nil
}
