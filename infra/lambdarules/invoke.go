package lambdarules

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// TimeoutError is Lambda's answer for an invocation that ran past its
// function's Timeout: "Task timed out after N.NN seconds", a function
// error of the invocation, not of the handler.
type TimeoutError struct {
	Function string
	Timeout  time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("Task timed out after %.2f seconds", e.Timeout.Seconds())
}

// IsTimeout reports whether err is an invocation's timeout.
func IsTimeout(err error) bool {
	var te *TimeoutError
	return errors.As(err, &te)
}

// Run runs h as one invocation of f. The handler's context has the
// deadline the Lambda runtime gives it (the Lambda-Runtime-Deadline-Ms of
// the invocation, which lambda.Start turns into the context's deadline:
// https://docs.aws.amazon.com/lambda/latest/dg/golang-context.html) and
// the invocation's trace header (WithTraceHeader), and names f as the
// function whose execution role its calls are made with (WithFunction).
// If h has not returned
// by then, the invocation is over, as Lambda stops a function at its
// timeout (https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html):
// Run returns a *TimeoutError at once, cancels the context and discards
// what h returns later.
//
// The invocation holds one of f's reserved executions until it is over
// (executions); with none free it is throttled: a *ThrottleError, and h
// does not run.
func Run[T any](ctx context.Context, f Function, trace TraceHeader, h func(context.Context) (T, error)) (T, error) {
	if f.executions != nil {
		if !f.executions.take() {
			var zero T
			return zero, &ThrottleError{Function: f.ID, Reserved: f.executions.limit}
		}
		// Lambda stops the execution at its timeout, so it is free again
		// when Run returns, whatever h does later.
		defer f.executions.release()
	}
	ictx, cancel := context.WithTimeout(WithFunction(WithTraceHeader(ctx, trace), f.ID), f.Timeout)
	defer cancel()
	// Billed from the start to the answer, or to the timeout (Usage).
	started := time.Now()
	defer func() { f.meter.add(time.Since(started)) }()
	deadline, _ := ictx.Deadline()
	type result struct {
		v    T
		err  error
		late bool
	}
	done := make(chan result, 1)
	go func() {
		v, err := h(ictx)
		// Judged by when the handler returned, not by when this
		// goroutine's answer is read (a busy machine may read it late).
		done <- result{v, err, !time.Now().Before(deadline)}
	}()
	var zero T
	select {
	case r := <-done:
		if !r.late || ctx.Err() != nil {
			return r.v, r.err
		}
	case <-ictx.Done():
		if ctx.Err() != nil {
			// The stack is stopping, not the function timing out.
			return zero, ctx.Err()
		}
	}
	return zero, &TimeoutError{Function: f.ID, Timeout: f.Timeout}
}

// Handler is h with every call run as one invocation of f (Run), for
// event sources with no rule of their own here (the table's stream).
func Handler[E, R any](f Function, h func(context.Context, E) (R, error)) func(context.Context, E) (R, error) {
	return func(ctx context.Context, e E) (R, error) {
		return Run(ctx, f, TraceHeader("").Next(f.ID), func(ctx context.Context) (R, error) { return h(ctx, e) })
	}
}

type functionKey struct{}

// WithFunction is ctx for requests made with function id's execution
// role: its invocations' (Run) and those Lambda makes for it, its event
// source mappings' reads and its on-failure destination's sends
// (https://docs.aws.amazon.com/lambda/latest/dg/lambda-intro-execution-role.html).
// An SDK middleware can tell by it whose role a request would need
// (infra/iamcheck); "" is no function's.
func WithFunction(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, functionKey{}, id)
}

// FunctionOf is the function whose execution role ctx's requests are made
// with ("": none, such as a test's own reads).
func FunctionOf(ctx context.Context) string {
	id, _ := ctx.Value(functionKey{}).(string)
	return id
}
