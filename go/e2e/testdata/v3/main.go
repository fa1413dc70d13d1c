// A program written against analytics-go v3's documented usage (its README
// and Segment's "Analytics for Go" page): every call kind, batching
// settings, a logger, integrations and context. It imports analytics-go;
// go/e2e builds it against callpost with only that import path changed.
package main

import (
	"log"
	"os"
	"time"

	"github.com/segmentio/analytics-go/v3"
)

func main() {
	client, err := analytics.NewWithConfig(os.Getenv("SEGMENT_WRITE_KEY"), analytics.Config{
		Endpoint:  os.Getenv("SEGMENT_ENDPOINT"),
		Interval:  30 * time.Second,
		BatchSize: 100,
		Verbose:   true,
		Logger:    analytics.StdLogger(log.New(os.Stderr, "segment ", log.LstdFlags)),
	})
	if err != nil {
		log.Fatal(err)
	}

	enqueue := func(msg analytics.Message) {
		if err := client.Enqueue(msg); err != nil {
			log.Fatal(err)
		}
	}
	enqueue(analytics.Identify{
		UserId: "019mr8mf4r",
		Traits: analytics.NewTraits().
			SetName("Michael Bolton").
			SetEmail("mbolton@example.com").
			Set("plan", "Enterprise").
			Set("friends", 42),
	})
	enqueue(analytics.Track{
		UserId:     "f4ca124298",
		Event:      "Signed Up",
		Properties: analytics.NewProperties().Set("plan", "Enterprise"),
	})
	enqueue(analytics.Page{
		UserId:     "f4ca124298",
		Name:       "Go Library",
		Properties: analytics.NewProperties().SetURL("https://segment.com/libraries/go/"),
	})
	enqueue(analytics.Screen{
		UserId:     "f4ca124298",
		Name:       "Checkout",
		Properties: analytics.NewProperties().Set("step", 2),
	})
	enqueue(analytics.Group{
		UserId:  "019mr8mf4r",
		GroupId: "56",
		Traits: map[string]interface{}{
			"name":        "Initech",
			"description": "Accounting Software",
		},
	})
	enqueue(analytics.Alias{
		PreviousId: "anonymousUser",
		UserId:     "019mr8mf4r",
	})
	enqueue(analytics.Track{
		Event:        "Membership Upgraded",
		UserId:       "019mr8mf4r",
		Integrations: analytics.NewIntegrations().DisableAll().Enable("Webhooks"),
		Context: &analytics.Context{
			Extra: map[string]interface{}{"active": false},
		},
	})

	// Flushes any queued messages and closes the client.
	client.Close()
}
