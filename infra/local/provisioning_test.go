package local

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"spaces/infra/staticminter"
	"spaces/infra/testcluster"
	"spaces/infra/testwait"
	"spaces/shared/awsclient"
	"spaces/shared/kubecred"
	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// fakeCreator is an in-memory cloud that creates clusters
// (space.ClusterCreator), standing in for the simulated clouds' creation:
// clusters are unique by identity; a repeated StartCreate with the same
// token finds its creation, with another token it is refused (name taken).
// It counts every call.
type fakeCreator struct {
	mu sync.Mutex
	// polls is how many Advance calls a creation takes to be ready.
	polls int
	// refuse, when set, is the cloud's refusal of every StartCreate.
	refuse string
	// lose makes the next lose StartCreate calls create the cluster and
	// then fail, as if the process died before it could store the answer.
	lose int
	// hold keeps every creation under way.
	hold bool

	clusters map[string]*fakeCluster
	starts   int
	advances int
	// readyAt is when each creation was first answered ready.
	readyAt map[string]time.Time
}

type fakeCluster struct {
	token string
	polls int
}

func (f *fakeCreator) key(acct space.CloudAccount, cfg space.Config) string {
	return acct.ID + "|" + space.Identity(acct.Provider, cfg)
}

func (f *fakeCreator) StartCreate(_ context.Context, acct space.CloudAccount, cfg space.Config, _ space.ClusterSpec, token string) (space.CreateProgress, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	if f.refuse != "" {
		return space.CreateProgress{}, &space.Error{Kind: space.KindInvalid, Reason: space.ReasonCloudRefused, Message: f.refuse}
	}
	if f.clusters == nil {
		f.clusters, f.readyAt = map[string]*fakeCluster{}, map[string]time.Time{}
	}
	k := f.key(acct, cfg)
	c, ok := f.clusters[k]
	switch {
	case ok && c.token != token:
		return space.CreateProgress{}, &space.Error{Kind: space.KindInvalid, Reason: space.ReasonCloudRefused,
			Message: "ResourceInUseException: Cluster already exists with name: " + cfg["clusterName"]}
	case !ok:
		f.clusters[k] = &fakeCluster{token: token}
	}
	if f.lose > 0 {
		f.lose--
		return space.CreateProgress{}, &space.Error{Kind: space.KindUnavailable, Reason: space.ReasonCloudUnavailable, Message: "connection reset"}
	}
	return space.CreateProgress{Operation: space.CloudOperation{Stage: "cluster", ID: cfg["clusterName"]}, Status: "CREATING"}, nil
}

func (f *fakeCreator) Advance(_ context.Context, acct space.CloudAccount, cfg space.Config, _ space.ClusterSpec, token string, op space.CloudOperation) (space.CreateProgress, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advances++
	c, ok := f.clusters[f.key(acct, cfg)]
	if !ok || c.token != token {
		return space.CreateProgress{}, &space.Error{Kind: space.KindInvalid, Reason: space.ReasonCloudRefused, Message: "ResourceNotFoundException: no cluster " + op.ID}
	}
	c.polls++
	if f.hold || c.polls < f.polls {
		return space.CreateProgress{Operation: op, Status: "CREATING"}, nil
	}
	if _, seen := f.readyAt[f.key(acct, cfg)]; !seen {
		f.readyAt[f.key(acct, cfg)] = time.Now()
	}
	return space.CreateProgress{Operation: space.CloudOperation{Stage: "nodegroup", ID: cfg["clusterName"] + "-nodes"}, Done: true, Status: "ACTIVE"}, nil
}

func (f *fakeCreator) counts() (clusters, starts, advances int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.clusters), f.starts, f.advances
}

// provisioningStack is a local stack whose provisioner creates clusters
// with creator and whose prober reaches one test cluster for every space.
func provisioningStack(t testing.TB, creator space.ClusterCreator, pc ProvisioningConfig) (*Stack, *testcluster.Cluster) {
	t.Helper()
	cluster := testcluster.NewForTest(t)
	minter := &staticminter.Static{Lookup: func(space.Space) (kubecred.Credentials, bool) { return cluster.Credentials(), true }}
	pc.Creator = creator
	if pc.PollInterval == 0 {
		pc.PollInterval = time.Second
	}
	pc.Wait = time.Second
	st := startWith(t, Config{
		Probing:      ProbingConfig{Interval: time.Second, Minter: minter},
		Revisions:    RevisionsConfig{Disabled: true},
		Provisioning: pc,
	})
	return st, cluster
}

func jobSpec(provider string) map[string]any {
	pool := map[string]any{"min_nodes": 1, "max_nodes": 3, "desired_nodes": 2}
	var network map[string]any
	switch provider {
	case "aws":
		pool["machine_type"] = "m5.large"
		network = map[string]any{"subnet_ids": []string{"subnet-0a1b2c3d", "subnet-4e5f6a7b"}, "security_group_ids": []string{"sg-0a1b2c3d"}}
	case "gcp":
		pool["machine_type"] = "e2-standard-4"
		network = map[string]any{"network": "default", "subnetwork": "default"}
	default:
		pool["machine_type"] = "Standard_D4s_v5"
		network = map[string]any{"location": "westeurope",
			"vnet_subnet_id": "/subscriptions/" + azSub + "/resourceGroups/rg-prod/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes"}
	}
	return map[string]any{"kubernetes_version": "1.31", "node_pool": pool, "network": network, "tags": map[string]string{"team": "platform"}}
}

func jobBody(provider, account, cluster string) map[string]any {
	return map[string]any{"provider": provider, "cloud_account_id": account, "config": configFor(provider, cluster), "spec": jobSpec(provider)}
}

// waitJob polls the job until it is in state, failing after a generous
// bound (against hanging, not a timing goal).
func waitJob(t *testing.T, c *client, id string, state provisioning.State) map[string]any {
	t.Helper()
	var j map[string]any
	if err := testwait.UntilEvery(testwait.Timeout, 100*time.Millisecond, func() bool {
		j = c.must(200, c.do("GET", "/provisioning-jobs/"+url.PathEscape(id), nil))
		return j["state"] == string(state)
	}); err != nil {
		t.Fatalf("job %s is %v (%v) %s, want %s", id, j["state"], j["failure"], err, state)
	}
	return j
}

func stepStates(j map[string]any) []string {
	var out []string
	for _, s := range j["steps"].([]any) {
		st := s.(map[string]any)["state"].(string)
		if len(out) == 0 || out[len(out)-1] != st {
			out = append(out, st)
		}
	}
	return out
}

func spaceCount(t *testing.T, c *client) int {
	t.Helper()
	return len(c.must(200, c.do("GET", "/spaces", nil))["items"].([]any))
}

// TestProvisioningJobEndToEnd: over HTTP, for each provider, a job creates
// its cluster (one StartCreate, polls until ready), registers it through
// POST /spaces' path, and the space turns active by the immediate probe.
// A second job for the same cluster is 409 naming the job while it lives
// and the space once it succeeded; another org sees nothing.
func TestProvisioningJobEndToEnd(t *testing.T) {
	creator := &fakeCreator{polls: 2}
	st, _ := provisioningStack(t, creator, ProvisioningConfig{})
	c, other := newClient(t, st, "acme"), newClient(t, st, "rival")
	for i, provider := range []string{"aws", "gcp", "azure"} {
		acct := c.account(provider)
		name := "prov-" + provider
		created := c.do("POST", "/provisioning-jobs", jobBody(provider, acct, name))
		job := c.must(201, created)
		id := job["id"].(string)
		if job["state"] != "queued" || created.header.Get("Location") != "/provisioning-jobs/"+id {
			t.Fatalf("%s: created %v, Location %q", provider, job, created.header.Get("Location"))
		}
		// While the job lives, the same cluster is its.
		dup := c.must(409, c.do("POST", "/provisioning-jobs", jobBody(provider, acct, name)))
		if dup["existing_job_id"] != id {
			t.Errorf("%s: second job: %v, want existing_job_id %s", provider, dup, id)
		}
		// One claim rule for every path that takes a cluster: a space,
		// synthetic or not, cannot name it either.
		reg := registerBody(provider, acct, name)
		reg["synthetic"] = true
		if taken := c.must(409, c.do("POST", "/spaces", reg)); taken["existing_job_id"] != id {
			t.Errorf("%s: synthetic space on a cluster a job is creating: %v, want existing_job_id %s", provider, taken, id)
		}
		// Another org can neither see nor touch the job.
		for _, r := range []resp{other.do("GET", "/provisioning-jobs/"+id, nil), other.do("DELETE", "/provisioning-jobs/"+id, nil),
			other.do("POST", "/provisioning-jobs/"+id+"/retry", nil)} {
			if r.status != 404 {
				t.Errorf("%s: another org got %d: %s", provider, r.status, r.body)
			}
		}
		done := waitJob(t, c, id, provisioning.Succeeded)
		want := []string{"queued", "creating", "waiting-ready", "registering", "succeeded"}
		if got := stepStates(done); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: steps %v, want %v", provider, got, want)
		}
		spaceID, _ := done["space_id"].(string)
		sp := waitActive(t, c, spaceID)
		if sp["name"] != name || sp["cloud_account_id"] != acct {
			t.Errorf("%s: space %v", provider, sp)
		}
		again := c.must(409, c.do("POST", "/provisioning-jobs", jobBody(provider, acct, name)))
		if again["existing_space_id"] != spaceID {
			t.Errorf("%s: job for a registered cluster: %v, want existing_space_id %s", provider, again, spaceID)
		}
		if n := spaceCount(t, c); n != i+1 {
			t.Errorf("%s: %d spaces, want %d", provider, n, i+1)
		}
		if r := c.do("DELETE", "/provisioning-jobs/"+id, nil); r.status != 409 {
			t.Errorf("%s: cancel of a succeeded job: %d %s", provider, r.status, r.body)
		}
	}
	clusters, starts, _ := creator.counts()
	if clusters != 3 || starts != 3 {
		t.Errorf("the cloud holds %d clusters after %d StartCreate calls; want 3 and 3", clusters, starts)
	}
	list := c.must(200, c.do("GET", "/provisioning-jobs?limit=2", nil))
	if len(list["items"].([]any)) != 2 || list["next_cursor"] == nil {
		t.Fatalf("first page: %v", list)
	}
	rest := c.must(200, c.do("GET", "/provisioning-jobs?limit=2&cursor="+url.QueryEscape(list["next_cursor"].(string)), nil))
	if len(rest["items"].([]any)) != 1 || rest["next_cursor"] != nil {
		t.Errorf("second page: %v", rest)
	}
	if n := len(other.must(200, other.do("GET", "/provisioning-jobs", nil))["items"].([]any)); n != 0 {
		t.Errorf("another org lists %d jobs", n)
	}
}

// TestProvisioningJobRefusedThenRetried: the cloud refuses the creation:
// the job fails at creating with the cloud's words, not retryable, and
// nothing is registered. Once the cause is gone, a retry resumes at the
// failed step and the job succeeds with one cluster and one space.
func TestProvisioningJobRefusedThenRetried(t *testing.T) {
	creator := &fakeCreator{polls: 1, refuse: "InvalidParameterException: unsupported Kubernetes version 1.31"}
	st, _ := provisioningStack(t, creator, ProvisioningConfig{})
	c := newClient(t, st, "acme")
	acct := c.account("aws")
	id := c.must(201, c.do("POST", "/provisioning-jobs", jobBody("aws", acct, "refused")))["id"].(string)
	failed := waitJob(t, c, id, provisioning.Failed)
	f := failed["failure"].(map[string]any)
	if f["step"] != "creating" || f["reason"] != space.ReasonCloudRefused || f["retryable"] != false ||
		!strings.Contains(f["message"].(string), "unsupported Kubernetes version 1.31") {
		t.Errorf("failure %v", f)
	}
	if n := spaceCount(t, c); n != 0 {
		t.Errorf("%d spaces after a refused job", n)
	}
	// A failed job still holds its cluster: a new job for it is 409.
	if r := c.do("POST", "/provisioning-jobs", jobBody("aws", acct, "refused")); r.status != 409 {
		t.Errorf("a job beside a failed one: %d %s", r.status, r.body)
	}
	creator.mu.Lock()
	creator.refuse = ""
	creator.mu.Unlock()
	retried := c.must(202, c.do("POST", "/provisioning-jobs/"+id+"/retry", nil))
	if retried["state"] != "creating" || retried["failure"] != nil {
		t.Errorf("retried job %v", retried)
	}
	if r := c.do("POST", "/provisioning-jobs/"+id+"/retry", nil); r.status != 409 {
		t.Errorf("retry of a job that is not failed: %d", r.status)
	}
	done := waitJob(t, c, id, provisioning.Succeeded)
	waitActive(t, c, done["space_id"].(string))
	if clusters, _, _ := creator.counts(); clusters != 1 || spaceCount(t, c) != 1 {
		t.Errorf("%d clusters, %d spaces; want 1 and 1", clusters, spaceCount(t, c))
	}
}

// TestProvisioningCrashAfterTheCloudCall: the create call reaches the cloud
// but its answer is lost twice (a crash between the call and the job's
// write); the redelivered step calls again with the same token and finds
// the creation: one cluster, one space.
func TestProvisioningCrashAfterTheCloudCall(t *testing.T) {
	creator := &fakeCreator{polls: 1, lose: 2}
	st, _ := provisioningStack(t, creator, ProvisioningConfig{})
	c := newClient(t, st, "acme")
	acct := c.account("gcp")
	id := c.must(201, c.do("POST", "/provisioning-jobs", jobBody("gcp", acct, "crashy")))["id"].(string)
	done := waitJob(t, c, id, provisioning.Succeeded)
	clusters, starts, _ := creator.counts()
	if clusters != 1 || starts != 3 {
		t.Errorf("%d clusters after %d StartCreate calls; want 1 after 3", clusters, starts)
	}
	if n := spaceCount(t, c); n != 1 {
		t.Errorf("%d spaces, want 1", n)
	}
	waitActive(t, c, done["space_id"].(string))
}

// TestProvisioningCancelMidway: a job whose cluster never gets ready is
// canceled while waiting: it says what it left in the cloud, takes no more
// steps, releases the cluster (a new job may name it) and cannot be
// canceled twice; nothing is registered.
func TestProvisioningCancelMidway(t *testing.T) {
	creator := &fakeCreator{hold: true}
	st, _ := provisioningStack(t, creator, ProvisioningConfig{})
	c := newClient(t, st, "acme")
	acct := c.account("azure")
	id := c.must(201, c.do("POST", "/provisioning-jobs", jobBody("azure", acct, "held")))["id"].(string)
	waitJob(t, c, id, provisioning.WaitingReady)
	canceled := c.must(200, c.do("DELETE", "/provisioning-jobs/"+id, nil))
	if canceled["state"] != "canceled" || !strings.Contains(canceled["left_in_cloud"].(string), "delete it in the cloud") {
		t.Errorf("canceled job %v", canceled)
	}
	if r := c.do("DELETE", "/provisioning-jobs/"+id, nil); r.status != 409 {
		t.Errorf("second cancel: %d", r.status)
	}
	// Deliveries still in flight find the job canceled and end: its
	// version and state stay as the cancel left them.
	_, _, advances := creator.counts()
	eventually(t, "a poll after the cancel is dropped", func() bool {
		j := c.must(200, c.do("GET", "/provisioning-jobs/"+id, nil))
		return j["state"] == "canceled" && j["version"] == canceled["version"] && messagesIn(t, st, "ProvisioningQueue") == 0
	})
	if _, _, after := creator.counts(); after > advances+1 {
		t.Errorf("the cloud was polled %d times after the cancel", after-advances)
	}
	if n := spaceCount(t, c); n != 0 {
		t.Errorf("%d spaces after a canceled job", n)
	}
	// The cluster is free in Spaces (the cloud refuses the name, as it
	// still holds it: a failed job with the cloud's words).
	next := c.must(201, c.do("POST", "/provisioning-jobs", jobBody("azure", acct, "held")))
	f := waitJob(t, c, next["id"].(string), provisioning.Failed)["failure"].(map[string]any)
	if !strings.Contains(f["message"].(string), "already exists") {
		t.Errorf("second job's failure %v", f)
	}
}

// messagesIn is a queue's visible plus in-flight plus delayed messages.
func messagesIn(t testing.TB, st *Stack, logicalID string) int {
	t.Helper()
	out, err := awsclient.SQS(st.AWS, st.EmulatorURL).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(st.Resources[logicalID].URL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		var k int
		fmt.Sscan(v, &k)
		n += k
	}
	return n
}

// TestProvisioningBadRequests: each bad job request is refused with a
// problem naming the field; nothing is stored, nothing queued and no cloud
// called. Then the Idempotency-Key: a retry replays the job, another body
// under the key is refused.
func TestProvisioningBadRequests(t *testing.T) {
	creator := &fakeCreator{polls: 1}
	st, _ := provisioningStack(t, creator, ProvisioningConfig{})
	c := newClient(t, st, "acme")
	accts := map[string]string{"aws": c.account("aws"), "gcp": c.account("gcp"), "azure": c.account("azure")}
	pending := c.must(201, c.do("POST", "/cloud-accounts", map[string]any{"provider": "aws", "name": "pending",
		"connection": map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}}))["id"].(string)

	// body returns a valid job for provider with change applied to a copy.
	body := func(provider string, change func(b, spec, pool, network map[string]any)) map[string]any {
		b := jobBody(provider, accts[provider], "bad-"+provider)
		spec := b["spec"].(map[string]any)
		change(b, spec, spec["node_pool"].(map[string]any), spec["network"].(map[string]any))
		return b
	}
	type bad struct {
		name    string
		body    any
		field   string
		headers []string
	}
	cases := []bad{
		{"no provider", body("aws", func(b, _, _, _ map[string]any) { delete(b, "provider") }), "provider", nil},
		{"unknown provider", body("aws", func(b, _, _, _ map[string]any) { b["provider"] = "ibm" }), "provider", nil},
		{"no account", body("aws", func(b, _, _, _ map[string]any) { delete(b, "cloud_account_id") }), "cloud_account_id", nil},
		{"account not a UUID", body("aws", func(b, _, _, _ map[string]any) { b["cloud_account_id"] = "nope" }), "cloud_account_id", nil},
		{"unknown account", body("aws", func(b, _, _, _ map[string]any) { b["cloud_account_id"] = uuid.NewString() }), "cloud_account_id", nil},
		{"account of another provider", body("aws", func(b, _, _, _ map[string]any) { b["cloud_account_id"] = accts["gcp"] }), "cloud_account_id", nil},
		{"account not ready", body("aws", func(b, _, _, _ map[string]any) { b["cloud_account_id"] = pending }), "cloud_account_id", nil},
		{"no config", body("aws", func(b, _, _, _ map[string]any) { delete(b, "config") }), "config", nil},
		{"cluster role not an ARN", body("aws", func(_, spec, _, _ map[string]any) { spec["cluster_role_arn"] = "eks-cluster" }), "spec.cluster_role_arn", nil},
		{"node role on gcp", body("gcp", func(_, spec, _, _ map[string]any) {
			spec["node_role_arn"] = "arn:aws:iam::123456789012:role/nodes"
		}), "spec.node_role_arn", nil},
		{"bad region", body("aws", func(b, _, _, _ map[string]any) {
			b["config"] = configFor("aws", "x")
			b["config"].(map[string]string)["region"] = "mars-1"
		}), "config.region", nil},
		{"extra config key", body("aws", func(b, _, _, _ map[string]any) {
			b["config"] = map[string]string{"clusterName": "x", "region": "us-east-1", "zone": "a"}
		}), "config.zone", nil},
		{"no cluster name", body("aws", func(b, _, _, _ map[string]any) { b["config"] = map[string]string{"region": "us-east-1"} }), "config.clusterName", nil},
		{"name with a control character", body("aws", func(b, _, _, _ map[string]any) { b["name"] = "prod\u0007" }), "name", nil},
		{"unknown top-level field", body("aws", func(b, _, _, _ map[string]any) { b["space_type"] = "kubernetes" }), "space_type", nil},
		{"no spec", body("aws", func(b, _, _, _ map[string]any) { delete(b, "spec") }), "spec.kubernetes_version", nil},
		{"spec not an object", body("aws", func(b, _, _, _ map[string]any) { b["spec"] = "big" }), "spec", nil},
		{"version not a minor", body("aws", func(_, s, _, _ map[string]any) { s["kubernetes_version"] = "latest" }), "spec.kubernetes_version", nil},
		{"version a number", body("aws", func(_, s, _, _ map[string]any) { s["kubernetes_version"] = 1.31 }), "spec.kubernetes_version", nil},
		{"unknown spec field", body("aws", func(_, s, _, _ map[string]any) { s["version"] = "1.31" }), "spec.version", nil},
		{"no machine type", body("aws", func(_, _, p, _ map[string]any) { delete(p, "machine_type") }), "spec.node_pool.machine_type", nil},
		{"GCE type on AWS", body("aws", func(_, _, p, _ map[string]any) { p["machine_type"] = "e2-standard-4" }), "spec.node_pool.machine_type", nil},
		{"no nodes at most", body("aws", func(_, _, p, _ map[string]any) { p["max_nodes"] = 0 }), "spec.node_pool.max_nodes", nil},
		{"min above max", body("aws", func(_, _, p, _ map[string]any) { p["min_nodes"] = 5 }), "spec.node_pool.min_nodes", nil},
		{"desired above max", body("aws", func(_, _, p, _ map[string]any) { p["desired_nodes"] = 9 }), "spec.node_pool.desired_nodes", nil},
		{"fractional nodes", body("aws", func(_, _, p, _ map[string]any) { p["min_nodes"] = 1.5 }), "spec.node_pool.min_nodes", nil},
		{"nodes as a string", body("aws", func(_, _, p, _ map[string]any) { p["max_nodes"] = "3" }), "spec.node_pool.max_nodes", nil},
		{"unknown pool field", body("aws", func(_, _, p, _ map[string]any) { p["gpu"] = true }), "spec.node_pool.gpu", nil},
		{"one subnet", body("aws", func(_, _, _, n map[string]any) { n["subnet_ids"] = []string{"subnet-0a1b2c3d"} }), "spec.network.subnet_ids", nil},
		{"bad subnet id", body("aws", func(_, _, _, n map[string]any) { n["subnet_ids"] = []string{"subnet-0a1b2c3d", "vpc-1"} }), "spec.network.subnet_ids[1]", nil},
		{"repeated subnet", body("aws", func(_, _, _, n map[string]any) { n["subnet_ids"] = []string{"subnet-0a1b2c3d", "subnet-0a1b2c3d"} }), "spec.network.subnet_ids[1]", nil},
		{"subnets as a string", body("aws", func(_, _, _, n map[string]any) { n["subnet_ids"] = "subnet-0a1b2c3d" }), "spec.network.subnet_ids", nil},
		{"bad security group", body("aws", func(_, _, _, n map[string]any) { n["security_group_ids"] = []string{"group"} }), "spec.network.security_group_ids[0]", nil},
		{"GCP network on AWS", body("aws", func(_, _, _, n map[string]any) { n["network"] = "default" }), "spec.network.network", nil},
		{"network an array", body("aws", func(_, s, _, _ map[string]any) { s["network"] = []string{} }), "spec.network", nil},
		{"reserved AWS tag", body("aws", func(_, s, _, _ map[string]any) { s["tags"] = map[string]string{"aws:owner": "me"} }), "spec.tags.aws:owner", nil},
		{"tag not a string", body("aws", func(_, s, _, _ map[string]any) { s["tags"] = map[string]any{"n": 1} }), "spec.tags.n", nil},
		// Null where a value is required, and characters no cloud takes,
		// are refused before any cloud call.
		{"min_nodes null", body("aws", func(_, _, p, _ map[string]any) { p["min_nodes"] = nil }), "spec.node_pool.min_nodes", nil},
		{"desired_nodes null", body("gcp", func(_, _, p, _ map[string]any) { p["desired_nodes"] = nil }), "spec.node_pool.desired_nodes", nil},
		{"azure tag with NUL, bidi override and BEL", body("azure", func(_, s, _, _ map[string]any) {
			s["tags"] = map[string]any{"a\u0000b": "x\u202ey\u0007"}
		}), "spec.tags.a\u0000b", nil},
		{"azure tag value null", body("azure", func(_, s, _, _ map[string]any) { s["tags"] = map[string]any{"n": nil} }), "spec.tags.n", nil},
		{"subnet id null", body("aws", func(_, _, _, n map[string]any) { n["subnet_ids"] = []any{"subnet-0a1b2c3d", nil} }), "spec.network.subnet_ids[1]", nil},
		{"GCP without network", body("gcp", func(_, _, _, n map[string]any) { delete(n, "network") }), "spec.network.network", nil},
		{"GCP label uppercase", body("gcp", func(_, s, _, _ map[string]any) { s["tags"] = map[string]string{"Team": "x"} }), "spec.tags.Team", nil},
		{"EC2 type on GCP", body("gcp", func(_, _, p, _ map[string]any) { p["machine_type"] = "m5.large" }), "spec.node_pool.machine_type", nil},
		{"AKS pool at zero", body("azure", func(_, _, p, _ map[string]any) { p["min_nodes"] = 0 }), "spec.node_pool.min_nodes", nil},
		{"VNet subnet in another subscription", body("azure", func(_, _, _, n map[string]any) {
			n["vnet_subnet_id"] = "/subscriptions/" + uuid.NewString() + "/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s"
		}), "spec.network.vnet_subnet_id", nil},
		{"Azure without location", body("azure", func(_, _, _, n map[string]any) { delete(n, "location") }), "spec.network.location", nil},
		{"AWS subnets on Azure", body("azure", func(_, _, _, n map[string]any) { n["subnet_ids"] = []string{"subnet-0a1b2c3d", "subnet-4e5f6a7b"} }), "spec.network.subnet_ids", nil},
		{"Idempotency-Key with a space", jobBody("aws", accts["aws"], "bad-aws"), "Idempotency-Key", []string{"Idempotency-Key: a b"}},
		{"duplicate key in the spec", `{"provider":"aws","cloud_account_id":"` + accts["aws"] + `","config":{"clusterName":"x","region":"us-east-1"},"spec":{"kubernetes_version":"1.31","kubernetes_version":"1.30"}}`, "spec.kubernetes_version", nil},
	}
	if len(cases) < 30 {
		t.Fatalf("only %d bad requests", len(cases))
	}
	items := itemCount(t, st)
	for _, tc := range cases {
		r := c.do("POST", "/provisioning-jobs", tc.body, tc.headers...)
		if r.status != 400 && r.status != 422 {
			t.Errorf("%s: status %d: %s", tc.name, r.status, r.body)
			continue
		}
		if strings.Contains(tc.name, "null") && r.status != 422 {
			t.Errorf("%s: status %d, want 422: %s", tc.name, r.status, r.body)
		}
		p := r.json(t)
		named := false
		for _, e := range p["errors"].([]any) {
			if e.(map[string]any)["field"] == tc.field {
				named = true
			}
		}
		if !named {
			t.Errorf("%s: problem does not name %s: %s", tc.name, tc.field, r.body)
		}
	}
	// A synthetic space names a cluster too: only on a ready account of
	// the org, like any other, so that another org's failed copy of an
	// account cannot register synthetic spaces naming the first org's
	// clusters.
	for name, acct := range map[string]string{"pending": pending, "unknown": uuid.NewString()} {
		syn := registerBody("aws", acct, "placeholder")
		syn["synthetic"] = true
		r := c.do("POST", "/spaces", syn)
		if r.status != 422 || !strings.Contains(string(r.body), `"cloud_account_id"`) {
			t.Errorf("synthetic space on a %s account: %d %s", name, r.status, r.body)
		}
	}
	if n := itemCount(t, st); n != items {
		t.Errorf("%d items after the bad requests, want %d", n, items)
	}
	if n := messagesIn(t, st, "ProvisioningQueue"); n != 0 {
		t.Errorf("%d messages queued by bad requests", n)
	}
	if _, starts, advances := creator.counts(); starts+advances != 0 {
		t.Errorf("bad requests made %d cloud calls", starts+advances)
	}

	// The Idempotency-Key, as POST /spaces honours it.
	first := c.do("POST", "/provisioning-jobs", jobBody("aws", accts["aws"], "idem"), "Idempotency-Key: job-1")
	j := c.must(201, first)
	again := c.do("POST", "/provisioning-jobs", jobBody("aws", accts["aws"], "idem"), "Idempotency-Key: job-1")
	if again.status != 201 || again.json(t)["id"] != j["id"] || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: %d %s %v", again.status, again.body, again.header)
	}
	other := c.do("POST", "/provisioning-jobs", jobBody("aws", accts["aws"], "idem-2"), "Idempotency-Key: job-1")
	if other.status != 422 {
		t.Errorf("another body under the key: %d %s", other.status, other.body)
	}
	waitJob(t, c, j["id"].(string), provisioning.Succeeded)
	if clusters, _, _ := creator.counts(); clusters != 1 || spaceCount(t, c) != 1 {
		t.Errorf("%d clusters, %d spaces after a replayed request; want 1 and 1", clusters, spaceCount(t, c))
	}

	// The documented least-privilege roles are known fields.
	roles := jobBody("aws", accts["aws"], "roles")
	roles["spec"].(map[string]any)["cluster_role_arn"] = "arn:aws:iam::123456789012:role/eks-cluster"
	roles["spec"].(map[string]any)["node_role_arn"] = "arn:aws:iam::123456789012:role/eks-nodes"
	withRoles := c.must(201, c.do("POST", "/provisioning-jobs", roles))["spec"].(map[string]any)
	if withRoles["cluster_role_arn"] != "arn:aws:iam::123456789012:role/eks-cluster" || withRoles["node_role_arn"] != "arn:aws:iam::123456789012:role/eks-nodes" {
		t.Errorf("job spec %v lost its roles", withRoles)
	}
}

// TestProvisioningDuplicateDeliveries: through real SQS, every version of
// the job the test sees gets two more copies of its step's message (racing
// the original) and one of the step before (a late redelivery): still one
// cluster, one space, and once the job is done no message is left
// circulating (duplicates never multiply into parallel chains).
func TestProvisioningDuplicateDeliveries(t *testing.T) {
	creator := &fakeCreator{polls: 3}
	st, _ := provisioningStack(t, creator, ProvisioningConfig{})
	c := newClient(t, st, "acme")
	acct := c.account("aws")
	id := c.must(201, c.do("POST", "/provisioning-jobs", jobBody("aws", acct, "twice")))["id"].(string)
	sqsc := awsclient.SQS(st.AWS, st.EmulatorURL)
	send := func(version int64) {
		body := provisioning.Message{OrgID: "acme", JobID: id, Version: version}.Encode()
		if _, err := sqsc.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(st.Resources["ProvisioningQueue"].URL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int64]bool{}
	var j map[string]any
	if err := testwait.Until(testwait.Timeout, func() bool {
		j = c.must(200, c.do("GET", "/provisioning-jobs/"+id, nil))
		v := int64(j["version"].(float64))
		if j["state"] == "succeeded" || j["state"] == "failed" {
			return true
		}
		if !seen[v] {
			seen[v] = true
			send(v)
			send(v)
			if v > 1 {
				send(v - 1)
			}
		}
		return false
	}); err != nil || j["state"] != "succeeded" {
		t.Fatalf("job %v (%v), want succeeded", j, err)
	}
	if len(seen) < 3 {
		t.Errorf("duplicates were sent for only %d versions", len(seen))
	}
	eventually(t, "every message consumed", func() bool { return messagesIn(t, st, "ProvisioningQueue") == 0 })
	if clusters, _, _ := creator.counts(); clusters != 1 {
		t.Errorf("%d clusters", clusters)
	}
	if n := spaceCount(t, c); n != 1 {
		t.Errorf("%d spaces, want 1", n)
	}
}
