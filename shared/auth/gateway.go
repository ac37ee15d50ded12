package auth

import (
	"net/http"
	"slices"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"
)

// GatewayClaims reads the claims API Gateway's JWT authorizer has already
// verified (issuer, audience, signature, expiry) from the request context that
// httpadapter.NewV2 builds. It reads the context only: the proxy's
// X-GoLambdaProxy-ApiGatewayContext header can be sent by any client and is
// never trusted.
type GatewayClaims struct{}

// Authenticate implements Authenticator.
func (GatewayClaims) Authenticate(r *http.Request) (Principal, error) {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
	if !ok || rc.Authorizer == nil || rc.Authorizer.JWT == nil || len(rc.Authorizer.JWT.Claims) == 0 {
		// Give the caller the same answer as a local run would for a missing
		// or malformed header; otherwise the route has no authorizer.
		if _, err := bearerToken(r); err != nil {
			return Principal{}, err
		}
		return Principal{}, invalidToken("the bearer token was not verified by the gateway", nil)
	}
	verified := rc.Authorizer.JWT
	scopes := parseScopes(verified.Claims["scope"])
	for _, s := range verified.Scopes {
		if s != "" && !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	return newPrincipal(verified.Claims["org_id"], verified.Claims["sub"], scopes)
}
