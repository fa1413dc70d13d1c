package callpost

// The shared vectors of testdata/ (testdata/README.md), through Go: the same
// bytes and codes as the Rust, Python and JavaScript suites.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func vectors(t *testing.T, name string, into interface{}) {
	t.Helper()
	loadVectors(t, name, into)
}

func loadVectors(t testing.TB, name string, into interface{}) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// wantCode checks that err is an *Error with code, raised as the class the
// registry names for it.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want %s, got %v (%T)", code, err, err)
	}
	if string(e.Code) != code {
		t.Fatalf("want %s, got %s: %s", code, e.Code, e.Message)
	}
	if e.Class() == nil || !errors.Is(err, e.Class()) {
		t.Fatalf("%s: no class sentinel matches", code)
	}
}

func TestRegistryIsTheCores(t *testing.T) {
	declared := map[Code]bool{}
	for _, c := range allCodes {
		declared[c] = true
	}
	infos := Codes()
	if len(infos) != len(allCodes) {
		t.Fatalf("the core has %d codes, this package declares %d", len(infos), len(allCodes))
	}
	for _, info := range infos {
		if !declared[info.Code] {
			t.Errorf("the core's %s has no Code constant", info.Code)
		}
		class := classOf[info.Code]
		if class == nil || class.(*classError).Name() != info.Class {
			t.Errorf("%s: class %s has no sentinel", info.Code, info.Class)
		}
	}
	err := &Error{Code: CodeSignatureMismatch, Message: "x"}
	if !errors.Is(err, ErrSignature) || errors.Is(err, ErrInvalidCall) {
		t.Fatal("errors.Is must match the class and only it")
	}
}

func TestDefaultsAreTheCores(t *testing.T) {
	for _, name := range []string{"flush_at", "flush_after_ms", "max_queue", "max_message_bytes", "max_batch_bytes",
		"shutdown_timeout_ms", "seen_capacity"} {
		if Defaults[name] == 0 {
			t.Errorf("no default %s", name)
		}
	}
	c := DefaultBatcherConfig("wk")
	if c.FlushAt != int(Defaults["flush_at"]) || c.FlushAfter != DefaultDuration("flush_after_ms") {
		t.Fatalf("DefaultBatcherConfig is not the core's: %v", c)
	}
	if strings.Contains(c.String(), "wk") || strings.Contains(c.GoString(), "wk") {
		t.Fatal("the write key must not be printed")
	}
}

type requestCase struct {
	Name     string          `json:"name"`
	Settings json.RawMessage `json:"settings"`
	Endpoint int             `json:"endpoint"`
	Now      int64           `json:"now"`
	Call     json.RawMessage `json:"call"`
	CallJSON *string         `json:"call_json"`
	Expect   struct {
		Method  string      `json:"method"`
		URL     string      `json:"url"`
		Headers [][2]string `json:"headers"`
		Body    string      `json:"body"`
	} `json:"expect"`
}

func TestWebhookRequests(t *testing.T) {
	var cases []requestCase
	vectors(t, "webhook_requests.json", &cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			w, err := NewWebhooks(c.Settings)
			if err != nil {
				t.Fatal(err)
			}
			call := []byte(c.Call)
			if c.CallJSON != nil {
				call = []byte(*c.CallJSON)
			}
			r, err := w.Request(call, c.Endpoint, time.UnixMilli(c.Now))
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Body) != c.Expect.Body || r.Method != c.Expect.Method || r.URL != c.Expect.URL {
				t.Fatalf("got %s %s %s", r.Method, r.URL, r.Body)
			}
			var headers [][2]string
			for _, h := range r.Headers {
				headers = append(headers, [2]string{h.Name, h.Value})
			}
			if !reflect.DeepEqual(headers, c.Expect.Headers) {
				t.Fatalf("headers %v, want %v", headers, c.Expect.Headers)
			}
			batch := BatchRequest{Request: r}
			for _, s := range []string{fmt.Sprintf("%v %+v %#v", r, r, r), fmt.Sprintf("%v %+v %#v", batch, &batch, batch)} {
				if strings.Contains(s, "Bearer") {
					t.Fatalf("a request printed shows header values: %s", s)
				}
			}
		})
	}
}

// testdata/mappings.json: each case's mapping, in the settings the core
// reads, builds its call's body exactly as the generator's JavaScript
// reading of the rules does; refused mappings are invalid_settings.
func TestMappings(t *testing.T) {
	var v struct {
		Cases []struct {
			Name    string          `json:"name"`
			Mapping json.RawMessage `json:"mapping"`
			Call    string          `json:"call"`
			Now     int64           `json:"now"`
			Expect  struct {
				Body string `json:"body"`
			} `json:"expect"`
		} `json:"cases"`
		Invalid []struct {
			Name    string          `json:"name"`
			Mapping json.RawMessage `json:"mapping"`
			Code    Code            `json:"code"`
		} `json:"invalid"`
	}
	vectors(t, "mappings.json", &v)
	settings := func(mapping json.RawMessage) []byte {
		return []byte(`{"endpoints":["https://hooks.example.com/in"],"mapping":` + string(mapping) + `}`)
	}
	if len(v.Cases) < 40 || len(v.Invalid) < 10 {
		t.Fatalf("%d cases, %d refused", len(v.Cases), len(v.Invalid))
	}
	for _, c := range v.Cases {
		w, err := NewWebhooks(settings(c.Mapping))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		r, err := w.Request([]byte(c.Call), 0, time.UnixMilli(c.Now))
		if err != nil || string(r.Body) != c.Expect.Body {
			t.Fatalf("%s: %s, %v; want %s", c.Name, r.Body, err, c.Expect.Body)
		}
	}
	for _, c := range v.Invalid {
		_, err := NewWebhooks(settings(c.Mapping))
		var e *Error
		if !errors.As(err, &e) || e.Code != c.Code || !strings.Contains(e.Error(), "mapping") {
			t.Fatalf("%s: %v", c.Name, err)
		}
	}
}

// testdata/mappings.json's url_templates: each call's URL filled in from
// its endpoint's template, or refused with invalid_url_value; the refused
// templates are refused when the settings are read.
func TestURLTemplates(t *testing.T) {
	var v struct {
		Cases []struct {
			Name     string          `json:"name"`
			Settings json.RawMessage `json:"settings"`
			Call     string          `json:"call"`
			Now      int64           `json:"now"`
			Expect   struct {
				URL  string `json:"url"`
				Code Code   `json:"code"`
			} `json:"expect"`
		} `json:"url_templates"`
		Invalid []struct {
			Name     string          `json:"name"`
			Settings json.RawMessage `json:"settings"`
			Code     Code            `json:"code"`
		} `json:"invalid_url_templates"`
	}
	vectors(t, "mappings.json", &v)
	if len(v.Cases) < 12 || len(v.Invalid) < 5 {
		t.Fatalf("%d cases, %d refused", len(v.Cases), len(v.Invalid))
	}
	for _, c := range v.Cases {
		w, err := NewWebhooks(c.Settings)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		r, err := w.Request([]byte(c.Call), 0, time.UnixMilli(c.Now))
		var e *Error
		switch {
		case c.Expect.URL != "":
			if err != nil || r.URL != c.Expect.URL || r.Method != "PUT" {
				t.Fatalf("%s: %s %s, %v; want %s", c.Name, r.Method, r.URL, err, c.Expect.URL)
			}
		case !errors.As(err, &e) || e.Code != c.Expect.Code:
			t.Fatalf("%s: %v; want %s", c.Name, err, c.Expect.Code)
		}
	}
	for _, c := range v.Invalid {
		_, err := NewWebhooks(c.Settings)
		var e *Error
		if !errors.As(err, &e) || e.Code != c.Code {
			t.Fatalf("%s: %v", c.Name, err)
		}
	}
}

func TestStringify(t *testing.T) {
	var cases []struct {
		Input    string `json:"input"`
		Expected string `json:"expected"`
	}
	vectors(t, "stringify.json", &cases)
	for _, c := range cases {
		got, err := Stringify([]byte(c.Input))
		if err != nil || string(got) != c.Expected {
			t.Errorf("Stringify(%s) = %s, %v; want %s", c.Input, got, err, c.Expected)
		}
	}
}

func TestSignatures(t *testing.T) {
	var v struct {
		RFC2202 []struct {
			KeyHex  string `json:"key_hex"`
			DataHex string `json:"data_hex"`
			Digest  string `json:"digest"`
		} `json:"rfc2202"`
		Sign []struct {
			Secret    string `json:"secret"`
			Body      string `json:"body"`
			Signature string `json:"signature"`
		} `json:"sign"`
		Verify []struct {
			Name      string   `json:"name"`
			Body      string   `json:"body"`
			Signature string   `json:"signature"`
			Secrets   []string `json:"secrets"`
			Expect    *bool    `json:"expect"`
			Error     string   `json:"error"`
		} `json:"verify"`
	}
	vectors(t, "signatures.json", &v)
	for _, c := range v.RFC2202 {
		key, _ := hex.DecodeString(c.KeyHex)
		data, _ := hex.DecodeString(c.DataHex)
		if got, err := Sign(key, data); err != nil || got != c.Digest {
			t.Errorf("rfc2202 %s: %s %v", c.Digest, got, err)
		}
	}
	for _, c := range v.Sign {
		if got, err := Sign([]byte(c.Secret), []byte(c.Body)); err != nil || got != c.Signature {
			t.Errorf("sign %s: %s %v", c.Signature, got, err)
		}
	}
	for _, c := range v.Verify {
		t.Run(c.Name, func(t *testing.T) {
			ok, err := VerifySignature([]byte(c.Body), c.Signature, c.Secrets...)
			if c.Error != "" {
				wantCode(t, err, c.Error)
				return
			}
			if err != nil || ok != *c.Expect {
				t.Fatalf("got %v %v", ok, err)
			}
		})
	}
}

func nestedCall(n int) string {
	return `{"type":"track","userId":"u","event":"e","properties":` + strings.Repeat(`{"a":`, n) + "1" +
		strings.Repeat("}", n) + "}"
}

func TestErrorVectors(t *testing.T) {
	var v struct {
		Calls []struct {
			Name     string  `json:"name"`
			CallJSON *string `json:"call_json"`
			Nest     int     `json:"call_json_nest"`
			Code     *string `json:"code"`
			Message  *string `json:"message"`
		} `json:"calls"`
		Settings []struct {
			Name     string          `json:"name"`
			Settings json.RawMessage `json:"settings"`
			Code     *string         `json:"code"`
		} `json:"settings"`
		CallBytes []struct {
			Name string  `json:"name"`
			Hex  string  `json:"hex"`
			Code *string `json:"code"`
		} `json:"call_bytes"`
		Enqueue []struct {
			Name     string  `json:"name"`
			Pad      int     `json:"pad"`
			DropUser bool    `json:"drop_user"`
			Code     *string `json:"code"`
		} `json:"enqueue"`
	}
	vectors(t, "errors.json", &v)
	hooks, err := NewWebhooks([]byte(`{"endpoints":["https://example.com/"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Calls {
		t.Run("call/"+c.Name, func(t *testing.T) {
			text := nestedCall(c.Nest)
			if c.CallJSON != nil {
				text = *c.CallJSON
			}
			_, err := hooks.Request([]byte(text), 0, time.UnixMilli(0))
			if c.Code == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, *c.Code)
			if c.Message != nil && err.(*Error).Message != *c.Message {
				t.Fatalf("message %q, want %q", err.(*Error).Message, *c.Message)
			}
			// The check alone gives the same code.
			wantCode(t, ValidateCall([]byte(text)), *c.Code)
		})
	}
	for _, c := range v.Settings {
		t.Run("settings/"+c.Name, func(t *testing.T) {
			_, err := NewWebhooks(c.Settings)
			if c.Code == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, *c.Code)
		})
	}
	for _, c := range v.CallBytes {
		t.Run("bytes/"+c.Name, func(t *testing.T) {
			raw, _ := hex.DecodeString(c.Hex)
			_, err := hooks.Request(raw, 0, time.UnixMilli(0))
			if c.Code == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, *c.Code)
		})
	}
	for _, c := range v.Enqueue {
		t.Run("enqueue/"+c.Name, func(t *testing.T) {
			b, err := NewBatcher(DefaultBatcherConfig("wk"), time.UnixMilli(0))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			call := map[string]interface{}{"type": "track", "event": "e",
				"properties": map[string]interface{}{"pad": strings.Repeat("x", c.Pad)}}
			if !c.DropUser {
				call["userId"] = "u"
			}
			text, _ := json.Marshal(call)
			_, err = b.Enqueue(time.UnixMilli(0), text, &[16]byte{})
			if c.Code == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, *c.Code)
		})
	}
}

func TestBatchVectors(t *testing.T) {
	var cases []struct {
		Name   string `json:"name"`
		Config struct {
			WriteKey       string `json:"writeKey"`
			Endpoint       string `json:"endpoint"`
			FlushAt        int    `json:"flushAt"`
			LibraryName    string `json:"libraryName"`
			LibraryVersion string `json:"libraryVersion"`
		} `json:"config"`
		Calls []struct {
			Now    int64           `json:"now"`
			Random string          `json:"random"`
			Call   json.RawMessage `json:"call"`
		} `json:"calls"`
		FlushAt int64 `json:"flushAt"`
		Expect  struct {
			URL     string      `json:"url"`
			Headers [][2]string `json:"headers"`
			Bodies  []string    `json:"bodies"`
		} `json:"expect"`
	}
	vectors(t, "batches.json", &cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			cfg := DefaultBatcherConfig(c.Config.WriteKey)
			cfg.Endpoint, cfg.FlushAt = c.Config.Endpoint, c.Config.FlushAt
			cfg.LibraryName, cfg.LibraryVersion = c.Config.LibraryName, c.Config.LibraryVersion
			b, err := NewBatcher(cfg, time.UnixMilli(0))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for _, call := range c.Calls {
				var random [16]byte
				hex.Decode(random[:], []byte(call.Random))
				if _, err := b.Enqueue(time.UnixMilli(call.Now), call.Call, &random); err != nil {
					t.Fatal(err)
				}
			}
			at := time.UnixMilli(c.FlushAt)
			b.Flush(at)
			var bodies []string
			for r := b.PollRequest(at); r != nil; r = b.PollRequest(at) {
				var headers [][2]string
				for _, h := range r.Headers {
					headers = append(headers, [2]string{h.Name, h.Value})
				}
				if r.URL != c.Expect.URL || !reflect.DeepEqual(headers, c.Expect.Headers) {
					t.Fatalf("%s %v", r.URL, headers)
				}
				bodies = append(bodies, string(r.Body))
				if err := b.HandleResponse(at, r.BatchID, 200, ""); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(bodies, c.Expect.Bodies) {
				t.Fatalf("bodies:\n%v\nwant:\n%v", bodies, c.Expect.Bodies)
			}
		})
	}
}

type receiveCase struct {
	Name           string      `json:"name"`
	Secrets        []string    `json:"secrets"`
	StandardSecret []string    `json:"standard_secrets"`
	NowMs          int64       `json:"now_ms"`
	Headers        [][2]string `json:"headers"`
	Body           string      `json:"body"`
	Options        struct {
		AllowFirstEventSignature bool `json:"allow_first_event_signature"`
	} `json:"options"`
	Expect struct {
		Error      string          `json:"error"`
		Header     string          `json:"header"`
		Coverage   string          `json:"coverage"`
		Batch      bool            `json:"batch"`
		Value      json.RawMessage `json:"value"`
		MessageIDs []*string       `json:"message_ids"`
	} `json:"expect"`
}

func headersOf(pairs [][2]string) []Header {
	out := make([]Header, len(pairs))
	for i, p := range pairs {
		out[i] = Header{Name: p[0], Value: p[1]}
	}
	return out
}

// decoded is JSON text as Go values, for comparing content.
func decoded(t *testing.T, text []byte) interface{} {
	t.Helper()
	var v interface{}
	if err := json.Unmarshal(text, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestReceiveVectors(t *testing.T) {
	var cases []receiveCase
	vectors(t, "receive.json", &cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			r, err := NewReceiver(ReceiverOptions{
				Secrets:                  c.Secrets,
				StandardSecrets:          c.StandardSecret,
				AllowFirstEventSignature: c.Options.AllowFirstEventSignature,
				Seen:                     KeepDuplicates,
			})
			if err == nil {
				var hook *Webhook
				hook, err = r.ReceiveHeaders([]byte(c.Body), headersOf(c.Headers), time.UnixMilli(c.NowMs))
				if err == nil {
					checkReceived(t, c, hook)
					return
				}
			}
			if c.Expect.Error == "" {
				t.Fatal(err)
			}
			wantCode(t, err, c.Expect.Error)
		})
	}
}

func checkReceived(t *testing.T, c receiveCase, hook *Webhook) {
	t.Helper()
	if c.Expect.Error != "" {
		t.Fatalf("accepted; want %s", c.Expect.Error)
	}
	if hook.Header != c.Expect.Header || hook.Coverage != c.Expect.Coverage || hook.Batch != c.Expect.Batch {
		t.Fatalf("%s %s %v", hook.Header, hook.Coverage, hook.Batch)
	}
	var calls []interface{}
	for _, call := range hook.Calls {
		calls = append(calls, decoded(t, call))
	}
	want := decoded(t, c.Expect.Value)
	if !c.Expect.Batch {
		want = []interface{}{want}
	}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	for i, id := range c.Expect.MessageIDs {
		want := ""
		if id != nil {
			want = *id
		}
		if hook.IDs[i] != want {
			t.Fatalf("ids %q, want %v", hook.IDs, c.Expect.MessageIDs)
		}
	}
}

func TestStandardWebhooksVectors(t *testing.T) {
	var v struct {
		Sign []struct {
			Name      string   `json:"name"`
			Secrets   []string `json:"secrets"`
			ID        string   `json:"id"`
			Timestamp int64    `json:"timestamp"`
			Body      string   `json:"body"`
			Signature string   `json:"signature"`
		} `json:"sign"`
		Verify []struct {
			Name        string      `json:"name"`
			Secrets     []string    `json:"secrets"`
			Headers     [][2]string `json:"headers"`
			Body        string      `json:"body"`
			Now         int64       `json:"now"`
			ToleranceMs *int64      `json:"tolerance_ms"`
			Expect      struct {
				ID        string `json:"id"`
				Timestamp int64  `json:"timestamp"`
				Error     string `json:"error"`
			} `json:"expect"`
		} `json:"verify"`
	}
	vectors(t, "standard_webhooks.json", &v)
	for _, c := range v.Sign {
		t.Run("sign/"+c.Name, func(t *testing.T) {
			headers, err := StandardSign(c.Secrets, c.ID, time.Unix(c.Timestamp, 0), []byte(c.Body))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, h := range headers {
				got[h.Name] = h.Value
			}
			if got["webhook-signature"] != c.Signature || got["webhook-id"] != c.ID {
				t.Fatalf("%v, want %s", got, c.Signature)
			}
		})
	}
	for _, c := range v.Verify {
		t.Run("verify/"+c.Name, func(t *testing.T) {
			tolerance := DefaultStandardTolerance
			if c.ToleranceMs != nil {
				tolerance = time.Duration(*c.ToleranceMs) * time.Millisecond
			}
			got, err := StandardVerify(c.Secrets, []byte(c.Body), headersOf(c.Headers), time.Unix(c.Now, 0), tolerance)
			if c.Expect.Error != "" {
				wantCode(t, err, c.Expect.Error)
				return
			}
			if err != nil || got.ID != c.Expect.ID || got.Timestamp.Unix() != c.Expect.Timestamp {
				t.Fatalf("%+v %v", got, err)
			}
		})
	}
}

func TestOperationalEventsVerifyAsAnyWebhook(t *testing.T) {
	var cases []struct {
		Type   string `json:"type"`
		Secret string `json:"secret"`
		Expect struct {
			Body           string `json:"body"`
			Signature      string `json:"signature"`
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"expect"`
	}
	vectors(t, "ops_events.json", &cases)
	for _, c := range cases {
		headers := []Header{{"X-Signature", c.Expect.Signature}, {"Idempotency-Key", c.Expect.IdempotencyKey}}
		r, err := NewReceiver(ReceiverOptions{Secrets: []string{c.Secret}, Seen: KeepDuplicates})
		if err != nil {
			t.Fatal(err)
		}
		hook, err := r.ReceiveHeaders([]byte(c.Expect.Body), headers, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", c.Type, err)
		}
		var event struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}
		_ = json.Unmarshal(hook.Calls[0], &event)
		if event.Type != c.Type || event.ID != c.Expect.IdempotencyKey {
			t.Fatalf("%+v", event)
		}
		other, _ := NewReceiver(ReceiverOptions{Secrets: []string{"another-secret"}})
		_, err = other.ReceiveHeaders([]byte(c.Expect.Body), headers, time.Now())
		wantCode(t, err, "signature_mismatch")
	}
}

// TestIDVectors runs the id rule's cases Go can express: ids reach the core
// in the call's JSON text (Go's API holds ids as strings, and encoding/json
// writes Go integers as number literals), so the "string", "bool" and
// "json" forms apply; the "integer" and "float" forms are those of hosts
// that hand the core a number itself (Python's int, JavaScript's BigInt
// and number).
func TestIDVectors(t *testing.T) {
	var v struct {
		Calls map[string]map[string]interface{} `json:"calls"`
		Cases []struct {
			Name   string   `json:"name"`
			Form   string   `json:"form"`
			ID     string   `json:"id"`
			Fields []string `json:"fields"`
			Expect *string  `json:"expect"`
			Code   string   `json:"code"`
		} `json:"cases"`
	}
	vectors(t, "ids.json", &v)
	ran := 0
	for _, c := range v.Cases {
		literal := map[string]string{"json": c.ID, "string": strconvQuote(c.ID), "bool": "true"}[c.Form]
		if literal == "" {
			continue
		}
		fields := c.Fields
		if len(fields) == 0 {
			fields = []string{"userId", "anonymousId", "groupId", "previousId", "messageId"}
		}
		for _, field := range fields {
			ran++
			t.Run(c.Name+"/"+field, func(t *testing.T) {
				template, _ := json.Marshal(v.Calls[field])
				call := string(template[:len(template)-1]) + `,"` + field + `":` + literal + "}"
				b, err := NewBatcher(DefaultBatcherConfig("wk"), time.UnixMilli(0))
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				_, err = b.Enqueue(time.UnixMilli(0), []byte(call), &[16]byte{})
				if c.Code != "" {
					wantCode(t, err, c.Code)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				b.Flush(time.UnixMilli(0))
				r := b.PollRequest(time.UnixMilli(0))
				var body struct {
					Batch []map[string]interface{} `json:"batch"`
				}
				_ = json.Unmarshal(r.Body, &body)
				if got := body.Batch[0][field]; got != *c.Expect {
					t.Fatalf("%s = %v, want %s", field, got, *c.Expect)
				}
			})
		}
	}
	if ran == 0 {
		t.Fatal("no id case ran")
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
