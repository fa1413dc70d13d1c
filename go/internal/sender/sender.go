// Package sender is the analytics packages' I/O loop around the core's
// batcher: one goroutine sends the batches the core makes due, over
// net/http, reports each outcome back, and sleeps until the core's next
// wake-up time. What a batch holds, when it is due, whether a failed
// upload is retried and when it gives up are the core's decisions; this
// loop only does the I/O (after Python's callpost Client._steps).
package sender

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"example.invalid/callpost/go/callpost"
)

// Logger is where the loop says what it did: Logf for progress (only when
// verbose), Errorf for messages that will not be delivered.
type Logger interface {
	Logf(format string, args ...interface{})
	Errorf(format string, args ...interface{})
}

// Options configure a Sender.
type Options struct {
	// Config is the core's batcher settings.
	Config callpost.BatcherConfig
	// HTTP sends the batches; nil is a client of its own. Redirects are
	// never followed whatever it says: the core treats a 3xx as a refusal.
	HTTP *http.Client
	// Gzip compresses batch bodies (Content-Encoding: gzip).
	Gzip bool
	// Logger receives the loop's logs; nil logs nothing.
	Logger Logger
	// Verbose logs every batch, not only failures.
	Verbose bool
	// ShutdownTimeout is how long Close waits for queued messages to be
	// delivered; 0 is the core's default.
	ShutdownTimeout time.Duration
	// OnDelivered is called, on the loop's goroutine, with the ids of the
	// messages of each batch the server accepted.
	OnDelivered func(messageIDs []string)
	// OnFailed is called, on the loop's goroutine, with messages that will
	// not be delivered and why (an *callpost.Error of class ErrDelivery).
	OnFailed func(err error, messages []callpost.FailedMessage)
}

// Sender queues calls into the core's batcher and sends its batches.
type Sender struct {
	b        *callpost.Batcher
	http     *http.Client
	opts     Options
	wake     chan struct{}
	results  chan result
	closing  chan struct{}
	shutOnce sync.Once
	closed   atomic.Bool
	done     chan struct{}
	ctx      context.Context
	cancel   context.CancelFunc
	sends    sync.WaitGroup
}

// result is one upload's outcome, as the HTTP client saw it.
type result struct {
	batchID    uint64
	at         time.Time
	status     int
	retryAfter string
	failure    callpost.Failure
	message    string
}

// DebugFromEnv is the spec's diagnostics switch: DEBUG=analytics (among
// comma-separated names) turns on verbose logging.
func DebugFromEnv() bool {
	for _, name := range strings.Split(os.Getenv("DEBUG"), ",") {
		if strings.TrimSpace(name) == "analytics" {
			return true
		}
	}
	return false
}

// Start makes the batcher (the core checks the settings) and starts the
// loop.
func Start(o Options) (*Sender, error) {
	b, err := callpost.NewBatcher(o.Config, time.Now())
	if err != nil {
		return nil, err
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = callpost.DefaultDuration("shutdown_timeout_ms")
	}
	client := http.Client{}
	if o.HTTP != nil {
		client = *o.HTTP
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	ctx, cancel := context.WithCancel(context.Background())
	inFlight := o.Config.MaxInFlight
	if inFlight < 1 {
		inFlight = 1
	}
	s := &Sender{
		b:       b,
		http:    &client,
		opts:    o,
		wake:    make(chan struct{}, 1),
		results: make(chan result, inFlight),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
	go s.loop()
	return s, nil
}

// Enqueue queues a call (JSON text with Segment's keys) and returns its
// messageId. Errors are the core's (*callpost.Error): the call's own, a
// message over the size limit, a full queue, or a closed client.
func (s *Sender) Enqueue(call []byte) (string, error) {
	if s.closed.Load() {
		return "", &callpost.Error{Code: callpost.CodeClosed, Message: "the client was closed"}
	}
	e, err := s.b.Enqueue(time.Now(), call, nil)
	if err != nil {
		return "", err
	}
	if e.Wake {
		s.poke()
	}
	return e.MessageID, nil
}

func (s *Sender) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Flush makes everything queued due now (and batches waiting to retry).
func (s *Sender) Flush() {
	if s.b.Flush(time.Now()) {
		s.poke()
	}
}

// Idle is true when nothing is queued, uploading or waiting to retry.
func (s *Sender) Idle() bool { return s.b.Idle() }

// Close sends what is queued, waits up to ShutdownTimeout for it to be
// delivered, reports the rest to OnFailed, and stops the loop and every
// request it started. Later calls are refused. It returns once the loop's
// goroutines are gone; calling it again returns at once.
func (s *Sender) Close() {
	s.closed.Store(true)
	s.shutOnce.Do(func() { close(s.closing) })
	<-s.done
}

func (s *Sender) loop() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	closing := s.closing
	shutting := false
	var deadline time.Time
	for {
		now := time.Now()
		if shutting {
			// Calls that raced Close are sent with the rest.
			s.b.Flush(now)
		}
		s.b.HandleTimeout(now)
		s.report()
		for r := s.b.PollRequest(now); r != nil; r = s.b.PollRequest(now) {
			s.sends.Add(1)
			go s.send(r)
		}
		if shutting && (s.b.Idle() || !now.Before(deadline)) {
			break
		}
		wait, armed := time.Duration(0), false
		if at, ok := s.b.PollTimeout(); ok {
			wait, armed = at.Sub(now), true
		}
		if shutting && (!armed || deadline.Sub(now) < wait) {
			wait, armed = deadline.Sub(now), true
		}
		var fired <-chan time.Time
		if armed {
			if wait < 0 {
				wait = 0
			}
			timer.Reset(wait)
			fired = timer.C
		}
		select {
		case <-s.wake:
		case r := <-s.results:
			s.handle(r)
		case <-fired:
			armed = false
		case <-closing:
			closing, shutting = nil, true
			deadline = now.Add(s.opts.ShutdownTimeout)
		}
		if armed && !timer.Stop() {
			<-timer.C
		}
	}
	// Whatever is still in flight is stopped; an answer that arrived first
	// still counts.
	s.cancel()
	go func() {
		s.sends.Wait()
		close(s.results)
	}()
	for r := range s.results {
		s.handle(r)
	}
	s.b.Shutdown()
	s.report()
}

func (s *Sender) handle(r result) {
	var err error
	if r.status != 0 {
		err = s.b.HandleResponse(r.at, r.batchID, r.status, r.retryAfter)
	} else {
		err = s.b.HandleFailure(r.at, r.batchID, r.failure, r.message)
	}
	if err != nil {
		s.errorf("reporting batch %d: %v", r.batchID, err)
	}
}

// report hands the core's events to the logs and the callbacks.
func (s *Sender) report() {
	for ev := s.b.PollEvent(); ev != nil; ev = s.b.PollEvent() {
		switch ev.Kind {
		case "delivered":
			s.debugf("batch %d delivered (%d messages)", ev.BatchID, len(ev.MessageIDs))
			if s.opts.OnDelivered != nil {
				s.callback(func() { s.opts.OnDelivered(ev.MessageIDs) })
			}
		case "retrying":
			s.debugf("batch %d attempt %d failed (%s); retrying", ev.BatchID, ev.Attempt, ev.Reason)
		case "failed":
			s.errorf("%d messages will not be delivered (%s): %s", len(ev.Messages), ev.Code, ev.Reason)
			if s.opts.OnFailed != nil {
				err := ev.Err()
				s.callback(func() { s.opts.OnFailed(err, ev.Messages) })
			}
		}
	}
}

// callback runs user code: a panic in it is logged, and the loop goes on
// sending.
func (s *Sender) callback(f func()) {
	defer func() {
		if p := recover(); p != nil {
			s.errorf("a callback panicked: %v", p)
		}
	}()
	f()
}

func (s *Sender) send(r *callpost.BatchRequest) {
	defer s.sends.Done()
	res := result{batchID: r.BatchID}
	ctx, cancel := context.WithDeadline(s.ctx, r.Deadline)
	defer cancel()
	body, gzipped := r.Body, false
	if s.opts.Gzip {
		if z, err := compress(r.Body); err == nil {
			body, gzipped = z, true
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, bytes.NewReader(body))
	if err == nil {
		for _, h := range r.Headers {
			req.Header.Add(h.Name, h.Value)
		}
		if gzipped {
			req.Header.Set("Content-Encoding", "gzip")
		}
		var resp *http.Response
		resp, err = s.http.Do(req)
		if err == nil {
			// Read to the end (a little at most) so the connection is
			// kept for the next batch.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
			res.status = resp.StatusCode
			res.retryAfter = resp.Header.Get("Retry-After")
		}
	}
	if err != nil {
		res.failure, res.message = classify(ctx, err)
	}
	res.at = time.Now()
	s.results <- res
}

func compress(body []byte) ([]byte, error) {
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	if _, err := z.Write(body); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// classify tells the core which kind of failure an HTTP error was: it
// retries a timeout or a broken connection, not a TLS failure.
func classify(ctx context.Context, err error) (callpost.Failure, string) {
	message := err.Error()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return callpost.FailureTimeout, message
	}
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		return callpost.FailureTimeout, message
	}
	var (
		authority x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
	)
	if errors.As(err, &authority) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &record) {
		return callpost.FailureTLS, message
	}
	return callpost.FailureConnection, message
}

func (s *Sender) debugf(format string, args ...interface{}) {
	if s.opts.Verbose && s.opts.Logger != nil {
		s.opts.Logger.Logf(format, args...)
	}
}

func (s *Sender) errorf(format string, args ...interface{}) {
	if s.opts.Logger != nil {
		s.opts.Logger.Errorf(format, args...)
	}
}

// String describes the sender without its write key.
func (s *Sender) String() string {
	return fmt.Sprintf("Sender{%s}", s.opts.Config)
}
