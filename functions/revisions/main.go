// Command revisions is the SQS-triggered Lambda that claims deployment
// revisions (see shared/revisions): apply, retry later, stop or
// dead-letter.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/config"
	"spaces/shared/kubeapply"
	"spaces/shared/tracing"
	"spaces/shared/wiring"
	"spaces/shared/wiring/clouds"
	"spaces/shared/wiring/parts"
)

func main() {
	fn := config.NewFunction()
	s, fed := wiring.ReadClaimer(fn.Env), clouds.Read(fn.Env)
	a := parts.AWS{Config: fn.AWS()}
	minter := clouds.Minter(fed, a.Config, a.Store(s.Table))
	lambda.Start(tracing.Handler(fn.Tracing, "revisions", wiring.Claimer(a, s, minter, &kubeapply.Applier{}, fn.Log).HandleSQS))
}
