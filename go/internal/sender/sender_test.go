package sender

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"example.invalid/callpost/go/callpost"
	"example.invalid/callpost/go/internal/testapi"
)

type failures struct {
	mu   sync.Mutex
	errs []error
	n    int
}

func (f *failures) record(err error, messages []callpost.FailedMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, err)
	f.n += len(messages)
}

func (f *failures) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func code(err error) callpost.Code {
	var e *callpost.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// A TLS failure is the core's refusal: reported at once, not retried.
func TestATLSFailureIsNotRetried(t *testing.T) {
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	server.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake the client refuses
	server.StartTLS()
	defer server.Close()
	f := &failures{}
	cfg := callpost.DefaultBatcherConfig("wk")
	cfg.Endpoint, cfg.FlushAt = server.URL, 1
	s, err := Start(Options{Config: cfg, OnFailed: f.record})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue([]byte(`{"type":"track","userId":"u","event":"e"}`)); err != nil {
		t.Fatal(err)
	}
	testapi.Eventually(t, "the failure is reported", func() bool { return f.count() == 1 })
	s.Close()
	if code(f.errs[0]) != callpost.CodeRejected {
		t.Fatalf("%v", f.errs[0])
	}
}

// Close waits for delivery only so long; what is left is reported as
// failed (shutdown), and nothing of the client outlives Close.
func TestCloseGivesUpAfterTheShutdownTimeout(t *testing.T) {
	before := runtime.NumGoroutine()
	release := make(chan struct{})
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-release
	}))
	f := &failures{}
	cfg := callpost.DefaultBatcherConfig("wk")
	cfg.Endpoint = server.URL
	s, err := Start(Options{Config: cfg, OnFailed: f.record, ShutdownTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := s.Enqueue([]byte(`{"type":"track","userId":"u","event":"e"}`)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if f.count() != 3 || code(f.errs[len(f.errs)-1]) != callpost.CodeShutdown {
		t.Fatalf("%d failed: %v", f.count(), f.errs)
	}
	if _, err := s.Enqueue([]byte(`{"type":"track","userId":"u","event":"e"}`)); code(err) != callpost.CodeClosed {
		t.Fatalf("after Close: %v", err)
	}
	s.Close() // again: returns at once
	close(release)
	server.Close()
	testapi.Eventually(t, "the sender's goroutines end", func() bool {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		return runtime.NumGoroutine() <= before
	})
}

func TestDebugFromEnv(t *testing.T) {
	for value, want := range map[string]bool{"analytics": true, "a, analytics": true, "analytics-go": false, "": false} {
		t.Setenv("DEBUG", value)
		if DebugFromEnv() != want {
			t.Errorf("DEBUG=%q: %v", value, !want)
		}
	}
}
