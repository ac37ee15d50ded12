package auth

import (
	"errors"

	"spaces/shared/space"
)

// Challenge is the RFC 6750 WWW-Authenticate value of a 401: bare when no
// credentials were offered, with the error code (kept in space.Error.Reason
// by the authenticators) when they were wrong.
func Challenge(err error) string {
	const base = `Bearer realm="spaces"`
	var e *space.Error
	if errors.As(err, &e) {
		switch e.Reason {
		case reasonInvalidRequest, reasonInvalidToken:
			return base + `, error="` + e.Reason + `"`
		}
	}
	return base
}
