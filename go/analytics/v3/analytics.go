package analytics

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"example.invalid/callpost/go/callpost"
	"example.invalid/callpost/go/internal/sender"
)

// Version is callpost's version, the library version messages carry.
var Version = callpost.Version

// DefaultEndpoint is where a client sends when Config.Endpoint is empty:
// the core's default (Segment's Tracking API).
var DefaultEndpoint = callpost.DefaultEndpoint

// DefaultInterval is the flush interval when Config.Interval is 0: the
// core's (client-library.md's 5 seconds).
var DefaultInterval = callpost.DefaultDuration("flush_after_ms")

// DefaultBatchSize is the batch size when Config.BatchSize is 0: the
// core's (client-library.md's 20 messages; analytics-go's was 250).
var DefaultBatchSize = int(callpost.Defaults["flush_at"])

// Config holds a client's settings; each field's zero value means the
// core's default.
type Config struct {
	// Endpoint is the base URL batches are sent to ({Endpoint}/v1/batch):
	// a callpost relay, Segment, or any /v1/batch API.
	Endpoint string

	// Interval is how long after the last flush queued messages are sent.
	Interval time.Duration

	// Transport sends the requests (http.DefaultTransport when nil).
	Transport http.RoundTripper

	// Logger receives the client's logs (a standard logger to os.Stderr
	// when nil).
	Logger Logger

	// Callback is told about each message's delivery or failure.
	Callback Callback

	// BatchSize is how many messages are queued before a flush. Each
	// batch also stays within the core's 500 KB request limit.
	BatchSize int

	// Verbose logs every batch; DEBUG=analytics in the environment does
	// too (the spec's diagnostics switch).
	Verbose bool

	// DefaultContext is context set on every message; a message's own
	// context keys win over it.
	DefaultContext *Context

	// RetryAfter is accepted for compatibility and not used: retries and
	// their backoff are the core's (1 s doubling to 60 s with full jitter,
	// and the server's Retry-After), the same in every callpost client. A
	// client made with it set logs that once.
	RetryAfter func(int) time.Duration

	// Gzip compresses batch bodies (Content-Encoding: gzip); callpost's
	// relay and Segment's Tracking API take it. A callpost addition.
	Gzip bool
}

// Client sends messages: Enqueue queues one, Close sends what is queued
// and stops. Safe for concurrent use.
type Client interface {
	io.Closer

	// Enqueue queues a message to be sent in a batch. It returns an error,
	// and queues nothing, when the message breaks the spec's rules (a
	// FieldError, or a *callpost.Error), is over the size limit, the queue
	// is full, or the client was closed.
	Enqueue(Message) error
}

type client struct {
	sender   *sender.Sender
	defaults *Context
	callback Callback
	closed   sync.Once
	// pending holds each message until its delivery or failure, for the
	// Callback (only when there is one), by messageId.
	mu      sync.Mutex
	pending map[string][]Message
}

// New makes a client with the default configuration. An empty write key
// gives a client whose every call returns the core's refusal
// (callpost.CodeEmptyWriteKey), since New cannot return an error.
func New(writeKey string) Client {
	c, err := NewWithConfig(writeKey, Config{})
	if err != nil {
		return refusing{err}
	}
	return c
}

// refusing is a client that could not be made.
type refusing struct{ err error }

func (r refusing) Enqueue(Message) error { return r.err }
func (r refusing) Close() error          { return nil }

// NewWithConfig makes a client. The core checks the settings: a negative
// Interval or BatchSize, or an Endpoint that is not an absolute http(s)
// URL, is a ConfigError; an empty write key is the core's
// callpost.CodeEmptyWriteKey.
func NewWithConfig(writeKey string, config Config) (Client, error) {
	bc := callpost.DefaultBatcherConfig(writeKey)
	if config.Endpoint != "" {
		bc.Endpoint = config.Endpoint
	}
	if config.Interval != 0 {
		bc.FlushAfter = config.Interval
	}
	if config.BatchSize != 0 {
		bc.FlushAt = config.BatchSize
	}
	logger := config.Logger
	if logger == nil {
		logger = newDefaultLogger()
	}
	c := &client{defaults: config.DefaultContext, callback: config.Callback}
	opts := sender.Options{
		Config:  bc,
		HTTP:    &http.Client{Transport: config.Transport},
		Gzip:    config.Gzip,
		Logger:  logger,
		Verbose: config.Verbose || sender.DebugFromEnv(),
	}
	if c.callback != nil {
		c.pending = map[string][]Message{}
		opts.OnDelivered = c.delivered
		opts.OnFailed = c.failed
	}
	s, err := sender.Start(opts)
	if err != nil {
		return nil, configError(err, config)
	}
	c.sender = s
	if config.RetryAfter != nil {
		logger.Logf("Config.RetryAfter is not used: retries and their backoff are callpost's core's")
	}
	return c, nil
}

// configError presents the core's refusal of a setting as analytics-go's
// ConfigError, naming the Config field it came from.
func configError(err error, config Config) error {
	var e *callpost.Error
	if !errors.As(err, &e) {
		return err
	}
	ce := ConfigError{Reason: e.Message, err: err}
	switch {
	case e.Code == callpost.CodeInvalidEndpoint:
		// The error is printed with its value: never a password in it.
		ce.Field, ce.Value = "Endpoint", redacted(config.Endpoint)
	// The core names the setting it refused first in its message.
	case e.Code == callpost.CodeInvalidConfig && strings.HasPrefix(e.Message, "flush_at "):
		ce.Field, ce.Value = "BatchSize", config.BatchSize
	case e.Code == callpost.CodeInvalidConfig && strings.HasPrefix(e.Message, "flush_after_ms "):
		ce.Field, ce.Value = "Interval", config.Interval
	default:
		return err
	}
	return ce
}

// redacted is an endpoint with any password in it masked, as the core
// shows it.
func redacted(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.User == nil {
		return endpoint
	}
	return u.Redacted()
}

// Enqueue queues msg (a message or a pointer to one).
func (c *client) Enqueue(msg Message) error {
	m, ok := deref(msg)
	if !ok {
		if m == nil {
			return &callpost.Error{Code: callpost.CodeInvalidArgument, Message: "a nil message cannot be enqueued"}
		}
		return &callpost.Error{Code: callpost.CodeInvalidArgument,
			Message: "only analytics.Track, Identify, Page, Screen, Group and Alias can be enqueued"}
	}
	w, err := encode(m, c.defaults)
	if err != nil {
		return err
	}
	defer w.Release()
	call, err := w.Bytes()
	if err != nil {
		return err
	}
	if c.callback == nil {
		_, err = c.sender.Enqueue(call)
		return fieldError(m, err)
	}
	// Under the lock, so that the delivery of the message's batch cannot
	// be reported before it is pending.
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	id, err := c.sender.Enqueue(call)
	if err != nil {
		return fieldError(m, err)
	}
	c.pending[id] = append(c.pending[id], stamped(m, id, now))
	return nil
}

func (c *client) take(id string) (Message, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.pending[id]
	if len(list) == 0 {
		return nil, false
	}
	if len(list) == 1 {
		delete(c.pending, id)
	} else {
		c.pending[id] = list[1:]
	}
	return list[0], true
}

func (c *client) delivered(ids []string) {
	for _, id := range ids {
		if m, ok := c.take(id); ok {
			c.callback.Success(m)
		}
	}
}

func (c *client) failed(err error, messages []callpost.FailedMessage) {
	for _, fm := range messages {
		if m, ok := c.take(fm.MessageID); ok {
			c.callback.Failure(m, err)
		}
	}
}

// Close sends what is queued, waits for it (up to the core's shutdown
// timeout, 10 s), reports what is left to the Callback as failed, and
// stops the client's goroutines. A second Close returns ErrClosed.
func (c *client) Close() error {
	err := ErrClosed
	c.closed.Do(func() {
		c.sender.Close()
		err = nil
	})
	return err
}
