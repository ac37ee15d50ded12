package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"spaces"
	"spaces/infra/openapitest"
	"spaces/infra/simcloud"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

var stackSeq atomic.Int64

// startStack starts a local stack on free ports with tables of its own.
func startStack(t testing.TB) *Stack {
	t.Helper()
	prefix := fmt.Sprintf("t%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Log: slog.New(slog.DiscardHandler),
		// The registry tests own every write; probing has tests of its own.
		Probing: ProbingConfig{Disabled: true},
		Names:   func(id string) string { return prefix + id },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// client talks to the stack's API over real HTTP; every exchange is checked
// against openapi.yaml.
type client struct {
	t     testing.TB
	st    *Stack
	base  string
	token string
	org   string
	http  *http.Client
}

var (
	validatorOnce sync.Once
	validator     *openapitest.Validator
)

func newClient(t testing.TB, st *Stack, org string, scopes ...string) *client {
	t.Helper()
	token := ""
	if org != "" {
		var err error
		if token, err = st.Signer.Mint(org, "test", scopes, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	validatorOnce.Do(func() { validator = openapitest.New(t, spaces.OpenAPI) })
	return &client{t: t, st: st, base: st.APIURL, token: token, org: org,
		http: &http.Client{Transport: openapitest.RoundTripper(t, validator, http.DefaultTransport)}}
}

// deregister deletes a space and waits for its cascade. The cascade's
// marker is an item written after the 204, from the table's stream: a test
// that counts items after a deregistration counts after this.
func (c *client) deregister(id string) {
	c.t.Helper()
	c.must(204, c.do("DELETE", "/spaces/"+id, nil))
	store := dynamostore.New(awsclient.DynamoDB(c.st.AWS, c.st.EmulatorURL), c.st.Table)
	eventually(c.t, "the cascade of space "+id, func() bool {
		done, err := store.Cascaded(context.Background(), c.org, id)
		return err == nil && done
	})
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d, body %q is not a JSON object: %v", r.status, r.body, err)
	}
	return m
}

// do sends body (a string is sent as is, anything else as JSON) with extra
// headers given as "Name: value".
func (c *client) do(method, path string, body any, headers ...string) resp {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		if strings.TrimSpace(v) == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, strings.TrimSpace(v))
		}
	}
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp{res.StatusCode, res.Header, b}
}

func (c *client) must(status int, r resp) map[string]any {
	c.t.Helper()
	if r.status != status {
		c.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if status == http.StatusNoContent {
		return nil
	}
	return r.json(c.t)
}

// connect connects a cloud account of the simulated cloud the new way:
// POST it (pending, with its setup), apply the setup in the cloud as the
// customer would, and verify it (ready). It returns the account's id.
func (c *client) connect(sc *simcloud.Cloud, p space.Provider, conn map[string]string) string {
	c.t.Helper()
	created := c.must(201, c.do("POST", "/cloud-accounts", map[string]any{"provider": p, "name": string(p), "connection": conn}))
	acct := accountOf(c.t, created)
	if err := sc.ApplySetup(acct); err != nil {
		c.t.Fatal(err)
	}
	if got := c.must(200, c.do("POST", "/cloud-accounts/"+acct.ID+"/verify", nil)); got["status"] != "ready" {
		c.t.Fatalf("verified %s account: %v", p, got)
	}
	return acct.ID
}

// accountOf reads an account answered by the API.
func accountOf(t testing.TB, m map[string]any) space.CloudAccount {
	t.Helper()
	b, _ := json.Marshal(m)
	var a space.CloudAccount
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// account connects an account that no cloud verifies (the stack has no
// minter): created through the API, pending, then marked ready in the
// table, as a verification would, so that registry tests can register on it.
func (c *client) account(provider string) string {
	c.t.Helper()
	conn := map[string]map[string]string{
		"aws":   {"roleArn": "arn:aws:iam::123456789012:role/spaces"},
		"gcp":   {"projectId": "acme-prod", "serviceAccountEmail": "spaces@acme-prod.iam.gserviceaccount.com"},
		"azure": {"tenantId": azSub, "clientId": azSub, "subscriptionId": azSub},
	}[provider]
	m := c.must(201, c.do("POST", "/cloud-accounts", map[string]any{"provider": provider, "name": provider + " prod", "connection": conn}))
	if m["status"] != "pending" {
		c.t.Fatalf("new account is %v, want pending", m["status"])
	}
	c.markReady(accountOf(c.t, m))
	return m["id"].(string)
}

// markReady stores a as verified.
func (c *client) markReady(a space.CloudAccount) {
	c.t.Helper()
	if c.st == nil {
		c.t.Fatal("client has no stack")
	}
	store := dynamostore.New(awsclient.DynamoDB(c.st.AWS, c.st.EmulatorURL), c.st.Table)
	now := time.Now().UTC()
	a.Status, a.StatusReason, a.StatusMessage, a.VerifiedAt, a.Setup = space.AccountReady, "", "", &now, nil
	a.Version++
	if err := store.SaveAccount(context.Background(), a); err != nil {
		c.t.Fatal(err)
	}
}

const azSub = "0b5d3c52-4d7e-4b0e-9a43-2f0d6c1e8a11"

func configFor(provider, cluster string) map[string]string {
	switch provider {
	case "aws":
		return map[string]string{"clusterName": cluster, "region": "eu-central-1"}
	case "gcp":
		return map[string]string{"clusterName": cluster, "region": "us-central1", "projectId": "acme-prod"}
	default:
		return map[string]string{"clusterName": cluster, "resourceGroup": "rg-prod", "subscriptionId": azSub}
	}
}

func registerBody(provider, account, cluster string) map[string]any {
	return map[string]any{"provider": provider, "space_type": "kubernetes", "cloud_account_id": account, "config": configFor(provider, cluster)}
}

// itemCount counts the stack's registry items (registryItems), deleted
// ones included.
func itemCount(t testing.TB, st *Stack) int {
	t.Helper()
	return len(registryItems(t, st))
}

// registryItems is every item in the stack's table but the orgs' activity
// entries and their markers: the stream's consumer writes those after the writes they
// record, at a time of its own, so an entry of a write made before a
// "nothing changed" check may land during it. (A refused request writes
// nothing, so it has no entry: TestActivityFromTheStream.)
func registryItems(t testing.TB, st *Stack) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, it := range scanTable(t, st.AWS, st.EmulatorURL, st.Table) {
		if pk, _ := it["pk"].(string); !strings.HasPrefix(pk, "ACT#") && !strings.HasPrefix(pk, "ACTID#") {
			out = append(out, it)
		}
	}
	return out
}

// scanTable reads every item of a table, strongly consistent, as plain
// values (numbers as float64).
func scanTable(t testing.TB, cfg aws.Config, endpoint, table string) []map[string]any {
	t.Helper()
	db := awsclient.DynamoDB(cfg, endpoint)
	var items []map[string]any
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			var m map[string]any
			if err := attributevalue.UnmarshalMap(it, &m); err != nil {
				t.Fatal(err)
			}
			items = append(items, m)
		}
	}
	return items
}

// startWith starts a local stack as cfg says, on free ports and with
// tables of its own, and stops it when the test ends.
func startWith(t testing.TB, cfg Config) *Stack {
	t.Helper()
	prefix := fmt.Sprintf("s%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	cfg.APIAddr, cfg.NoEmulatorPort, cfg.DataDir = "127.0.0.1:0", true, t.TempDir()
	cfg.Names = func(id string) string { return prefix + id }
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	st, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}
