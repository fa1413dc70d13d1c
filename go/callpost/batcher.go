package callpost

/*
#include "callpost.h"
*/
import "C"

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// BatcherConfig is the batching client's settings. Start from
// DefaultBatcherConfig, which holds the core's defaults, and change what
// you need; NewBatcher hands every field to the core, which checks them.
type BatcherConfig struct {
	// WriteKey is the source's write key, sent as the Basic auth user.
	WriteKey string
	// Endpoint is the base URL; batches go to Endpoint + BatchPath.
	Endpoint string
	// BatchPath is the path of the upload under Endpoint ("/v1/batch").
	BatchPath string
	// FlushAt is how many messages are queued before a flush; 1 sends
	// every message at once.
	FlushAt int
	// FlushAfter is the time since the last flush after which a flush
	// happens.
	FlushAfter time.Duration
	// MaxQueue is how many messages are held before Enqueue refuses with
	// CodeQueueFull.
	MaxQueue int
	// MaxAttempts is how many times a batch is sent before it is reported
	// failed.
	MaxAttempts int
	// MaxRetry is how long a batch may keep retrying, from its first
	// attempt.
	MaxRetry time.Duration
	// RequestTimeout is how long a request may go unanswered before it
	// counts as a timeout.
	RequestTimeout time.Duration
	// MaxInFlight is how many batches may be uploading or waiting to retry
	// at once; 1 keeps them in order.
	MaxInFlight int
	// BackoffBase and BackoffCap bound the retry delay (full jitter).
	BackoffBase, BackoffCap time.Duration
	// LibraryName and LibraryVersion are the messages' context.library and
	// the User-Agent.
	LibraryName, LibraryVersion string
	// JitterSeed seeds the backoff jitter. DefaultBatcherConfig takes it
	// from crypto/rand, so clients that fail together do not retry at the
	// same instants.
	JitterSeed uint64
}

// String shows the settings without the write key.
func (c BatcherConfig) String() string {
	return fmt.Sprintf("BatcherConfig{Endpoint: %q, FlushAt: %d, FlushAfter: %s, MaxQueue: %d}",
		c.Endpoint, c.FlushAt, c.FlushAfter, c.MaxQueue)
}

// GoString is String: %#v must not print the write key either.
func (c BatcherConfig) GoString() string { return c.String() }

// DefaultBatcherConfig is the core's defaults, with writeKey.
func DefaultBatcherConfig(writeKey string) BatcherConfig {
	var c C.CallpostBatcherConfig
	C.callpost_batcher_config_default(&c)
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // a zero seed only makes retries less spread out
	ms := func(v C.int64_t) time.Duration { return time.Duration(v) * time.Millisecond }
	return BatcherConfig{
		WriteKey:       writeKey,
		Endpoint:       goString(c.endpoint),
		BatchPath:      goString(c.batch_path),
		FlushAt:        int(c.flush_at),
		FlushAfter:     ms(c.flush_after_ms),
		MaxQueue:       int(c.max_queue),
		MaxAttempts:    int(c.max_attempts),
		MaxRetry:       ms(c.max_retry_ms),
		RequestTimeout: ms(c.request_timeout_ms),
		MaxInFlight:    int(c.max_in_flight),
		BackoffBase:    ms(c.backoff_base_ms),
		BackoffCap:     ms(c.backoff_cap_ms),
		LibraryName:    goString(c.library_name),
		LibraryVersion: goString(c.library_version),
		JitterSeed:     binary.LittleEndian.Uint64(seed[:]),
	}
}

// durationMillis rounds up, so that a positive duration under a
// millisecond is not read as zero.
func durationMillis(d time.Duration) C.int64_t {
	if d <= 0 {
		return C.int64_t(d / time.Millisecond)
	}
	return C.int64_t((d + time.Millisecond - 1) / time.Millisecond)
}

// Batcher is the batching client's state machine (the core's), sans I/O:
// Enqueue calls, PollRequest the batches due, send them, report each
// outcome with HandleResponse or HandleFailure, drain PollEvent, and sleep
// until PollTimeout. Which batches form, when they are retried and when
// they give up are all the core's decisions. The analytics packages drive
// one with net/http; use it directly for another transport.
//
// A Batcher is safe for concurrent use.
type Batcher struct {
	h *C.CallpostBatcher
}

// NewBatcher makes a batcher whose flush interval starts at now. The core
// checks the settings: CodeEmptyWriteKey, CodeInvalidEndpoint,
// CodeInvalidConfig (a number out of range).
func NewBatcher(config BatcherConfig, now time.Time) (*Batcher, error) {
	strs := newCList(nil)
	defer strs.free()
	c := C.CallpostBatcherConfig{
		write_key:          strs.copy(config.WriteKey),
		endpoint:           strs.copy(config.Endpoint),
		batch_path:         strs.copy(config.BatchPath),
		flush_at:           C.int64_t(config.FlushAt),
		flush_after_ms:     durationMillis(config.FlushAfter),
		max_queue:          C.int64_t(config.MaxQueue),
		max_attempts:       C.int64_t(config.MaxAttempts),
		max_retry_ms:       durationMillis(config.MaxRetry),
		request_timeout_ms: durationMillis(config.RequestTimeout),
		max_in_flight:      C.int64_t(config.MaxInFlight),
		backoff_base_ms:    durationMillis(config.BackoffBase),
		backoff_cap_ms:     durationMillis(config.BackoffCap),
		library_name:       strs.copy(config.LibraryName),
		library_version:    strs.copy(config.LibraryVersion),
		jitter_seed:        C.uint64_t(config.JitterSeed),
	}
	var h *C.CallpostBatcher
	var e C.CallpostError
	if err := failure(C.callpost_batcher_new(&c, millis(now), &h, &e), &e); err != nil {
		return nil, err
	}
	b := &Batcher{h: h}
	// The batcher holds its queue in Rust memory: it is freed with the
	// Batcher, or by Close.
	runtime.SetFinalizer(b, (*Batcher).free)
	return b, nil
}

func (b *Batcher) free() {
	if b.h != nil {
		C.callpost_batcher_free(b.h)
		b.h = nil
	}
}

// Close frees the batcher's memory at once instead of when it is garbage
// collected. Nothing it still holds is reported: Shutdown and drain
// PollEvent first. No method may be called during or after Close.
func (b *Batcher) Close() {
	runtime.SetFinalizer(b, nil)
	b.free()
}

// Enqueued is what Enqueue returns.
type Enqueued struct {
	// MessageID is the message's messageId: the call's own, or a UUID v4.
	MessageID string
	// Wake says the sender must wake now: the call moved PollTimeout
	// earlier (the first queued message, or a full batch).
	Wake bool
}

// enqueueScratch is what one Enqueue hands the C ABI besides the call:
// pooled, so that a call costs no allocation for it.
type enqueueScratch struct {
	random [16]byte
	id     [64]byte
	idLen  C.size_t
	wake   C.bool
	err    C.CallpostError
}

var scratchPool = sync.Pool{New: func() interface{} { return new(enqueueScratch) }}

// Enqueue queues a call given as JSON text with Segment's keys ("type",
// "userId", "event", "properties", ...). The core checks it (the spec's
// rules, JSON values JavaScript reads alike, the message size limit) and
// completes it: messageId (a UUID v4 from random, or from crypto/rand when
// random is nil), timestamp (now, unless the call has one) and
// context.library. On error nothing is queued; the error is an *Error.
//
// One cgo call: the JSON is parsed and checked in Rust, outside the
// batcher's lock.
func (b *Batcher) Enqueue(now time.Time, call []byte, random *[16]byte) (Enqueued, error) {
	s := scratchPool.Get().(*enqueueScratch)
	defer scratchPool.Put(s)
	if random != nil {
		s.random = *random
	} else if err := ids.take(&s.random); err != nil {
		return Enqueued{}, err
	}
	status := C.callpost_batcher_enqueue(b.h, view(call), millis(now),
		(*C.uint8_t)(unsafe.Pointer(&s.random[0])), (*C.uint8_t)(unsafe.Pointer(&s.id[0])), C.size_t(len(s.id)),
		&s.idLen, &s.wake, &s.err)
	runtime.KeepAlive(b)
	if err := failure(status, &s.err); err != nil {
		return Enqueued{}, err
	}
	var id string
	if int(s.idLen) <= len(s.id) {
		id = string(s.id[:s.idLen])
	} else {
		// Longer than the buffer: the call's own messageId, which the
		// core keeps as given.
		id = messageIDOf(call)
	}
	return Enqueued{MessageID: id, Wake: bool(s.wake)}, nil
}

// messageIDOf reads a call's own messageId from its JSON, for the rare id
// longer than Enqueue's buffer.
func messageIDOf(call []byte) string {
	var c struct {
		MessageID string `json:"messageId"`
	}
	_ = json.Unmarshal(call, &c)
	return c.MessageID
}

// Flush makes everything queued due now, and brings batches waiting to
// retry forward. It reports whether the sender must wake.
func (b *Batcher) Flush(now time.Time) (wake bool) {
	var w C.bool
	C.callpost_batcher_flush(b.h, millis(now), &w)
	runtime.KeepAlive(b)
	return bool(w)
}

// Shutdown gives up: everything still queued or in a batch is reported by
// a "failed" event (CodeShutdown) and later calls are refused
// (CodeClosed). Wait for in-flight responses first, or their batches are
// reported failed even if the server accepts them.
func (b *Batcher) Shutdown() {
	C.callpost_batcher_shutdown(b.h)
	runtime.KeepAlive(b)
}

// Header is one HTTP header.
type Header struct {
	// Name is the header's name, as the core writes it.
	Name string
	// Value is its value.
	Value string
}

// Request is an HTTP request to send, as the core built it.
type Request struct {
	// Method is POST.
	Method string
	// URL is the full URL.
	URL string
	// Headers are the headers, in the order to send them. They may hold
	// credentials (Basic auth, an endpoint's static headers).
	Headers []Header
	// Body is exactly the bytes the signatures cover.
	Body []byte
}

// Header is the value of the first header named name (case-insensitively),
// or "".
func (r Request) Header(name string) string {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// String shows the method, URL, header names and body size: header values
// may be credentials and bodies hold customer data. (A value receiver, so
// that a BatchRequest printed by value shows no credentials either.)
func (r Request) String() string {
	names := make([]string, len(r.Headers))
	for i, h := range r.Headers {
		names[i] = h.Name
	}
	return fmt.Sprintf("Request{%s %s headers: %s; body: %d bytes}", r.Method, r.URL,
		strings.Join(names, ", "), len(r.Body))
}

// GoString is String, so that %#v shows no credentials either.
func (r Request) GoString() string { return r.String() }

func requestOf(r *C.CallpostRequest) Request {
	return Request{
		Method:  goString(r.method),
		URL:     string(bytesOf(r.url)),
		Headers: parseHeaderBlock(bytesOf(r.headers)),
		Body:    bytesOf(r.body),
	}
}

// BatchRequest is a batch upload to send now.
type BatchRequest struct {
	// BatchID is passed back to HandleResponse or HandleFailure.
	BatchID uint64
	// Attempt is the attempt number, from 1.
	Attempt int
	// MessageCount is how many messages the batch holds.
	MessageCount int
	// Deadline is when to give up waiting and report a timeout.
	Deadline time.Time
	// Request is the HTTP request (its Authorization header holds the
	// write key).
	Request
}

// PollRequest is the next batch to upload now, or nil. Call it until nil
// after every input.
func (b *Batcher) PollRequest(now time.Time) *BatchRequest {
	var r C.CallpostBatchRequest
	ok := C.callpost_batcher_poll_request(b.h, millis(now), &r)
	runtime.KeepAlive(b)
	if !ok {
		return nil
	}
	defer C.callpost_batch_request_free(&r)
	return &BatchRequest{
		BatchID:      uint64(r.batch_id),
		Attempt:      int(r.attempt),
		MessageCount: int(r.message_count),
		Deadline:     time.UnixMilli(int64(r.deadline_ms)),
		Request:      requestOf(&r.request),
	}
}

// HandleResponse reports the HTTP status of the upload of batchID, with
// its raw Retry-After header ("" when it had none). What the status means
// (done, retry, give up) is the core's decision.
func (b *Batcher) HandleResponse(now time.Time, batchID uint64, status int, retryAfter string) error {
	ra := C.CallpostStr{}
	if retryAfter != "" {
		ra = viewString(retryAfter)
	}
	var e C.CallpostError
	s := C.callpost_batcher_handle_response(b.h, millis(now), C.uint64_t(batchID), C.uint16_t(status), ra,
		C.CallpostStr{}, C.CallpostStr{}, &e)
	runtime.KeepAlive(b)
	runtime.KeepAlive(retryAfter)
	return failure(s, &e)
}

// Failure is how an upload failed without an HTTP status.
type Failure string

// The failures the core tells apart: a timeout and a broken connection are
// retried, a TLS failure is not.
const (
	FailureTimeout    Failure = "timeout"
	FailureConnection Failure = "connection"
	FailureTLS        Failure = "tls"
)

// HandleFailure reports an upload of batchID that got no HTTP status;
// message is for logs.
func (b *Batcher) HandleFailure(now time.Time, batchID uint64, kind Failure, message string) error {
	var e C.CallpostError
	s := C.callpost_batcher_handle_response(b.h, millis(now), C.uint64_t(batchID), 0, C.CallpostStr{},
		viewString(string(kind)), viewString(message), &e)
	runtime.KeepAlive(b)
	runtime.KeepAlive(message)
	return failure(s, &e)
}

// HandleTimeout is called when now reaches PollTimeout: an upload
// unanswered past its deadline counts as a timeout.
func (b *Batcher) HandleTimeout(now time.Time) {
	C.callpost_batcher_handle_timeout(b.h, millis(now))
	runtime.KeepAlive(b)
}

// PollTimeout is when to call HandleTimeout next (possibly in the past:
// wake now); false when nothing waits on time.
func (b *Batcher) PollTimeout() (time.Time, bool) {
	var at C.int64_t
	ok := C.callpost_batcher_poll_timeout(b.h, &at)
	runtime.KeepAlive(b)
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(at)), true
}

// Event is something the host should know about, in the core's shape.
type Event struct {
	// Kind is "delivered", "retrying" or "failed".
	Kind string `json:"kind"`
	// BatchID is the batch; 0 for messages that were never in one (failed
	// at shutdown while queued).
	BatchID uint64 `json:"batch_id"`
	// MessageIDs are the delivered messages' ids ("delivered").
	MessageIDs []string `json:"message_ids"`
	// Attempt is the attempt that failed ("retrying").
	Attempt int `json:"attempt"`
	// RetryAtMillis is when the next attempt is due, ms since the epoch
	// ("retrying").
	RetryAtMillis int64 `json:"retry_at_ms"`
	// Code is why the messages failed: CodeRejected, CodeRetriesExhausted
	// or CodeShutdown ("failed").
	Code Code `json:"code"`
	// Reason is a description for logs ("retrying", "failed").
	Reason string `json:"reason"`
	// Messages are the messages that will not be delivered ("failed").
	Messages []FailedMessage `json:"messages"`
}

// FailedMessage is a message that will not be delivered.
type FailedMessage struct {
	// MessageID is its messageId.
	MessageID string `json:"message_id"`
	// JSON is the message as it was queued, to log or send again.
	JSON string `json:"json"`
}

// Err is the failure of a "failed" event as an *Error (class ErrDelivery),
// or nil for other events.
func (e *Event) Err() error {
	if e.Kind != "failed" {
		return nil
	}
	return &Error{Code: e.Code, Message: e.Reason}
}

// PollEvent is the next event, or nil. Every message Enqueue accepted ends
// in exactly one "delivered" or "failed" event.
func (b *Batcher) PollEvent() *Event {
	var j C.CallpostBytes
	ok := C.callpost_batcher_poll_event(b.h, &j)
	runtime.KeepAlive(b)
	if !ok {
		return nil
	}
	text := takeBytes(&j)
	ev := new(Event)
	if err := json.Unmarshal(text, ev); err != nil {
		// The core wrote it; not reading it is a bug here.
		return &Event{Kind: "failed", Code: CodeInvalidArgument, Reason: "unreadable event: " + err.Error()}
	}
	return ev
}

// Queued is how many messages are queued and not yet in a batch.
func (b *Batcher) Queued() int {
	n := int(C.callpost_batcher_queued(b.h))
	runtime.KeepAlive(b)
	return n
}

// InBatches is how many messages are in batches uploading or waiting to
// retry.
func (b *Batcher) InBatches() int {
	n := int(C.callpost_batcher_in_batches(b.h))
	runtime.KeepAlive(b)
	return n
}

// Idle is true when nothing is queued, uploading or waiting to retry.
func (b *Batcher) Idle() bool {
	idle := bool(C.callpost_batcher_idle(b.h))
	runtime.KeepAlive(b)
	return idle
}

// entropy hands out crypto/rand bytes for message ids, read 4 KB at a
// time: one read per id would be a system call per message.
type entropy struct {
	mu  sync.Mutex
	buf [4096]byte
	pos int
}

var ids = &entropy{pos: 4096}

func (e *entropy) take(out *[16]byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pos+16 > len(e.buf) {
		if _, err := rand.Read(e.buf[:]); err != nil {
			return err
		}
		e.pos = 0
	}
	copy(out[:], e.buf[e.pos:e.pos+16])
	// Used bytes are wiped so they exist only in the id they became.
	for i := e.pos; i < e.pos+16; i++ {
		e.buf[i] = 0
	}
	e.pos += 16
	return nil
}
