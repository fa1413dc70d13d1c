// A program written against analytics-go v2's documented usage (Segment's
// "Analytics for Go v2" page and the library's example): every call kind
// and the client's batching settings. It imports analytics-go; go/e2e
// builds it against callpost with only that import path changed.
package main

import (
	"os"
	"time"

	"github.com/segmentio/analytics-go"
)

func main() {
	client := analytics.New(os.Getenv("SEGMENT_WRITE_KEY"))
	client.Endpoint = os.Getenv("SEGMENT_ENDPOINT")
	client.Interval = 30 * time.Second
	client.Size = 100
	client.Verbose = true

	check := func(err error) {
		if err != nil {
			println("error:", err.Error())
			os.Exit(1)
		}
	}
	check(client.Identify(&analytics.Identify{
		UserId: "019mr8mf4r",
		Traits: map[string]interface{}{
			"name":    "Michael Bolton",
			"email":   "mbolton@example.com",
			"plan":    "Enterprise",
			"friends": 42,
		},
	}))
	check(client.Track(&analytics.Track{
		Event:  "Signed Up",
		UserId: "f4ca124298",
		Properties: map[string]interface{}{
			"plan": "Enterprise",
		},
	}))
	check(client.Page(&analytics.Page{
		UserId:   "f4ca124298",
		Name:     "Go Library",
		Category: "Docs",
		Traits: map[string]interface{}{
			"url": "https://segment.com/libraries/go/",
		},
	}))
	check(client.Group(&analytics.Group{
		UserId:  "019mr8mf4r",
		GroupId: "56",
		Traits: map[string]interface{}{
			"name":        "Initech",
			"description": "Accounting Software",
		},
	}))
	check(client.Alias(&analytics.Alias{
		PreviousId: "anonymousUser",
		UserId:     "019mr8mf4r",
	}))

	client.Close()
}
