// Command cascade is the Lambda on the spaces table's stream that carries a
// deregistration through the platform (see shared/cascade). Its event
// source's filter lets only deregistrations invoke it.
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
	s := wiring.ReadCascade(fn.Env)
	a := parts.AWS{Config: fn.AWS()}
	lambda.Start(tracing.Handler(fn.Tracing, "cascade", wiring.Cascade(a, s, fn.Log).HandleStream))
}
