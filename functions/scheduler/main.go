// Command scheduler runs every minute (EventBridge Scheduler) and sends a
// probe of every registered, non-synthetic space to the probe queue, up to
// probing.MaxSpaces spaces a message. It does not link client-go.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/config"
	"spaces/shared/tracing"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

func main() {
	fn := config.NewFunction()
	s := wiring.ReadScheduler(fn.Env)
	a := parts.AWS{Config: fn.AWS()}
	lambda.Start(tracing.Handler(fn.Tracing, "scheduler", wiring.Scheduler(a, s, fn.Log).HandleSchedule))
}
