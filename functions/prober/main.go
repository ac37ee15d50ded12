// Command prober is the SQS-triggered Lambda that probes spaces: for each
// message it mints credentials, sends GET /version, stores the status and
// publishes transitions. It reports only infrastructure failures back to
// SQS (ReportBatchItemFailures).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/awsclient"
	"spaces/shared/config"
	"spaces/shared/dynamostore"
	"spaces/shared/eventbus"
	"spaces/shared/kubeprobe"
	"spaces/shared/metrics"
	"spaces/shared/mint"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/sqsqueue"
)

func main() {
	fn := config.NewFunction()
	log, env := fn.Log, fn.Env
	table := env.Required("TABLE_NAME")
	queueURL := env.Required("PROBE_QUEUE_URL")
	bus := env.Required("EVENT_BUS_NAME")
	heartbeat := env.Duration("HEARTBEAT", space.DefaultHeartbeat)
	staleAfter := env.Duration("STALE_AFTER", space.DefaultStaleAfter)
	gcpPool := env.String("GCP_WORKLOAD_IDENTITY_PROVIDER", "")
	azureAud := env.String("AZURE_FEDERATED_TOKEN_AUDIENCE", "")
	fn.Check("settings", probing.CheckHeartbeat(heartbeat, space.DefaultProbeInterval, staleAfter))
	ctx := context.Background()
	awsCfg := fn.AWS(ctx)
	store := dynamostore.New(awsclient.DynamoDB(awsCfg, ""), table)
	p := &probing.Prober{
		Store: store,
		Minter: mint.ForRuntime(mint.RuntimeConfig{AWS: awsCfg, Store: store, GCPWorkloadIdentityProvider: gcpPool, AzureTokenAudience: azureAud,
			GCPFederationRole: env.String("GCP_FEDERATION_ROLE_ARN", "")}),
		Checker:   &kubeprobe.Prober{Timeout: probing.DefaultTimeout},
		Events:    eventbus.New(awsclient.EventBridge(awsCfg, ""), bus),
		Queue:     probing.SQSQueue{Q: sqsqueue.New(awsclient.SQS(awsCfg, ""), queueURL)},
		Heartbeat: heartbeat,
		Metrics:   &metrics.Emitter{Log: log},
		Log:       log,
	}
	lambda.Start(p.HandleSQS)
}
