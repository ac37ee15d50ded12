package client

import "strings"

// idempotentCreates are the routes (method and path template, as in
// openapi.yaml) that take an Idempotency-Key. TestIdempotentCreatesMatchSpec
// holds the list to openapi.yaml's: a new route that takes one fails it
// until it is listed here.
var idempotentCreates = []string{
	"POST /spaces",
	"POST /provisioning-jobs",
}

// takesIdempotencyKey matches a request's method and path (below the
// server's base path) against the templates, a {parameter} matching one
// segment.
func takesIdempotencyKey(method, path string) bool {
	for _, route := range idempotentCreates {
		m, tmpl, _ := strings.Cut(route, " ")
		if m == method && pathMatches(tmpl, path) {
			return true
		}
	}
	return false
}

func pathMatches(tmpl, path string) bool {
	ts, ps := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if ps[i] == "" {
				return false
			}
		} else if t != ps[i] {
			return false
		}
	}
	return true
}
