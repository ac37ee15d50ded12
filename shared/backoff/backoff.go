// Package backoff is the one wait between retries of the project's own
// retry loops (the store's transactions, the queue's unsent entries): full
// jitter, doubling from a base, capped, ended early by the context. The AWS
// SDK retries each call itself; these loops retry only what the SDK does
// not (a cancelled transaction, entries a batch call reported as failed).
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// maxDoublings caps the wait at base·2^6.
const maxDoublings = 6

// Wait sleeps a random time in [0, base·2^attempt) before retry attempt
// (from 1), or returns ctx's error when it ends first.
func Wait(ctx context.Context, base time.Duration, attempt int) error {
	d := time.Duration(rand.Int64N(int64(base << min(attempt, maxDoublings))))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
