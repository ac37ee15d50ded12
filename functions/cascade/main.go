// Command cascade is the Lambda on the spaces table's stream that carries a
// deregistration through the platform (see shared/cascade). Its event
// source's filter lets only deregistrations invoke it.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/awsclient"
	"spaces/shared/cascade"
	"spaces/shared/config"
	"spaces/shared/dynamostore"
	"spaces/shared/eventbus"
)

func main() {
	fn := config.NewFunction()
	log, env := fn.Log, fn.Env
	table := env.Required("TABLE_NAME")
	bus := env.Required("EVENT_BUS_NAME")
	awsCfg := fn.AWS(context.Background())
	c := &cascade.Cascade{
		Store:  dynamostore.New(awsclient.DynamoDB(awsCfg, ""), table),
		Events: eventbus.New(awsclient.EventBridge(awsCfg, ""), bus),
		Log:    log,
	}
	lambda.Start(c.HandleStream)
}
