// Command api is the Spaces REST API as a Lambda function behind an API
// Gateway HTTP API whose JWT authorizer has already verified the token.
package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"spaces"
	"spaces/shared/auth"
	"spaces/shared/awsclient"
	"spaces/shared/config"
	"spaces/shared/cursor"
	"spaces/shared/dynamostore"
	"spaces/shared/httpapi"
	"spaces/shared/space"
)

type settings struct {
	table      string
	secret     string
	staleAfter time.Duration
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	env := config.FromOS()
	s := settings{
		table:      env.Required("TABLE_NAME"),
		secret:     env.Required("CURSOR_SECRET"),
		staleAfter: env.Duration("STALE_AFTER", space.DefaultStaleAfter),
	}
	if err := env.Err(); err != nil {
		log.Error("cannot start", "error", err)
		os.Exit(1)
	}
	awsCfg, err := awsclient.Load(context.Background(), awsclient.Options{})
	if err != nil {
		log.Error("cannot load AWS configuration", "error", err)
		os.Exit(1)
	}
	h, err := handler(s, awsclient.DynamoDB(awsCfg, ""), log)
	if err != nil {
		log.Error("cannot start", "error", err)
		os.Exit(1)
	}
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}

// handler builds the API exactly as the function serves it.
func handler(s settings, db *dynamodb.Client, log *slog.Logger) (http.Handler, error) {
	cursors, err := cursor.New(cursor.KeyFromSecret(s.secret))
	if err != nil {
		return nil, err
	}
	api := &httpapi.API{
		Spaces:  space.NewService(dynamostore.New(db, s.table), s.staleAfter),
		Auth:    auth.GatewayClaims{},
		Cursors: cursors,
		Log:     log,
		OpenAPI: spaces.OpenAPI,
	}
	return api.Handler(), nil
}
