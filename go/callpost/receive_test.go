package callpost

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const secret = "s3cret"

func signed(t testing.TB, body string) *http.Request {
	t.Helper()
	sig, err := Sign([]byte(secret), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/segment", strings.NewReader(body))
	r.Header.Set("X-Signature", sig)
	return r
}

func answerOf(t *testing.T, w *httptest.ResponseRecorder) map[string]interface{} {
	t.Helper()
	var out map[string]interface{}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%d %q: %v", w.Code, w.Body.String(), err)
	}
	return out
}

func TestMiddlewareHandsOverVerifiedCallsOnce(t *testing.T) {
	r, err := NewReceiver(ReceiverOptions{Secrets: []string{"the-old-secret", secret}})
	if err != nil {
		t.Fatal(err)
	}
	var got []*Webhook
	var bodies []string
	failNext := false
	h := r.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		hook := WebhookFrom(req.Context())
		got = append(got, hook)
		raw, _ := io.ReadAll(req.Body)
		bodies = append(bodies, string(raw))
		if failNext {
			failNext = false
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	body := `{"type":"track","userId":"u1","event":"Signed Up","messageId":"m-1"}`

	w := httptest.NewRecorder()
	h.ServeHTTP(w, signed(t, body))
	if w.Code != http.StatusNoContent || len(got) != 1 || got[0].IDs[0] != "m-1" || bodies[0] != body {
		t.Fatalf("%d %+v", w.Code, got)
	}
	var call map[string]interface{}
	if err := json.Unmarshal(got[0].Calls[0], &call); err != nil || call["event"] != "Signed Up" {
		t.Fatalf("%v %v", call, err)
	}
	// The sender's retry of a call already processed: 200, handler not called.
	w = httptest.NewRecorder()
	h.ServeHTTP(w, signed(t, body))
	if w.Code != http.StatusOK || answerOf(t, w)["duplicates"] != 1.0 || len(got) != 1 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// A handler that fails forgets the ids, so the retry is processed.
	failNext = true
	other := `{"type":"track","userId":"u1","event":"Again","messageId":"m-2"}`
	h.ServeHTTP(httptest.NewRecorder(), signed(t, other))
	w = httptest.NewRecorder()
	h.ServeHTTP(w, signed(t, other))
	if w.Code != http.StatusNoContent || len(got) != 3 {
		t.Fatalf("the retry after a failure: %d, %d calls", w.Code, len(got))
	}
}

func TestMiddlewareRefusals(t *testing.T) {
	r, _ := NewReceiver(ReceiverOptions{Secrets: []string{secret}})
	called := false
	h := r.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	body := `{"type":"track","userId":"u1","event":"A"}`
	tampered := signed(t, body)
	tampered.Body = io.NopCloser(strings.NewReader(body + " "))
	unsigned := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	notJSON := signed(t, "not json")
	cases := []struct {
		req    *http.Request
		status int
		code   Code
	}{
		{tampered, 401, CodeSignatureMismatch},
		{unsigned, 401, CodeMissingSignature},
		{notJSON, 400, CodeInvalidJSON},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, c.req)
		out := answerOf(t, w)
		if w.Code != c.status || out["error"] != string(c.code) {
			t.Fatalf("%d %v, want %d %s", w.Code, out, c.status, c.code)
		}
		if strings.Contains(w.Body.String(), secret) {
			t.Fatal("a refusal shows the secret")
		}
	}
	if called {
		t.Fatal("the handler saw an unverified request")
	}
}

func TestMiddlewareForgetsWhenTheHandlerPanics(t *testing.T) {
	seen := NewSeenIDs(10)
	r, _ := NewReceiver(ReceiverOptions{Secrets: []string{secret}, Seen: seen})
	h := r.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("handler bug") }))
	body := `{"type":"track","userId":"u1","event":"A","messageId":"m-9"}`
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic must go on")
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), signed(t, body))
	}()
	if seen.Len() != 0 {
		t.Fatal("the id of a call whose handler panicked is still remembered")
	}
}

func TestSeenIDsIsAnLRU(t *testing.T) {
	s := NewSeenIDs(2)
	if s.Seen("a") || s.Seen("b") || !s.Seen("a") {
		t.Fatal("check-and-set")
	}
	s.Seen("c") // drops b, the least recently seen
	if s.Seen("b") {
		t.Fatal("b should have been dropped")
	}
	if NewSeenIDs(0).capacity != int(Defaults["seen_capacity"]) {
		t.Fatal("the default capacity is the core's")
	}
}

func TestStandardWebhooksAndRotation(t *testing.T) {
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	hooks, err := NewWebhooks([]byte(fmt.Sprintf(
		`{"endpoints":["https://hooks.example.com/in"],"sharedSecret":%q,"signature":"both","signingSecrets":[%q]}`,
		secret, whsec)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	req, err := hooks.Request([]byte(`{"type":"track","userId":"u42","event":"Order Completed","messageId":"m-1"}`), 0, now)
	if err != nil {
		t.Fatal(err)
	}
	// A receiver with Standard secrets only holds the request to them.
	standard, _ := NewReceiver(ReceiverOptions{StandardSecrets: []string{whsec}})
	hook, err := standard.ReceiveHeaders(req.Body, req.Headers, now)
	if err != nil || hook.Header != "webhook-signature" || hook.IDs[0] != "m-1" || hook.Timestamp.IsZero() {
		t.Fatalf("%+v %v", hook, err)
	}
	// Outside the 5-minute window.
	_, err = standard.ReceiveHeaders(req.Body, req.Headers, now.Add(DefaultStandardTolerance+time.Minute))
	if !errors.Is(err, ErrSignature) || err.(*Error).Code != CodeTimestampTooOld {
		t.Fatalf("%v", err)
	}
	// Stripping the Standard headers cannot downgrade it to X-Signature.
	var stripped []Header
	for _, h := range req.Headers {
		if !strings.HasPrefix(h.Name, "webhook-") {
			stripped = append(stripped, h)
		}
	}
	if _, err := standard.ReceiveHeaders(req.Body, stripped, now); err.(*Error).Code != CodeMissingSignature {
		t.Fatalf("%v", err)
	}
	if _, err := NewReceiver(ReceiverOptions{StandardSecrets: []string{"not base64!"}}); err.(*Error).Code != CodeMalformedSecret {
		t.Fatalf("%v", err)
	}
	if s := fmt.Sprintf("%v %#v %v", standard, standard, ReceiverOptions{Secrets: []string{secret}}); strings.Contains(s, secret) {
		t.Fatalf("a secret was printed: %s", s)
	}
}
