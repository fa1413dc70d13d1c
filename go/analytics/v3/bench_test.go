package analytics

// CPU per enqueued message, callpost against a plain-Go baseline doing the
// same work the way analytics-go v3 does it (encoding/json of the message,
// a messageId from crypto/rand, the size check, a copy into the queue), on
// the realistic fixtures of benches/fixtures/. BENCHMARKS.md gives the
// ratios; `go test -run '^$' -bench . ./analytics/v3` reproduces them.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"example.invalid/callpost/go/callpost"
)

// benchFixtures are the fixtures a message can hold: order_completed is
// over the 32,000-byte message limit, which both sides refuse.
var benchFixtures = []string{"track_423", "track_4k", "identify_200_traits", "unicode_text", "number_arrays",
	"product_list_32k"}

// fixtureMessage reads a fixture as the message a program would enqueue:
// its fields in the v3 structs, the free-form parts as maps.
func fixtureMessage(b *testing.B, name string) Message {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "benches", "fixtures", name+".json"))
	if err != nil {
		b.Fatal(err)
	}
	var f struct {
		Type         string                 `json:"type"`
		UserId       string                 `json:"userId"`
		AnonymousId  string                 `json:"anonymousId"`
		Event        string                 `json:"event"`
		Properties   map[string]interface{} `json:"properties"`
		Traits       map[string]interface{} `json:"traits"`
		Context      map[string]interface{} `json:"context"`
		Integrations map[string]interface{} `json:"integrations"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		b.Fatal(err)
	}
	var ctx *Context
	if f.Context != nil {
		ctx = &Context{Extra: f.Context}
	}
	if f.Type == "identify" {
		return Identify{UserId: f.UserId, AnonymousId: f.AnonymousId, Traits: f.Traits, Context: ctx,
			Integrations: f.Integrations}
	}
	return Track{UserId: f.UserId, AnonymousId: f.AnonymousId, Event: f.Event, Properties: f.Properties,
		Context: ctx, Integrations: f.Integrations}
}

// BenchmarkEnqueue measures each fixture two ways, one after the other so
// that a noisy machine treats them alike:
//
//   - callpost: what Client.Enqueue does for one message: write it as JSON
//     and hand it to the core (one cgo call), which checks it, completes it
//     and queues it (the queue is drained outside the timer);
//   - baseline: the same work in plain Go, as analytics-go v3 does it: a
//     messageId from crypto/rand (read 4 KB at a time here, as callpost
//     does), the timestamp, encoding/json of the message with its context,
//     the size check, and the message into the queue.
func BenchmarkEnqueue(b *testing.B) {
	limit := int(callpost.Defaults["max_message_bytes"])
	for _, name := range benchFixtures {
		msg := fixtureMessage(b, name)
		b.Run(name+"/callpost", func(b *testing.B) {
			cfg := callpost.DefaultBatcherConfig("wk")
			cfg.FlushAt, cfg.MaxQueue = 1000, 1000
			batcher, err := callpost.NewBatcher(cfg, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			defer batcher.Close()
			queued := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w, err := encode(msg, nil)
				if err != nil {
					b.Fatal(err)
				}
				call, err := w.Bytes()
				if err == nil {
					_, err = batcher.Enqueue(time.Now(), call, nil)
				}
				w.Release()
				if err != nil {
					b.Fatal(err)
				}
				if queued++; queued == cfg.MaxQueue {
					b.StopTimer()
					drain(b, batcher)
					queued = 0
					b.StartTimer()
				}
			}
		})
		base := baselineOf(msg)
		b.Run(name+"/baseline", func(b *testing.B) {
			var random [4096]byte
			pos := len(random)
			queue := make([][]byte, 0, 1000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if pos == len(random) {
					_, _ = rand.Read(random[:])
					pos = 0
				}
				m := base
				m.MessageId = hex.EncodeToString(random[pos : pos+16])
				pos += 16
				m.Timestamp = time.Now()
				text, err := json.Marshal(m)
				if err != nil || len(text) > limit {
					b.Fatalf("%v %d", err, len(text))
				}
				queue = append(queue, text)
				if len(queue) == cap(queue) {
					queue = queue[:0]
				}
			}
		})
	}
}

func drain(b *testing.B, batcher *callpost.Batcher) {
	now := time.Now()
	batcher.Flush(now)
	for r := batcher.PollRequest(now); r != nil; r = batcher.PollRequest(now) {
		if err := batcher.HandleResponse(now, r.BatchID, 200, ""); err != nil {
			b.Fatal(err)
		}
	}
	for batcher.PollEvent() != nil {
	}
}

// baselineMessage is a v3 message as analytics-go marshals it.
type baselineMessage struct {
	Type         string                 `json:"type,omitempty"`
	MessageId    string                 `json:"messageId,omitempty"`
	AnonymousId  string                 `json:"anonymousId,omitempty"`
	UserId       string                 `json:"userId,omitempty"`
	Event        string                 `json:"event,omitempty"`
	Timestamp    time.Time              `json:"timestamp"`
	Context      map[string]interface{} `json:"context,omitempty"`
	Properties   map[string]interface{} `json:"properties,omitempty"`
	Traits       map[string]interface{} `json:"traits,omitempty"`
	Integrations map[string]interface{} `json:"integrations,omitempty"`
}

func baselineOf(msg Message) baselineMessage {
	var base baselineMessage
	switch m := msg.(type) {
	case Track:
		base = baselineMessage{Type: "track", UserId: m.UserId, AnonymousId: m.AnonymousId, Event: m.Event,
			Properties: m.Properties, Integrations: m.Integrations}
		if m.Context != nil {
			base.Context = m.Context.Extra
		}
	case Identify:
		base = baselineMessage{Type: "identify", UserId: m.UserId, Traits: m.Traits, Integrations: m.Integrations}
		if m.Context != nil {
			base.Context = m.Context.Extra
		}
	}
	return base
}
