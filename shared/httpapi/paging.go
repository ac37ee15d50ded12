package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"spaces/shared/space"
)

const (
	defaultLimit = 50
	// MaxLimit caps a page; larger requests are clamped to it.
	MaxLimit = 100
)

// query reads a query string: only the allowed parameters, each at most
// once; paged listings allow pageParams. Problems are collected so all of them are reported together.
type query struct {
	v   url.Values
	bad []space.FieldError
}

// pageParams are the parameters of every paged listing.
var pageParams = []string{"limit", "cursor"}

func newQuery(rawQuery string, allowed ...string) *query {
	q := &query{v: url.Values{}}
	// url.ParseQuery drops a pair whose percent-escape is broken and
	// r.URL.Query() hides the error, so ?provider=gc%zz would list every
	// provider: a filter that fails open. Each pair is decoded here and a
	// bad one is refused by name.
	for _, pair := range strings.Split(rawQuery, "&") {
		if pair == "" {
			continue
		}
		rawKey, rawVal, _ := strings.Cut(pair, "=")
		k, err := url.QueryUnescape(rawKey)
		if err != nil {
			q.fail(rawKey, "is not a validly percent-encoded parameter name")
			continue
		}
		if k == "" {
			q.fail("query", "has a parameter without a name")
			continue
		}
		val, err := url.QueryUnescape(rawVal)
		if err != nil {
			q.fail(k, "has an invalid percent-escape in its value")
		}
		q.v[k] = append(q.v[k], val)
	}
	v := q.v
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case !ok[k]:
			q.fail(k, "is not a known query parameter")
		case len(v[k]) > 1:
			q.fail(k, "must be given at most once")
		}
	}
	return q
}

func (q *query) fail(field, reason string) {
	q.bad = append(q.bad, space.FieldError{Field: field, Reason: reason})
}

func (q *query) get(name string) string { return q.v.Get(name) }

// oneOf reads an optional parameter that must be one of the given values.
func (q *query) oneOf(name string, values ...string) string {
	s := q.v.Get(name)
	if s == "" {
		return ""
	}
	for _, v := range values {
		if s == v {
			return s
		}
	}
	q.fail(name, "must be one of "+strings.Join(values, ", "))
	return ""
}

// oneOf is q.oneOf for the domain's own lists of values.
func oneOf[T ~string](q *query, name string, values []T) T {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	return T(q.oneOf(name, s...))
}

func (q *query) limit() int {
	s := q.v.Get("limit")
	if s == "" {
		return defaultLimit
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		q.fail("limit", "must be a whole number from 1 to "+strconv.Itoa(MaxLimit))
		return 0
	}
	return min(n, MaxLimit)
}

func (q *query) err() error {
	if len(q.bad) == 0 {
		return nil
	}
	return &space.Error{Kind: space.KindMalformed, Message: "the query string is not valid", Fields: q.bad}
}

// cursorState is what a cursor hides: the id of the last item returned.
type cursorState struct {
	After string `json:"a"`
}

// page reads limit and cursor; scope binds the cursor to the org, route and
// filters so that it cannot be replayed against another listing.
func (a *API) page(q *query, scope string) space.Page {
	p := space.Page{Limit: q.limit()}
	if c := q.get("cursor"); c != "" {
		var st cursorState
		if err := a.Cursors.Open(scope, c, &st); err != nil {
			q.fail("cursor", "is not a valid cursor for this listing")
		}
		p.After = st.After
	}
	return p
}

type listResponse[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// writeList answers one page of a listing; after is the id to continue
// after ("" when the listing is complete), sealed into the next cursor. The
// page carries an ETag derived from its content, so a client polling with
// If-None-Match gets a 304 without a body while nothing on the page changed.
func writeList[T any](a *API, w http.ResponseWriter, r *http.Request, scope string, items []T, after string, err error) error {
	if err != nil {
		return err
	}
	var next string
	if after != "" {
		if next, err = a.Cursors.Seal(scope, cursorState{After: after}); err != nil {
			return err
		}
	}
	if items == nil {
		items = []T{}
	}
	body, err := json.Marshal(listResponse[T]{Items: items, NextCursor: next})
	if err != nil {
		return err
	}
	body = append(body, '\n')
	tag, err := listETag(scope, items, after)
	if err != nil {
		return err
	}
	writeTagged(w, r, tag, body)
	return nil
}

// listETag is a weak entity tag of a page: its items and the position it
// continues after, within its listing (scope). The sealed cursor itself is
// left out, since sealing is randomised: two pages with the same tag carry
// the same items and cursors to the same next page, though not the same
// cursor bytes, which is what a weak tag promises. The items already reflect
// the observed status (ProbeStale), so a space turning stale changes it too.
func listETag[T any](scope string, items []T, after string) (string, error) {
	b, err := json.Marshal(items)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(after))
	h.Write([]byte{0})
	h.Write(b)
	return `W/"l-` + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:18]) + `"`, nil
}

// noneMatch reports whether If-None-Match (as header values, which the proxy
// may have split on commas) names tag or is *. Comparison is weak (RFC 9110
// 13.1.2, as If-None-Match requires), so "x" matches W/"x".
func noneMatch(values []string, tag string) bool {
	tag = strings.TrimPrefix(tag, "W/")
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == "*" || t == tag {
				return true
			}
		}
	}
	return false
}

// writeTagged answers a JSON body under its entity tag, or 304 when the
// caller's If-None-Match already names it.
func writeTagged(w http.ResponseWriter, r *http.Request, tag string, body []byte) {
	w.Header().Set("ETag", tag)
	if noneMatch(r.Header.Values("If-None-Match"), tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
