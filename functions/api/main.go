// Command api is the Spaces catalog REST API as a Lambda function behind an
// API Gateway HTTP API whose JWT authorizer has already verified the token.
// It links neither client-go nor a cloud SDK: the cloud questions of a
// registration or a new account are invoked on functions/discovery, which
// also serves the cluster-side routes.
package main

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"spaces/shared/auth"
	"spaces/shared/awsclient"
	"spaces/shared/config"
	"spaces/shared/secret"
	"spaces/shared/wiring"
	"spaces/shared/wiring/api"
)

func main() {
	fn := config.NewFunction()
	ctx := context.Background()
	s := api.Read(fn.Env)
	a := wiring.AWS{Config: fn.AWS(ctx)}
	// The cursor key comes from Secrets Manager at cold start, never from
	// the environment; the previous value keeps older cursors open.
	var err error
	s.CursorSecret, s.PreviousCursorSecret, err = secret.Versions(ctx, awsclient.SecretsManager(a.Config, ""), s.CursorSecretARN)
	fn.Check("cursor secret", err)
	h, err := handler(a, s, fn)
	fn.Check("handler", err)
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}

// handler builds the API exactly as the function serves it.
func handler(a wiring.AWS, s api.Settings, fn *config.Function) (http.Handler, error) {
	h, _, err := api.New(a, s, api.Options{Auth: auth.GatewayClaims{}, Cloud: api.CloudCall(a, s), Log: fn.Log})
	if err != nil {
		return nil, err
	}
	return h.Handler(), nil
}
