package analytics

import (
	"fmt"

	"example.invalid/callpost/go/callpost"
)

// ConfigError is returned by NewWithConfig when a Config field holds a
// value the core refuses. It wraps the core's *callpost.Error (errors.As
// reaches it, with its code).
type ConfigError struct {
	// Reason is why the value was refused, as the core says it.
	Reason string
	// Field is the Config field, when the refusal names one.
	Field string
	// Value is the value refused.
	Value interface{}

	err error
}

// Error is analytics-go's message: the reason, the field and its value.
func (e ConfigError) Error() string {
	return fmt.Sprintf("analytics.NewWithConfig: %s (analytics.Config.%s: %#v)", e.Reason, e.Field, e.Value)
}

// Unwrap is the core's error.
func (e ConfigError) Unwrap() error { return e.err }

// FieldError is returned when a message misses a field the spec requires
// (Track without Event, Group without GroupId, ...). It wraps the core's
// *callpost.Error (errors.As reaches it, with its code).
type FieldError struct {
	// Type is the message's type, "analytics.Track", ...
	Type string
	// Name is the missing field.
	Name string
	// Value is its value.
	Value interface{}

	err error
}

// Error is analytics-go's message: the type, the field and its value.
func (e FieldError) Error() string {
	return fmt.Sprintf("%s.%s: invalid field value: %#v", e.Type, e.Name, e.Value)
}

// Unwrap is the core's error.
func (e FieldError) Unwrap() error { return e.err }

var (
	// ErrClosed matches (errors.Is) the error of a call made after Close,
	// and is what a second Close returns.
	ErrClosed = callpost.ErrClosed

	// ErrTooManyRequests matches (errors.Is) the error of a call refused
	// because the queue is full: the server is slow or down.
	ErrTooManyRequests = callpost.ErrQueueFull

	// ErrMessageTooBig matches (errors.Is) the error of a message over
	// the core's size limit; nothing was queued.
	ErrMessageTooBig = callpost.ErrMessageTooLarge
)
