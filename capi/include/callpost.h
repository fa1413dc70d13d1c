/*
 * callpost: the sans-IO core behind a C ABI.
 *
 * Ownership, stated on every function below and summed up here:
 *  - CallpostStr inputs are borrowed for the call only; CallpostStr outputs
 *    point at static data or into the struct that holds them.
 *  - CallpostBytes are the caller's: free them with callpost_bytes_free, or
 *    with the free function of the struct that holds them.
 *  - A CallpostError the call filled is freed with callpost_error_free.
 *  - Handles are freed with their _free function, once.
 * No function lets a panic unwind into the caller.
 */

#ifndef CALLPOST_H
#define CALLPOST_H

/* Generated from capi/src by cbindgen: cargo run -p callpost-capi --example header > capi/include/callpost.h. Do not edit. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// How a fallible function ended.
typedef enum {
  // It succeeded; the error was not touched.
  CALLPOST_OK = 0,
  // It failed with one of the core's errors: the error holds its code,
  // class and message.
  CALLPOST_FAILED = 1,
  // callpost panicked (a bug): the error's code and class are empty and
  // its message says what happened. The handle it was called on may be
  // left in any state the core's own methods can leave it in.
  CALLPOST_INTERNAL = 2,
} CallpostStatus;

// A batching client's state, sans I/O. Made by `callpost_batcher_new`,
// freed by `callpost_batcher_free`. Safe to use from several threads at
// once: each function holds its lock for the core call only (a call's
// JSON is parsed before the lock is taken).
typedef struct CallpostBatcher CallpostBatcher;

// The storage behind a `CallpostReceived`; freed with it.
typedef struct CallpostReceivedOwner CallpostReceivedOwner;

// The secrets and options of one endpoint's receiver, keyed once. Made by
// `callpost_receiver_new`, freed by `callpost_receiver_free`; read-only,
// so safe to use from several threads at once.
typedef struct CallpostReceiver CallpostReceiver;

// A Webhooks destination's settings, validated. Made by
// `callpost_webhooks_new`, freed by `callpost_webhooks_free`; read-only,
// so safe to use from several threads at once.
typedef struct CallpostWebhooks CallpostWebhooks;

// Bytes callpost allocated for the caller, who frees them with
// `callpost_bytes_free` (or with the free function of the struct that
// holds them). `ptr` is NULL when `len` is 0.
typedef struct {
  // The first byte, or NULL.
  uint8_t *ptr;
  // How many bytes.
  size_t len;
} CallpostBytes;

// Bytes borrowed from whoever made them: `ptr` may be NULL only when `len`
// is 0. Inputs are borrowed for the duration of the call; outputs that are
// a `CallpostStr` point at static data or into the struct that holds them.
typedef struct {
  // The first byte.
  const uint8_t *ptr;
  // How many bytes.
  size_t len;
} CallpostStr;

// A failure, as the core reports it.
typedef struct {
  // The stable code of the core's registry (`signature_mismatch`,
  // `missing_event`, ...): static, never freed. Empty for
  // `CallpostInternal`.
  CallpostStr code;
  // The class the registry names for the code (`SignatureError`,
  // `InvalidCallError`, ...): static, never freed. Empty for
  // `CallpostInternal`.
  CallpostStr class_name;
  // What went wrong and how to fix it, UTF-8. Never holds a secret.
  // The caller frees it with `callpost_error_free`.
  CallpostBytes message;
} CallpostError;

// The batching client's settings. `callpost_batcher_config_default` fills
// in the core's defaults; change what you need, then pass it to
// `callpost_batcher_new`. Numbers are signed so that a host's negative
// value reaches the core's check (`invalid_config`) instead of wrapping.
typedef struct {
  // The source's write key, sent as the Basic auth user. Required.
  CallpostStr write_key;
  // Base URL; batches go to `{endpoint}{batch_path}`.
  CallpostStr endpoint;
  // Path of the batch upload under `endpoint` (`/v1/batch`).
  CallpostStr batch_path;
  // Messages queued before a flush; 1 sends every message at once.
  int64_t flush_at;
  // Milliseconds since the last flush after which a flush happens.
  int64_t flush_after_ms;
  // Messages held before `queue_full`.
  int64_t max_queue;
  // Attempts per batch before it fails.
  int64_t max_attempts;
  // Milliseconds a batch may spend retrying, from its first attempt.
  int64_t max_retry_ms;
  // Milliseconds a request may go unanswered before it is a timeout.
  int64_t request_timeout_ms;
  // Batches uploading or waiting to retry at once.
  int64_t max_in_flight;
  // Retry backoff: first delay, in milliseconds (full jitter).
  int64_t backoff_base_ms;
  // Retry backoff: longest delay, in milliseconds.
  int64_t backoff_cap_ms;
  // `context.library.name` of the messages, and the User-Agent's name.
  CallpostStr library_name;
  // `context.library.version`, and the User-Agent's version.
  CallpostStr library_version;
  // Seed for backoff jitter: pass OS randomness, so that clients failing
  // together do not retry at the same instants; tests pass a constant.
  uint64_t jitter_seed;
} CallpostBatcherConfig;

// An HTTP request to send. Freed with `callpost_request_free`.
typedef struct {
  // `POST`, static.
  CallpostStr method;
  // The full URL.
  CallpostBytes url;
  // The headers, in order, as an HTTP/1.1 header block (`Name: value`
  // lines ending in CRLF). They may hold credentials (Basic auth, an
  // endpoint's static headers): do not log them.
  CallpostBytes headers;
  // The body: exactly the bytes the signatures cover.
  CallpostBytes body;
} CallpostRequest;

// A batch upload to send: POST `request` and report its outcome with
// `callpost_batcher_handle_response(batch_id, ...)`. Freed with
// `callpost_batch_request_free`.
typedef struct {
  // Pass back to `callpost_batcher_handle_response`.
  uint64_t batch_id;
  // Attempt number, 1-based.
  uint32_t attempt;
  // Messages in the batch.
  size_t message_count;
  // When to give up waiting and report a timeout (ms since the epoch).
  int64_t deadline_ms;
  // The HTTP request: its headers hold the write key (Basic auth).
  CallpostRequest request;
} CallpostBatchRequest;

// What a receiver accepts beyond the default. Fill it with
// `callpost_receiver_options_default`.
typedef struct {
  // Accept a batch whose `X-Signature` covers only its first event
  // (Segment's Actions destination without "Use X-Segment-Signature
  // Header"); its other events are then unauthenticated. Default false.
  bool allow_first_event_signature;
  // How far a Standard Webhooks `webhook-timestamp` may be from the
  // receiver's clock, either way, in milliseconds (default: the
  // specification's 5 minutes).
  uint64_t tolerance_ms;
} CallpostReceiverOptions;

// One verified call.
typedef struct {
  // The call as JSON text, in `JSON.stringify` form.
  CallpostStr json;
  // Its id for duplicate detection: its `messageId`, else the request's
  // (`Idempotency-Key` or the verified `webhook-id`, `<id>.<index>` for
  // a batch's element); `ptr` is NULL when it has none.
  CallpostStr id;
} CallpostReceivedCall;

// A verified webhook. Every string in it (but the static `header` and
// `coverage`) lives until `callpost_received_free`.
typedef struct {
  // The header whose signature was accepted: `X-Signature`,
  // `X-Segment-Signature` or `webhook-signature` (static).
  CallpostStr header;
  // What it covers: `body`, or `first_event` (opted in) (static).
  CallpostStr coverage;
  // Whether the body is a batch (a JSON array of calls).
  bool batch;
  // Whether `timestamp` is set (the Standard scheme).
  bool has_timestamp;
  // The verified `webhook-timestamp`, seconds since the epoch.
  int64_t timestamp;
  // The calls, in body order.
  const CallpostReceivedCall *calls;
  // How many.
  size_t count;
  // Owns what the strings point at.
  CallpostReceivedOwner *owner;
} CallpostReceived;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Frees bytes callpost handed out; afterwards `bytes` is empty (NULL,
// 0). NULL, or bytes already freed, are left as they are.
//
// # Safety
// `bytes` is NULL or points at a `CallpostBytes` that callpost filled and
// that nothing else frees.
void callpost_bytes_free(CallpostBytes *bytes);

// Frees an error's message; afterwards `error` is empty. Safe to call on
// an error that was never filled (its fields zeroed) or already freed.
//
// # Safety
// `error` is NULL or points at a `CallpostError` that is zeroed or was
// filled by callpost, and that nothing else frees.
void callpost_error_free(CallpostError *error);

// Fills `config` with the core's defaults: the write key empty, the
// strings static (never freed), the numbers those of client-library.md
// and the core (flush at 20 messages or 5 s, ...).
//
// # Safety
// `config` is NULL or writable.
void callpost_batcher_config_default(CallpostBatcherConfig *config);

// Makes a batcher whose flush interval starts at `now_ms`. The core checks
// the settings: `empty_write_key`, `invalid_endpoint` (not an absolute
// http(s) URL without credentials, query or fragment), `invalid_config`
// (a number out of range).
//
// On success `*out` is the batcher, which the caller frees with
// `callpost_batcher_free`. The config's strings are copied.
//
// # Safety
// `config` points at a valid config whose strings are readable; `out` is
// writable; `err` is NULL or writable.
CallpostStatus callpost_batcher_new(const CallpostBatcherConfig *config,
                                    int64_t now_ms,
                                    CallpostBatcher **out,
                                    CallpostError *err);

// Frees a batcher. Whatever it still held is dropped without events: call
// `callpost_batcher_shutdown` and drain `callpost_batcher_poll_event`
// first to report it. NULL is ignored.
//
// # Safety
// `batcher` is NULL or came from `callpost_batcher_new`, is not used by
// another thread, and is not used again.
void callpost_batcher_free(CallpostBatcher *batcher);

// Queues a call given as JSON text with Segment's keys. The core checks
// it (the spec's rules and the 32,000-byte message limit: `missing_event`,
// `message_too_large`, ...) and completes it into a message: `messageId`
// (a UUID v4 from `random`, unless the call has one), `timestamp` (`now_ms`
// unless the call has one) and `context.library`. On error nothing is
// queued (`queue_full`, `closed`, or the call's own error).
//
// `random` points at 16 bytes from a CSPRNG: the core has no entropy.
// `id_out` (may be NULL) receives the messageId when it fits in `id_cap`
// bytes (a generated one is 36); `*id_len` (may be NULL) is its length
// either way. `*wake` (may be NULL) is set to whether the host's sender
// must wake now: the call moved `callpost_batcher_poll_timeout` earlier
// (the first queued message starts the flush timer, a full batch is due
// at once). Nothing is allocated on success.
//
// # Safety
// `batcher` is live; `call_json` is readable; `random` points at 16
// readable bytes; `id_out` is NULL or has `id_cap` writable bytes;
// `id_len`, `wake` and `err` are NULL or writable.
CallpostStatus callpost_batcher_enqueue(const CallpostBatcher *batcher,
                                        CallpostStr call_json,
                                        int64_t now_ms,
                                        const uint8_t *random,
                                        uint8_t *id_out,
                                        size_t id_cap,
                                        size_t *id_len,
                                        bool *wake,
                                        CallpostError *err);

// Makes everything queued due now, and brings batches waiting to retry
// forward to `now_ms`. `*wake` (may be NULL) as for
// `callpost_batcher_enqueue`. A NULL batcher is ignored.
//
// # Safety
// `batcher` is NULL or live; `wake` is NULL or writable.
void callpost_batcher_flush(const CallpostBatcher *batcher, int64_t now_ms, bool *wake);

// Gives up: every message still queued or in a batch is reported by a
// `failed` event (code `shutdown`), and later calls are refused
// (`closed`). Wait for in-flight responses first, or their batches are
// reported failed even if the server accepts them.
//
// # Safety
// `batcher` is NULL or live.
void callpost_batcher_shutdown(const CallpostBatcher *batcher);

// The next batch to upload now: returns true and fills `*out`, which the
// caller frees with `callpost_batch_request_free`; or returns false.
// Call it until it returns false after every input.
//
// # Safety
// `batcher` is NULL or live; `out` is writable.
bool callpost_batcher_poll_request(const CallpostBatcher *batcher,
                                   int64_t now_ms,
                                   CallpostBatchRequest *out);

// Frees a batch request's buffers; afterwards it is empty.
//
// # Safety
// `request` is NULL or was filled by `callpost_batcher_poll_request` and
// is not freed by anything else.
void callpost_batch_request_free(CallpostBatchRequest *request);

// Reports the outcome of the upload of `batch_id`: an HTTP `status` (0
// when there was none) with the raw `Retry-After` header (`retry_after`,
// `ptr` NULL when absent); or, with status 0, an `error` kind `timeout`,
// `connection` or `tls` and a `message` for logs. Any other combination
// is `invalid_argument`. What the outcome means (retry, give up) is the
// core's; unknown or stale batch ids are ignored.
//
// # Safety
// `batcher` is live; the strings are readable; `err` is NULL or writable.
CallpostStatus callpost_batcher_handle_response(const CallpostBatcher *batcher,
                                                int64_t now_ms,
                                                uint64_t batch_id,
                                                uint16_t status,
                                                CallpostStr retry_after,
                                                CallpostStr error,
                                                CallpostStr message,
                                                CallpostError *err);

// Call when `now_ms` reaches `callpost_batcher_poll_timeout`: an upload
// unanswered past its deadline counts as a timeout.
//
// # Safety
// `batcher` is NULL or live.
void callpost_batcher_handle_timeout(const CallpostBatcher *batcher, int64_t now_ms);

// When to call `callpost_batcher_handle_timeout` next: returns true and
// writes the time (ms since the epoch; it may be in the past: wake now),
// or returns false when nothing waits on time.
//
// # Safety
// `batcher` is NULL or live; `at_ms` is NULL or writable.
bool callpost_batcher_poll_timeout(const CallpostBatcher *batcher, int64_t *at_ms);

// The next event as JSON text: returns true and fills `*json`, which the
// caller frees with `callpost_bytes_free`; or returns false. The shapes
// (the core's, the same in Python and JavaScript):
//
// * `{"kind":"delivered","batch_id":n,"message_ids":[...]}`
// * `{"kind":"retrying","batch_id":n,"attempt":n,"retry_at_ms":n,"reason":"..."}`
// * `{"kind":"failed","batch_id":n|null,"code":"...","reason":"...",
//   "messages":[{"message_id":"...","json":"..."}]}`: these messages
//   will not be delivered; hand them to the user.
//
// # Safety
// `batcher` is NULL or live; `json` is writable.
bool callpost_batcher_poll_event(const CallpostBatcher *batcher, CallpostBytes *json);

// Messages queued and not yet in a batch (0 for NULL).
//
// # Safety
// `batcher` is NULL or live.
size_t callpost_batcher_queued(const CallpostBatcher *batcher);

// Messages in batches being uploaded or waiting to retry (0 for NULL).
//
// # Safety
// `batcher` is NULL or live.
size_t callpost_batcher_in_batches(const CallpostBatcher *batcher);

// True when nothing is queued, uploading or waiting to retry (and for
// NULL).
//
// # Safety
// `batcher` is NULL or live.
bool callpost_batcher_idle(const CallpostBatcher *batcher);

// Checks a call given as JSON text with Segment's keys (`type`, `userId`,
// `event`, ...) against the spec's rules: the same check the batcher and
// webhook requests make, with the same error codes (`missing_event`,
// `invalid_timestamp`, `integer_out_of_range`, ...).
//
// Returns `CallpostOk` when the call is valid. Allocates nothing on
// success; on failure `err` (may be NULL) is filled, and the caller frees
// it with `callpost_error_free`.
//
// # Safety
// `call_json` points at `len` readable bytes; `err` is NULL or writable.
CallpostStatus callpost_call_validate(CallpostStr call_json, CallpostError *err);

// `JSON.stringify(JSON.parse(json))`, byte for byte as JavaScript writes
// it: key order, number spelling, escapes. Refuses what JavaScript would
// read as another value (`integer_out_of_range`, `too_deep`, ...).
//
// On success `out` receives the text, which the caller frees with
// `callpost_bytes_free`.
//
// # Safety
// `json` points at `len` readable bytes; `out` is writable; `err` is NULL
// or writable.
CallpostStatus callpost_stringify(CallpostStr json, CallpostBytes *out, CallpostError *err);

// callpost's version (the workspace's), static.
CallpostStr callpost_version(void);

// The `i`-th of the core's numeric defaults and limits (`flush_at`,
// `max_message_bytes`, `seen_capacity`, ...; durations in milliseconds):
// writes its name (static) and value and returns true, or returns false
// when `i` is past the last one. Walk `i` from 0 to read them all.
//
// # Safety
// `name` and `value` are NULL or writable.
bool callpost_default_at(size_t i, CallpostStr *name, uint64_t *value);

// The batching client's default endpoint (Segment's Tracking API base
// URL), static.
CallpostStr callpost_default_endpoint(void);

// The `i`-th code of the core's error registry: writes the code and the
// class it is raised as (both static) and returns true, or returns false
// when `i` is past the last one.
//
// # Safety
// `code` and `class_name` are NULL or writable.
bool callpost_code_at(size_t i, CallpostStr *code, CallpostStr *class_name);

// The HTTP status a receiver answers a refused webhook with, for the
// code of the error that refused it: 401 when it did not verify, 400
// otherwise (including a code the registry does not know).
//
// # Safety
// `code` points at `len` readable bytes.
uint16_t callpost_refusal_status(CallpostStr code);

// Fills `options` with the defaults.
//
// # Safety
// `options` is NULL or writable.
void callpost_receiver_options_default(CallpostReceiverOptions *options);

// Makes a receiver from `X-Signature` secrets (any bytes but empty;
// several while rotating) and Standard Webhooks `whsec_` secrets: give
// either list or both (`no_secrets` for neither). With Standard
// secrets only, a request must carry `webhook-signature`; with both, a
// request carrying it is held to it, one without it to `X-Signature`.
// `options` may be NULL (the defaults).
//
// On success `*out` is the receiver, which the caller frees with
// `callpost_receiver_free`. The secrets are keyed and not kept as text.
//
// # Safety
// The lists point at `count` readable strings each (or are NULL with
// count 0); `options` is NULL or readable; `out` is writable; `err` is
// NULL or writable.
CallpostStatus callpost_receiver_new(const CallpostStr *secrets,
                                     size_t secret_count,
                                     const CallpostStr *standard,
                                     size_t standard_count,
                                     const CallpostReceiverOptions *options,
                                     CallpostReceiver **out,
                                     CallpostError *err);

// Frees a receiver. NULL is ignored.
//
// # Safety
// `receiver` is NULL or came from `callpost_receiver_new` and is not used
// again.
void callpost_receiver_free(CallpostReceiver *receiver);

// Verifies a received webhook: `body` is the raw request body exactly as
// received, `headers` the request's headers as an HTTP/1.1 header block,
// `now_ms` the receiver's clock (for the Standard timestamp window).
// Refusals are `SignatureError`s (`missing_signature`,
// `malformed_signature`, `signature_mismatch`, `first_event_signature`,
// `timestamp_too_old`, `timestamp_too_new`) or, for a verified body that
// is not JSON, a `JSONValueError` (`invalid_json`, ...).
//
// On success `*out` holds the verified calls; the caller frees it with
// `callpost_received_free`.
//
// # Safety
// `receiver` is live; `body` and `headers` are readable; `out` is
// writable; `err` is NULL or writable.
CallpostStatus callpost_receiver_verify(const CallpostReceiver *receiver,
                                        CallpostStr body,
                                        CallpostStr headers,
                                        int64_t now_ms,
                                        CallpostReceived *out,
                                        CallpostError *err);

// Frees a verified webhook's storage; afterwards it is empty.
//
// # Safety
// `received` is NULL or was filled by `callpost_receiver_verify` and is
// not freed by anything else.
void callpost_received_free(CallpostReceived *received);

// Checks a request's Standard Webhooks headers alone (the timestamp
// within `tolerance_ms` of `now_ms`, then a `v1` signature under one of
// the `whsec_` secrets), without reading the body as JSON. On success
// `*id_out` is the verified `webhook-id` (the caller frees it with
// `callpost_bytes_free`) and `*timestamp_out` the verified
// `webhook-timestamp` in seconds.
//
// # Safety
// `secrets` points at `count` readable strings; `body` and `headers` are
// readable; `id_out` and `timestamp_out` are writable; `err` is NULL or
// writable.
CallpostStatus callpost_standard_verify(const CallpostStr *secrets,
                                        size_t count,
                                        CallpostStr body,
                                        CallpostStr headers,
                                        int64_t now_ms,
                                        uint64_t tolerance_ms,
                                        CallpostBytes *id_out,
                                        int64_t *timestamp_out,
                                        CallpostError *err);

// The default Standard Webhooks tolerance in milliseconds (5 minutes, the
// specification's), the default of `CallpostReceiverOptions`.
uint64_t callpost_standard_tolerance_ms(void);

// Frees a request's buffers; afterwards it is empty.
//
// # Safety
// `request` is NULL or was filled by callpost and is not freed by
// anything else.
void callpost_request_free(CallpostRequest *request);

// Validates a destination's settings, given as JSON in the form the shared
// vectors, the other bindings and the relay use: `{"endpoints": [url |
// {"url", "headers"}], "sharedSecret": "...", "mode": "parallel" |
// "failover", "signature": "segment" | "standard" | "both",
// "signingSecrets": [...], "filters": ..., "batch": ...}`. Errors are the
// core's settings codes (`no_endpoints`, `invalid_url`, ...).
//
// On success `*out` is the settings, which the caller frees with
// `callpost_webhooks_free`.
//
// # Safety
// `settings_json` is readable; `out` is writable; `err` is NULL or
// writable.
CallpostStatus callpost_webhooks_new(CallpostStr settings_json,
                                     CallpostWebhooks **out,
                                     CallpostError *err);

// Frees settings made by `callpost_webhooks_new`. NULL is ignored.
//
// # Safety
// `webhooks` is NULL or came from `callpost_webhooks_new` and is not used
// again.
void callpost_webhooks_free(CallpostWebhooks *webhooks);

// The signed request delivering a call (JSON text with Segment's keys) to
// endpoint `endpoint` (0-based): the spec's body for the call's kind,
// `X-Signature` and/or the Standard Webhooks headers, `Idempotency-Key`.
// `now_ms` stamps a call that has no timestamp, and the Standard
// signature. Errors are the call's own (`missing_event`, ...), or
// `invalid_argument` for an endpoint past the configured ones.
//
// On success `*out` is the request; the caller frees it with
// `callpost_request_free`.
//
// # Safety
// `webhooks` is live; `call_json` is readable; `out` is writable; `err`
// is NULL or writable.
CallpostStatus callpost_webhooks_request(const CallpostWebhooks *webhooks,
                                         CallpostStr call_json,
                                         size_t endpoint,
                                         int64_t now_ms,
                                         CallpostRequest *out,
                                         CallpostError *err);

// The `X-Signature` value of `body` under `secret`: 40 lowercase hex
// digits (HMAC-SHA1), written to `signature_out`, which has room for 40
// bytes (no NUL is written). An empty secret is `empty_secret`.
//
// # Safety
// `secret` and `body` are readable; `signature_out` has 40 writable
// bytes; `err` is NULL or writable.
CallpostStatus callpost_sign(CallpostStr secret,
                             CallpostStr body,
                             uint8_t *signature_out,
                             CallpostError *err);

// Checks an `X-Signature` value over the exact `body` bytes against each
// of `count` secrets (several while rotating), in constant time. Writes
// whether one matches to `*matched`. A signature that is not 40 hex
// digits is `malformed_signature`; no secrets is `no_secrets`.
//
// # Safety
// `body`, `signature` and the `count` secrets are readable; `matched` is
// writable; `err` is NULL or writable.
CallpostStatus callpost_verify(CallpostStr body,
                               CallpostStr signature,
                               const CallpostStr *secrets,
                               size_t count,
                               bool *matched,
                               CallpostError *err);

// The three Standard Webhooks headers (`webhook-id`, `webhook-timestamp`,
// `webhook-signature` with one `v1,` entry per secret) for `body` sent
// with id `id` at `at_ms`, as an HTTP/1.1 header block in `*headers_out`,
// which the caller frees with `callpost_bytes_free`. Secrets are
// `whsec_` and base64 (`malformed_secret` otherwise).
//
// # Safety
// `secrets` points at `count` readable strings; `id` and `body` are
// readable; `headers_out` is writable; `err` is NULL or writable.
CallpostStatus callpost_standard_sign(const CallpostStr *secrets,
                                      size_t count,
                                      CallpostStr id,
                                      int64_t at_ms,
                                      CallpostStr body,
                                      CallpostBytes *headers_out,
                                      CallpostError *err);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* CALLPOST_H */
