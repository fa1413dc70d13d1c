// Package calljson writes a call as JSON text with Segment's keys, which
// is how the analytics packages hand a call to the core: one cgo call, the
// core then checks and completes it. Only the Go side's part is here:
// turning Go values into JSON (encoding/json, as analytics-go does) and
// naming what has no JSON form with the core's codes.
package calljson

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"example.invalid/callpost/go/callpost"
)

// Writer builds one call. Get one with Start, Release it when its bytes
// have been handed to the core.
type Writer struct {
	buf []byte
	enc *json.Encoder
	err error
}

var pool = sync.Pool{New: func() interface{} {
	w := &Writer{buf: make([]byte, 0, 1024)}
	w.enc = json.NewEncoder(w)
	// Bodies are JSON, not HTML: <, > and & stay as they are, as
	// JSON.stringify writes them.
	w.enc.SetEscapeHTML(false)
	return w
}}

// Start begins a call of type kind ("track", "identify", ...).
func Start(kind string) *Writer {
	w := pool.Get().(*Writer)
	w.buf = append(w.buf[:0], `{"type":`...)
	w.buf = appendString(w.buf, kind)
	w.err = nil
	return w
}

// Release gives the writer back; its bytes are no longer valid.
func (w *Writer) Release() {
	if cap(w.buf) > 64<<10 {
		// A huge call's buffer is not kept for the next small one.
		w.buf = make([]byte, 0, 1024)
	}
	pool.Put(w)
}

// Write lets encoding/json append to the call.
func (w *Writer) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *Writer) key(key string) {
	w.buf = append(w.buf, ',', '"')
	w.buf = append(w.buf, key...)
	w.buf = append(w.buf, '"', ':')
}

// String writes a string field; "" is absent, as analytics-go omits it.
func (w *Writer) String(key, value string) {
	if value == "" {
		return
	}
	w.key(key)
	w.buf = appendString(w.buf, value)
}

// Time writes an ISO 8601 timestamp; the zero time is absent (the core
// stamps the call with now).
func (w *Writer) Time(key string, t time.Time) {
	if t.IsZero() {
		return
	}
	w.key(key)
	w.buf = append(w.buf, '"')
	w.buf = t.AppendFormat(w.buf, time.RFC3339Nano)
	w.buf = append(w.buf, '"')
}

// Value writes a free-form value (properties, traits, context,
// integrations) with encoding/json; nil and empty maps are absent, as
// analytics-go's omitempty leaves them out.
func (w *Writer) Value(key string, v interface{}) {
	if w.err != nil || isEmpty(v) {
		return
	}
	mark := len(w.buf)
	w.key(key)
	if err := w.enc.Encode(v); err != nil {
		w.buf = w.buf[:mark]
		w.err = valueError(key, err)
		return
	}
	// Encode ends the value with a newline.
	w.buf = w.buf[:len(w.buf)-1]
}

// Bytes ends the call: its JSON text, or the first value that had no JSON
// form. The bytes are valid until Release.
func (w *Writer) Bytes() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	return append(w.buf, '}'), nil
}

func isEmpty(v interface{}) bool {
	if v == nil {
		return true
	}
	switch m := v.(type) {
	case map[string]interface{}:
		return len(m) == 0
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Map:
		return r.Len() == 0
	case reflect.Ptr, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// valueError names a value encoding/json could not write with the core's
// code for it, and the field it was in.
func valueError(key string, err error) error {
	code := callpost.CodeNotJSON
	var value *json.UnsupportedValueError
	if errors.As(err, &value) {
		switch {
		case strings.Contains(value.Str, "cycle"):
			code = callpost.CodeCyclicValue
		case isNonFinite(value.Str):
			code = callpost.CodeNonFiniteNumber
		}
	}
	return &callpost.Error{Code: code, Message: key + ": " + err.Error()}
}

func isNonFinite(s string) bool {
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && (math.IsNaN(f) || math.IsInf(f, 0))
}

// appendString writes s as a JSON string. Bytes that are not UTF-8 are
// kept as they are, so that the core refuses them (invalid_unicode)
// instead of a silent U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
