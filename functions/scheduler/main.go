// Command scheduler runs every minute (EventBridge Scheduler) and sends one
// probe message per registered, non-synthetic space to the probe queue. It
// does not link client-go.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/awsclient"
	"spaces/shared/config"
	"spaces/shared/dynamostore"
	"spaces/shared/metrics"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/sqsqueue"
)

func main() {
	fn := config.NewFunction()
	log, env := fn.Log, fn.Env
	table := env.Required("TABLE_NAME")
	queueURL := env.Required("PROBE_QUEUE_URL")
	interval := env.Duration("PROBE_INTERVAL", space.DefaultProbeInterval)
	ctx := context.Background()
	awsCfg := fn.AWS(ctx)
	s := &probing.Scheduler{
		Targets:  dynamostore.New(awsclient.DynamoDB(awsCfg, ""), table),
		Queue:    probing.SQSQueue{Q: sqsqueue.New(awsclient.SQS(awsCfg, ""), queueURL)},
		Interval: interval,
		Metrics:  &metrics.Emitter{Log: log},
		Log:      log,
	}
	lambda.Start(s.HandleSchedule)
}
