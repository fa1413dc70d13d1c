// Package analytics is callpost's drop-in for analytics-go v3
// (github.com/segmentio/analytics-go/v3, gopkg.in/segmentio/analytics-go.v3):
// the same names (New, NewWithConfig, Config, Client.Enqueue, Track,
// Identify, Page, Screen, Group, Alias, Context, Properties, Traits,
// Integrations, Callback, Logger), so a program moves over by changing its
// import path to example.invalid/callpost/go/analytics/v3.
//
// Underneath, every rule is callpost's core, the same as in callpost's
// Python and JavaScript clients: the spec's validation with stable error
// codes (errors.As to *callpost.Error), the 32 KB message and 500 KB
// batch limits applied before sending, JSON.stringify-exact bodies,
// batching, retries and backoff. This package only turns Go values into
// JSON and does the I/O (a goroutine, timers, net/http). What differs from
// analytics-go, and why, is in docs/senders.md.
package analytics
