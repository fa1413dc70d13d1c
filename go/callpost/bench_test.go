package callpost

// CPU per verified webhook, callpost's Receiver against a plain-Go baseline
// doing the same work (crypto/hmac over the body, a constant-time compare,
// encoding/json to read it), on the fixtures of benches/fixtures/; and the
// cost of one cgo crossing. BENCHMARKS.md gives the ratios;
// `go test -run '^$' -bench . ./callpost` reproduces them.

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var verifyFixtures = []string{"track_423", "track_4k", "identify_200_traits", "unicode_text", "number_arrays",
	"product_list_32k", "order_completed"}

func fixture(b *testing.B, name string) ([]byte, []Header) {
	body, err := os.ReadFile(filepath.Join("..", "..", "benches", "fixtures", name+".json"))
	if err != nil {
		b.Fatal(err)
	}
	sig, err := Sign([]byte(secret), body)
	if err != nil {
		b.Fatal(err)
	}
	return body, []Header{{"Content-Type", "application/json"}, {"X-Signature", sig}, {"User-Agent", "callpost/1.0"}}
}

// BenchmarkVerify measures each fixture three ways, one after the other so
// that a noisy machine treats them alike:
//
//   - callpost: Receiver.ReceiveHeaders, the core picking the header,
//     checking the HMAC in constant time and reading the body as JSON (as a
//     JavaScript receiver reads it), the calls handed back as JSON text;
//   - callpost+decode: that, then encoding/json of the call into a map, as
//     a handler would;
//   - baseline: the plain-Go receiver: find X-Signature, HMAC-SHA1 the body
//     (crypto/hmac), compare in constant time, encoding/json into a map.
func BenchmarkVerify(b *testing.B) {
	r, err := NewReceiver(ReceiverOptions{Secrets: []string{secret}, Seen: KeepDuplicates})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range verifyFixtures {
		body, headers := fixture(b, name)
		now := time.Now()
		b.Run(name+"/callpost", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := r.ReceiveHeaders(body, headers, now); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/callpost+decode", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				hook, err := r.ReceiveHeaders(body, headers, now)
				if err != nil {
					b.Fatal(err)
				}
				var call map[string]interface{}
				if err := json.Unmarshal(hook.Calls[0], &call); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/baseline", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			key := []byte(secret)
			for i := 0; i < b.N; i++ {
				var signature string
				for _, h := range headers {
					if h.Name == "X-Signature" {
						signature = h.Value
					}
				}
				given, err := hex.DecodeString(signature)
				if err != nil {
					b.Fatal(err)
				}
				mac := hmac.New(sha1.New, key)
				mac.Write(body)
				if !hmac.Equal(mac.Sum(nil), given) {
					b.Fatal("mismatch")
				}
				var call map[string]interface{}
				if err := json.Unmarshal(body, &call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCgoCrossing is one call into the library that does nothing
// (it returns a static string's length): the price of a cgo crossing.
func BenchmarkCgoCrossing(b *testing.B) {
	n := 0
	for i := 0; i < b.N; i++ {
		n += crossing()
	}
	if n == 0 {
		b.Fatal("no version")
	}
}
