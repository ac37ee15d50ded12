package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/infra/staticminter"
	"spaces/infra/testcluster"
	"spaces/shared/awsclient"
	"spaces/shared/kubecred"
	"spaces/shared/space"
)

func queueDepth(t *testing.T, c *sqs.Client, url string) (visible, inFlight string) {
	t.Helper()
	a, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	return a.Attributes["ApproximateNumberOfMessages"], a.Attributes["ApproximateNumberOfMessagesNotVisible"]
}

// The poller hands a batch over as Lambda would, deletes what the handler
// acknowledged and leaves what it reported failed, or the whole batch when
// the handler fails.
func TestPollerDeletesOnlyAcknowledged(t *testing.T) {
	env := emulatortest.Start(t)
	c := awsclient.SQS(env.Config, env.Endpoint)
	q := env.Resources["ProbeQueue"]
	send := func(bodies ...string) {
		for _, b := range bodies {
			if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(b)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var seen events.SQSEvent
	handler := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		seen = ev
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			if r.Body == "fail" {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		return resp, nil
	}
	p := &Poller{SQS: c, QueueURL: q.URL, QueueARN: q.ARN, Handler: handler, Wait: time.Second, Log: slog.New(slog.DiscardHandler)}
	send("ok-1", "fail", "ok-2")
	n, err := p.Poll(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("poll: %d deleted, %v", n, err)
	}
	r := seen.Records[0]
	if len(seen.Records) != 3 || r.EventSource != "aws:sqs" || r.EventSourceARN != q.ARN || r.Attributes["ApproximateReceiveCount"] != "1" || r.ReceiptHandle == "" {
		t.Errorf("event %+v", seen)
	}
	if vis, inflight := queueDepth(t, c, q.URL); vis != "0" || inflight != "1" {
		t.Errorf("after poll: %s visible, %s in flight; want the failed one in flight", vis, inflight)
	}

	// A handler error or an unknown id leaves the whole batch.
	env2 := emulatortest.Start(t)
	q2 := env2.Resources["ProbeQueue"]
	for _, h := range []func(context.Context, events.SQSEvent) (events.SQSEventResponse, error){
		func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, errors.New("boom")
		},
		func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "nope"}}}, nil
		},
	} {
		q = q2
		send("a", "b")
		p := &Poller{SQS: c, QueueURL: q2.URL, QueueARN: q2.ARN, Handler: h, Wait: time.Second}
		if n, err := p.Poll(t.Context()); err == nil || n != 0 {
			t.Errorf("failing batch: %d deleted, %v", n, err)
		}
	}
	if vis, inflight := queueDepth(t, c, q2.URL); vis != "0" || inflight != "4" {
		t.Errorf("%s visible, %s in flight; want all 4 left for redelivery", vis, inflight)
	}
}

// The local stack probes on its own: a registered space with a test
// cluster behind it becomes active, one without credentials inactive with
// CredentialsUnavailable.
func TestStackProbes(t *testing.T) {
	cluster := testcluster.NewForTest(t)
	minter := &staticminter.Static{Lookup: func(s space.Space) (creds kubecred.Credentials, ok bool) {
		if s.Config["clusterName"] == "reachable" {
			return cluster.Credentials(), true
		}
		return creds, false
	}}
	prefix := fmt.Sprintf("p%s-", uuid.NewString()[:8])
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Log:     slog.New(slog.DiscardHandler),
		Names:   func(id string) string { return prefix + id },
		Probing: ProbingConfig{Interval: time.Second, Minter: minter},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	org := "acme"
	acct, err := st.Service.CreateAccount(t.Context(), org, space.NewAccountInput{Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}})
	if err != nil {
		t.Fatal(err)
	}
	acct.Status, acct.Version = space.AccountReady, acct.Version+1 // as a verification would
	if err := st.Service.Store.(space.AccountSaver).SaveAccount(t.Context(), acct); err != nil {
		t.Fatal(err)
	}
	reg := func(name string) space.Space {
		s, _, err := st.Service.Register(t.Context(), org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
			CloudAccountID: acct.ID, Config: space.Config{"clusterName": name, "region": "us-east-1"}}, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	up, down := reg("reachable"), reg("unreachable")
	if err := st.ProbeQueue.ProbeRegistered(t.Context(), up); err != nil {
		t.Fatal(err)
	}
	wait := func(id string, status space.Status, reason string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s, err := st.Service.Get(t.Context(), org, id)
			if err != nil {
				t.Fatal(err)
			}
			if s.Status == status && s.Probe.Reason == reason {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("space %s: %s %q (%s), want %s %q", s.Name, s.Status, s.Probe.Reason, s.Probe.Message, status, reason)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	wait(up.ID, space.Active, "")
	wait(down.ID, space.Inactive, space.ReasonCredentialsUnavailable)
	s, _ := st.Service.Get(t.Context(), org, down.ID)
	if !strings.Contains(s.Probe.Message, down.ID) {
		t.Errorf("message %q", s.Probe.Message)
	}
}
