package analytics

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"strings"
	"testing"

	"example.invalid/callpost/go/callpost"
	"example.invalid/callpost/go/internal/testapi"
)

func client(url string) *Client {
	c := New("wk")
	c.Endpoint = url
	c.Logger = log.New(&bytes.Buffer{}, "", 0)
	return c
}

func TestEveryKindReachesTheTrackingAPI(t *testing.T) {
	api := testapi.New(t, "wk")
	c := client(api.URL)
	c.FlushAt = 2
	track := &Track{UserId: "u1", Event: "Signed Up", Properties: map[string]interface{}{"plan": "Enterprise"}}
	page := &Page{UserId: "u1", Name: "Docs", Category: "Guides", Traits: map[string]interface{}{"url": "https://x.example/docs"}}
	imported := &Identify{UserId: "u1", Traits: map[string]interface{}{"friends": 42}}
	imported.Timestamp = "2015-02-03T10:00:00+01:00"
	calls := []error{
		c.Identify(imported),
		c.Track(track),
		c.Page(page),
		c.Group(&Group{UserId: "u1", GroupId: "56", Traits: map[string]interface{}{"name": "Initech"}}),
		c.Alias(&Alias{PreviousId: "anonymousUser", UserId: "u1"}),
	}
	for i, err := range calls {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	// v2 writes the type and the messageId it made into the message.
	if track.Type != "track" || len(track.MessageId) != 36 {
		t.Fatalf("%+v", track.Message)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	got := api.Messages()
	if len(got) != 5 {
		t.Fatalf("%d messages", len(got))
	}
	if got[0]["timestamp"] != "2015-02-03T09:00:00.000Z" {
		t.Fatalf("historical import %v", got[0]["timestamp"])
	}
	if got[1]["messageId"] != track.MessageId {
		t.Fatalf("%v", got[1])
	}
	props := got[2]["properties"].(map[string]interface{})
	if got[2]["category"] != "Guides" || props["url"] != "https://x.example/docs" {
		t.Fatalf("a page's Traits are its properties: %v", got[2])
	}
	if len(api.Batches()) != 3 {
		t.Fatalf("FlushAt 2: %d batches", len(api.Batches()))
	}
}

func TestErrorsAreTheCores(t *testing.T) {
	c := client("http://127.0.0.1:9")
	defer c.Close()
	cases := []struct {
		err  error
		code callpost.Code
	}{
		{c.Track(&Track{UserId: "u"}), callpost.CodeMissingEvent},
		{c.Identify(&Identify{}), callpost.CodeMissingIdentity},
		{c.Group(&Group{UserId: "u"}), callpost.CodeMissingGroupID},
		{c.Alias(&Alias{UserId: "u"}), callpost.CodeMissingPreviousID},
		{c.Page(nil), callpost.CodeInvalidArgument},
		// analytics-go v2 wrote %z offsets (+0000), which are not ISO 8601
		// as a JavaScript receiver reads it.
		{c.Track(&Track{UserId: "u", Event: "e", Message: Message{Timestamp: "2015-02-03T10:00:00+0000"}}),
			callpost.CodeInvalidTimestamp},
	}
	for i, tc := range cases {
		var e *callpost.Error
		if !errors.As(tc.err, &e) || e.Code != tc.code {
			t.Fatalf("case %d: want %s, got %v", i, tc.code, tc.err)
		}
	}
}

func TestTwoNamesForOneSettingMustAgree(t *testing.T) {
	c := client("http://127.0.0.1:9")
	c.Size = 10
	c.FlushAt = 30
	err := c.Track(&Track{UserId: "u", Event: "e"})
	var e *callpost.Error
	if !errors.As(err, &e) || e.Code != callpost.CodeInvalidConfig || !errors.Is(err, callpost.ErrConfig) {
		t.Fatalf("%v", err)
	}
	_ = c.Close()

	api := testapi.New(t, "wk")
	c = client(api.URL)
	c.Size = 1 // analytics-go v2's name alone: every message is sent at once
	if err := c.Track(&Track{UserId: "u", Event: "e"}); err != nil {
		t.Fatal(err)
	}
	api.WaitMessages(t, 1)
	_ = c.Close()
}

func TestTheWriteKeyIsNeverPrinted(t *testing.T) {
	c := New("wk-secret-key")
	defer c.Close()
	if s := fmt.Sprintf("%v %+v %#v %s", c, c, c, c); strings.Contains(s, "wk-secret-key") {
		t.Fatalf("printed: %s", s)
	}
}

func TestClose(t *testing.T) {
	c := client("http://127.0.0.1:9")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	err := c.Track(&Track{UserId: "u", Event: "e"})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
