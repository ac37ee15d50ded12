package auth

import (
	"errors"
	"net/http"

	"spaces/shared/space"
)

// Middleware authenticates every request with a and passes it on with the
// Principal in its context (read it with FromContext). A failure goes to
// onError, which writes the response (the HTTP layer maps errors in one
// place); the RFC 6750 WWW-Authenticate challenge is set before that. Public
// paths are the caller's business: wrap only the handlers that need a caller.
func Middleware(a Authenticator, onError func(w http.ResponseWriter, r *http.Request, err error)) func(http.Handler) http.Handler {
	if onError == nil {
		onError = plainError
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := a.Authenticate(r)
			if err != nil {
				if space.KindOf(err) == space.KindUnauthenticated {
					w.Header().Set("WWW-Authenticate", challenge(err))
				}
				onError(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
		})
	}
}

// challenge builds the WWW-Authenticate value: bare when no credentials were
// offered, with an error code when they were wrong.
func challenge(err error) string {
	const base = `Bearer realm="spaces"`
	var e *space.Error
	if errors.As(err, &e) && e.Reason != "" {
		return base + `, error="` + e.Reason + `"`
	}
	return base
}

// plainError is the fallback when no onError is given: the public message
// only, never the internal cause.
func plainError(w http.ResponseWriter, _ *http.Request, err error) {
	var e *space.Error
	if errors.As(err, &e) && e.Kind == space.KindUnauthenticated {
		http.Error(w, e.Message, http.StatusUnauthorized)
		return
	}
	http.Error(w, "internal error", http.StatusInternalServerError)
}
