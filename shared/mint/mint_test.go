package mint_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"spaces/infra/minttest"
	"spaces/infra/simcloud"
	"spaces/infra/testcluster"
	"spaces/shared/kubeprobe"
	"spaces/shared/mint"
	"spaces/shared/mint/eks"
	"spaces/shared/space"
)

func wantReason(t *testing.T, err error, reason string, kind space.Kind) *space.Error {
	t.Helper()
	var e *space.Error
	if !errors.As(err, &e) || e.Reason != reason || e.Kind != kind {
		t.Fatalf("error %v, want reason %s kind %v", err, reason, kind)
	}
	return e
}

// testclusterSpace registers a space of p backed by a testcluster that
// simcloud pushes its tokens to.
func testclusterSpace(t *testing.T, env *minttest.Env, p space.Provider, name string) (space.Space, *testcluster.Cluster) {
	t.Helper()
	tc := testcluster.NewForTest(t)
	tc.SetTokens() // only what simcloud issues
	cl := minttest.Cluster(p, name, tc.URL(), tc.CAPEM())
	cl.Sink = tc
	env.Cloud.AddCluster(cl)
	return env.Register(t, p, name, false), tc
}

func TestEKSToken(t *testing.T) {
	env := minttest.Start(t)
	cl := minttest.Cluster(space.AWS, "tok-cluster", "https://127.0.0.1:1", []byte("x"))
	env.Cloud.AddCluster(cl)
	m := minttest.Providers(env.Cloud)[space.AWS].(*eks.Minter)
	assumed := env.Cloud.Calls("sts:AssumeRole") // by the accounts' verification
	before := time.Now()
	tok, err := m.Token(t.Context(), env.Accounts[space.AWS], "tok-cluster", minttest.Region)
	if err != nil {
		t.Fatal(err)
	}
	enc, ok := strings.CutPrefix(tok, "k8s-aws-v1.")
	if !ok || strings.ContainsAny(enc, "=+/") {
		t.Fatalf("token %q lacks the prefix or is not unpadded base64url", tok[:20])
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Scheme != "https" || u.Host != strings.TrimPrefix(env.Cloud.URL, "https://") || (u.Path != "/" && u.Path != "") {
		t.Errorf("presigned URL %s is not the STS endpoint", u.Redacted())
	}
	if q.Get("Action") != "GetCallerIdentity" || q.Get("Version") != "2011-06-15" {
		t.Errorf("action/version: %v", q)
	}
	if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" || q.Get("X-Amz-Signature") == "" || q.Get("X-Amz-Security-Token") == "" {
		t.Errorf("not a SigV4 presigned session request: %v", q)
	}
	if !strings.Contains(";"+q.Get("X-Amz-SignedHeaders")+";", ";x-k8s-aws-id;") {
		t.Errorf("x-k8s-aws-id is not signed: %q", q.Get("X-Amz-SignedHeaders"))
	}
	if q.Get("X-Amz-Expires") != "60" {
		t.Errorf("X-Amz-Expires = %q, want 60", q.Get("X-Amz-Expires"))
	}
	if cred := strings.Split(q.Get("X-Amz-Credential"), "/"); len(cred) != 5 || cred[2] != minttest.Region || cred[3] != "sts" {
		t.Errorf("credential scope %v", cred)
	}
	at, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil || at.Before(before.Add(-time.Second).Truncate(time.Second)) || at.After(time.Now()) {
		t.Errorf("X-Amz-Date %q (%v)", q.Get("X-Amz-Date"), err)
	}
	// One AssumeRole for the session, reused by the next token.
	if _, err := m.Token(t.Context(), env.Accounts[space.AWS], "tok-cluster", minttest.Region); err != nil {
		t.Fatal(err)
	}
	if n := env.Cloud.Calls("sts:AssumeRole") - assumed; n != 1 {
		t.Errorf("AssumeRole calls = %d, want 1 (session reused)", n)
	}
}

func TestMintRefusesWithoutGrant(t *testing.T) {
	env := minttest.Start(t)
	s, _ := testclusterSpace(t, env, space.GCP, "dereg-cluster")
	if _, err := env.Minter.Mint(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if err := env.Service.Deregister(t.Context(), env.Org, s.ID, 0, "test"); err != nil {
		t.Fatal(err)
	}
	if ok, err := env.Store.HasGrant(t.Context(), env.Org, s.ID); err != nil || ok {
		t.Fatalf("grant after deregistration: %v %v", ok, err)
	}
	calls := env.Cloud.TotalCalls()
	_, err := env.Minter.Mint(t.Context(), s) // the cache is warm: still refused
	wantReason(t, err, space.ReasonCredentialsUnavailable, space.KindUnavailable)
	if got := env.Cloud.TotalCalls(); got != calls {
		t.Errorf("cloud calls %d -> %d: minting for a deregistered space reached the cloud", calls, got)
	}
	// A synthetic space is never minted for.
	syn := env.Register(t, space.AWS, "synthetic", true)
	_, err = env.Minter.Mint(t.Context(), syn)
	wantReason(t, err, space.ReasonCredentialsUnavailable, space.KindUnavailable)
	if got := env.Cloud.TotalCalls(); got != calls {
		t.Errorf("cloud calls %d -> %d for a synthetic space", calls, got)
	}
}

func TestConcurrentMintsShareOne(t *testing.T) {
	env := minttest.Start(t)
	// One mint's calls: GKE is the runtime token (first time only),
	// generateAccessToken and GetCluster; AKS assumes the federation role,
	// takes its web identity token, exchanges it with Entra and reads the
	// kubeconfig.
	oneMint := map[space.Provider]int{space.GCP: 3, space.Azure: 4}
	for _, p := range []space.Provider{space.GCP, space.Azure} {
		t.Run(string(p), func(t *testing.T) {
			s, _ := testclusterSpace(t, env, p, "conc-"+string(p))
			before := env.Cloud.TotalCalls()
			var wg sync.WaitGroup
			tokens := make([]string, 100)
			errs := make([]error, 100)
			for i := range 100 {
				wg.Go(func() {
					c, err := env.Minter.Mint(t.Context(), s)
					tokens[i], errs[i] = c.Token, err
				})
			}
			wg.Wait()
			for i := range 100 {
				if errs[i] != nil || tokens[i] != tokens[0] {
					t.Fatalf("mint %d: %v (same token: %v)", i, errs[i], tokens[i] == tokens[0])
				}
			}
			got := env.Cloud.TotalCalls() - before
			if got > oneMint[p] {
				t.Errorf("%d cloud calls for 100 concurrent mints, want one mint (<= %d calls): %v", got, oneMint[p], env.Cloud.CallCounts())
			}
		})
	}
}

func TestRevokedTokenIsReminted(t *testing.T) {
	env := minttest.Start(t)
	prober := &kubeprobe.Prober{}
	defer prober.Close()
	for _, p := range []space.Provider{space.GCP, space.Azure} {
		t.Run(string(p), func(t *testing.T) {
			s, tc := testclusterSpace(t, env, p, "revoke-"+string(p))
			c1, err := env.Minter.Mint(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if o := prober.Probe(t.Context(), c1); !o.OK() {
				t.Fatalf("first probe: %+v", o)
			}
			env.Cloud.Revoke(c1.Token)
			o := prober.Probe(t.Context(), c1)
			if !kubeprobe.IsUnauthorized(o) {
				t.Fatalf("probe with a revoked token: %+v", o)
			}
			// What the prober does on a 401: invalidate, mint once, probe.
			env.Minter.Invalidate(s.ID)
			c2, err := env.Minter.Mint(t.Context(), s)
			if err != nil || c2.Token == c1.Token {
				t.Fatalf("re-mint: %v (same token: %v)", err, c2.Token == c1.Token)
			}
			if o := prober.Probe(t.Context(), c2); !o.OK() {
				t.Fatalf("probe after re-mint: %+v", o)
			}
			if tc.Served401() != 1 {
				t.Errorf("401s served: %d", tc.Served401())
			}
		})
	}
}

func TestExpiringCredentialIsRenewed(t *testing.T) {
	// Tokens live 90 s: inside the one-minute refresh window after 30 s.
	env := minttest.Start(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	sc := simcloud.StartForTest(t, simcloud.Options{TokenLifetime: 90 * time.Second})
	if err := sc.ApplySetup(env.Accounts[space.GCP]); err != nil {
		t.Fatal(err)
	}
	env.Cloud = sc
	env.Minter.Providers = minttest.Providers(sc)
	env.Minter.Now = clock
	s, _ := testclusterSpace(t, env, space.GCP, "expiring")
	c1, err := env.Minter.Mint(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if c1.ExpiresAt.IsZero() || c1.ExpiresAt.Sub(now) > 91*time.Second {
		t.Fatalf("expiry %v not carried", c1.ExpiresAt)
	}
	if c, _ := env.Minter.Mint(t.Context(), s); c.Token != c1.Token {
		t.Fatal("a fresh credential was not reused")
	}
	mu.Lock()
	now = now.Add(31 * time.Second)
	mu.Unlock()
	c2, err := env.Minter.Mint(t.Context(), s)
	if err != nil || c2.Token == c1.Token {
		t.Fatalf("a credential within a minute of expiry was reused: %v", err)
	}
}

func TestCloudErrorsAreClassified(t *testing.T) {
	env := minttest.Start(t)
	for _, p := range space.Providers {
		t.Run(string(p), func(t *testing.T) {
			// Registered, but the cloud has no such cluster.
			s := env.Register(t, p, "ghost-"+string(p), false)
			_, err := env.Minter.Mint(t.Context(), s)
			wantReason(t, err, space.ReasonClusterNotFound, space.KindBadGateway)
			_, err = env.Minter.CheckCluster(t.Context(), env.Accounts[p], s)
			e := wantReason(t, err, space.ReasonClusterNotFound, space.KindInvalid)
			if len(e.Fields) != 1 || e.Fields[0].Field != "config.clusterName" || e.Fields[0].Reason == "" {
				t.Errorf("registration check fields: %+v", e.Fields)
			}
			// The domain hook: a synthetic space is not looked up, a real
			// one is.
			syn := s
			syn.Synthetic = true
			before := env.Cloud.TotalCalls()
			if facts, err := space.CheckRegistration(t.Context(), env.Store, env.Minter, syn); err != nil || facts != (space.ClusterFacts{}) {
				t.Errorf("synthetic: %+v, %v", facts, err)
			}
			if env.Cloud.TotalCalls() != before {
				t.Error("a synthetic registration called the cloud")
			}
			_, err = space.CheckRegistration(t.Context(), env.Store, env.Minter, s)
			wantReason(t, err, space.ReasonClusterNotFound, space.KindInvalid)
			// An existing cluster passes.
			tc := testcluster.NewForTest(t)
			cl := minttest.Cluster(p, "real-"+string(p), tc.URL(), tc.CAPEM())
			cl.Sink = tc
			env.Cloud.AddCluster(cl)
			ok := s
			ok.Config = minttest.Config(p, "real-"+string(p))
			if _, err := space.CheckRegistration(t.Context(), env.Store, env.Minter, ok); err != nil {
				t.Errorf("existing cluster: %v", err)
			}
			// ... and the cloud's answer says where it runs and its
			// version, in the cloud's words.
			cl.Name, cl.Version = "versioned-"+string(p), map[space.Provider]string{space.AWS: "1.30", space.GCP: "1.30.9-gke.1009000", space.Azure: "1.30.7"}[p]
			env.Cloud.AddCluster(cl)
			ok.Config = minttest.Config(p, cl.Name)
			facts, err := space.CheckRegistration(t.Context(), env.Store, env.Minter, ok)
			if want := (space.ClusterFacts{Location: cl.Location, KubernetesVersion: cl.Version}); err != nil || facts != want {
				t.Errorf("facts of %s: %+v, %v; want %+v", cl.Name, facts, err, want)
			}
			// Not granted to the account: AccessDenied.
			other := minttest.Cluster(p, "other-"+string(p), tc.URL(), tc.CAPEM())
			other.Principals = nil
			env.Cloud.AddCluster(other)
			denied := s
			denied.Config = minttest.Config(p, "other-"+string(p))
			_, err = env.Minter.CheckCluster(t.Context(), env.Accounts[p], denied)
			wantReason(t, err, space.ReasonAccessDenied, space.KindBadGateway)
		})
	}
	t.Run("cloud down", func(t *testing.T) {
		s, _ := testclusterSpace(t, env, space.AWS, "down-aws")
		env.Cloud.Fail("eks:DescribeCluster", 503)
		defer env.Cloud.Fail("eks:DescribeCluster", 0)
		_, err := env.Minter.Mint(t.Context(), s)
		wantReason(t, err, space.ReasonCloudUnavailable, space.KindUnavailable)
	})
	t.Run("wrong external id", func(t *testing.T) {
		a := env.Accounts[space.AWS]
		a.Connection = map[string]string{"roleArn": minttest.RoleARN, "externalId": "wrong-external"}
		s := env.Register(t, space.AWS, "denied-aws", false)
		_, err := env.Minter.CheckCluster(t.Context(), a, s)
		wantReason(t, err, space.ReasonAccessDenied, space.KindBadGateway)
	})
}

// TestEKSTokenReview: simcloud's webhook accepts an EKS token only for the
// cluster it names in the signed header, and only with an intact signature.
func TestEKSTokenReview(t *testing.T) {
	env := minttest.Start(t)
	for _, name := range []string{"review-a", "review-b"} {
		cl := minttest.Cluster(space.AWS, name, "https://127.0.0.1:1", []byte("x"))
		cl.Backend = name
		env.Cloud.AddCluster(cl)
	}
	m := minttest.Providers(env.Cloud)[space.AWS].(*eks.Minter)
	tok, err := m.Token(t.Context(), env.Accounts[space.AWS], "review-a", minttest.Region)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, eks.TokenPrefix))
	tampered := eks.TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "X-Amz-Signature=", "X-Amz-Signature=0", 1)))
	hc := env.Cloud.HTTPClient()
	review := func(backend, token string) map[string]any {
		body := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + token + `"}}`
		resp, err := hc.Post(env.Cloud.WebhookURL(backend), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Status map[string]any `json:"status"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out.Status
	}
	if st := review("review-a", tok); st["authenticated"] != true ||
		st["user"].(map[string]any)["username"] != minttest.RoleARN {
		t.Errorf("valid token: %v", st)
	}
	if st := review("review-b", tok); st["authenticated"] != false {
		t.Errorf("token for review-a accepted by review-b: %v", st)
	}
	if st := review("review-a", tampered); st["authenticated"] != false {
		t.Errorf("tampered token accepted: %v", st)
	}
}

// countingAccounts counts the account reads a minter makes.
type countingAccounts struct {
	mu    sync.Mutex
	reads int
	next  interface {
		GetAccount(ctx context.Context, org, id string) (space.CloudAccount, error)
	}
}

func (c *countingAccounts) GetAccount(ctx context.Context, org, id string) (space.CloudAccount, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.next.GetAccount(ctx, org, id)
}

// TestAccountReadServesItsSpaces: one read of a cloud account serves the
// mints of its spaces for AccountsFor; after that, or after a refused
// credential (Invalidate), the next mint reads it again.
func TestAccountReadServesItsSpaces(t *testing.T) {
	env := minttest.Start(t)
	var mu sync.Mutex
	now := time.Now()
	env.Minter.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	accts := &countingAccounts{next: env.Minter.Accounts}
	env.Minter.Accounts = accts
	var spaces []space.Space
	for i := range 3 {
		s, _ := testclusterSpace(t, env, space.GCP, fmt.Sprintf("shared-acct-%d", i))
		spaces = append(spaces, s)
	}
	mintOne := func(s space.Space) {
		t.Helper()
		if _, err := env.Minter.Mint(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	mintOne(spaces[0])
	mintOne(spaces[1])
	if accts.reads != 1 {
		t.Errorf("two spaces of one account: %d account reads, want 1", accts.reads)
	}
	mu.Lock()
	now = now.Add(mint.DefaultAccountsFor + time.Second)
	mu.Unlock()
	mintOne(spaces[2])
	if accts.reads != 2 {
		t.Errorf("after AccountsFor: %d account reads, want 2", accts.reads)
	}
	env.Minter.Invalidate(spaces[0].ID)
	mintOne(spaces[0])
	if accts.reads != 3 {
		t.Errorf("after a refused credential: %d account reads, want 3", accts.reads)
	}
}
