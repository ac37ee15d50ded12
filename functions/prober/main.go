// Command prober is the SQS-triggered Lambda that probes spaces: for each
// space of a message it mints credentials and sends GET /version (for an
// agent space, reads its lease instead), stores the status and publishes
// transitions. It reports only infrastructure failures back to
// SQS (ReportBatchItemFailures).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/config"
	"spaces/shared/kubeprobe"
	"spaces/shared/probing"
	"spaces/shared/tracing"
	"spaces/shared/wiring"
	"spaces/shared/wiring/clouds"
	"spaces/shared/wiring/parts"
)

func main() {
	fn := config.NewFunction()
	s, err := wiring.ReadProber(fn.Env)
	fed := clouds.Read(fn.Env)
	fn.Check("settings", err)
	a := parts.AWS{Config: fn.AWS()}
	minter := clouds.Minter(fed, a.Config, a.Store(s.Table))
	p := wiring.Prober(a, s, minter, &kubeprobe.Prober{Timeout: probing.DefaultTimeout}, fn.Log)
	lambda.Start(tracing.Handler(fn.Tracing, "prober", p.HandleSQS))
}
