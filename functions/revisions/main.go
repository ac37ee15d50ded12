// Command revisions is the SQS-triggered Lambda that claims deployment
// revisions (see shared/revisions): apply, retry later, stop or
// dead-letter.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/awsclient"
	"spaces/shared/config"
	"spaces/shared/dynamostore"
	"spaces/shared/kubeapply"
	"spaces/shared/mint"
	"spaces/shared/revisions"
	"spaces/shared/space"
)

func main() {
	fn := config.NewFunction()
	log, env := fn.Log, fn.Env
	table := env.Required("TABLE_NAME")
	queueURL := env.Required("REVISIONS_QUEUE_URL")
	dlqURL := env.Required("REVISIONS_DLQ_URL")
	staleAfter := env.Duration("STALE_AFTER", space.DefaultStaleAfter)
	gcpPool := env.String("GCP_WORKLOAD_IDENTITY_PROVIDER", "")
	azureAud := env.String("AZURE_FEDERATED_TOKEN_AUDIENCE", "")
	awsCfg := fn.AWS(context.Background())
	store := dynamostore.New(awsclient.DynamoDB(awsCfg, ""), table)
	c := &revisions.Claimer{
		Store: store,
		Minter: mint.ForRuntime(mint.RuntimeConfig{AWS: awsCfg, Store: store, GCPWorkloadIdentityProvider: gcpPool, AzureTokenAudience: azureAud,
			GCPFederationRole: env.String("GCP_FEDERATION_ROLE_ARN", "")}),
		Applier:    &kubeapply.Applier{},
		SQS:        awsclient.SQS(awsCfg, ""),
		QueueURL:   queueURL,
		DLQURL:     dlqURL,
		StaleAfter: staleAfter,
		Log:        log,
	}
	lambda.Start(c.HandleSQS)
}
