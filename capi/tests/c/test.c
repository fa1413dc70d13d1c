/*
 * The C ABI from C: every group of functions once, the way a binding in
 * another language would drive them. scripts/test-go.sh builds it against
 * the static and the shared library and runs both; any failed CHECK exits 1.
 */
#include "callpost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      failures++;                                                            \
    }                                                                        \
  } while (0)

static CallpostStr str(const char *s) {
  CallpostStr out = {(const uint8_t *)s, strlen(s)};
  return out;
}

static int eq(CallpostStr a, const char *b) {
  return a.len == strlen(b) && (a.len == 0 || memcmp(a.ptr, b, a.len) == 0);
}

static int bytes_contain(CallpostBytes b, const char *needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; i + n <= b.len; i++) {
    if (memcmp(b.ptr + i, needle, n) == 0) return 1;
  }
  return 0;
}

static void info(void) {
  CallpostStr v = callpost_version();
  CHECK(v.len > 0);
  CallpostStr name;
  uint64_t value = 0;
  int found = 0;
  for (size_t i = 0; callpost_default_at(i, &name, &value); i++) {
    if (eq(name, "max_message_bytes")) found = value == 32000;
  }
  CHECK(found);
  CallpostStr code, class_name;
  int codes = 0;
  for (size_t i = 0; callpost_code_at(i, &code, &class_name); i++) codes++;
  CHECK(codes > 40);
  CHECK(callpost_refusal_status(str("signature_mismatch")) == 401);
  CHECK(callpost_refusal_status(str("invalid_json")) == 400);
}

static void calls(void) {
  CallpostError err = {0};
  CHECK(callpost_call_validate(str("{\"type\":\"track\",\"userId\":\"u\",\"event\":\"e\"}"), &err) ==
        CALLPOST_OK);
  CHECK(callpost_call_validate(str("{\"type\":\"track\",\"userId\":\"u\"}"), &err) == CALLPOST_FAILED);
  CHECK(eq(err.code, "missing_event"));
  CHECK(eq(err.class_name, "InvalidCallError"));
  CHECK(err.message.len > 0);
  callpost_error_free(&err);
  CHECK(err.message.ptr == NULL);
  /* A NULL error pointer: the status alone. */
  CHECK(callpost_call_validate(str("[1]"), NULL) == CALLPOST_FAILED);

  CallpostBytes out = {0};
  CHECK(callpost_stringify(str("{\"b\":1,\"2\":[1.0,-0,1e21]}"), &out, &err) == CALLPOST_OK);
  CHECK(out.len == strlen("{\"2\":[1,0,1e+21],\"b\":1}") &&
        memcmp(out.ptr, "{\"2\":[1,0,1e+21],\"b\":1}", out.len) == 0);
  callpost_bytes_free(&out);
  CHECK(out.ptr == NULL);
  CHECK(callpost_stringify(str("9007199254740993"), &out, &err) == CALLPOST_FAILED);
  CHECK(eq(err.code, "integer_out_of_range"));
  callpost_error_free(&err);
}

static void batcher(void) {
  CallpostBatcherConfig config;
  callpost_batcher_config_default(&config);
  CHECK(config.flush_at == 20);
  config.write_key = str("wk");
  config.endpoint = str("http://127.0.0.1:9/base");
  config.flush_at = 2;
  CallpostBatcher *b = NULL;
  CallpostError err = {0};
  CHECK(callpost_batcher_new(&config, 1000, &b, &err) == CALLPOST_OK);

  uint8_t random[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  uint8_t id[64];
  size_t id_len = 0;
  bool wake = false;
  CHECK(callpost_batcher_enqueue(b, str("{\"type\":\"identify\",\"userId\":\"u1\"}"), 1000, random, id,
                                 sizeof id, &id_len, &wake, &err) == CALLPOST_OK);
  CHECK(id_len == 36);
  CHECK(wake); /* the first message starts the flush timer */
  CHECK(callpost_batcher_enqueue(b, str("{\"type\":\"track\",\"userId\":\"u1\"}"), 1000, random, id,
                                 sizeof id, &id_len, &wake, &err) == CALLPOST_FAILED);
  CHECK(eq(err.code, "missing_event"));
  callpost_error_free(&err);
  CHECK(callpost_batcher_enqueue(b, str("{\"type\":\"track\",\"userId\":\"u1\",\"event\":\"A\",\"messageId\":\"m-2\"}"),
                                 1000, random, id, sizeof id, &id_len, &wake, &err) == CALLPOST_OK);
  CHECK(id_len == 3 && memcmp(id, "m-2", 3) == 0);
  CHECK(callpost_batcher_queued(b) == 2);

  CallpostBatchRequest req;
  CHECK(callpost_batcher_poll_request(b, 1000, &req));
  CHECK(req.message_count == 2 && req.attempt == 1);
  CHECK(eq(req.request.method, "POST"));
  CHECK(bytes_contain(req.request.url, "http://127.0.0.1:9/base/v1/batch"));
  CHECK(bytes_contain(req.request.headers, "Authorization: Basic d2s6\r\n"));
  CHECK(bytes_contain(req.request.body, "\"messageId\":\"m-2\""));
  /* A 503 is retried: a retrying event, then a new attempt when due. */
  CHECK(callpost_batcher_handle_response(b, 1000, req.batch_id, 503, (CallpostStr){NULL, 0}, str(""), str(""),
                                         &err) == CALLPOST_OK);
  CallpostBytes event = {0};
  CHECK(callpost_batcher_poll_event(b, &event));
  CHECK(bytes_contain(event, "\"kind\":\"retrying\""));
  callpost_bytes_free(&event);
  int64_t at = 0;
  CHECK(callpost_batcher_poll_timeout(b, &at) && at > 1000);
  uint64_t batch_id = req.batch_id;
  callpost_batch_request_free(&req);
  CHECK(req.request.body.ptr == NULL);
  CHECK(!callpost_batcher_poll_request(b, 1000, &req));
  CHECK(callpost_batcher_poll_request(b, at, &req));
  CHECK(req.batch_id == batch_id && req.attempt == 2);
  CHECK(callpost_batcher_handle_response(b, at, req.batch_id, 200, (CallpostStr){NULL, 0}, str(""), str(""),
                                         &err) == CALLPOST_OK);
  callpost_batch_request_free(&req);
  CHECK(callpost_batcher_poll_event(b, &event));
  CHECK(bytes_contain(event, "\"kind\":\"delivered\"") && bytes_contain(event, "\"m-2\""));
  callpost_bytes_free(&event);
  CHECK(callpost_batcher_idle(b));

  /* Shut down with one queued: reported failed, later calls refused. */
  CHECK(callpost_batcher_enqueue(b, str("{\"type\":\"identify\",\"userId\":\"u2\"}"), at, random, NULL, 0, NULL,
                                 NULL, &err) == CALLPOST_OK);
  callpost_batcher_shutdown(b);
  CHECK(callpost_batcher_poll_event(b, &event));
  CHECK(bytes_contain(event, "\"code\":\"shutdown\""));
  callpost_bytes_free(&event);
  CHECK(callpost_batcher_enqueue(b, str("{\"type\":\"identify\",\"userId\":\"u3\"}"), at, random, NULL, 0, NULL,
                                 NULL, &err) == CALLPOST_FAILED);
  CHECK(eq(err.code, "closed"));
  callpost_error_free(&err);
  callpost_batcher_free(b);

  /* The core's config checks. */
  config.write_key = str("");
  CHECK(callpost_batcher_new(&config, 0, &b, &err) == CALLPOST_FAILED);
  CHECK(eq(err.code, "empty_write_key"));
  callpost_error_free(&err);
}

static void webhooks_and_receivers(void) {
  CallpostError err = {0};
  CallpostWebhooks *w = NULL;
  CHECK(callpost_webhooks_new(str("{\"endpoints\":[\"https://hooks.example.com/in\"],\"sharedSecret\":\"s3cret\"}"),
                              &w, &err) == CALLPOST_OK);
  CallpostRequest req;
  CHECK(callpost_webhooks_request(w, str("{\"type\":\"track\",\"userId\":\"u\",\"event\":\"A\",\"messageId\":\"m-1\"}"),
                                  0, 1795341845123, &req, &err) == CALLPOST_OK);
  CHECK(bytes_contain(req.headers, "X-Signature: "));
  CHECK(bytes_contain(req.headers, "Idempotency-Key: m-1\r\n"));
  CHECK(callpost_webhooks_request(w, str("{\"type\":\"track\"}"), 7, 0, &req, &err) == CALLPOST_FAILED);
  callpost_error_free(&err);

  /* Its signature, recomputed and checked. */
  char signature[40];
  CallpostStr body = {req.body.ptr, req.body.len};
  CHECK(callpost_sign(str("s3cret"), body, (uint8_t *)signature, &err) == CALLPOST_OK);
  CHECK(bytes_contain(req.headers, "X-Signature: ") && memchr(signature, 0, sizeof signature) == NULL);
  CallpostStr secrets[2] = {str("old"), str("s3cret")};
  bool matched = false;
  CHECK(callpost_verify(body, (CallpostStr){(const uint8_t *)signature, 40}, secrets, 2, &matched, &err) ==
        CALLPOST_OK);
  CHECK(matched);

  /* The receiver takes the request as it arrived. */
  CallpostReceiver *r = NULL;
  CHECK(callpost_receiver_new(secrets, 2, NULL, 0, NULL, &r, &err) == CALLPOST_OK);
  CallpostReceived got;
  CallpostStr headers = {req.headers.ptr, req.headers.len};
  CHECK(callpost_receiver_verify(r, body, headers, 0, &got, &err) == CALLPOST_OK);
  CHECK(eq(got.header, "X-Signature") && eq(got.coverage, "body") && !got.batch && got.count == 1);
  /* The spec's body has no messageId: the id is the signed body's
     ("body_" and 16 bytes of its SHA-256 in hex), never Idempotency-Key. */
  CHECK(got.calls[0].id.len == 5 + 32 && memcmp(got.calls[0].id.ptr, "body_", 5) == 0);
  CHECK(got.calls[0].json.len > 0);
  callpost_received_free(&got);
  CHECK(got.owner == NULL);
  /* One byte more than was signed. */
  uint8_t *longer = malloc(req.body.len + 1);
  memcpy(longer, req.body.ptr, req.body.len);
  longer[req.body.len] = ' ';
  CHECK(callpost_receiver_verify(r, (CallpostStr){longer, req.body.len + 1}, headers, 0, &got, &err) ==
        CALLPOST_FAILED);
  CHECK(eq(err.code, "signature_mismatch") && eq(err.class_name, "SignatureError"));
  callpost_error_free(&err);
  free(longer);
  callpost_receiver_free(r);
  CHECK(callpost_receiver_new(NULL, 0, NULL, 0, NULL, &r, &err) == CALLPOST_FAILED);
  CHECK(eq(err.code, "no_secrets"));
  callpost_error_free(&err);
  callpost_request_free(&req);
  callpost_webhooks_free(w);

  /* Standard Webhooks: sign, verify inside and outside the window. */
  CallpostStr whsec = str("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  CallpostBytes signed_headers = {0};
  CallpostStr payload = str("{\"type\":\"track\",\"userId\":\"u\",\"event\":\"A\"}");
  CHECK(callpost_standard_sign(&whsec, 1, str("m-9"), 1795341845000, payload, &signed_headers, &err) ==
        CALLPOST_OK);
  CHECK(bytes_contain(signed_headers, "webhook-signature: v1,"));
  CallpostStr block = {signed_headers.ptr, signed_headers.len};
  CallpostBytes verified_id = {0};
  int64_t ts = 0;
  CHECK(callpost_standard_verify(&whsec, 1, payload, block, 1795341845000, callpost_standard_tolerance_ms(),
                                 &verified_id, &ts, &err) == CALLPOST_OK);
  CHECK(ts == 1795341845 && verified_id.len == 3);
  callpost_bytes_free(&verified_id);
  CHECK(callpost_standard_verify(&whsec, 1, payload, block, 1795341845000 + 3600000,
                                 callpost_standard_tolerance_ms(), &verified_id, &ts, &err) == CALLPOST_FAILED);
  CHECK(eq(err.code, "timestamp_too_old"));
  callpost_error_free(&err);
  CallpostReceiverOptions options;
  callpost_receiver_options_default(&options);
  CHECK(options.tolerance_ms == callpost_standard_tolerance_ms() && !options.allow_first_event_signature);
  CHECK(callpost_receiver_new(NULL, 0, &whsec, 1, &options, &r, &err) == CALLPOST_OK);
  CHECK(callpost_receiver_verify(r, payload, block, 1795341845000, &got, &err) == CALLPOST_OK);
  CHECK(eq(got.header, "webhook-signature") && got.has_timestamp && eq(got.calls[0].id, "m-9"));
  callpost_received_free(&got);
  callpost_receiver_free(r);
  callpost_bytes_free(&signed_headers);
}

int main(void) {
  info();
  calls();
  batcher();
  webhooks_and_receivers();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("C ABI: all checks passed\n");
  return 0;
}
