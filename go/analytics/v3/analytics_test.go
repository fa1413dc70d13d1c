package analytics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"example.invalid/callpost/go/callpost"
	"example.invalid/callpost/go/internal/testapi"
)

// recorder is a Callback that remembers what it was told.
type recorder struct {
	mu        sync.Mutex
	succeeded []Message
	failed    []Message
	errs      []error
}

func (r *recorder) Success(m Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.succeeded = append(r.succeeded, m)
}

func (r *recorder) Failure(m Message, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, m)
	r.errs = append(r.errs, err)
}

func (r *recorder) counts() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.succeeded), len(r.failed)
}

func quietLogger() Logger { return StdLogger(log.New(&bytes.Buffer{}, "", 0)) }

func TestEveryKindReachesTheTrackingAPI(t *testing.T) {
	api := testapi.New(t, "wk")
	cb := &recorder{}
	c, err := NewWithConfig("wk", Config{Endpoint: api.URL, BatchSize: 3, Callback: cb, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2020, 2, 2, 2, 2, 2, 222_000_000, time.UTC)
	messages := []Message{
		Identify{UserId: "u1", Traits: NewTraits().SetEmail("u1@example.com").SetAge(42)},
		&Track{UserId: "u1", Event: "Order Completed", Properties: NewProperties().SetRevenue(27.5).SetCurrency("EUR").
			SetProducts(Product{ID: "p", SKU: "p-1", Price: 13.75}),
			Context: &Context{IP: []byte{203, 0, 113, 5}, Extra: map[string]interface{}{"active": true}}},
		Page{AnonymousId: "a1", Name: "Docs", Properties: NewProperties().SetURL("https://example.com/docs")},
		Screen{UserId: "u1", Name: "Cart", Timestamp: at},
		Group{UserId: "u1", GroupId: "g1", Traits: NewTraits().SetName("Initech")},
		Alias{PreviousId: "a1", UserId: "u1", Integrations: NewIntegrations().DisableAll().Enable("Webhooks")},
	}
	for _, m := range messages {
		if err := c.Enqueue(m); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	got := api.Messages()
	if len(got) != len(messages) {
		t.Fatalf("the API got %d messages", len(got))
	}
	kinds := []string{"identify", "track", "page", "screen", "group", "alias"}
	for i, m := range got {
		if m["type"] != kinds[i] || m["messageId"] == "" {
			t.Fatalf("message %d: %v", i, m)
		}
		lib := m["context"].(map[string]interface{})["library"].(map[string]interface{})
		if lib["name"] != "callpost" || lib["version"] != callpost.Version {
			t.Fatalf("context.library %v", lib)
		}
	}
	ctx := got[1]["context"].(map[string]interface{})
	if ctx["ip"] != "203.0.113.5" || ctx["active"] != true {
		t.Fatalf("context %v", ctx)
	}
	products := got[1]["properties"].(map[string]interface{})["products"].([]interface{})
	if products[0].(map[string]interface{})["sku"] != "p-1" {
		t.Fatalf("products %v", products)
	}
	if got[3]["timestamp"] != "2020-02-02T02:02:02.222Z" {
		t.Fatalf("timestamp %v", got[3]["timestamp"])
	}
	if got[5]["integrations"].(map[string]interface{})["All"] != false {
		t.Fatalf("integrations %v", got[5]["integrations"])
	}
	if ok, failed := cb.counts(); ok != len(messages) || failed != 0 {
		t.Fatalf("callbacks: %d succeeded, %d failed", ok, failed)
	}
	// The callback sees each message as sent: type, messageId, timestamp.
	first := cb.succeeded[0].(Identify)
	if first.Type != "identify" || first.MessageId != got[0]["messageId"] || first.Timestamp.IsZero() {
		t.Fatalf("callback message %+v", first)
	}
	if refused := api.Refused(); len(refused) != 0 {
		t.Fatalf("refused: %v", refused)
	}
}

func TestValidationIsTheCores(t *testing.T) {
	c, err := NewWithConfig("wk", Config{Endpoint: "http://127.0.0.1:9", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cases := []struct {
		msg   Message
		code  callpost.Code
		field string
	}{
		{Track{Event: "e"}, callpost.CodeMissingIdentity, "UserId"},
		{Track{UserId: "u"}, callpost.CodeMissingEvent, "Event"},
		{&Group{UserId: "u"}, callpost.CodeMissingGroupID, "GroupId"},
		{Alias{UserId: "u"}, callpost.CodeMissingPreviousID, "PreviousId"},
		{Alias{PreviousId: "p"}, callpost.CodeMissingUserID, "UserId"},
		{Identify{}, callpost.CodeMissingIdentity, "UserId"},
	}
	for _, tc := range cases {
		for _, err := range []error{c.Enqueue(tc.msg), tc.msg.Validate()} {
			var fe FieldError
			var ce *callpost.Error
			if !errors.As(err, &fe) || !errors.As(err, &ce) || ce.Code != tc.code || fe.Name != tc.field {
				t.Fatalf("%T: %v", tc.msg, err)
			}
			if !errors.Is(err, callpost.ErrInvalidCall) {
				t.Fatalf("%v is not an ErrInvalidCall", err)
			}
		}
	}
	if err := (Track{UserId: "u", Event: "e"}).Validate(); err != nil {
		t.Fatal(err)
	}
	// What only the core knows: a timestamp out of its range, an integer
	// JavaScript would read as another number.
	err = c.Enqueue(Track{UserId: "u", Event: "e", Timestamp: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	wantCode(t, err, callpost.CodeInvalidTimestamp)
	err = c.Enqueue(Track{UserId: "u", Event: "e", Properties: Properties{"id": int64(9007199254740993)}})
	wantCode(t, err, callpost.CodeIntegerOutOfRange)
	err = c.Enqueue(Track{UserId: "u", Event: "e", Properties: Properties{"c": make(chan int)}})
	wantCode(t, err, callpost.CodeNotJSON)
	loop := map[string]interface{}{}
	loop["self"] = loop
	err = c.Enqueue(Track{UserId: "u", Event: "e", Properties: Properties{"loop": loop}})
	wantCode(t, err, callpost.CodeCyclicValue)
	// A message over the core's limit: nothing is queued.
	big := strings.Repeat("x", int(callpost.Defaults["max_message_bytes"]))
	err = c.Enqueue(Track{UserId: "u", Event: "e", Properties: Properties{"pad": big}})
	if !errors.Is(err, ErrMessageTooBig) {
		t.Fatalf("%v", err)
	}
	var nilTrack *Track
	wantCode(t, c.Enqueue(nilTrack), callpost.CodeInvalidArgument)
	wantCode(t, c.Enqueue(custom{}), callpost.CodeInvalidArgument)
}

type custom struct{}

func (custom) Validate() error { return nil }

func wantCode(t *testing.T, err error, code callpost.Code) {
	t.Helper()
	var e *callpost.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("want %s, got %v", code, err)
	}
}

// TestNonFiniteNumbersAreTheCoresCode runs errors.json's "stringify" cases
// the way a Go host meets them: a float64 in a call's properties.
func TestNonFiniteNumbersAreTheCoresCode(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "errors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Stringify []struct {
			Number string        `json:"number"`
			Code   callpost.Code `json:"code"`
		} `json:"stringify"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	numbers := map[string]float64{"NaN": math.NaN(), "Infinity": math.Inf(1), "-Infinity": math.Inf(-1)}
	for _, c := range v.Stringify {
		n, ok := numbers[c.Number]
		if !ok {
			t.Fatalf("no Go value for %s", c.Number)
		}
		err := Track{UserId: "u", Event: "e", Properties: Properties{"n": n}}.Validate()
		wantCode(t, err, c.Code)
	}
}

func TestConfigErrorsAreTheCores(t *testing.T) {
	cases := []struct {
		config Config
		code   callpost.Code
		field  string
	}{
		{Config{Interval: -time.Second}, callpost.CodeInvalidConfig, "Interval"},
		{Config{BatchSize: -1}, callpost.CodeInvalidConfig, "BatchSize"},
		{Config{Endpoint: "ftp://example.com"}, callpost.CodeInvalidEndpoint, "Endpoint"},
		{Config{Endpoint: "https://user:pass@example.com"}, callpost.CodeInvalidEndpoint, "Endpoint"},
	}
	for _, tc := range cases {
		c, err := NewWithConfig("wk", tc.config)
		var ce ConfigError
		var e *callpost.Error
		if c != nil || !errors.As(err, &ce) || ce.Field != tc.field || !errors.As(err, &e) || e.Code != tc.code {
			t.Fatalf("%+v: %v", tc.config, err)
		}
		if strings.Contains(fmt.Sprintf("%v %#v", err, err), "pass") {
			t.Fatalf("the error shows a password: %v", err)
		}
	}
	// New cannot return an error: its client refuses every call instead.
	err := New("").Enqueue(Track{UserId: "u", Event: "e"})
	wantCode(t, err, callpost.CodeEmptyWriteKey)
}

func TestFailedBatchesReachTheCallback(t *testing.T) {
	api := testapi.New(t, "wk")
	api.Answer(http.StatusBadRequest)
	cb := &recorder{}
	c, err := NewWithConfig("wk", Config{Endpoint: api.URL, BatchSize: 2, Callback: cb, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Enqueue(Track{UserId: "u", Event: "one"})
	_ = c.Enqueue(Track{UserId: "u", Event: "two"})
	testapi.Eventually(t, "the refused batch is reported", func() bool { _, f := cb.counts(); return f == 2 })
	for _, err := range cb.errs {
		var e *callpost.Error
		if !errors.Is(err, callpost.ErrDelivery) || !errors.As(err, &e) || e.Code != callpost.CodeRejected {
			t.Fatalf("%v", err)
		}
	}
	// A 503 is retried (the core's backoff), then delivered.
	api.Answer(http.StatusServiceUnavailable)
	_ = c.Enqueue(Track{UserId: "u", Event: "three"})
	_ = c.Enqueue(Track{UserId: "u", Event: "four"})
	testapi.Eventually(t, "the retried batch is delivered", func() bool { ok, _ := cb.counts(); return ok == 2 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != ErrClosed {
		t.Fatalf("a second Close: %v", err)
	}
	if err := c.Enqueue(Track{UserId: "u", Event: "late"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestConcurrentEnqueuesAreAllDelivered(t *testing.T) {
	api := testapi.New(t, "wk")
	c, err := NewWithConfig("wk", Config{Endpoint: api.URL, Logger: quietLogger(), Gzip: true})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 8, 100
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := c.Enqueue(Track{UserId: "u", Event: "e", Properties: Properties{"g": g, "i": i}}); err != nil {
					t.Error(err)
				}
			}
		}(g)
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	got := api.Messages()
	seen := map[interface{}]bool{}
	for _, m := range got {
		seen[m["messageId"]] = true
	}
	if len(got) != goroutines*each || len(seen) != goroutines*each {
		t.Fatalf("%d messages, %d distinct", len(got), len(seen))
	}
	for _, b := range api.Batches() {
		if b.Header.Get("Content-Encoding") != "gzip" || len(b.Messages) > DefaultBatchSize {
			t.Fatalf("batch of %d, %q", len(b.Messages), b.Header.Get("Content-Encoding"))
		}
	}
}

func TestDefaultContextUnderTheMessagesOwn(t *testing.T) {
	api := testapi.New(t, "wk")
	c, err := NewWithConfig("wk", Config{Endpoint: api.URL, Logger: quietLogger(), DefaultContext: &Context{
		App: AppInfo{Name: "shop"}, Locale: "en-GB", Extra: map[string]interface{}{"region": "eu"}}})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Enqueue(Track{UserId: "u", Event: "e", Context: &Context{Locale: "fr-FR"}})
	_ = c.Close()
	ctx := api.Messages()[0]["context"].(map[string]interface{})
	if ctx["locale"] != "fr-FR" || ctx["region"] != "eu" || ctx["app"].(map[string]interface{})["name"] != "shop" {
		t.Fatalf("context %v", ctx)
	}
}

func TestVerboseLogsAndTheSpecsDebugSwitch(t *testing.T) {
	api := testapi.New(t, "wk")
	var out bytes.Buffer
	var mu sync.Mutex
	t.Setenv("DEBUG", "express,analytics")
	c, err := NewWithConfig("wk", Config{Endpoint: api.URL, Logger: StdLogger(log.New(lockedWriter{&mu, &out}, "", 0))})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Enqueue(Track{UserId: "u", Event: "e"})
	_ = c.Close()
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(out.String(), "INFO: batch 1 delivered (1 messages)") {
		t.Fatalf("logs: %q", out.String())
	}
	if strings.Contains(out.String(), "wk") {
		t.Fatal("the write key was logged")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestNoGoroutineOutlivesClose(t *testing.T) {
	api := testapi.New(t, "wk")
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		c, err := NewWithConfig("wk", Config{Endpoint: api.URL, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Enqueue(Track{UserId: "u", Event: "e"})
		_ = c.Close()
	}
	// Idle keep-alive connections belong to net/http, not to a client.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	testapi.Eventually(t, "the clients' goroutines end", func() bool { return runtime.NumGoroutine() <= before })
}
