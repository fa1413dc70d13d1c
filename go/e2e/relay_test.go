// Package e2e sends every call kind from Go through callpost's native relay
// to a receiver built with the Go middleware: the Go drop-ins themselves,
// and programs written against analytics-go v2's and v3's documented usage
// built against callpost with only their import path changed. Every
// request the relay delivers must verify.
package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	analytics2 "example.invalid/callpost/go/analytics/v2"
	analytics3 "example.invalid/callpost/go/analytics/v3"
	"example.invalid/callpost/go/callpost"
)

const (
	secret = "a-secret"
	whsec  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// received is what the receiver took, by path.
type received struct {
	mu      sync.Mutex
	changed *sync.Cond
	calls   map[string][]map[string]interface{}
	ids     map[string][]string
	headers map[string][]string
	refused []string
}

// wait blocks until path has n calls, or fails after two minutes (a hang
// guard: the relay delivers as soon as it stores).
func (r *received) wait(t *testing.T, path string, n int) []map[string]interface{} {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	guard := time.AfterFunc(2*time.Minute, func() { r.changed.Broadcast() })
	defer guard.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.calls[path]) < n && time.Now().Before(deadline) {
		r.changed.Wait()
	}
	if len(r.calls[path]) < n {
		t.Fatalf("%s got %d calls, want %d (refused: %v)", path, len(r.calls[path]), n, r.refused)
	}
	return append([]map[string]interface{}(nil), r.calls[path]...)
}

func startReceiver(t *testing.T) (*received, string) {
	rec := &received{calls: map[string][]map[string]interface{}{}, ids: map[string][]string{},
		headers: map[string][]string{}}
	rec.changed = sync.NewCond(&rec.mu)
	receiver, err := callpost.NewReceiver(callpost.ReceiverOptions{Secrets: []string{secret}, StandardSecrets: []string{whsec}})
	if err != nil {
		t.Fatal(err)
	}
	handler := receiver.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		hook := callpost.WebhookFrom(req.Context())
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for i, raw := range hook.Calls {
			var call map[string]interface{}
			if err := json.Unmarshal(raw, &call); err != nil {
				t.Error(err)
			}
			rec.calls[req.URL.Path] = append(rec.calls[req.URL.Path], call)
			// The spec's bodies carry no messageId: the receiver's id is
			// the signed body's, and the relay's Idempotency-Key header
			// names the call it sent.
			id := hook.IDs[i]
			if !hook.Batch && hook.Header == "X-Signature" {
				id = req.Header.Get("Idempotency-Key")
			}
			rec.ids[req.URL.Path] = append(rec.ids[req.URL.Path], id)
		}
		rec.headers[req.URL.Path] = append(rec.headers[req.URL.Path], hook.Header)
		rec.changed.Broadcast()
		w.WriteHeader(http.StatusNoContent)
	}))
	// Whatever the middleware refuses is remembered: the test fails on it.
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		handler.ServeHTTP(sw, req)
		if sw.status >= 400 {
			rec.mu.Lock()
			rec.refused = append(rec.refused, fmt.Sprintf("%s %d", req.URL.Path, sw.status))
			rec.mu.Unlock()
		}
	}))
	t.Cleanup(server.Close)
	return rec, server.URL
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(status int) {
	s.status = status
	s.ResponseWriter.WriteHeader(status)
}

// relayBinary is the relay to run: CALLPOST_RELAY_BIN (scripts/test.sh's
// build), else the checkout's debug build.
func relayBinary(t *testing.T) string {
	if bin := os.Getenv("CALLPOST_RELAY_BIN"); bin != "" {
		return bin
	}
	bin, _ := filepath.Abs(filepath.Join("..", "..", "target", "debug", "callpost-relay"))
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no relay: set CALLPOST_RELAY_BIN or run `cargo build -p callpost-relay` (scripts/test-go.sh does)")
	}
	return bin
}

// startRelay runs the relay with three sources, each delivering to its own
// path of the receiver: the Go clients' (X-Signature), the v3 example's
// (Standard Webhooks) and the v2 example's (both signatures).
func startRelay(t *testing.T, receiverURL string) string {
	dir := t.TempDir()
	config := fmt.Sprintf(`listen = "127.0.0.1:0"
database = "sqlite:///%s/relay.db"

[[sources]]
name = "go-clients"
write_keys = ["wk-clients"]
[sources.webhooks]
urls = ["%[2]s/hook/clients"]
shared_secret = %[3]q

[[sources]]
name = "go-v3-example"
write_keys = ["wk-v3"]
[sources.webhooks]
urls = ["%[2]s/hook/v3"]
signature = "standard"
signing_secrets = [%[4]q]

[[sources]]
name = "go-v2-example"
write_keys = ["wk-v2"]
[sources.webhooks]
urls = ["%[2]s/hook/v2"]
shared_secret = %[3]q
signature = "both"
signing_secrets = [%[4]q]

[security]
allow_private_networks = true
`, dir, receiverURL, secret, whsec)
	path := filepath.Join(dir, "relay.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(relayBinary(t), "--config", path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)
	found := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			if m := listening.FindStringSubmatch(lines.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case url := <-found:
		return url
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the relay never said it was listening")
		return ""
	}
}

type successes struct {
	mu  sync.Mutex
	ids []string
	bad []error
}

func (s *successes) Success(m analytics3.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, messageID(m))
}

func (s *successes) Failure(m analytics3.Message, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bad = append(s.bad, err)
}

func messageID(m analytics3.Message) string {
	switch m := m.(type) {
	case analytics3.Track:
		return m.MessageId
	case analytics3.Identify:
		return m.MessageId
	case analytics3.Page:
		return m.MessageId
	case analytics3.Screen:
		return m.MessageId
	case analytics3.Group:
		return m.MessageId
	case analytics3.Alias:
		return m.MessageId
	}
	return ""
}

func TestEveryCallReachesAVerifyingReceiverThroughTheRelay(t *testing.T) {
	rec, receiverURL := startReceiver(t)
	relay := startRelay(t, receiverURL)

	// The v3 drop-in: every kind, each accepted by the relay (Success).
	cb := &successes{}
	v3, err := analytics3.NewWithConfig("wk-clients", analytics3.Config{Endpoint: relay, Callback: cb, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	v3Calls := []analytics3.Message{
		analytics3.Identify{UserId: "u-go", Traits: analytics3.NewTraits().SetName("Grace").Set("ünïcode", "✓ 🚀")},
		analytics3.Track{UserId: "u-go", Event: "Order Completed",
			Properties: analytics3.NewProperties().SetTotal(27.5).SetProducts(analytics3.Product{ID: "p-1", Price: 13.75})},
		analytics3.Page{AnonymousId: "a-go", Name: "Docs"},
		analytics3.Screen{UserId: "u-go", Name: "Cart"},
		analytics3.Group{UserId: "u-go", GroupId: "g-go"},
		analytics3.Alias{PreviousId: "a-go", UserId: "u-go"},
	}
	for _, m := range v3Calls {
		if err := v3.Enqueue(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := v3.Close(); err != nil {
		t.Fatal(err)
	}
	if len(cb.ids) != len(v3Calls) || len(cb.bad) != 0 {
		t.Fatalf("the relay accepted %d of %d: %v", len(cb.ids), len(v3Calls), cb.bad)
	}

	// The v2 drop-in: every kind.
	v2 := analytics2.New("wk-clients")
	v2.Endpoint = relay
	v2Messages := []*analytics2.Message{}
	identify := &analytics2.Identify{UserId: "u-go2"}
	track := &analytics2.Track{UserId: "u-go2", Event: "Signed Up"}
	page := &analytics2.Page{UserId: "u-go2", Name: "Home", Traits: map[string]interface{}{"path": "/"}}
	group := &analytics2.Group{UserId: "u-go2", GroupId: "g-go2"}
	alias := &analytics2.Alias{PreviousId: "a-go2", UserId: "u-go2"}
	for _, err := range []error{v2.Identify(identify), v2.Track(track), v2.Page(page), v2.Group(group), v2.Alias(alias)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	v2Messages = append(v2Messages, &identify.Message, &track.Message, &page.Message, &group.Message, &alias.Message)
	if err := v2.Close(); err != nil {
		t.Fatal(err)
	}

	// The documented examples, built with only the import path changed.
	for _, version := range []string{"v3", "v2"} {
		runExample(t, version, relay)
	}

	clients := rec.wait(t, "/hook/clients", len(v3Calls)+len(v2Messages))
	// Each call arrives under the messageId it was sent with (the relay
	// puts it in Idempotency-Key).
	want := map[string]bool{}
	for _, id := range cb.ids {
		want[id] = true
	}
	for _, m := range v2Messages {
		want[m.MessageId] = true
	}
	rec.mu.Lock()
	for _, id := range rec.ids["/hook/clients"] {
		if !want[id] {
			t.Errorf("an unexpected call %q", id)
		}
		delete(want, id)
	}
	rec.mu.Unlock()
	if len(want) != 0 {
		t.Fatalf("never delivered: %v", want)
	}
	types := map[string]int{}
	for _, call := range clients {
		types[call["type"].(string)]++
	}
	for _, kind := range []string{"identify", "track", "page", "screen", "group", "alias"} {
		if types[kind] == 0 {
			t.Errorf("no %s call reached the receiver: %v", kind, types)
		}
	}
	v3Example := rec.wait(t, "/hook/v3", 7)
	v2Example := rec.wait(t, "/hook/v2", 5)
	checkEvents(t, v3Example, "Signed Up", "Membership Upgraded")
	checkEvents(t, v2Example, "Signed Up")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.refused) != 0 {
		t.Fatalf("the receiver refused: %v", rec.refused)
	}
	for path, scheme := range map[string]string{"/hook/clients": "X-Signature", "/hook/v3": "webhook-signature",
		"/hook/v2": "webhook-signature"} {
		for _, h := range rec.headers[path] {
			if h != scheme {
				t.Fatalf("%s verified under %s, want %s", path, h, scheme)
			}
		}
	}
}

func checkEvents(t *testing.T, calls []map[string]interface{}, events ...string) {
	t.Helper()
	seen := map[interface{}]bool{}
	for _, c := range calls {
		seen[c["event"]] = true
	}
	for _, e := range events {
		if !seen[e] {
			t.Fatalf("no %q among %v", e, calls)
		}
	}
}

// importPaths are analytics-go's import paths and callpost's drop-ins for
// them.
var importPaths = map[string][2]string{
	"v2": {`"github.com/segmentio/analytics-go"`, `"example.invalid/callpost/go/analytics/v2"`},
	"v3": {`"github.com/segmentio/analytics-go/v3"`, `"example.invalid/callpost/go/analytics/v3"`},
}

// runExample builds testdata/<version>/main.go in a module of its own that
// takes callpost by a replace directive, as a new user does, with the
// import path changed and nothing else, and runs it against the relay.
func runExample(t *testing.T, version, relay string) {
	t.Helper()
	original, err := os.ReadFile(filepath.Join("testdata", version, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	paths := importPaths[version]
	changed := strings.Replace(string(original), paths[0], paths[1], 1)
	if diff := changedLines(string(original), changed); diff != 1 {
		t.Fatalf("%s: %d lines changed, want the import line alone", version, diff)
	}
	module, _ := filepath.Abs("..")
	dir := t.TempDir()
	gomod := fmt.Sprintf("module example.com/%sexample\n\ngo 1.19\n\nrequire example.invalid/callpost/go v0.0.0-00010101000000-000000000000\n\nreplace example.invalid/callpost/go => %s\n", version, module)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	bin := filepath.Join(dir, "example")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s example does not build against callpost:\n%s", version, out)
	}
	run := exec.Command(bin)
	run.Env = append(os.Environ(), "SEGMENT_WRITE_KEY=wk-"+version, "SEGMENT_ENDPOINT="+relay)
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("%s example failed: %v\n%s", version, err, out)
	}
}

func changedLines(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(la) != len(lb) {
		return -1
	}
	n := 0
	for i := range la {
		if la[i] != lb[i] {
			n++
		}
	}
	return n
}
