// Command api is the Spaces catalog REST API as a Lambda function behind an
// API Gateway HTTP API whose JWT authorizer has already verified the token.
// It links neither client-go nor a cloud SDK: the cloud questions of a
// registration or a new account are invoked on functions/discovery, which
// also serves the cluster-side routes.
package main

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"spaces/shared/auth"
	"spaces/shared/awsclient"
	"spaces/shared/config"
	"spaces/shared/secret"
	"spaces/shared/tracing"
	"spaces/shared/tracing/tracehttp"
	"spaces/shared/wiring/api"
	"spaces/shared/wiring/parts"
)

func main() {
	fn := config.NewFunction()
	ctx := context.Background()
	s := api.Read(fn.Env)
	a := parts.AWS{Config: fn.AWS()}
	// The cursor key comes from Secrets Manager at cold start, never from
	// the environment; the previous value keeps older cursors open.
	var err error
	s.CursorSecret, s.PreviousCursorSecret, err = secret.Versions(ctx, awsclient.SecretsManager(a.Config, ""), s.CursorSecretARN)
	fn.Check("cursor secret", err)
	h, err := handler(a, s, fn)
	fn.Check("handler", err)
	lambda.Start(serve(h, fn.Tracing))
}

// serve is the Lambda handler: the invocation's span (continuing Lambda's
// X-Ray trace), the API Gateway v2 adapter, then a span per request.
func serve(h http.Handler, t *tracing.Tracing) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return tracing.Handler(t, "api", httpadapter.NewV2(tracehttp.Handler(t, h)).ProxyWithContext)
}

// handler builds the API exactly as the function serves it.
func handler(a parts.AWS, s api.Settings, fn *config.Function) (http.Handler, error) {
	h, _, err := api.New(a, s, api.Options{Auth: auth.GatewayClaims{}, Cloud: api.CloudCall(a, s), Log: fn.Log})
	if err != nil {
		return nil, err
	}
	return h.Handler(), nil
}
