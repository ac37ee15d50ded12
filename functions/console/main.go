// Command console serves the web console (shared/console: embedded static
// files and the sign-in config document) as a Lambda behind the HTTP API's
// GET / and GET /console/{proxy+} routes, which take no authorizer: the page
// must load before its user signs in, and it holds nothing secret. It links
// neither the AWS SDK nor the API, and the API function links no console.
package main

import (
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"spaces/shared/console"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	h, err := handler(os.Getenv)
	if err != nil {
		log.Error("cannot start: configuration", "error", err)
		os.Exit(1)
	}
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}

type configError []string

func (e configError) Error() string { return strings.Join(e, "; ") }

// handler reads the OIDC settings the template passes and builds the
// console with them.
func handler(getenv func(string) string) (http.Handler, error) {
	cfg := console.Config{
		SignIn:   "oidc",
		Issuer:   getenv("OIDC_ISSUER"),
		ClientID: getenv("OIDC_CLIENT_ID"),
		Audience: getenv("OIDC_AUDIENCE"),
		Scope:    getenv("OIDC_SCOPE"),
		// Only when the token endpoint is not on the issuer's origin.
		TokenEndpoint: getenv("OIDC_TOKEN_ENDPOINT"),
	}
	var bad configError
	if !strings.HasPrefix(cfg.Issuer, "https://") {
		bad = append(bad, "OIDC_ISSUER must be an https URL")
	}
	if cfg.TokenEndpoint != "" && !strings.HasPrefix(cfg.TokenEndpoint, "https://") {
		bad = append(bad, "OIDC_TOKEN_ENDPOINT must be an https URL when set")
	}
	if cfg.ClientID == "" {
		bad = append(bad, "OIDC_CLIENT_ID is required")
	}
	if len(bad) > 0 {
		return nil, bad
	}
	return console.Handler(cfg), nil
}
