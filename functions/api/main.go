// Command api is the Spaces REST API as a Lambda function behind an API
// Gateway HTTP API whose JWT authorizer has already verified the token.
package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"spaces/shared/auth"
	"spaces/shared/awsclient"
	"spaces/shared/config"
	"spaces/shared/cursor"
	"spaces/shared/dynamostore"
	"spaces/shared/mint"
	"spaces/shared/probing"
	"spaces/shared/registry"
	"spaces/shared/revisions"
	"spaces/shared/space"
	"spaces/shared/sqsqueue"
)

type settings struct {
	table      string
	secret     string
	staleAfter time.Duration
	probeQueue string // where registration probes are sent
	revisions  string // where deployment revisions are queued
	gcpPool    string // GCP workload identity provider resource name
	azureAud   string // audience of the STS web identity token Entra trusts
}

func main() {
	fn := config.NewFunction()
	log, env := fn.Log, fn.Env
	s := settings{
		table:      env.Required("TABLE_NAME"),
		secret:     env.Required("CURSOR_SECRET"),
		staleAfter: env.Duration("STALE_AFTER", space.DefaultStaleAfter),
		probeQueue: env.Required("PROBE_QUEUE_URL"),
		revisions:  env.Required("REVISIONS_QUEUE_URL"),
		gcpPool:    env.String("GCP_WORKLOAD_IDENTITY_PROVIDER", ""),
		azureAud:   env.String("AZURE_FEDERATED_TOKEN_AUDIENCE", ""),
	}
	awsCfg := fn.AWS(context.Background())
	store := dynamostore.New(awsclient.DynamoDB(awsCfg, ""), s.table)
	minter := mint.ForRuntime(mint.RuntimeConfig{AWS: awsCfg, Store: store, GCPWorkloadIdentityProvider: s.gcpPool, AzureTokenAudience: s.azureAud,
		// Who the customers' clouds are told to trust (each account's setup).
		GCPFederationRole: env.String("GCP_FEDERATION_ROLE_ARN", ""), AWSPrincipal: env.String("SPACES_AWS_PRINCIPAL", ""),
		AzureIssuer: env.String("AZURE_FEDERATED_TOKEN_ISSUER", ""), AzureSubject: env.String("AZURE_FEDERATED_TOKEN_SUBJECT", "")})
	probes := probing.Enqueuer{Queue: probing.SQSQueue{Q: sqsqueue.New(awsclient.SQS(awsCfg, ""), s.probeQueue)}}
	revs := revisions.Queue{Q: sqsqueue.New(awsclient.SQS(awsCfg, ""), s.revisions)}
	h, err := handler(s, store, minter, probes, revs, log)
	fn.Check("handler", err)
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}

// handler builds the API exactly as the function serves it.
func handler(s settings, store *dynamostore.Store, minter *mint.Minter, probes probing.Enqueuer, revs space.RevisionQueue, log *slog.Logger) (http.Handler, error) {
	cursors, err := cursor.New(cursor.KeyFromSecret(s.secret))
	if err != nil {
		return nil, err
	}
	api, _ := registry.API(registry.Options{Store: store, Minter: minter, Auth: auth.GatewayClaims{},
		Cursors: cursors, Log: log, StaleAfter: s.staleAfter, Probes: probes, Revisions: revs})
	return api.Handler(), nil
}
