// Package analytics is callpost's drop-in for analytics-go v2
// (github.com/segmentio/analytics-go before its v3), the API
// client-library.md describes: analytics.New(writeKey), the client's
// exported settings (Endpoint, Interval, Size, Logger, Verbose, Client,
// and the spec's FlushAt and FlushAfter), and Identify, Track, Page, Group
// and Alias taking pointers to the message structs. A program moves over
// by changing its import path to example.invalid/callpost/go/analytics/v2.
//
// Underneath, every rule is callpost's core, the same as in callpost's
// Python and JavaScript clients and in the v3 drop-in: the spec's
// validation with stable error codes (errors.As to *callpost.Error), the
// 32 KB message and 500 KB batch limits applied before sending,
// JSON.stringify-exact bodies, batching, retries and backoff. What differs
// from analytics-go v2, and why, is in docs/senders.md.
package analytics

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	"example.invalid/callpost/go/callpost"
	"example.invalid/callpost/go/internal/calljson"
	"example.invalid/callpost/go/internal/sender"
)

// Version is callpost's version, the library version messages carry.
var Version = callpost.Version

// Endpoint is the default Endpoint of a new client: the core's (Segment's
// Tracking API).
var Endpoint = callpost.DefaultEndpoint

// Message holds the fields every message has. Type and MessageId are set
// by the client when the call is queued (MessageId only when empty).
type Message struct {
	Type      string `json:"type,omitempty"`
	MessageId string `json:"messageId,omitempty"`
	// Timestamp (ISO 8601 with a zone) imports historical data; empty
	// means now.
	Timestamp string `json:"timestamp,omitempty"`
	// SentAt is not sent: the core stamps each batch with its own sentAt.
	SentAt string `json:"sentAt,omitempty"`
}

// Identify records who the user is, with traits.
type Identify struct {
	Context      map[string]interface{} `json:"context,omitempty"`
	Integrations map[string]interface{} `json:"integrations,omitempty"`
	Traits       map[string]interface{} `json:"traits,omitempty"`
	AnonymousId  string                 `json:"anonymousId,omitempty"`
	UserId       string                 `json:"userId,omitempty"`
	Message
}

// Group associates the user with a group.
type Group struct {
	Context      map[string]interface{} `json:"context,omitempty"`
	Integrations map[string]interface{} `json:"integrations,omitempty"`
	Traits       map[string]interface{} `json:"traits,omitempty"`
	AnonymousId  string                 `json:"anonymousId,omitempty"`
	UserId       string                 `json:"userId,omitempty"`
	GroupId      string                 `json:"groupId"`
	Message
}

// Track records an event the user performed.
type Track struct {
	Context      map[string]interface{} `json:"context,omitempty"`
	Integrations map[string]interface{} `json:"integrations,omitempty"`
	Properties   map[string]interface{} `json:"properties,omitempty"`
	AnonymousId  string                 `json:"anonymousId,omitempty"`
	UserId       string                 `json:"userId,omitempty"`
	Event        string                 `json:"event"`
	Message
}

// Page records a web page view. Its Traits (url, title, referrer, path,
// and any custom keys) are sent as the call's properties, as
// analytics-go v2 sent them.
type Page struct {
	Context      map[string]interface{} `json:"context,omitempty"`
	Integrations map[string]interface{} `json:"integrations,omitempty"`
	Traits       map[string]interface{} `json:"properties,omitempty"`
	AnonymousId  string                 `json:"anonymousId,omitempty"`
	UserId       string                 `json:"userId,omitempty"`
	Category     string                 `json:"category,omitempty"`
	Name         string                 `json:"name,omitempty"`
	Message
}

// Alias merges PreviousId into UserId. Context and Integrations are the
// spec's (integrations are available on every call), which v2 lacked.
type Alias struct {
	Context      map[string]interface{} `json:"context,omitempty"`
	Integrations map[string]interface{} `json:"integrations,omitempty"`
	PreviousId   string                 `json:"previousId"`
	UserId       string                 `json:"userId"`
	Message
}

// Client batches messages and sends them when FlushAt (or Size) are
// queued or FlushAfter (or Interval) has passed since the last flush. Set
// its fields after New and before the first call; they are read then.
// Safe for concurrent use.
type Client struct {
	// Endpoint is the base URL batches are sent to ({Endpoint}/v1/batch).
	Endpoint string
	// Interval is analytics-go v2's name for FlushAfter.
	Interval time.Duration
	// Size is analytics-go v2's name for FlushAt.
	Size int
	// Logger receives the client's logs.
	Logger *log.Logger
	// Verbose logs every batch; DEBUG=analytics in the environment does
	// too (the spec's diagnostics switch).
	Verbose bool
	// Client sends the requests (a copy; redirects are never followed).
	Client http.Client
	// FlushAt is how many messages are queued before a flush; 1 sends
	// every message at once (client-library.md). Set it or Size, not two
	// different values.
	FlushAt int
	// FlushAfter is the time since the last flush after which a flush
	// happens (client-library.md). Set it or Interval, not two different
	// values.
	FlushAfter time.Duration

	key      string
	once     sync.Once
	sender   *sender.Sender
	startErr error
	closing  sync.Once
}

// String shows the client's settings without its write key.
func (c *Client) String() string {
	return fmt.Sprintf("analytics.Client{Endpoint: %q, FlushAt: %d, FlushAfter: %s, Size: %d, Interval: %s}",
		c.Endpoint, c.FlushAt, c.FlushAfter, c.Size, c.Interval)
}

// GoString is String: %#v must not print the write key either.
func (c *Client) GoString() string { return c.String() }

// New makes a client for the source whose write key is key, with the
// core's defaults (20 messages or 5 seconds). Nothing is sent, and no
// goroutine started, until the first call.
func New(key string) *Client {
	flushAt := int(callpost.Defaults["flush_at"])
	flushAfter := callpost.DefaultDuration("flush_after_ms")
	return &Client{
		Endpoint:   Endpoint,
		Interval:   flushAfter,
		Size:       flushAt,
		FlushAt:    flushAt,
		FlushAfter: flushAfter,
		Logger:     log.New(os.Stderr, "segment ", log.LstdFlags),
		Client:     *http.DefaultClient,
		key:        key,
	}
}

// printfLogger adapts a *log.Logger to the sender's logger.
type printfLogger struct{ l *log.Logger }

func (p printfLogger) Logf(format string, args ...interface{}) { p.l.Printf(format, args...) }
func (p printfLogger) Errorf(format string, args ...interface{}) {
	p.l.Printf("error: "+format, args...)
}

// pick is a setting given under two names (the spec's and analytics-go
// v2's): the one changed from New's default, or an error when both were
// changed to different values.
func pick[T comparable](spec, v2 T, def T, specName, v2Name string) (T, error) {
	switch {
	case spec == def:
		return v2, nil
	case v2 == def || v2 == spec:
		return spec, nil
	}
	return spec, &callpost.Error{Code: callpost.CodeInvalidConfig,
		Message: specName + " and " + v2Name + " are two names for one setting, set to different values"}
}

func (c *Client) start() {
	bc := callpost.DefaultBatcherConfig(c.key)
	var err error
	if bc.FlushAt, err = pick(c.FlushAt, c.Size, bc.FlushAt, "FlushAt", "Size"); err != nil {
		c.startErr = err
		return
	}
	if bc.FlushAfter, err = pick(c.FlushAfter, c.Interval, bc.FlushAfter, "FlushAfter", "Interval"); err != nil {
		c.startErr = err
		return
	}
	bc.Endpoint = c.Endpoint
	httpClient := c.Client
	opts := sender.Options{
		Config:  bc,
		HTTP:    &httpClient,
		Verbose: c.Verbose || sender.DebugFromEnv(),
	}
	if c.Logger != nil {
		opts.Logger = printfLogger{c.Logger}
	}
	c.sender, c.startErr = sender.Start(opts)
}

// queue sends the call to the core and, as v2 did, writes the message's
// type and (when it had none) its messageId back into it.
func (c *Client) queue(kind string, m *Message, w *calljson.Writer) error {
	defer w.Release()
	c.once.Do(c.start)
	if c.startErr != nil {
		return c.startErr
	}
	call, err := w.Bytes()
	if err != nil {
		return err
	}
	id, err := c.sender.Enqueue(call)
	if err != nil {
		return err
	}
	m.Type = kind
	if m.MessageId == "" {
		m.MessageId = id
	}
	return nil
}

func start(kind string, m *Message, anonymousID, userID string) *calljson.Writer {
	w := calljson.Start(kind)
	w.String("messageId", m.MessageId)
	w.String("anonymousId", anonymousID)
	w.String("userId", userID)
	return w
}

// stamp writes the message's timestamp, which the core reads as ISO 8601
// with a zone.
func stamp(w *calljson.Writer, m *Message) {
	w.String("timestamp", m.Timestamp)
}

var errNil = &callpost.Error{Code: callpost.CodeInvalidArgument, Message: "the message is nil"}

// Identify queues an identify call. Errors are the core's (*callpost.Error):
// the spec's rules (callpost.CodeMissingIdentity, ...), the size limit, a
// full queue, a closed client.
func (c *Client) Identify(msg *Identify) error {
	if msg == nil {
		return errNil
	}
	w := start("identify", &msg.Message, msg.AnonymousId, msg.UserId)
	stamp(w, &msg.Message)
	w.Value("context", msg.Context)
	w.Value("traits", msg.Traits)
	w.Value("integrations", msg.Integrations)
	return c.queue("identify", &msg.Message, w)
}

// Track queues a track call.
func (c *Client) Track(msg *Track) error {
	if msg == nil {
		return errNil
	}
	w := start("track", &msg.Message, msg.AnonymousId, msg.UserId)
	w.String("event", msg.Event)
	stamp(w, &msg.Message)
	w.Value("context", msg.Context)
	w.Value("properties", msg.Properties)
	w.Value("integrations", msg.Integrations)
	return c.queue("track", &msg.Message, w)
}

// Page queues a page call.
func (c *Client) Page(msg *Page) error {
	if msg == nil {
		return errNil
	}
	w := start("page", &msg.Message, msg.AnonymousId, msg.UserId)
	w.String("name", msg.Name)
	w.String("category", msg.Category)
	stamp(w, &msg.Message)
	w.Value("context", msg.Context)
	w.Value("properties", msg.Traits)
	w.Value("integrations", msg.Integrations)
	return c.queue("page", &msg.Message, w)
}

// Group queues a group call.
func (c *Client) Group(msg *Group) error {
	if msg == nil {
		return errNil
	}
	w := start("group", &msg.Message, msg.AnonymousId, msg.UserId)
	w.String("groupId", msg.GroupId)
	stamp(w, &msg.Message)
	w.Value("context", msg.Context)
	w.Value("traits", msg.Traits)
	w.Value("integrations", msg.Integrations)
	return c.queue("group", &msg.Message, w)
}

// Alias queues an alias call.
func (c *Client) Alias(msg *Alias) error {
	if msg == nil {
		return errNil
	}
	w := start("alias", &msg.Message, "", msg.UserId)
	w.String("previousId", msg.PreviousId)
	stamp(w, &msg.Message)
	w.Value("context", msg.Context)
	w.Value("integrations", msg.Integrations)
	return c.queue("alias", &msg.Message, w)
}

// Close sends what is queued, waits for it (up to the core's shutdown
// timeout, 10 s), logs what is left as failed, and stops the client's
// goroutines. Later calls are refused (callpost.CodeClosed); a second
// Close does nothing.
func (c *Client) Close() error {
	c.closing.Do(func() {
		// A client never used has nothing to send; later calls are
		// refused all the same.
		c.once.Do(func() { c.startErr = errClosed })
		if c.sender != nil {
			c.sender.Close()
		}
	})
	return nil
}

var errClosed = &callpost.Error{Code: callpost.CodeClosed, Message: "the client was closed"}

// ErrClosed matches (errors.Is) the error of a call made after Close.
var ErrClosed = callpost.ErrClosed
