package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"spaces/shared/auth"
	"spaces/shared/space"
)

// problem is an RFC 9457 problem details document.
type problem struct {
	Type            string             `json:"type"`
	Title           string             `json:"title"`
	Status          int                `json:"status"`
	Detail          string             `json:"detail,omitempty"`
	Instance        string             `json:"instance,omitempty"`
	Errors          []space.FieldError `json:"errors,omitempty"`
	Reason          string             `json:"reason,omitempty"`
	ExistingSpaceID string             `json:"existing_space_id,omitempty"`
	ExistingJobID   string             `json:"existing_job_id,omitempty"`
	Tombstone       *space.Tombstone   `json:"tombstone,omitempty"`
	RequestID       string             `json:"request_id,omitempty"`
}

// httpError is a failure that only exists at the HTTP layer (an oversized
// body, a wrong content type, an unknown route); domain failures are
// *space.Error.
type httpError struct {
	status int
	detail string
	field  string // the header or "body" at fault, if any
}

func (e *httpError) Error() string { return e.detail }

// kinds is the one mapping from domain error kinds to HTTP statuses and
// problem types.
var kinds = map[space.Kind]struct {
	status int
	slug   string
}{
	space.KindInvalid:              {http.StatusUnprocessableEntity, "invalid-fields"},
	space.KindMalformed:            {http.StatusBadRequest, "malformed-request"},
	space.KindNotFound:             {http.StatusNotFound, "not-found"},
	space.KindConflict:             {http.StatusConflict, "conflict"},
	space.KindPreconditionFailed:   {http.StatusPreconditionFailed, "precondition-failed"},
	space.KindPreconditionRequired: {http.StatusPreconditionRequired, "precondition-required"},
	space.KindForbidden:            {http.StatusForbidden, "forbidden"},
	space.KindUnauthenticated:      {http.StatusUnauthorized, "unauthenticated"},
	space.KindUnavailable:          {http.StatusServiceUnavailable, "unavailable"},
	space.KindBadGateway:           {http.StatusBadGateway, "bad-gateway"},
	space.KindTooManyRequests:      {http.StatusTooManyRequests, "too-many-requests"},
	space.KindInternal:             {http.StatusInternalServerError, "internal"},
}

var httpSlugs = map[int]string{
	http.StatusRequestEntityTooLarge: "body-too-large",
	http.StatusUnsupportedMediaType:  "unsupported-media-type",
	http.StatusMethodNotAllowed:      "method-not-allowed",
	http.StatusNotFound:              "not-found",
	http.StatusNotAcceptable:         "not-acceptable",
}

const problemTypePrefix = "urn:spaces:problem:"

// writeError renders err as a problem. Internal causes go to the log only.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := problem{Instance: r.URL.Path, RequestID: requestID(r.Context())}
	var de *space.Error
	var he *httpError
	switch {
	case errors.As(err, &he):
		p.Status, p.Detail = he.status, he.detail
		p.Type = problemTypePrefix + httpSlugs[he.status]
		if he.field != "" {
			p.Errors = []space.FieldError{{Field: he.field, Reason: he.detail}}
		}
	case errors.As(err, &de):
		k := kinds[de.Kind]
		p.Status, p.Type = k.status, problemTypePrefix+k.slug
		p.Detail, p.Errors, p.Reason, p.ExistingSpaceID, p.ExistingJobID = de.Message, de.Fields, de.Reason, de.ExistingID, de.ExistingJobID
		p.Tombstone = de.Tombstone
		switch de.Kind {
		case space.KindUnauthenticated:
			if len(p.Errors) == 0 { // the credentials are what to fix
				p.Errors = []space.FieldError{{Field: "Authorization", Reason: de.Message}}
			}
		case space.KindInternal:
			p.Detail = "an internal error occurred; quote the request id when reporting it"
		case space.KindBadGateway:
			// The message may carry the cloud's own words, which can name
			// Spaces' runtime principal: the log keeps it, the client is
			// told what to fix.
			p.Detail = badGatewayDetail(de.Reason)
		}
	default:
		k := kinds[space.KindInternal]
		p.Status, p.Type = k.status, problemTypePrefix+k.slug
		p.Detail = "an internal error occurred; quote the request id when reporting it"
	}
	p.Title = http.StatusText(p.Status)
	if errors.Is(r.Context().Err(), context.Canceled) {
		// The client went away (the server cancels the request's context
		// then): whatever failed downstream is not the server's fault, and
		// nobody reads the answer. Logged and counted as 499, never 5xx.
		if rec, ok := w.(interface{ clientGone() }); ok {
			rec.clientGone()
		}
		logger(r.Context()).InfoContext(r.Context(), "client cancelled the request", "error", err.Error())
		return
	}
	if p.Status >= 500 {
		logger(r.Context()).ErrorContext(r.Context(), "request failed", "status", p.Status, "error", err.Error())
	} else {
		logger(r.Context()).InfoContext(r.Context(), "request refused", "status", p.Status, "error", err.Error())
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", auth.Challenge(err))
	}
	if de != nil && de.RetryAfter > 0 { // whole seconds, rounded up (RFC 9110, 10.2.3)
		w.Header().Set("Retry-After", strconv.FormatInt(int64((de.RetryAfter+time.Second-1)/time.Second), 10))
	}
	writeJSON(w, p.Status, "application/problem+json", p)
}

var newline = []byte("\n")

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only unsupported values can fail here: a programming error.
		slog.Error("encode response", "error", err)
		http.Error(w, `{"title":"Internal Server Error","status":500}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	// Two writes: appending the newline would copy the body.
	_, _ = w.Write(body)
	_, _ = w.Write(newline)
}

// badGatewayDetail tells the client what to fix for each 502 reason.
func badGatewayDetail(reason string) string {
	switch reason {
	case space.ReasonAccessDenied:
		return "the cloud refused Spaces access: check the cloud account's connection (the role or identity Spaces uses and its permissions on the cluster)"
	case space.ReasonClusterNotFound:
		return "the cloud account has no such cluster: check the space's config and the cloud account"
	case space.ReasonUnauthorized:
		return "the cluster refused Spaces' credentials: check that the cluster grants access to the cloud account's identity"
	case space.ReasonCredentialsUnavailable:
		return "no usable credentials could be minted for the cluster: check the cloud account's connection"
	case space.ReasonBadResponse:
		return "the cluster answered unexpectedly; try again, and quote the request id if it persists"
	default:
		return "a dependency answered unexpectedly; quote the request id when reporting it"
	}
}

// UnreadableRequest is the problem for a request the HTTP server refused
// before any handler could read it (a header value with a control byte, a
// malformed request line): the same document every other 4xx is, so a
// client parses one error format. status is the server's own (400, 431,
// 501); detail says what was wrong without echoing the request.
func UnreadableRequest(status int, detail string) []byte {
	slug := "malformed-request"
	if s, ok := httpSlugs[status]; ok {
		slug = s
	}
	body, _ := json.Marshal(problem{Type: problemTypePrefix + slug, Title: http.StatusText(status), Status: status, Detail: detail})
	return append(body, '\n')
}
