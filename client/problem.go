package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"reflect"
	"strings"
)

// ProblemPrefix starts every problem type the API answers.
const ProblemPrefix = "urn:spaces:problem:"

// Kinds of failure, matched with errors.Is against an *Error: by the
// problem's type, or by the status where API Gateway answered itself
// (its {"message"} body has no type).
var (
	ErrMalformed          = kind("malformed-request", http.StatusBadRequest)
	ErrUnauthenticated    = kind("unauthenticated", http.StatusUnauthorized)
	ErrForbidden          = kind("forbidden", http.StatusForbidden)
	ErrNotFound           = kind("not-found", http.StatusNotFound)
	ErrConflict           = kind("conflict", http.StatusConflict)
	ErrPreconditionFailed = kind("precondition-failed", http.StatusPreconditionFailed)
	ErrInvalid            = kind("invalid-fields", http.StatusUnprocessableEntity)
	ErrTooManyRequests    = kind("", http.StatusTooManyRequests)
	ErrBadGateway         = kind("bad-gateway", http.StatusBadGateway)
	ErrUnavailable        = kind("unavailable", http.StatusServiceUnavailable)
)

// Kind is one kind of failure (the Err* values).
type Kind struct {
	slug   string
	status int
}

func kind(slug string, status int) *Kind { return &Kind{slug, status} }

func (k *Kind) Error() string {
	if k.slug == "" {
		return http.StatusText(k.status)
	}
	return k.slug
}

// Error is an answer of 400 or more: the API's problem document, or API
// Gateway's own answer (Gateway set, Problem.Type empty), or a body that is
// neither (Problem.Type empty, Body kept).
type Error struct {
	Problem
	// StatusCode is the HTTP status of the answer (Problem.Status may be
	// absent from a gateway answer).
	StatusCode int
	// Gateway is API Gateway's message when it answered itself.
	Gateway string
	// RequestID is the problem's request_id, or else the X-Request-Id header.
	RequestID string
	// Body is the answer's body when it was not a problem document.
	Body []byte
}

// Slug is the problem type without ProblemPrefix ("not-found").
func (e *Error) Slug() string { return strings.TrimPrefix(e.Type, ProblemPrefix) }

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	switch {
	case e.Problem.Detail != nil:
		b.WriteString(": " + *e.Problem.Detail)
	case e.Gateway != "":
		b.WriteString(": " + e.Gateway)
	case e.Type == "" && len(e.Body) > 0:
		fmt.Fprintf(&b, ": %.200q", e.Body)
	}
	if e.Problem.Reason != nil {
		b.WriteString(" (" + *e.Problem.Reason + ")")
	}
	if e.Problem.Errors != nil {
		for _, f := range *e.Problem.Errors {
			fmt.Fprintf(&b, "; %s: %s", f.Field, f.Reason)
		}
	}
	if e.Problem.ExistingSpaceId != nil {
		b.WriteString("; existing space " + e.Problem.ExistingSpaceId.String())
	}
	if e.Problem.ExistingJobId != nil {
		b.WriteString("; existing job " + e.Problem.ExistingJobId.String())
	}
	if e.RequestID != "" {
		b.WriteString(" [request " + e.RequestID + "]")
	}
	return b.String()
}

// Is matches a Kind: by the problem's type when it has one, else by status.
func (e *Error) Is(target error) bool {
	k, ok := target.(*Kind)
	if !ok {
		return false
	}
	if e.Type != "" {
		return k.slug != "" && e.Slug() == k.slug
	}
	return e.StatusCode == k.status
}

// Check turns a generated call's outcome into an error: err itself when
// the call failed (the request never answered, or its body did not parse),
// an *Error for a status of 400 or more, nil otherwise. res and body are the
// response's HTTPResponse and Body.
func Check(res *http.Response, body []byte, err error) error {
	if err != nil {
		return err
	}
	if res == nil {
		return errors.New("client: no response")
	}
	if res.StatusCode < 400 {
		return nil
	}
	return errorOf(res, body)
}

func errorOf(res *http.Response, body []byte) *Error {
	e := &Error{StatusCode: res.StatusCode, RequestID: res.Header.Get("X-Request-Id")}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	switch mt {
	case "application/problem+json":
		if json.Unmarshal(body, &e.Problem) == nil && strings.HasPrefix(e.Type, ProblemPrefix) {
			if e.Problem.RequestId != nil {
				e.RequestID = *e.Problem.RequestId
			}
			return e
		}
		e.Problem = Problem{}
	case "application/json":
		var g GatewayMessage
		if json.Unmarshal(body, &g) == nil && g.Message != "" {
			e.Gateway = g.Message
			return e
		}
	}
	e.Body = body
	return e
}

// Result checks what a generated ...WithResponse call returned, so that a
// call reads
//
//	r, err := client.Result(api.GetSpaceWithResponse(ctx, id, nil))
//
// and r's JSON200 is there when err is nil. It is Check on the response's
// HTTPResponse and Body fields, which every generated response has.
func Result[R any](r *R, err error) (*R, error) {
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, errors.New("client: no response")
	}
	v := reflect.ValueOf(r).Elem()
	res, _ := v.FieldByName("HTTPResponse").Interface().(*http.Response)
	body, _ := v.FieldByName("Body").Interface().([]byte)
	if err := Check(res, body, nil); err != nil {
		return nil, err
	}
	return r, nil
}
