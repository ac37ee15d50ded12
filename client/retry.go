package client

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Retry is how a retryable call is retried.
type Retry struct {
	// Attempts is how many times a call is sent at most (default 4; 1
	// never retries).
	Attempts int
	// Base is the first backoff (default 250ms); each next one doubles, up
	// to Max (default 8s), and a random wait between half of it and all of
	// it is taken, so that clients refused together do not come back
	// together.
	Base, Max time.Duration
	// MaxRetryAfter caps an answer's Retry-After (default 60s): a longer
	// one is not waited for, the answer is returned as it is.
	MaxRetryAfter time.Duration
	// Sleep waits d or until ctx ends (default: a timer). Tests record the
	// waits through it.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (r Retry) withDefaults() Retry {
	if r.Attempts <= 0 {
		r.Attempts = 4
	}
	if r.Base <= 0 {
		r.Base = 250 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 8 * time.Second
	}
	if r.MaxRetryAfter <= 0 {
		r.MaxRetryAfter = 60 * time.Second
	}
	if r.Sleep == nil {
		r.Sleep = sleep
	}
	return r
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Doer is what the generated client sends requests with (its
// HttpRequestDoer).
type Doer = HttpRequestDoer

// retrying sends a request again when it is safe to (idempotent) and worth
// it: the answer says to come back (429, 503, 504) or no answer came.
type retrying struct {
	next  Doer
	retry Retry
}

// retryable statuses: the gateway's rate limit (429) and integration
// timeout (504), and the API's unavailable (503: a cloud or cluster that
// could not answer, retried with backoff as openapi.yaml says). A 502 is a
// refusal, answered the same on a retry.
func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// idempotent: sending it twice does what sending it once does. A POST is
// when it carries an Idempotency-Key: the API answers a replay with the
// first answer.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	case http.MethodPost:
		return req.Header.Get("Idempotency-Key") != ""
	}
	return false
}

func (d *retrying) Do(req *http.Request) (*http.Response, error) {
	if !idempotent(req) || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
		return d.next.Do(req)
	}
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		res, err := d.next.Do(req)
		if attempt >= d.retry.Attempts || ctx.Err() != nil {
			return res, err
		}
		var wait time.Duration
		switch {
		case err != nil:
			wait = d.backoff(attempt)
		case retryableStatus(res.StatusCode):
			after, ok := retryAfter(res.Header.Get("Retry-After"), time.Now())
			switch {
			case !ok:
				wait = d.backoff(attempt)
			case after > d.retry.MaxRetryAfter:
				return res, nil
			default:
				wait = after
			}
		default:
			return res, nil
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return res, err // no time left to come back: this answer is the answer
		}
		if res != nil {
			// Read to the end so that the connection is reused.
			_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
			res.Body.Close()
		}
		if err := d.retry.Sleep(ctx, wait); err != nil {
			return nil, err
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, errors.Join(errors.New("client: cannot resend the request body"), err)
			}
			req = req.Clone(ctx)
			req.Body = body
		}
	}
}

// backoff is the wait before attempt+1: between half and all of
// Base·2^(attempt-1), at most Max.
func (d *retrying) backoff(attempt int) time.Duration {
	ceiling := d.retry.Base << (attempt - 1)
	if ceiling > d.retry.Max || ceiling <= 0 {
		ceiling = d.retry.Max
	}
	return ceiling/2 + rand.N(ceiling/2+1)
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP-date
// (RFC 9110 section 10.2.3). A date in the past is no wait.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
