// Package callpost is the callpost core for Go: the rules every callpost
// client and receiver shares (Segment-spec calls and their validation,
// JSON.stringify-exact bodies, the 32 KB message and 500 KB batch limits,
// the batching client's state machine, X-Signature and Standard Webhooks
// signatures, receivers' verification), reached through callpost-capi, the
// core's C ABI, with cgo.
//
// Most programs use the analytics packages, drop-ins for analytics-go
// (example.invalid/callpost/go/analytics/v3 and .../analytics/v2), to
// send calls, and a Receiver with its Middleware to take webhooks:
//
//	r, err := callpost.NewReceiver(callpost.ReceiverOptions{Secrets: []string{os.Getenv("WEBHOOK_SECRET")}})
//	...
//	http.Handle("/segment", r.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
//		hook := callpost.WebhookFrom(req.Context())
//		for _, call := range hook.Calls { ... }
//	})))
//
// Every error for bad input, a refused webhook or an undelivered message
// is an *Error carrying the core's stable Code (the same in Rust, Python
// and JavaScript); errors.Is matches it against its class (ErrInvalidCall,
// ErrSignature, ...). Defaults and limits are the core's, in Defaults.
//
// Building: the package links callpost-capi's static library, built in a
// checkout of callpost with `cargo build --release -p callpost-capi`
// (Rust 1.89 or later); see docs/senders.md. Go 1.19 or later.
package callpost
