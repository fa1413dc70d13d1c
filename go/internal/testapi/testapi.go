// Package testapi is a Tracking API for tests: an httptest server that
// takes POST /v1/batch with Basic auth, as Segment and callpost's relay
// do, records every batch and message, and answers what the test scripts.
package testapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Batch is one request the server took.
type Batch struct {
	// Header is the request's headers.
	Header http.Header
	// Messages are the batch's messages, decoded.
	Messages []map[string]interface{}
	// Raw is the body as sent (after gzip, when it was gzipped).
	Raw []byte
}

// Server records batches.
type Server struct {
	*httptest.Server
	// WriteKey is the key Basic auth must carry.
	WriteKey string

	mu       sync.Mutex
	changed  *sync.Cond
	batches  []Batch
	refused  []string
	statuses []int
}

// New starts a server for writeKey; it is closed when the test ends.
func New(t testing.TB, writeKey string) *Server {
	s := &Server{WriteKey: writeKey}
	s.changed = sync.NewCond(&s.mu)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Answer makes the next requests answer these statuses, in order (then
// 200).
func (s *Server) Answer(statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses = append(s.statuses, statuses...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	user, _, ok := r.BasicAuth()
	body, _ := io.ReadAll(r.Body)
	raw := body
	if r.Header.Get("Content-Encoding") == "gzip" {
		if z, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
			body, _ = io.ReadAll(z)
		}
	}
	var batch struct {
		Batch []map[string]interface{} `json:"batch"`
	}
	decodeErr := json.Unmarshal(body, &batch)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed.Broadcast()
	if r.URL.Path != "/v1/batch" || !ok || user != s.WriteKey || decodeErr != nil {
		s.refused = append(s.refused, r.Method+" "+r.URL.Path)
		http.Error(w, `{"error":"refused"}`, http.StatusUnauthorized)
		return
	}
	status := http.StatusOK
	if len(s.statuses) > 0 {
		status, s.statuses = s.statuses[0], s.statuses[1:]
	}
	if status == http.StatusOK {
		s.batches = append(s.batches, Batch{Header: r.Header.Clone(), Messages: batch.Batch, Raw: raw})
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"success":true}`))
}

// Messages is every message accepted so far, in order.
func (s *Server) Messages() []map[string]interface{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]interface{}
	for _, b := range s.batches {
		out = append(out, b.Messages...)
	}
	return out
}

// Batches is every batch accepted so far.
func (s *Server) Batches() []Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Batch(nil), s.batches...)
}

// Refused is every request refused (wrong path, key or body).
func (s *Server) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refused...)
}

// WaitMessages waits until n messages were accepted, or fails the test
// after a minute (a hang guard, not a timing assertion).
func (s *Server) WaitMessages(t testing.TB, n int) []map[string]interface{} {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	stop := time.AfterFunc(time.Minute, func() {
		s.mu.Lock()
		s.changed.Broadcast()
		s.mu.Unlock()
	})
	defer stop.Stop()
	s.mu.Lock()
	for {
		count := 0
		for _, b := range s.batches {
			count += len(b.Messages)
		}
		if count >= n || time.Now().After(deadline) {
			break
		}
		s.changed.Wait()
	}
	s.mu.Unlock()
	got := s.Messages()
	if len(got) < n {
		t.Fatalf("the server got %d messages, want %d", len(got), n)
	}
	return got
}

// Eventually polls cond until it holds, or fails the test after a minute
// (a hang guard).
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
