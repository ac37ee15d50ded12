// Command cascade is the Lambda on the spaces table's stream that carries a
// deregistration through the platform (see shared/cascade). Its event
// source's filter lets only deregistrations invoke it.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/awsclient"
	"spaces/shared/cascade"
	"spaces/shared/config"
	"spaces/shared/dynamostore"
	"spaces/shared/eventbus"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	env := config.FromOS()
	table := env.Required("TABLE_NAME")
	bus := env.Required("EVENT_BUS_NAME")
	if err := env.Err(); err != nil {
		log.Error("cannot start", "error", err)
		os.Exit(1)
	}
	awsCfg, err := awsclient.Load(context.Background(), awsclient.Options{})
	if err != nil {
		log.Error("cannot load AWS configuration", "error", err)
		os.Exit(1)
	}
	c := &cascade.Cascade{
		Store:  dynamostore.New(awsclient.DynamoDB(awsCfg, ""), table),
		Events: eventbus.New(awsclient.EventBridge(awsCfg, ""), bus),
		Log:    log,
	}
	lambda.Start(c.HandleStream)
}
