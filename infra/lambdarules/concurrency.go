package lambdarules

import (
	"errors"
	"fmt"
	"sync"
)

// executions is one function's reserved concurrency: "Concurrency
// settings apply to the function as a whole"
// (https://docs.aws.amazon.com/lambda/latest/api/API_PutFunctionConcurrency.html),
// and reserved concurrency "is the maximum number of concurrent instances
// you want to allocate to your function"
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html),
// whichever trigger invokes it: its function URL, a service invoking it
// synchronously (IoT Core's custom authorizer), its event source mappings
// and asynchronous invocation all take from the same executions. An
// invocation when none is free is throttled; nothing waits in line.
type executions struct {
	mu     sync.Mutex
	limit  int
	inUse  int
	denied int64
}

func (e *executions) take() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.inUse >= e.limit {
		e.denied++
		return false
	}
	e.inUse++
	return true
}

func (e *executions) release() {
	e.mu.Lock()
	e.inUse--
	e.mu.Unlock()
}

// InUse is how many of f's reserved executions are running now (0 for a
// function without reserved concurrency).
func (f Function) InUse() int {
	if f.executions == nil {
		return 0
	}
	f.executions.mu.Lock()
	defer f.executions.mu.Unlock()
	return f.executions.inUse
}

// Throttled is how many of f's invocations found no free execution, from
// any trigger, since the template was read.
func (f Function) Throttled() int64 {
	if f.executions == nil {
		return 0
	}
	f.executions.mu.Lock()
	defer f.executions.mu.Unlock()
	return f.executions.denied
}

// ThrottleError is Lambda's answer to an invocation over the function's
// reserved concurrency: TooManyRequestsException (429), reason
// ReservedFunctionConcurrentInvocationLimitExceeded
// (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html). What
// each trigger makes of it: a function URL answers 429
// (https://docs.aws.amazon.com/lambda/latest/dg/urls-configuration.html#urls-throttling);
// IoT Core counts a failed authorizer invocation as a refused connection;
// an SQS event source leaves the batch in the queue, to be received again;
// asynchronous invocation puts the event back in its queue and tries again
// within its maximum event age, without spending a retry (AsyncInvoker).
type ThrottleError struct {
	Function string
	Reserved int
}

func (e *ThrottleError) Error() string {
	return fmt.Sprintf("Rate Exceeded.: %s is at its reserved concurrency (%d executions)", e.Function, e.Reserved)
}

// IsThrottled reports whether err is an invocation's throttle.
func IsThrottled(err error) bool {
	var te *ThrottleError
	return errors.As(err, &te)
}
