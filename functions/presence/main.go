// Command presence is the agents' presence channel over AWS IoT Core: the
// custom authorizer of their MQTT connections (AgentAuthorizer) and the
// consumer of their lifecycle events (AgentPresenceQueue); agents.Lambda
// tells the two event shapes apart. A function of its own, with no URL,
// so that the agent function's public URL, which anyone may flood, holds
// none of its reserved concurrency (docs/operating.md, "Concurrency";
// infra/local's TestPresenceWhileAgentURLSaturated). It links neither
// client-go nor a cloud SDK.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/config"
	"spaces/shared/tracing"
	"spaces/shared/wiring/agents"
	"spaces/shared/wiring/parts"
)

func main() {
	fn := config.NewFunction()
	a := parts.AWS{Config: fn.AWS()}
	h := agents.NewHandlers(a, agents.Read(fn.Env), agents.Options{Log: fn.Log})
	lambda.Start(serve(h, fn.Tracing))
}

// serve is the Lambda handler: each shape in the invocation's span; an
// HTTP request is none of this function's (it has no URL).
func serve(h *agents.Handlers, t *tracing.Tracing) func(context.Context, json.RawMessage) (any, error) {
	return agents.Lambda{
		Authorize: tracing.Handler(t, "agent authorize", h.Authorize),
		Presence:  tracing.Handler(t, "agent presence", h.Presence),
	}.Handle
}
