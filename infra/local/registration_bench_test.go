package local

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/infra/demo"
	"spaces/shared/space"
	"spaces/shared/wiring/api"
)

// BenchmarkRegistrationCheck measures the cloud check of a registration
// (simulated AWS: the account's role assumed, then DescribeCluster) three
// ways on the demo stack: "invoke", as the catalog asks it now (an SDK
// Invoke of the discovery function through the emulator's Lambda, whose
// runtime API the function's handler polls); "in-process", the minter
// called directly, as the API did before the split; and "post-422", the
// whole POST /spaces over HTTP for a cluster the cloud does not have.
//
//	GOFLAGS=-modfile=$(make -s overlay) go test -run '^$' -bench RegistrationCheck -benchtime 200x ./infra/local
func BenchmarkRegistrationCheck(b *testing.B) {
	prefix := fmt.Sprintf("r%s-", uuid.NewString()[:8])
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: b.TempDir(),
		Log: slog.New(slog.DiscardHandler), Names: func(id string) string { return prefix + id },
		Demo: &demo.Options{}, Probing: ProbingConfig{Disabled: true},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	org := "org-" + uuid.NewString()[:8]
	c := newClient(b, st, org)
	acctID := c.connect(st.Demo.Cloud, space.AWS, demo.Connection(space.AWS))
	acct, err := st.Service.GetAccount(b.Context(), org, acctID)
	if err != nil {
		b.Fatal(err)
	}
	items := c.must(200, c.do("GET", "/cloud-accounts/"+acctID+"/clusters?region="+demo.AWSRegion, nil))["items"].([]any)
	cfg := space.Config{}
	for k, v := range items[0].(map[string]any)["config"].(map[string]any) {
		cfg[k] = v.(string)
	}
	s := space.NewSpace(uuid.NewString(), org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: acctID, Config: cfg}, time.Now())

	check := func(b *testing.B, checker space.ClusterChecker) {
		if _, err := checker.CheckCluster(b.Context(), acct, s); err != nil { // warm the caches
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := checker.CheckCluster(b.Context(), acct, s); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("invoke", func(b *testing.B) {
		check(b, api.CloudCall(st.aws, api.Settings{DiscoveryFunction: prefix + "DiscoveryFunction"}))
	})
	b.Run("in-process", func(b *testing.B) {
		check(b, st.Demo.Minter(st.aws.Store(st.Table)))
	})
	b.Run("post-422", func(b *testing.B) {
		body := map[string]any{"provider": "aws", "space_type": "kubernetes", "cloud_account_id": acctID,
			"config": map[string]string{"clusterName": "no-such-cluster", "region": demo.AWSRegion}}
		for b.Loop() {
			if r := c.do("POST", "/spaces", body); r.status != 422 || r.json(b)["reason"] != space.ReasonClusterNotFound {
				b.Fatalf("POST /spaces: %d %v", r.status, r.json(b))
			}
		}
	})
}
