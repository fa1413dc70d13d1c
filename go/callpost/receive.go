package callpost

/*
#include "callpost.h"
*/
import "C"

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// ReceiverOptions are a receiver's secrets and choices. Give Secrets,
// StandardSecrets, or both.
type ReceiverOptions struct {
	// Secrets are the X-Signature shared secrets (HMAC-SHA1): one, or the
	// new and the old while rotating.
	Secrets []string
	// StandardSecrets are Standard Webhooks whsec_ secrets (HMAC-SHA256).
	// With these only, a request must carry webhook-signature; with both
	// kinds, a request carrying webhook-signature is held to it and one
	// without it to X-Signature (the receiver's choice, not the request's).
	StandardSecrets []string
	// AllowFirstEventSignature accepts a batch whose X-Signature covers
	// only its first event (Segment's Actions destination without "Use
	// X-Segment-Signature Header"); the other events are then
	// unauthenticated.
	AllowFirstEventSignature bool
	// Tolerance is how far a Standard webhook-timestamp may be from the
	// receiver's clock, either way; 0 means DefaultStandardTolerance.
	Tolerance time.Duration
	// Seen drops calls already processed (senders retry until they see a
	// 2xx). nil means an in-memory LRU of the core's seen_capacity ids
	// per Receiver (NewSeenIDs(0)); KeepDuplicates turns it off.
	Seen SeenStore
}

// String shows the options without the secrets.
func (o ReceiverOptions) String() string {
	return fmt.Sprintf("ReceiverOptions{Secrets: %d, StandardSecrets: %d, AllowFirstEventSignature: %t, Tolerance: %s}",
		len(o.Secrets), len(o.StandardSecrets), o.AllowFirstEventSignature, o.Tolerance)
}

// GoString is String: %#v must not print the secrets either.
func (o ReceiverOptions) GoString() string { return o.String() }

// SeenStore remembers the ids of calls already processed.
type SeenStore interface {
	// Seen reports whether id was processed before; otherwise it remembers
	// it and returns false (check-and-set, as Redis SET NX does, so two
	// concurrent retries of one call cannot both pass).
	Seen(id string) bool
	// Forget drops id, so that the sender's retry of a call whose handler
	// failed is processed.
	Forget(id string)
}

// KeepDuplicates is a SeenStore that remembers nothing: every call reaches
// the handler, retries included.
var KeepDuplicates SeenStore = keepDuplicates{}

type keepDuplicates struct{}

func (keepDuplicates) Seen(string) bool { return false }
func (keepDuplicates) Forget(string)    {}

// SeenIDs is the default SeenStore: the last ids, in memory, per process.
// Several processes or hosts behind one URL need a shared store instead (a
// Redis SET NX with a 4-hour expiry is the usual one).
type SeenIDs struct {
	mu       sync.Mutex
	capacity int
	order    *list.List
	ids      map[string]*list.Element
}

// NewSeenIDs remembers the last capacity ids; 0 means the core's default
// (Defaults["seen_capacity"]: 4 hours of retries at under 0.7 calls a
// second).
func NewSeenIDs(capacity int) *SeenIDs {
	if capacity <= 0 {
		capacity = int(Defaults["seen_capacity"])
	}
	return &SeenIDs{capacity: capacity, order: list.New(), ids: map[string]*list.Element{}}
}

// Seen implements SeenStore.
func (s *SeenIDs) Seen(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.ids[id]; ok {
		s.order.MoveToFront(e)
		return true
	}
	s.ids[id] = s.order.PushFront(id)
	if s.order.Len() > s.capacity {
		oldest := s.order.Back()
		s.order.Remove(oldest)
		delete(s.ids, oldest.Value.(string))
	}
	return false
}

// Forget implements SeenStore.
func (s *SeenIDs) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.ids[id]; ok {
		s.order.Remove(e)
		delete(s.ids, id)
	}
}

// Len is how many ids are remembered.
func (s *SeenIDs) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}

// Receiver verifies webhooks for one endpoint: the core's one check (which
// header, which bytes, which scheme, the timestamp window), then drops the
// calls already seen. Safe for concurrent use.
type Receiver struct {
	h    *C.CallpostReceiver
	seen SeenStore
}

// NewReceiver keys the secrets once. Neither kind of secret is
// CodeNoSecrets; an empty X-Signature secret is CodeEmptySecret, a
// Standard one that is not whsec_ and base64 CodeMalformedSecret.
func NewReceiver(o ReceiverOptions) (*Receiver, error) {
	segment, standard := newCList(o.Secrets), newCList(o.StandardSecrets)
	defer segment.free()
	defer standard.free()
	var opts C.CallpostReceiverOptions
	C.callpost_receiver_options_default(&opts)
	opts.allow_first_event_signature = C.bool(o.AllowFirstEventSignature)
	if o.Tolerance > 0 {
		opts.tolerance_ms = C.uint64_t(o.Tolerance / time.Millisecond)
	}
	var h *C.CallpostReceiver
	var e C.CallpostError
	s := C.callpost_receiver_new(segment.items, C.size_t(segment.count), standard.items, C.size_t(standard.count),
		&opts, &h, &e)
	if err := failure(s, &e); err != nil {
		return nil, err
	}
	seen := o.Seen
	if seen == nil {
		seen = NewSeenIDs(0)
	}
	r := &Receiver{h: h, seen: seen}
	runtime.SetFinalizer(r, func(r *Receiver) { C.callpost_receiver_free(r.h) })
	return r, nil
}

// String shows no secrets.
func (r *Receiver) String() string { return fmt.Sprintf("Receiver{seen: %T}", r.seen) }

// GoString is String.
func (r *Receiver) GoString() string { return r.String() }

// Webhook is a verified webhook.
type Webhook struct {
	// Calls are the calls not seen before, in body order, in
	// JSON.stringify form: process these (json.Unmarshal each into your
	// own type).
	Calls []json.RawMessage
	// IDs are their ids: messageId, else the request's signed id (the
	// verified webhook-id, or under X-Signature "body_" and 16 bytes of
	// the body's SHA-256 in hex; "<id>.<index>" for a batch's element);
	// "" for none. The unsigned Idempotency-Key header is never an id.
	IDs []string
	// Duplicates are the ids of the calls dropped as already seen.
	Duplicates []string
	// Batch says the body was a JSON array of calls.
	Batch bool
	// Header is the header whose signature was accepted: X-Signature,
	// X-Segment-Signature or webhook-signature.
	Header string
	// Coverage is what it covers: "body", or "first_event" (opted in).
	Coverage string
	// Timestamp is the verified webhook-timestamp (the Standard scheme),
	// or the zero time.
	Timestamp time.Time
}

// OnlyDuplicates is true when every call was seen before: answer 2xx and
// process nothing.
func (w *Webhook) OnlyDuplicates() bool { return len(w.Calls) == 0 && len(w.Duplicates) > 0 }

// Receive verifies a webhook as it arrived: body is the raw request body,
// byte for byte, header the request's headers. Refusals are *Error of
// class ErrSignature (CodeMissingSignature, CodeMalformedSignature,
// CodeSignatureMismatch, CodeFirstEventSignature, CodeTimestampTooOld,
// CodeTimestampTooNew) or ErrJSONValue (a verified body that is not JSON).
func (r *Receiver) Receive(body []byte, header http.Header) (*Webhook, error) {
	return r.ReceiveAt(body, header, time.Now())
}

// ReceiveAt is Receive with the receiver's clock given (for the Standard
// timestamp window).
func (r *Receiver) ReceiveAt(body []byte, header http.Header, now time.Time) (*Webhook, error) {
	block := make([]byte, 0, 512)
	for name, values := range header {
		for _, v := range values {
			block = headerLines(block, name, v)
		}
	}
	return r.receive(body, block, now)
}

// ReceiveHeaders is ReceiveAt for headers given as an ordered list, as
// they were on the wire.
func (r *Receiver) ReceiveHeaders(body []byte, headers []Header, now time.Time) (*Webhook, error) {
	block := make([]byte, 0, 512)
	for _, h := range headers {
		block = headerLines(block, h.Name, h.Value)
	}
	return r.receive(body, block, now)
}

func (r *Receiver) receive(body, headerBlock []byte, now time.Time) (*Webhook, error) {
	var got C.CallpostReceived
	var e C.CallpostError
	s := C.callpost_receiver_verify(r.h, view(body), view(headerBlock), millis(now), &got, &e)
	runtime.KeepAlive(r)
	if err := failure(s, &e); err != nil {
		return nil, err
	}
	hook := &Webhook{
		Batch:    bool(got.batch),
		Header:   goString(got.header),
		Coverage: goString(got.coverage),
	}
	if got.has_timestamp {
		hook.Timestamp = time.Unix(int64(got.timestamp), 0)
	}
	calls := unsafe.Slice(got.calls, int(got.count))
	hook.Calls = make([]json.RawMessage, 0, len(calls))
	hook.IDs = make([]string, 0, len(calls))
	for _, c := range calls {
		id := goString(c.id)
		if id != "" && r.seen.Seen(id) {
			hook.Duplicates = append(hook.Duplicates, id)
			continue
		}
		hook.Calls = append(hook.Calls, C.GoBytes(unsafe.Pointer(c.json.ptr), C.int(c.json.len)))
		hook.IDs = append(hook.IDs, id)
	}
	C.callpost_received_free(&got)
	return hook, nil
}

// Failed forgets the webhook's new ids, so that the sender's retry is
// processed: call it when the handler failed.
func (r *Receiver) Failed(w *Webhook) {
	for _, id := range w.IDs {
		if id != "" {
			r.seen.Forget(id)
		}
	}
}

// RefusalStatus is the HTTP status a receiver answers a refused webhook
// with: 401 when it did not verify (a sender does not retry a 4xx), 400
// for anything else.
func RefusalStatus(err error) int {
	var e *Error
	code := ""
	if errors.As(err, &e) {
		code = string(e.Code)
	}
	return int(C.callpost_refusal_status(viewString(code)))
}

type webhookKey struct{}

// WebhookFrom is the verified webhook Middleware put in the request's
// context, or nil.
func WebhookFrom(ctx context.Context) *Webhook {
	w, _ := ctx.Value(webhookKey{}).(*Webhook)
	return w
}

// Middleware verifies each request before next sees it. It reads the raw
// body, answers a refusal itself (401 for a signature that did not verify,
// 400 otherwise, as {"error": code, "message": ...}, never a secret or the
// expected signature), answers 200 {"duplicates": n} without calling next
// when every call was seen before, and otherwise calls next with the
// webhook in the request's context (WebhookFrom) and the body readable
// again. When next panics or answers 5xx, the new calls' ids are
// forgotten so that the sender's retry is processed.
//
// It reads the whole body: cap it in front (http.MaxBytesHandler) where
// senders are not trusted to stay small.
func (r *Receiver) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			answer(w, http.StatusBadRequest, map[string]interface{}{
				"error": string(CodeInvalidArgument), "message": "the request body could not be read: " + err.Error(),
			})
			return
		}
		hook, err := r.Receive(body, req.Header)
		if err != nil {
			code, message := string(CodeInvalidArgument), err.Error()
			var e *Error
			if errors.As(err, &e) {
				code, message = string(e.Code), e.Message
			}
			answer(w, RefusalStatus(err), map[string]interface{}{"error": code, "message": message})
			return
		}
		if hook.OnlyDuplicates() {
			answer(w, http.StatusOK, map[string]interface{}{"duplicates": len(hook.Duplicates)})
			return
		}
		req = req.WithContext(context.WithValue(req.Context(), webhookKey{}, hook))
		req.Body = io.NopCloser(bytes.NewReader(body))
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				r.Failed(hook)
				panic(p)
			}
		}()
		next.ServeHTTP(rec, req)
		if rec.status >= 500 {
			r.Failed(hook)
		}
	})
}

func answer(w http.ResponseWriter, status int, body map[string]interface{}) {
	text, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(text)
}

// statusRecorder notes the status the handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
