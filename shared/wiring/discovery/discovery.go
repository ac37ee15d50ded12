// Package discovery assembles the cluster-side function (functions/discovery):
// the routes that reach into clouds and clusters (namespace discovery, the
// cluster picker, account verification; httpapi.ClusterRoutes) and the
// catalog API's cloud questions (shared/cloudcall), both on the minter. It
// links client-go and the three cloud SDKs so that the catalog API does not.
package discovery

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"spaces"
	"spaces/shared/auth"
	"spaces/shared/cloudcall"
	"spaces/shared/config"
	"spaces/shared/httpapi"
	"spaces/shared/kubens"
	"spaces/shared/mint"
	"spaces/shared/space"
	"spaces/shared/tracing"
	"spaces/shared/tracing/tracehttp"
	"spaces/shared/wiring/parts"
)

// Settings are the discovery function's configuration.
type Settings struct {
	parts.Common
	Clouds parts.Clouds
	Wakes  parts.Wakes
}

// Read reads the discovery function's settings.
func Read(env *config.Env) Settings {
	return Settings{Common: parts.ReadCommon(env), Clouds: parts.ReadClouds(env), Wakes: parts.ReadWakes(env)}
}

// Options are the parts that differ between processes.
type Options struct {
	Auth auth.Authenticator
	// Minter reaches the clouds; nil means none is reachable: the routes
	// answer 503 and the cloud questions CloudUnavailable.
	Minter *mint.Minter
	Log    *slog.Logger
	Now    func() time.Time
}

// Function is the assembled discovery function.
type Function struct {
	// HTTP serves httpapi.ClusterRoutes.
	HTTP http.Handler
	// Cloud answers the catalog's cloud questions.
	Cloud cloudcall.Handler
}

// New assembles the function.
func New(a parts.AWS, s Settings, o Options) *Function {
	store := a.Store(s.Table)
	svc := space.NewService(store, s.StaleAfter)
	if o.Now != nil {
		svc.Now = o.Now
	}
	svc.Trust = s.Clouds.Trust()
	h := &httpapi.API{Spaces: svc, Auth: o.Auth, Log: o.Log, OpenAPI: spaces.OpenAPI, ClusterSide: true}
	f := &Function{Cloud: cloudcall.Handler{Clusters: unreachable{}, Verifier: unreachable{}}}
	// An agent space's namespaces are its agent's (through the store),
	// minter or not; a direct space's need the minter.
	ns := &kubens.Service{Spaces: svc, Agent: parts.WakingWork(store, a.Waker(s.Wakes), o.Log), Now: svc.Now}
	h.Discovery = &httpapi.Discovery{Namespaces: ns}
	if o.Minter != nil {
		svc.Clusters, svc.Verifier, svc.Trust = o.Minter, o.Minter, o.Minter.Trust
		ns.Minter = o.Minter
		h.Discovery.Clusters, h.Discovery.Claims = o.Minter, store
		f.Cloud = cloudcall.Handler{Clusters: o.Minter, Verifier: o.Minter}
	}
	f.HTTP = h.Handler()
	return f
}

// Lambda is the function's Lambda handler: an API Gateway v2 event for a
// cluster route, or a cloudcall.Request the catalog API invoked it with.
func (f *Function) Lambda(t *tracing.Tracing) func(ctx context.Context, raw json.RawMessage) (any, error) {
	proxy := httpadapter.NewV2(tracehttp.Handler(t, f.HTTP))
	return tracing.Handler(t, "discovery", func(ctx context.Context, raw json.RawMessage) (any, error) {
		var req cloudcall.Request
		if err := json.Unmarshal(raw, &req); err == nil && req.Op != "" {
			return f.Cloud.Handle(ctx, req)
		}
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, err
		}
		return proxy.ProxyWithContext(ctx, ev)
	})
}

// unreachable answers every cloud question when no cloud is configured.
type unreachable struct{}

func (unreachable) CheckCluster(context.Context, space.CloudAccount, space.Space) (space.ClusterFacts, error) {
	return space.ClusterFacts{}, noCloud
}

func (unreachable) VerifyAccount(context.Context, space.CloudAccount) error { return noCloud }

var noCloud = &space.Error{Kind: space.KindUnavailable, Reason: space.ReasonCloudUnavailable,
	Message: "no cloud is reachable from this deployment"}
