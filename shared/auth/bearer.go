package auth

import (
	"net/http"
	"strings"
)

// maxTokenLen bounds what is parsed at all; real tokens are well under 2 KiB.
const maxTokenLen = 8 << 10

// bearerToken extracts the token from the Authorization header (RFC 6750
// section 2.1; the scheme is case-insensitive).
func bearerToken(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	if len(values) > 1 {
		return "", unauthenticated(reasonInvalidRequest, "the request has more than one Authorization header", nil)
	}
	if len(values) == 0 || strings.TrimSpace(values[0]) == "" {
		return "", unauthenticated("", "the request has no Authorization header; send Authorization: Bearer <token>", nil)
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", unauthenticated("", "the Authorization header must use the Bearer scheme", nil)
	}
	token = strings.TrimSpace(token)
	switch {
	case token == "":
		return "", unauthenticated(reasonInvalidRequest, "the bearer token is empty", nil)
	case len(token) > maxTokenLen:
		return "", invalidToken("the bearer token is too long", nil)
	}
	return token, nil
}
