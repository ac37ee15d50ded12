// Command agent serves the routes Spaces' in-cluster agents call (the
// bootstrap exchange, credential and lease renewal, the reports of their
// namespaces and revisions) on its own function URL, not the catalog's
// HTTP API (a function URL has no request charge of its own), with no
// JWT: the agent's own secret is checked here. A function of its own so that these
// unauthenticated routes hold only its reserved concurrency (docs/operating.md,
// "Concurrency"). It links neither client-go nor a cloud SDK.
//
// The agents' presence channel over AWS IoT Core (the custom authorizer
// and the lifecycle events) is functions/presence's, not this one's: this
// URL is public, and a flood of it must not refuse agents' connections.
package main

import (
	"context"
	"encoding/json"

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
	h := agents.NewHandlers(a, agents.Read(fn.Env), agents.Options{Log: fn.Log})
	lambda.Start(serve(h, fn.Tracing))
}

// serve is the Lambda handler: an HTTP request (a function URL's,
// payload format 2.0) in the invocation's span, through the API Gateway
// v2 adapter, then a span per request; no other shape is this function's.
func serve(h *agents.Handlers, t *tracing.Tracing) func(context.Context, json.RawMessage) (any, error) {
	return agents.Lambda{
		HTTP: tracing.Handler(t, "agent", httpadapter.NewV2(tracehttp.Handler(t, h.HTTP)).ProxyWithContext),
	}.Handle
}
