// Package openapitest checks HTTP exchanges against the OpenAPI document, so
// that the document (the API reference) and the server cannot drift apart
// unnoticed: every test that talks to the API through a checked client also
// proves that what it saw is what the document promises.
//
// The rules a checked exchange must follow:
//
//   - The response must match the document for its route: a documented
//     status code, the documented content type, a body that validates against
//     the schema (unknown fields fail: the schemas forbid additional
//     properties), the documented headers, and no body where none is
//     documented.
//   - A request the document allows is checked as is. A request it forbids
//     (bad parameters, body or credentials, as negative tests send on
//     purpose) must be refused with a 4xx; accepting it, or failing with a
//     5xx, is reported together with what the document says is wrong.
//   - A route the document does not have must be answered with a 404 or 405
//     problem document, as the server does for unknown routes.
package openapitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"io"
	"mime"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
)

// problemSchema names the component every problem document must match.
const problemSchema = "Problem"

// Validator checks requests and responses against one OpenAPI document. It is
// safe for concurrent use.
type Validator struct {
	// mu serializes checks: libopenapi renders schemas lazily, writing to
	// the shared model as it goes (the race detector caught it), and a check
	// takes well under a millisecond.
	mu      sync.Mutex
	model   *v3.Document
	http    validator.Validator
	schemas schema_validation.SchemaValidator
	problem *base.Schema
}

// New parses doc and builds its validator; a document that does not parse, or
// is not a valid OpenAPI 3.x document, fails t at once.
func New(t testing.TB, doc []byte) *Validator {
	t.Helper()
	v, err := build(doc)
	if err != nil {
		t.Fatalf("openapitest: %v", err)
	}
	return v
}

func build(doc []byte) (*Validator, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("parse the document: %w", err)
	}
	m, err := d.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build the document model: %w", err)
	}
	// Format assertions make uuid and date-time fields checked, not just
	// described.
	hv, errs := validator.NewValidator(d, config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("build the validator: %w", errors.Join(errs...))
	}
	if ok, verrs := hv.ValidateDocument(); !ok {
		lines := make([]string, 0, len(verrs))
		for _, e := range verrs {
			lines = append(lines, "  - "+describe(e))
		}
		return nil, fmt.Errorf("the document is not valid OpenAPI:\n%s", strings.Join(lines, "\n"))
	}
	v := &Validator{
		model:   &m.Model,
		http:    hv,
		schemas: schema_validation.NewSchemaValidator(config.WithFormatAssertions()),
	}
	if m.Model.Components != nil && m.Model.Components.Schemas != nil {
		if p, ok := m.Model.Components.Schemas.Get(problemSchema); ok {
			v.problem = p.Schema()
		}
	}
	if v.problem == nil {
		return nil, fmt.Errorf("the document has no components.schemas.%s", problemSchema)
	}
	return v, nil
}

// Model is the parsed document, for tests that inspect it. Read it, and not
// while checks run: rendering a schema writes to it.
func (v *Validator) Model() *v3.Document { return v.model }

// Routes lists the document's operations as "METHOD /path", sorted, in the
// form httpapi.Routes uses.
func (v *Validator) Routes() []string {
	var out []string
	if v.model.Paths == nil {
		return out
	}
	for path, item := range v.model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().FromOldest() {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

// Check fails t (with t.Errorf, listing every mismatch) when the exchange does
// not follow the document. reqBody and respBody are the bodies as sent and
// received; req.Body and resp.Body are not read, so the caller keeps them.
func (v *Validator) Check(t testing.TB, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	t.Helper()
	if msgs := v.mismatches(req, reqBody, resp, respBody); len(msgs) > 0 {
		t.Errorf("openapitest: %s %s answered %d does not follow the OpenAPI document:\n  - %s\n  response body: %s",
			req.Method, req.URL.RequestURI(), resp.StatusCode, strings.Join(msgs, "\n  - "), excerpt(respBody))
	}
}

// RequestMismatches lists every way a request departs from the document
// (an unknown route included), whatever the server would answer: for a
// client that must send only documented requests, such as the console.
func (v *Validator) RequestMismatches(req *http.Request, reqBody []byte) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	r := cloneRequest(req, reqBody)
	_, errs := v.http.ValidateHttpRequestSync(r)
	var out []string
	for _, e := range errs {
		out = append(out, describe(e))
	}
	if len(out) == 0 {
		if _, _, template := paths.FindPath(r, v.model, nil); !matchesTemplate(template, r.URL.EscapedPath()) {
			out = append(out, fmt.Sprintf("%s is not exactly the documented path %s", r.URL.EscapedPath(), template))
		}
	}
	return out
}

// mismatches returns every way the exchange departs from the document.
func (v *Validator) mismatches(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	r := cloneRequest(req, reqBody)
	_, reqErrs := v.http.ValidateHttpRequestSync(r)
	if routeMissing(reqErrs) {
		return v.unknownRoute(r, reqErrs, resp, respBody)
	}
	// The validator forgives a trailing or doubled slash; net/http's mux
	// does not, so such a path is not the documented route.
	if _, _, template := paths.FindPath(r, v.model, nil); !matchesTemplate(template, r.URL.EscapedPath()) {
		return v.unknownRoute(r, []*verrors.ValidationError{{
			Message: fmt.Sprintf("%s %s is not exactly the documented path %s", r.Method, r.URL.EscapedPath(), template),
		}}, resp, respBody)
	}

	var out []string
	rs := cloneResponse(resp, respBody, cloneRequest(req, reqBody))
	if _, respErrs := v.http.ValidateHttpResponse(rs.Request, rs); len(respErrs) > 0 {
		for _, e := range respErrs {
			out = append(out, "response: "+describe(e))
		}
	}
	if len(respBody) > 0 && !v.documentsContent(r, resp.StatusCode) {
		out = append(out, fmt.Sprintf("response: the document declares no body for %d, but the server sent %d bytes", resp.StatusCode, len(respBody)))
	}
	if len(reqErrs) > 0 && (resp.StatusCode < 400 || resp.StatusCode > 499) {
		out = append(out, fmt.Sprintf("request: the document says this request is invalid, yet the server answered %d instead of refusing it with a 4xx:", resp.StatusCode))
		for _, e := range reqErrs {
			out = append(out, "request: "+describe(e))
		}
	}
	return out
}

// routeMissing reports whether the document has no operation for the request.
func routeMissing(errs []*verrors.ValidationError) bool {
	for _, e := range errs {
		if e.ValidationType == helpers.PathValidation {
			switch e.ValidationSubType {
			case helpers.ValidationMissing, helpers.ValidationMissingOperation, helpers.ValidationAmbiguousPath:
				return true
			}
		}
	}
	return false
}

// matchesTemplate reports whether the escaped request path fills the path
// template exactly: the same segments, each parameter non-empty.
func matchesTemplate(template, escapedPath string) bool {
	ts, ps := strings.Split(template, "/"), strings.Split(escapedPath, "/")
	if template == "" || len(ts) != len(ps) {
		return false
	}
	for i, t := range ts {
		isParam := strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}")
		if (isParam && ps[i] == "") || (!isParam && t != ps[i]) {
			return false
		}
	}
	return true
}

// unknownRoute checks the answer to a route the document does not have: the
// server must refuse it with a 404 or 405 problem, or redirect a path that is
// not in canonical form (such as //spaces) to its canonical form.
func (v *Validator) unknownRoute(r *http.Request, reqErrs []*verrors.ValidationError, resp *http.Response, respBody []byte) []string {
	var out []string
	if isRedirect(resp.StatusCode) && resp.Header.Get("Location") != "" && !canonical(r.URL.Path) {
		return nil
	}
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		for _, e := range reqErrs {
			out = append(out, "request: "+describe(e))
		}
		return append(out, fmt.Sprintf("response: the route is not in the document, yet the server answered %d instead of 404 or 405", resp.StatusCode))
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/problem+json" {
		out = append(out, fmt.Sprintf("response: the %d for a route not in the document has Content-Type %q, want application/problem+json",
			resp.StatusCode, resp.Header.Get("Content-Type")))
		return out
	}
	if _, errs := v.schemas.ValidateSchemaBytes(v.problem, respBody); len(errs) > 0 {
		for _, e := range errs {
			out = append(out, "response: "+describe(e))
		}
	}
	return out
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// canonical reports whether p is already clean (no doubled slashes, dot
// segments or trailing slash), the form net/http's mux does not redirect.
func canonical(p string) bool { return p == "/" || path.Clean(p) == p }

// documentsContent reports whether the document declares a body for the
// status of the request's operation; an undocumented status counts as
// declaring one, since the response validator already reports it.
func (v *Validator) documentsContent(r *http.Request, status int) bool {
	item, _, _ := paths.FindPath(r, v.model, nil)
	op := helpers.ExtractOperation(r, item)
	if op == nil || op.Responses == nil {
		return true
	}
	res := op.Responses.FindResponseByCode(status)
	if res == nil {
		return true
	}
	return res.Content != nil && res.Content.Len() > 0
}

// cloneRequest copies req with a fresh reader over body, so validation reads
// neither the caller's body nor a cancelled context.
func cloneRequest(req *http.Request, body []byte) *http.Request {
	r := req.Clone(context.WithoutCancel(req.Context()))
	r.ContentLength = int64(len(body))
	if len(body) == 0 {
		r.Body, r.GetBody = http.NoBody, nil
		return r
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return r
}

func cloneResponse(resp *http.Response, body []byte, req *http.Request) *http.Response {
	rs := *resp
	rs.Header = resp.Header.Clone()
	rs.Body = io.NopCloser(bytes.NewReader(body))
	rs.ContentLength = int64(len(body))
	rs.Request = req
	return &rs
}

// describe renders a validation error on one line, with each schema failure
// on its own indented line.
func describe(e *verrors.ValidationError) string {
	var b strings.Builder
	b.WriteString(e.Message)
	if e.Reason != "" && e.Reason != e.Message {
		b.WriteString(": " + e.Reason)
	}
	for _, f := range e.SchemaValidationErrors {
		b.WriteString("\n      * ")
		if f.FieldPath != "" {
			b.WriteString(f.FieldPath + ": ")
		}
		b.WriteString(f.Reason)
		if f.KeywordLocation != "" {
			b.WriteString(" (schema " + f.KeywordLocation + ")")
		}
	}
	return b.String()
}

// excerpt shortens a body for an error message.
func excerpt(b []byte) string {
	const max = 600
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(empty)"
	}
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// RoundTripper returns a transport that sends every request through base
// (http.DefaultTransport when nil) and checks the exchange with v, failing t on
// a mismatch. The response body is read in full and handed back unread.
func RoundTripper(t testing.TB, v *Validator, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &roundTripper{t: t, v: v, base: base}
}

type roundTripper struct {
	t    testing.TB
	v    *Validator
	base http.RoundTripper
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	reqBody, out, err := bufferRequest(req)
	if err != nil {
		return nil, err
	}
	resp, err := rt.base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("openapitest: read the response body: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	rt.t.Helper()
	rt.v.Check(rt.t, req, reqBody, resp, respBody)
	return resp, nil
}

// bufferRequest returns the request body's bytes and the request to send:
// req itself when the body can be read again through GetBody, otherwise a
// copy carrying the buffered body.
func bufferRequest(req *http.Request) ([]byte, *http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, req, nil
	}
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			req.Body.Close()
			return nil, nil, fmt.Errorf("openapitest: copy the request body: %w", err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			req.Body.Close()
			return nil, nil, fmt.Errorf("openapitest: copy the request body: %w", err)
		}
		return b, req, nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("openapitest: read the request body: %w", err)
	}
	out := cloneRequest(req, b)
	out = out.WithContext(req.Context()) // the send keeps the caller's deadline
	return b, out, nil
}

// Webhook returns why body is not what the document's webhooks section
// says event is delivered as (nil when it is).
func (v *Validator) Webhook(event string, body []byte) []string {
	item, ok := v.model.Webhooks.Get(event)
	if !ok || item.Post == nil || item.Post.RequestBody == nil {
		return []string{"the document has no webhook " + event}
	}
	mt, ok := item.Post.RequestBody.Content.Get("application/json")
	if !ok || mt.Schema == nil {
		return []string{"webhook " + event + " has no application/json schema"}
	}
	okay, errs := schema_validation.NewSchemaValidator().ValidateSchemaBytes(mt.Schema.Schema(), body)
	if okay {
		return nil
	}
	var out []string
	for _, e := range errs {
		out = append(out, describe(e))
	}
	if len(out) == 0 {
		out = []string{"does not validate"}
	}
	return out
}
