// Command agent serves the routes Spaces' in-cluster agents call (the
// bootstrap exchange, credential and lease renewal, the reports of their
// namespaces and revisions) behind the same API
// Gateway HTTP API as the catalog, without its JWT authorizer: the agent's
// own secret is checked here. A function of its own so that these
// unauthenticated routes hold only its reserved concurrency (README,
// "Concurrency"). It links neither client-go nor a cloud SDK.
package main

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"spaces/shared/config"
	"spaces/shared/tracing"
	"spaces/shared/tracing/tracehttp"
	"spaces/shared/wiring/agents"
	"spaces/shared/wiring/parts"
)

func main() {
	fn := config.NewFunction()
	a := parts.AWS{Config: fn.AWS()}
	h := agents.New(a, agents.Read(fn.Env), agents.Options{Log: fn.Log})
	lambda.Start(serve(h, fn.Tracing))
}

// serve is the Lambda handler: the invocation's span, the API Gateway v2
// adapter, then a span per request.
func serve(h http.Handler, t *tracing.Tracing) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return tracing.Handler(t, "agent", httpadapter.NewV2(tracehttp.Handler(t, h)).ProxyWithContext)
}
