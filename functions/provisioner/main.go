// Command provisioner is the SQS-triggered Lambda that runs provisioning
// jobs one step per message (see shared/provisioning): create the cluster
// as the org's connected identity, poll it, register it as a space.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/config"
	"spaces/shared/tracing"
	"spaces/shared/wiring"
	"spaces/shared/wiring/clouds"
	"spaces/shared/wiring/parts"
)

func main() {
	fn := config.NewFunction()
	s, fed := wiring.ReadProvisioner(fn.Env), clouds.Read(fn.Env)
	a := parts.AWS{Config: fn.AWS()}
	minter := clouds.Minter(fed, a.Config, a.Store(s.Table))
	lambda.Start(tracing.Handler(fn.Tracing, "provisioner", wiring.Provisioner(a, s, clouds.Creator(minter), minter, fn.Log).HandleSQS))
}
