// Command webhooks is the Lambda that delivers the org's events to its
// webhook endpoints (see shared/webhooks): on the spaces table's stream it
// fans each event out to the delivery queue, and on that queue it makes
// each attempt.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/config"
	"spaces/shared/tracing"
	"spaces/shared/webhooks"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

func main() {
	fn := config.NewFunction()
	s := wiring.ReadWebhooks(fn.Env)
	a := parts.AWS{Config: fn.AWS()}
	lambda.Start(tracing.Handler(fn.Tracing, "webhooks", webhooks.Lambda(wiring.Webhooks(a, s, fn.Log))))
}
