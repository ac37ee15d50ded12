// Command discovery is Spaces' cluster-side function: the routes that reach
// into clouds and clusters (namespace discovery, the cluster picker,
// account verification) behind the same API Gateway HTTP API as the
// catalog, and the catalog API's cloud questions (does a cluster exist,
// does an account trust the org), invoked synchronously. It is the one API
// function that links client-go and the cloud SDKs.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"spaces/shared/auth"
	"spaces/shared/config"
	"spaces/shared/wiring/clouds"
	"spaces/shared/wiring/discovery"
	"spaces/shared/wiring/parts"
)

func main() {
	fn := config.NewFunction()
	s := discovery.Read(fn.Env)
	a := parts.AWS{Config: fn.AWS()}
	lambda.Start(function(a, s, fn).Lambda(fn.Tracing))
}

// function builds the discovery function exactly as Lambda runs it.
func function(a parts.AWS, s discovery.Settings, fn *config.Function) *discovery.Function {
	minter := clouds.Minter(s.Clouds, a.Config, a.Store(s.Table))
	return discovery.New(a, s, discovery.Options{Auth: auth.GatewayClaims{}, Minter: minter, Log: fn.Log})
}
