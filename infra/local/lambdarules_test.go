package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces/infra/emulator/emulatortest"
	"spaces/infra/lambdarules"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/kubecred"
	"spaces/shared/mint"
	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// The local stack runs every function under the template's rules
// (lambdarules). These tests fail where AWS would fail if the template's
// settings were missing.

// TestProvisioningSurvivesFortyPolls: a creation that takes 45 polls (an
// EKS creation of over 20 minutes at the deployed 30 s) runs to the end.
// Every step sends the job's next message to the queue that invokes the
// provisioner, one chain of requests per job, past Lambda's 16: the chain
// goes on only because the template allows the loop
// (ProvisionerFunction's RecursiveLoop: Allow); without it, the 17th step
// is stopped and the job never finishes.
func TestProvisioningSurvivesFortyPolls(t *testing.T) {
	creator := &fakeCreator{polls: 45}
	// Polls at once (a delay under a second is none), not every 30 s.
	st, _ := provisioningStack(t, creator, ProvisioningConfig{PollInterval: time.Millisecond})
	c := newClient(t, st, "acme")
	job := c.must(201, c.do("POST", "/provisioning-jobs", jobBody("aws", c.account("aws"), "slow-eks")))
	done := waitJob(t, c, job["id"].(string), provisioning.Succeeded)
	if polls := done["polls"].(float64); polls < 40 {
		t.Errorf("the job polled %v times, want at least 40", polls)
	}
	if _, starts, advances := creator.counts(); starts != 1 || advances < 45 {
		t.Errorf("%d StartCreate and %d Advance calls, want 1 and at least 45", starts, advances)
	}
	if n := visible(t, st, "ProvisioningDLQ"); n != 0 {
		t.Errorf("%d messages in the provisioning DLQ", n)
	}
}

// visible counts the messages waiting in the template's queue id.
func visible(t *testing.T, st *Stack, id string) int {
	t.Helper()
	vis, _ := emulatortest.QueueDepth(t, awsclient.SQS(st.AWS, st.EmulatorURL), st.Resources[id].URL)
	var n int
	fmt.Sscan(vis, &n)
	return n
}

// TestSchedulerTickIsAsync: the scheduler runs as EventBridge Scheduler
// invokes it, asynchronously: a tick that fails is not tried again (the
// scheduler's EventInvokeConfig: MaximumRetryAttempts 0) and its
// invocation record lands in SchedulerDLQ (the on-failure destination).
// Under Lambda's defaults it would be run three times and leave no record.
func TestSchedulerTickIsAsync(t *testing.T) {
	st := startWith(t, Config{
		// One tick at start (an empty index: it succeeds), then none
		// during the test; retries, if any, within milliseconds.
		Probing:      ProbingConfig{Interval: time.Hour, AsyncDelays: []time.Duration{10 * time.Millisecond}},
		Revisions:    RevisionsConfig{Disabled: true},
		Provisioning: ProvisioningConfig{Disabled: true},
	})

	// Shards the index does not have: the fan-out fails.
	input := json.RawMessage(`{"shards":{"first":0,"last":99}}`)
	res := st.Tick(t.Context(), input)
	if res.Attempts != 1 || res.Condition != lambdarules.RetriesExhausted {
		t.Fatalf("failed tick: %+v; want one attempt, then dropped", res)
	}
	sqsc := awsclient.SQS(st.AWS, st.EmulatorURL)
	out, err := sqsc.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.Resources["SchedulerDLQ"].URL), WaitTimeSeconds: 1, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("%d records in SchedulerDLQ, want 1", len(out.Messages))
	}
	var rec struct {
		RequestContext struct {
			Condition              string
			ApproximateInvokeCount int
		}
		RequestPayload json.RawMessage
	}
	if err := json.Unmarshal([]byte(aws.ToString(out.Messages[0].Body)), &rec); err != nil || rec.RequestContext.Condition != "RetriesExhausted" ||
		rec.RequestContext.ApproximateInvokeCount != 1 || string(rec.RequestPayload) != string(input) {
		t.Errorf("record %s (%v)", aws.ToString(out.Messages[0].Body), err)
	}
}

// hungCloud never answers: every call waits until its caller gives up.
type hungCloud struct{}

func (hungCloud) Mint(ctx context.Context, _ space.CloudAccount, _ space.Space) (kubecred.Credentials, error) {
	<-ctx.Done()
	return kubecred.Credentials{}, ctx.Err()
}

func (hungCloud) CheckCluster(ctx context.Context, _ space.CloudAccount, _ space.Space) (space.ClusterFacts, error) {
	<-ctx.Done()
	return space.ClusterFacts{}, ctx.Err()
}

func (hungCloud) ListClusters(ctx context.Context, _ space.CloudAccount, _ string) ([]space.DiscoveredCluster, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestHungCloudAnswersAProblem: with the cloud hanging, a registration's
// cluster check (API → Invoke of the discovery function → the cloud)
// answers the 503 CloudUnavailable problem before the API function's
// Timeout, because each hop hands its deadline down (shared/budget). The
// API runs under its template Timeout behind the modelled gateway, which
// would answer a timed-out function with its 500.
func TestHungCloudAnswersAProblem(t *testing.T) {
	minter := &mint.Minter{Providers: map[space.Provider]mint.Provider{space.AWS: hungCloud{}}}
	st := startWith(t, Config{
		Minter: minter, Probing: ProbingConfig{Disabled: true},
		Revisions: RevisionsConfig{Disabled: true}, Provisioning: ProvisioningConfig{Disabled: true},
	})
	store := dynamostore.New(awsclient.DynamoDB(st.AWS, st.EmulatorURL), st.Table)
	minter.Grants, minter.Accounts = store, store

	c := newClient(t, st, "acme")
	acct := c.account("aws")
	r := c.do("POST", "/spaces", registerBody("aws", acct, "hung"))
	p := r.json(t)
	if r.status != 503 || p["reason"] != space.ReasonCloudUnavailable {
		t.Fatalf("registration against a hung cloud: %d %s; want the 503 %s problem", r.status, r.body, space.ReasonCloudUnavailable)
	}
	if n := spaceCount(t, c); n != 0 {
		t.Errorf("%d spaces registered", n)
	}
}

// TestAgentRoutesOnTheFunctionURL: the agent's routes are AgentFunction's
// function URL, as deployed, not the gateway's: on the API they are the
// catalog's unknown route (404), on the function URL the agent function
// answers them (a missing secret is its 401 problem) and every other path
// too (a function URL has no routes: its own 404 problem, never a
// catalog answer).
func TestAgentRoutesOnTheFunctionURL(t *testing.T) {
	st := startStack(t)
	if st.AgentURL == "" || st.AgentURL == st.APIURL {
		t.Fatalf("agent URL %q, API %q: want a listener of its own", st.AgentURL, st.APIURL)
	}
	post := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Post(url, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(st.APIURL + "/agent/exchange"); code != http.StatusNotFound {
		t.Errorf("POST /agent/exchange on the API: %d %s, want 404", code, body)
	}
	if code, body := post(st.AgentURL + "/agent/exchange"); code != http.StatusUnauthorized || !strings.Contains(body, "urn:spaces:problem:") {
		t.Errorf("POST /agent/exchange on the function URL without a token: %d %s, want a 401 problem", code, body)
	}
	if code, body := post(st.AgentURL + "/spaces"); code != http.StatusNotFound || !strings.Contains(body, "urn:spaces:problem:") {
		t.Errorf("POST /spaces on the function URL: %d %s, want the agent function's 404 problem", code, body)
	}
}
