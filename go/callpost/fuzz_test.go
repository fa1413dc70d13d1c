package callpost

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzVerify: whatever the body and the signature header, Receive either
// refuses with one of the core's codes or accepts a body whose whole bytes
// the header's signature covers; it never panics and never fails
// internally. Seeded from testdata/receive.json.
func FuzzVerify(f *testing.F) {
	var cases []receiveCase
	loadVectors(f, "receive.json", &cases)
	for _, c := range cases {
		for _, h := range c.Headers {
			f.Add([]byte(c.Body), h[0], h[1])
		}
	}
	body := []byte(`{"type":"track","userId":"u","event":"e"}`)
	sig, _ := Sign([]byte(secret), body)
	f.Add(body, "X-Signature", sig)
	f.Add([]byte(`[`+string(body)+`]`), "x-segment-signature", sig)
	r, err := NewReceiver(ReceiverOptions{Secrets: []string{secret}, Seen: KeepDuplicates})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, name, value string) {
		hook, err := r.ReceiveHeaders(body, []Header{{Name: name, Value: value}}, time.UnixMilli(0))
		if err != nil {
			var e *Error
			if errors.Is(err, ErrInternal) || !errors.As(err, &e) || e.Class() == nil {
				t.Fatalf("not one of the core's refusals: %v", err)
			}
			return
		}
		want, _ := Sign([]byte(secret), body)
		if !strings.EqualFold(value, want) || hook.Coverage != "body" {
			t.Fatalf("accepted %q under %s: %q", body, name, value)
		}
		if !strings.EqualFold(name, "X-Signature") && !strings.EqualFold(name, "X-Segment-Signature") {
			t.Fatalf("accepted a signature in %q", name)
		}
	})
}
