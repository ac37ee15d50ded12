// Package budget hands a synchronous caller's deadline down the call, so
// that each caller answers before its own time is up: the API answers a
// problem before its function's timeout, the discovery function's cloud
// call ends before the API's Invoke of it gives up, and the cloud call
// before that. Each hop keeps a reserve of its deadline to answer in.
//
//	API (Timeout 10 s)            answers by its deadline − APIReserve
//	└─ Invoke discovery           deadline handed down in the request, − InvokeReserve
//	   └─ mint (the cloud call)   the handed-down deadline (and at most mint.DefaultTimeout)
package budget

import (
	"context"
	"net/http"
	"time"
)

// Reserves: how long before its deadline each hop stops waiting, to
// answer in time. The API's covers writing the problem and the gateway's
// hop; the Invoke's covers the discovery function's answer on its way
// back.
const (
	APIReserve    = time.Second
	InvokeReserve = 500 * time.Millisecond
)

// Within is ctx with its deadline (if any) brought forward by reserve.
func Within(ctx context.Context, reserve time.Duration) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, d.Add(-reserve))
}

// Until is ctx with deadline at (zero: ctx unchanged), never later than
// ctx's own.
func Until(ctx context.Context, at time.Time) (context.Context, context.CancelFunc) {
	if at.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, at)
}

// Handler runs h with each request's deadline (the function's, which
// lambda.Start puts on the invocation's context) brought forward by
// reserve, so that what h waits on gives up in time for h to answer.
func Handler(h http.Handler, reserve time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := Within(r.Context(), reserve)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}
