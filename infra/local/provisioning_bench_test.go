package local

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/infra/lambdarules"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/provisioning"
	"spaces/shared/space"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

// BenchmarkProvisioningJobCost counts every AWS request one job makes,
// from POST /provisioning-jobs' use case to the registered space, with the
// AWS SDK metered (awscost): the API's create, each step of the
// provisioner (one delivery each), the registration and its probe request,
// and the job's end event. The Lambda event source's receives and deletes
// are not SDK calls of ours; they are reported as deliveries (each is at
// most one ReceiveMessage and one DeleteMessage in a batch). polls is how
// many Advance calls the creation takes: a real EKS creation of 10-15
// minutes polled every 30 s takes 20-30.
func BenchmarkProvisioningJobCost(b *testing.B) {
	for _, polls := range []int{1, 4} {
		b.Run("polls="+string(rune('0'+polls)), func(b *testing.B) { measureJobCost(b, polls) })
	}
}

func measureJobCost(b *testing.B, polls int) {
	env := emulatortest.Start(b)
	meter := awscost.New()
	a := parts.AWS{Config: meter.Instrument(env.Config), Endpoint: env.Endpoint}
	table := env.Name(b, "SpacesTable")
	store := a.Store(table)
	queue := env.Resources["ProvisioningQueue"]
	org := "org-" + uuid.NewString()[:8]
	acct, err := space.NewService(store, 0).CreateAccount(b.Context(), org, space.NewAccountInput{Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}})
	if err != nil {
		b.Fatal(err)
	}
	acct.Status, acct.Version = space.AccountReady, acct.Version+1
	if err := store.SaveAccount(b.Context(), acct); err != nil {
		b.Fatal(err)
	}
	creator := &fakeCreator{polls: polls}
	jobs := provisioning.NewJobs(store, store, parts.ProvisioningQueue{Q: a.Queue(queue.URL)})
	p := wiring.Provisioner(a, wiring.ProvisionerSettings{
		Common:            parts.Common{Table: table, StaleAfter: space.DefaultStaleAfter},
		ProvisioningQueue: queue.URL, EventBus: env.Name(b, "EventBus"), ProbeQueue: env.Resources["ProbeQueue"].URL,
		PollInterval: time.Second, MaxReceives: provisioning.DefaultMaxReceives,
	}, creator, nil, slog.New(slog.DiscardHandler))
	var mu sync.Mutex
	deliveries := 0
	counted := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		mu.Lock()
		deliveries += len(ev.Records)
		mu.Unlock()
		return p.HandleSQS(ctx, ev)
	}
	// The event source's receives run on an unmetered client.
	poller := &lambdarules.Poller{SQS: awsclient.SQS(env.Config, env.Endpoint), QueueURL: queue.URL, QueueARN: queue.ARN, Handler: counted, Wait: time.Second, Source: lambdarules.SQSSource{BatchSize: 1}}
	plain := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), table)
	meter.Take()
	total := meter.Take()
	for b.Loop() {
		in := provisioning.Input{Provider: space.AWS, CloudAccountID: acct.ID,
			Config: space.Config{"clusterName": "bench-" + uuid.NewString()[:8], "region": "us-east-1"},
			Spec: space.ClusterSpec{KubernetesVersion: "1.31", NodePool: space.NodePool{MachineType: "m5.large", Min: 1, Max: 3, Desired: 2},
				Network: space.Network{SubnetIDs: []string{"subnet-0a1b2c3d", "subnet-4e5f6a7b"}}}}
		j, _, err := jobs.Create(b.Context(), org, in, "")
		if err != nil {
			b.Fatal(err)
		}
		for j.State != provisioning.Succeeded {
			if _, err := poller.Poll(b.Context()); err != nil {
				b.Fatal(err)
			}
			// The benchmark's own reads go through an unmetered store.
			if j, err = plain.GetJob(context.Background(), org, j.ID); err != nil {
				b.Fatal(err)
			}
			if j.State == provisioning.Failed {
				b.Fatalf("job failed: %+v", j.Failure)
			}
		}
		total.Add(meter.Take())
	}
	n := float64(b.N)
	ddb, sqs := 0.0, 0.0
	ops := total.Ops()
	sort.Strings(ops)
	for _, op := range ops {
		v := total.Requests[op]
		switch {
		case len(op) > 9 && op[:9] == "DynamoDB ":
			ddb += v
		case len(op) > 4 && op[:4] == "SQS ":
			sqs += v
		}
		b.ReportMetric(v/n, strings.ReplaceAll(op, " ", ":")+"/job")
	}
	b.ReportMetric(ddb/n, "dynamodb-requests/job")
	b.ReportMetric(sqs/n, "sqs-sends/job")
	b.ReportMetric(float64(deliveries)/n, "deliveries/job")
	b.ReportMetric(total.TotalRRU()/n, "RRU/job")
	b.ReportMetric(total.TotalWRU()/n, "WRU/job")
	b.ReportMetric(total.Events/n, "events/job")
}

// timedCreator's clusters become ready a fixed time after their creation
// started, whoever polls: the moment "cluster ready" happens in the cloud.
type timedCreator struct {
	mu    sync.Mutex
	after time.Duration // of the next creation started
	start map[string]time.Time
}

func (c *timedCreator) setAfter(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.after = d
}

func (c *timedCreator) readyAt(token string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start[token]
}

func (c *timedCreator) StartCreate(_ context.Context, _ space.CloudAccount, cfg space.Config, _ space.ClusterSpec, token string) (space.CreateProgress, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.start == nil {
		c.start = map[string]time.Time{}
	}
	if _, ok := c.start[token]; !ok {
		c.start[token] = time.Now().Add(c.after) // when it will be ready
	}
	return space.CreateProgress{Operation: space.CloudOperation{Stage: "cluster", ID: cfg["clusterName"]}, Status: "CREATING"}, nil
}

func (c *timedCreator) Advance(_ context.Context, _ space.CloudAccount, _ space.Config, _ space.ClusterSpec, token string, op space.CloudOperation) (space.CreateProgress, error) {
	if time.Now().Before(c.readyAt(token)) {
		return space.CreateProgress{Operation: op, Status: "CREATING"}, nil
	}
	return space.CreateProgress{Operation: op, Status: "ACTIVE", Done: true}, nil
}

// BenchmarkReadyToActive measures, through the local stack over HTTP, the
// time from the moment the cloud has the cluster ready to the moment the
// prober stored the new space active (its last_transition_at), with the
// local poll interval (2 s) and the registration's immediate probe. The
// goal is at most one poll interval plus one probe.
func BenchmarkReadyToActive(b *testing.B) {
	creator := &timedCreator{}
	st, _ := provisioningStack(b, creator, ProvisioningConfig{PollInterval: DefaultLocalPollInterval})
	c := newClient(b, st, "acme")
	acct := c.account("aws")
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		// Ready at every phase of the poll rhythm: 3 s to 4.8 s after the
		// creation started.
		creator.setAfter(3*time.Second + time.Duration(i%7)*300*time.Millisecond)
		id := c.must(201, c.do("POST", "/provisioning-jobs", jobBody("aws", acct, "bench-"+uuid.NewString()[:8])))["id"].(string)
		var spaceID string
		for deadline := time.Now().Add(time.Minute); spaceID == ""; time.Sleep(50 * time.Millisecond) {
			j := c.must(200, c.do("GET", "/provisioning-jobs/"+id, nil))
			if j["state"] == "failed" || time.Now().After(deadline) {
				b.Fatalf("job %v", j)
			}
			spaceID, _ = j["space_id"].(string)
		}
		var active time.Time
		for deadline := time.Now().Add(time.Minute); active.IsZero(); time.Sleep(50 * time.Millisecond) {
			s := c.must(200, c.do("GET", "/spaces/"+spaceID, nil))
			if s["status"] == "active" {
				active, _ = time.Parse(time.RFC3339Nano, s["probe"].(map[string]any)["last_transition_at"].(string))
			} else if time.Now().After(deadline) {
				b.Fatalf("space %v", s)
			}
		}
		lat = append(lat, active.Sub(creator.readyAt(id)))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	b.ReportMetric(float64(sum.Milliseconds())/float64(len(lat)), "ms-ready-to-active-mean")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "ms-ready-to-active-max")
	b.ReportMetric(float64(DefaultLocalPollInterval.Milliseconds()), "ms-poll-interval")
}
