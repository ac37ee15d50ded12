// Command scheduler runs every minute (EventBridge Scheduler) and sends one
// probe message per registered, non-synthetic space to the probe queue. It
// does not link client-go.
package main

import (
	"context"
	"log/slog"
	"os"

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
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	env := config.FromOS()
	table := env.Required("TABLE_NAME")
	queueURL := env.Required("PROBE_QUEUE_URL")
	interval := env.Duration("PROBE_INTERVAL", space.DefaultProbeInterval)
	if err := env.Err(); err != nil {
		log.Error("cannot start", "error", err)
		os.Exit(1)
	}
	ctx := context.Background()
	awsCfg, err := awsclient.Load(ctx, awsclient.Options{})
	if err != nil {
		log.Error("cannot load AWS configuration", "error", err)
		os.Exit(1)
	}
	s := &probing.Scheduler{
		Targets:  dynamostore.New(awsclient.DynamoDB(awsCfg, ""), table),
		Queue:    probing.SQSQueue{Q: sqsqueue.New(awsclient.SQS(awsCfg, ""), queueURL)},
		Interval: interval,
		Metrics:  &metrics.Emitter{Log: log},
		Log:      log,
	}
	lambda.Start(s.HandleSchedule)
}
