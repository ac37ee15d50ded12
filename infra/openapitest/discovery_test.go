package openapitest_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces"
	"spaces/infra/minttest"
	"spaces/infra/openapitest"
	"spaces/infra/testcluster"
	"spaces/shared/auth"
	"spaces/shared/cursor"
	"spaces/shared/httpapi"
	"spaces/shared/kubens"
	"spaces/shared/space"
)

// checkedClient calls one server as one org, every exchange checked against
// the document.
type checkedClient struct {
	t     *testing.T
	base  string
	token string
	http  *http.Client
}

// do sends the request and returns the status and the decoded JSON body.
func (c checkedClient) do(method, path, ctype, body string) (int, map[string]any) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	var doc map[string]any
	if len(data) > 0 && strings.Contains(resp.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(data, &doc); err != nil {
			c.t.Fatalf("%s %s: the body is not JSON: %v: %s", method, path, err, data)
		}
	}
	return resp.StatusCode, doc
}

// expect sends the request and fails unless it answers want; with a reason,
// the problem's reason must be it.
func (c checkedClient) expect(want int, reason, method, path, ctype, body string) map[string]any {
	c.t.Helper()
	code, doc := c.do(method, path, ctype, body)
	if code != want {
		c.t.Fatalf("%s %s: status %d, want %d: %v", method, path, code, want, doc)
	}
	if got, _ := doc["reason"].(string); reason != "" && got != reason {
		c.t.Errorf("%s %s: reason %q, want %q: %v", method, path, got, reason, doc)
	}
	return doc
}

func items(doc map[string]any) []map[string]any {
	var out []map[string]any
	list, _ := doc["items"].([]any)
	for _, it := range list {
		out = append(out, it.(map[string]any))
	}
	return out
}

// TestCloudAndClusterRoutesFollowTheDocument drives the routes that reach
// into clouds and clusters, and the status history, through the real
// handler wired to the simulated clouds, a test API server and the embedded
// DynamoDB: every exchange, success or failure, is checked against the
// document by the transport.
func TestCloudAndClusterRoutesFollowTheDocument(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	env := minttest.Start(t)
	// Registration asks the cloud, as the assembled API does.
	env.Service.Clusters = env.Minter
	kc := testcluster.NewForTest(t)

	key := filepath.Join(t.TempDir(), "dev-jwt.pem")
	verifier, err := auth.NewLocalVerifier(auth.LocalConfig{KeyPath: key})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(auth.LocalConfig{KeyPath: key})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := cursor.New(cursor.KeyFromSecret("openapitest-discovery"))
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.API{
		Spaces: env.Service, Auth: verifier, Cursors: codec, Log: slog.New(slog.DiscardHandler), OpenAPI: spaces.OpenAPI,
		Discovery: &httpapi.Discovery{
			Namespaces: &kubens.Service{Spaces: env.Service, Minter: env.Minter, Timeout: 2 * time.Second},
			Clusters:   env.Minter,
			Claims:     env.Store,
		},
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	tok, err := signer.Mint(env.Org, "tester", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := checkedClient{t: t, base: srv.URL, token: tok, http: &http.Client{Transport: openapitest.RoundTripper(t, v, nil)}}

	// One cluster per provider behind the test API server; gcp and azure
	// tokens reach it (EKS tokens need a token-review webhook).
	for _, p := range space.Providers {
		cl := minttest.Cluster(p, "oa-"+string(p), kc.URL(), kc.CAPEM())
		cl.Sink = kc
		env.Cloud.AddCluster(cl)
	}
	register := func(p space.Provider, name string, synthetic bool) string {
		body, _ := json.Marshal(map[string]any{"provider": p, "space_type": "kubernetes",
			"cloud_account_id": env.Accounts[p].ID, "config": minttest.Config(p, name), "synthetic": synthetic})
		doc := c.expect(201, "", "POST", "/spaces", "application/json", string(body))
		return doc["id"].(string)
	}

	var awsID, gcpID string
	t.Run("registration asks the cloud", func(t *testing.T) {
		c.t = t
		awsID = register(space.AWS, "oa-aws", false)
		gcpID = register(space.GCP, "oa-gcp", false)
		body, _ := json.Marshal(map[string]any{"provider": "aws", "space_type": "kubernetes",
			"cloud_account_id": env.Accounts[space.AWS].ID, "config": minttest.Config(space.AWS, "nowhere")})
		doc := c.expect(422, space.ReasonClusterNotFound, "POST", "/spaces", "application/json", string(body))
		if errs, _ := doc["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "config.clusterName" {
			t.Errorf("unknown cluster: errors %v, want one on config.clusterName", doc["errors"])
		}
		env.Cloud.Fail("eks:DescribeCluster", http.StatusForbidden)
		c.expect(502, space.ReasonAccessDenied, "POST", "/spaces", "application/json", string(body))
		env.Cloud.Fail("eks:DescribeCluster", 0)
	})

	t.Run("cluster picker", func(t *testing.T) {
		c.t = t
		accounts := "/cloud-accounts/"
		aws := accounts + env.Accounts[space.AWS].ID + "/clusters"
		got := items(c.expect(200, "", "GET", aws+"?region="+minttest.Region, "", ""))
		if len(got) != 1 || got[0]["name"] != "oa-aws" || got[0]["registered_space_id"] != awsID || got[0]["location"] != minttest.Region {
			t.Errorf("aws picker: %v, want oa-aws held by %s", got, awsID)
		}
		if got := items(c.expect(200, "", "GET", aws+"?region=us-east-2", "", "")); len(got) != 0 {
			t.Errorf("aws picker in an empty region: %v", got)
		}
		got = items(c.expect(200, "", "GET", accounts+env.Accounts[space.GCP].ID+"/clusters", "", ""))
		if len(got) != 1 || got[0]["registered_space_id"] != gcpID || got[0]["status"] == nil {
			t.Errorf("gcp picker: %v", got)
		}
		got = items(c.expect(200, "", "GET", accounts+env.Accounts[space.Azure].ID+"/clusters", "", ""))
		if len(got) != 1 || got[0]["registered_space_id"] != nil {
			t.Errorf("azure picker (nothing registered): %v", got)
		}

		for _, q := range []string{"", "?region=", "?region=mars-1", "?region=eu-west-1&region=eu-west-2", "?zone=a"} {
			c.expect(400, "", "GET", aws+q, "", "")
		}
		c.expect(400, "", "GET", accounts+env.Accounts[space.GCP].ID+"/clusters?region=us-central1", "", "")
		c.expect(404, "", "GET", accounts+uuid.NewString()+"/clusters?region=eu-west-1", "", "")
		c.expect(404, "", "GET", accounts+"not-a-uuid/clusters", "", "")

		env.Cloud.Fail("eks:ListClusters", http.StatusForbidden)
		c.expect(502, space.ReasonAccessDenied, "GET", aws+"?region="+minttest.Region, "", "")
		env.Cloud.Fail("eks:ListClusters", 0)
		env.Cloud.Fail("gke:ListClusters", http.StatusNotFound)
		c.expect(502, space.ReasonClusterNotFound, "GET", accounts+env.Accounts[space.GCP].ID+"/clusters", "", "")
		env.Cloud.Fail("gke:ListClusters", 0)
		env.Cloud.Fail("arm:managedClusters.list", http.StatusBadRequest)
		c.expect(503, space.ReasonCloudUnavailable, "GET", accounts+env.Accounts[space.Azure].ID+"/clusters", "", "")
		env.Cloud.Fail("arm:managedClusters.list", 0)
	})

	t.Run("namespaces", func(t *testing.T) {
		c.t = t
		path := "/space-discovery/" + gcpID + "/namespaces"
		got := items(c.expect(200, "", "GET", path, "", ""))
		var names []string
		for _, ns := range got {
			names = append(names, ns["name"].(string))
		}
		if !slices.IsSorted(names) || !slices.Contains(names, "kube-system") {
			t.Errorf("namespaces %v, want them sorted, kube-system among them", names)
		}
		c.expect(400, "", "GET", path+"?watch=true", "", "")

		doc := c.expect(201, "", "POST", path, "application/json", `{"name":"team-a","labels":{"team":"a","spaces.dev/owner":"x"}}`)
		if doc["name"] != "team-a" || doc["labels"].(map[string]any)["spaces.dev/owner"] != "x" {
			t.Errorf("created %v", doc)
		}
		c.expect(201, "", "POST", path, "application/json", `{"name":"team-b","labels":null}`)
		c.expect(409, "", "POST", path, "application/json", `{"name":"team-a"}`)

		before := kc.Namespaces()
		doc = c.expect(422, "", "POST", path, "application/json", `{"name":"Bad_Name","labels":{"bad key!":"v","ok":"bad value!"}}`)
		if errs, _ := doc["errors"].([]any); len(errs) != 3 {
			t.Errorf("bad namespace: %v, want 3 errors", doc)
		}
		c.expect(422, "", "POST", path, "application/json", `{}`)
		c.expect(400, "", "POST", path, "application/json", `{"name":"x","annotations":{}}`)
		c.expect(400, "", "POST", path, "application/json", `{"name":"x","labels":{"a":1}}`)
		c.expect(415, "", "POST", path, "text/plain", `name=x`)
		c.expect(413, "", "POST", path, "application/json", `{"name":"`+strings.Repeat("x", httpapi.MaxBody)+`"}`)
		if after := kc.Namespaces(); !slices.Equal(before, after) {
			t.Errorf("refused creates changed the cluster: %v -> %v", before, after)
		}

		c.expect(404, "", "GET", "/space-discovery/"+uuid.NewString()+"/namespaces", "", "")
		c.expect(404, "", "GET", "/space-discovery/not-a-uuid/namespaces", "", "")
		c.expect(404, "", "POST", "/space-discovery/"+uuid.NewString()+"/namespaces", "application/json", `{"name":"x"}`)
		synthetic := register(space.Azure, "oa-placeholder", true)
		c.expect(422, space.ReasonCredentialsUnavailable, "GET", "/space-discovery/"+synthetic+"/namespaces", "", "")

		kc.SetMode(testcluster.Forbidden())
		c.expect(502, space.ReasonUnauthorized, "GET", path, "", "")
		kc.SetMode(testcluster.ServerError())
		c.expect(502, space.ReasonBadResponse, "POST", path, "application/json", `{"name":"team-c"}`)
		// A cluster that drops connections is retried by client-go until
		// the call's deadline: a Timeout. One that refuses them is
		// Unreachable at once.
		kc.SetMode(testcluster.Down())
		c.expect(503, space.ReasonTimeout, "GET", path, "", "")
		kc.SetMode(testcluster.Healthy())
		if err := kc.Stop(); err != nil {
			t.Fatal(err)
		}
		c.expect(503, space.ReasonUnreachable, "GET", path, "", "")
		if err := kc.Start(); err != nil {
			t.Fatal(err)
		}
		env.Cloud.Fail("gke:GetCluster", http.StatusForbidden)
		env.Minter.Invalidate(gcpID)
		c.expect(502, space.ReasonAccessDenied, "GET", path, "", "")
		env.Cloud.Fail("gke:GetCluster", 0)
		c.expect(200, "", "GET", path, "", "")
	})

	t.Run("status history", func(t *testing.T) {
		c.t = t
		s, err := env.Store.GetSpace(t.Context(), env.Org, awsID)
		if err != nil {
			t.Fatal(err)
		}
		// unknown→active→inactive→active, as the prober stores it.
		at := time.Now().UTC()
		for i, o := range []space.Outcome{{}, {Reason: space.ReasonTimeout, Message: "slow"}, {Reason: space.ReasonTimeout},
			{Reason: space.ReasonTimeout, Message: "no answer"}, {}} {
			o.At = at.Add(time.Duration(i+1) * time.Minute)
			res, err := env.Store.UpdateSpace(t.Context(), s.OrgID, s.ID, space.Update[space.Space]{At: o.At, Read: &s,
				Apply: func(cur space.Space) (space.Space, error) { next, _ := space.ApplyProbe(cur, o); return next, nil }})
			if err != nil {
				t.Fatal(err)
			}
			s = res.After
		}
		path := "/spaces/" + awsID + "/status-history"
		page1 := c.expect(200, "", "GET", path+"?limit=2", "", "")
		got := items(page1)
		if len(got) != 2 || got[0]["to"] != "active" || got[1]["to"] != "inactive" || got[1]["reason"] != space.ReasonTimeout || page1["next_cursor"] == nil {
			t.Fatalf("page 1: %v", page1)
		}
		page2 := c.expect(200, "", "GET", path+"?limit=2&cursor="+url.QueryEscape(page1["next_cursor"].(string)), "", "")
		if got := items(page2); len(got) != 1 || got[0]["from"] != "unknown" || page2["next_cursor"] != nil {
			t.Errorf("page 2: %v", page2)
		}
		if got := items(c.expect(200, "", "GET", "/spaces/"+gcpID+"/status-history", "", "")); len(got) != 0 {
			t.Errorf("a space never probed has history %v", got)
		}
		for _, q := range []string{"?limit=0", "?limit=x", "?cursor=forged", "?status=active"} {
			c.expect(400, "", "GET", path+q, "", "")
		}
		c.expect(400, "", "GET", "/spaces/"+gcpID+"/status-history?cursor="+url.QueryEscape(page1["next_cursor"].(string)), "", "")
		c.expect(404, "", "GET", "/spaces/"+uuid.NewString()+"/status-history", "", "")
		c.expect(404, "", "GET", "/spaces/not-a-uuid/status-history", "", "")
	})
}
