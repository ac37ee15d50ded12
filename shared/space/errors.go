package space

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind classifies a domain error. The HTTP layer maps each kind to one status
// code in one place; nothing else decides status codes.
type Kind int

const (
	KindInternal             Kind = iota
	KindInvalid                   // the request is well-formed but a field is wrong (422)
	KindMalformed                 // the request cannot be read at all (400)
	KindNotFound                  // absent, deleted, or another org's (404)
	KindConflict                  // the state forbids it (409)
	KindPreconditionFailed        // If-Match does not match (412)
	KindPreconditionRequired      // If-Match missing (428)
	KindForbidden                 // authenticated but not allowed (403)
	KindUnauthenticated           // no valid token (401)
	KindUnavailable               // a dependency is down (503)
	KindBadGateway                // a dependency answered wrongly (502)
	KindTooManyRequests           // too soon after the last one; retry after RetryAfter (429)
)

// FieldError names one bad field; Field is a JSON pointer-like dotted path
// such as "config.region".
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// Error is the error type every layer returns for expected failures.
type Error struct {
	Kind    Kind
	Message string
	Fields  []FieldError
	// ExistingID names the space that already holds a cluster identity (409).
	ExistingID string
	// ExistingJobID names the live provisioning job already creating a
	// cluster identity (409).
	ExistingJobID string
	// Reason is a machine-readable cause such as "ClusterNotFound".
	Reason string
	// Tombstone, on a 404 for a deregistered space, is what remains of it.
	Tombstone *Tombstone
	// RetryAfter, on KindTooManyRequests, is when to try again.
	RetryAfter time.Duration
	Err        error // internal cause: logged, never shown to clients
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "; %s: %s", f.Field, f.Reason)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of err, KindInternal for foreign errors.
func KindOf(err error) Kind {
	if err == nil {
		return KindInternal // what errors.As answers below, without moving e to the heap
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// Errorf builds an *Error of the given kind.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// ErrNotFound is the shared not-found answer: callers cannot tell absent,
// deleted and foreign apart.
func ErrNotFound(what string) *Error { return Errorf(KindNotFound, "%s not found", what) }

// ErrDeregistered is the not-found of a deregistered space, carrying its
// tombstone.
func ErrDeregistered(s Space) *Error {
	return &Error{Kind: KindNotFound, Message: "space not found: it was deregistered", Tombstone: s.Tombstone()}
}

// fieldErrors collects validation problems so that every bad field is reported
// at once.
type fieldErrors []FieldError

func (f *fieldErrors) add(field, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (f fieldErrors) err(msg string) error {
	if len(f) == 0 {
		return nil
	}
	return &Error{Kind: KindInvalid, Message: msg, Fields: f}
}
