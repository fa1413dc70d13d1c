package callpost

/*
#include "callpost.h"
*/
import "C"

import "time"

// Version is callpost's version: the core's, the same as the Python and npm
// packages'.
var Version = goString(C.callpost_version())

// DefaultEndpoint is the batching client's default base URL (Segment's
// Tracking API); batches go to {endpoint}/v1/batch.
var DefaultEndpoint = goString(C.callpost_default_endpoint())

// Defaults holds every numeric default and limit of the core by its name
// (durations in milliseconds): flush_at, flush_after_ms, max_queue,
// max_message_bytes, max_batch_bytes, seen_capacity, ... It is read from
// the core when the package loads, so no number is restated in Go. Do not
// modify it.
var Defaults = loadDefaults()

func loadDefaults() map[string]uint64 {
	out := map[string]uint64{}
	var name C.CallpostStr
	var value C.uint64_t
	for i := C.size_t(0); C.callpost_default_at(i, &name, &value); i++ {
		out[goString(name)] = uint64(value)
	}
	return out
}

// DefaultDuration is a duration default of the core ("flush_after_ms",
// "shutdown_timeout_ms", ...) as a time.Duration; 0 for an unknown name.
func DefaultDuration(name string) time.Duration {
	return time.Duration(Defaults[name]) * time.Millisecond
}

// DefaultStandardTolerance is how far a Standard Webhooks timestamp may be
// from a receiver's clock by default: the specification's 5 minutes.
var DefaultStandardTolerance = time.Duration(C.callpost_standard_tolerance_ms()) * time.Millisecond

// millis is t as the core's time: milliseconds since the Unix epoch.
func millis(t time.Time) C.int64_t {
	return C.int64_t(t.UnixMilli())
}
