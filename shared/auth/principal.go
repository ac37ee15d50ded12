// Package auth tells who is calling: it turns a request's bearer token into a
// Principal (org, subject, scopes). Deployed, API Gateway has verified the JWT
// and the function reads the verified claims (GatewayClaims); locally the
// token is verified here against a development key (LocalVerifier).
package auth

import (
	"net/http"
	"slices"
	"strings"
	"unicode"

	"spaces/shared/space"
)

// ScopeInternal marks internal callers (the prober, other platform services).
const ScopeInternal = "spaces:internal"

// Principal is the verified caller. OrgID comes from the token only, never
// from the request.
type Principal struct {
	OrgID   string
	Subject string
	Scopes  []string
}

// Has reports whether the principal was granted scope.
func (p Principal) Has(scope string) bool { return scope != "" && slices.Contains(p.Scopes, scope) }

// Authenticator turns a request into its Principal. Errors are *space.Error
// of kind KindUnauthenticated whose Message is safe to show the client.
type Authenticator interface {
	Authenticate(r *http.Request) (Principal, error)
}

// RFC 6750 error codes, kept in space.Error.Reason so that Challenge can
// build the WWW-Authenticate value without parsing messages.
const (
	reasonInvalidRequest = "invalid_request"
	reasonInvalidToken   = "invalid_token"
)

// unauthenticated builds the 401 error; msg is shown to the client, cause
// only logged.
func unauthenticated(reason, msg string, cause error) *space.Error {
	return &space.Error{Kind: space.KindUnauthenticated, Reason: reason, Message: msg, Err: cause}
}

func invalidToken(msg string, cause error) *space.Error {
	return unauthenticated(reasonInvalidToken, msg, cause)
}

// maxOrgIDLen bounds org_id: it becomes part of storage keys and log lines.
const maxOrgIDLen = 128

// newPrincipal checks the identity claims every authenticator shares.
func newPrincipal(org, subject string, scopes []string) (Principal, error) {
	if org == "" {
		return Principal{}, invalidToken("the bearer token has no org_id claim", nil)
	}
	if !validOrgID(org) {
		return Principal{}, invalidToken("the bearer token's org_id claim is not a valid organization id", nil)
	}
	return Principal{OrgID: org, Subject: subject, Scopes: scopes}, nil
}

// validOrgID accepts up to maxOrgIDLen printable, non-space characters.
func validOrgID(org string) bool {
	if len(org) > maxOrgIDLen {
		return false
	}
	for _, r := range org {
		if r == unicode.ReplacementChar || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// parseScopes splits an OAuth scope string ("a b c"). API Gateway flattens
// array claims to "[a b c]", so brackets around the whole value are dropped.
func parseScopes(s string) []string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	return strings.Fields(s)
}
