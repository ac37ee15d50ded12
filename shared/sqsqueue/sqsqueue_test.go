package sqsqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/sqsqueue"
)

func setup(t *testing.T) (*sqs.Client, string) {
	env := emulatortest.Start(t)
	return awsclient.SQS(env.Config, env.Endpoint), env.Resources["ProbeQueue"].URL
}

func receiveAll(t *testing.T, c *sqs.Client, url string) []types.Message {
	t.Helper()
	var out []types.Message
	for {
		r, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 0})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			return out
		}
		out = append(out, r.Messages...)
	}
}

func TestSendBatchesAndDelays(t *testing.T) {
	c, url := setup(t)
	q := sqsqueue.New(c, url)
	var msgs []sqsqueue.Message
	for i := range 25 {
		d := time.Duration(0)
		if i%5 != 0 {
			d = 30 * time.Second
		}
		msgs = append(msgs, sqsqueue.Message{Body: fmt.Sprintf("m%02d", i), Delay: d})
	}
	if err := q.Send(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	if q.Calls() != 3 {
		t.Errorf("%d SendMessageBatch calls for 25 messages, want 3", q.Calls())
	}
	got := receiveAll(t, c, url)
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, aws.ToString(m.Body))
	}
	// Only the undelayed messages are visible yet.
	if len(got) != 5 {
		t.Errorf("visible now: %v, want m00 m05 m10 m15 m20", bodies)
	}
	attrs, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		t.Fatal(err)
	}
	if n := attrs.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesDelayed)]; n != "20" {
		t.Errorf("delayed messages %s, want 20", n)
	}
}

// flaky fails chosen entries of the first call it sees, then forwards.
type flaky struct {
	api       sqsqueue.API
	mu        sync.Mutex
	calls     [][]string
	failOnce  map[string]bool
	sender    map[string]bool
	failAll   bool
	failCalls int
}

func (f *flaky) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return f.api.ChangeMessageVisibility(ctx, in, opts...)
}

func (f *flaky) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	var ids []string
	for _, e := range in.Entries {
		ids = append(ids, aws.ToString(e.Id))
	}
	f.calls = append(f.calls, ids)
	if f.failCalls > 0 {
		f.failCalls--
		f.mu.Unlock()
		return nil, errors.New("connection reset")
	}
	var pass []types.SendMessageBatchRequestEntry
	var failed []types.BatchResultErrorEntry
	for _, e := range in.Entries {
		id := aws.ToString(e.Id)
		switch {
		case f.sender[id]:
			failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), Message: aws.String("bad"), SenderFault: true})
		case f.failOnce[id] || f.failAll:
			delete(f.failOnce, id)
			failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("try again")})
		default:
			pass = append(pass, e)
		}
	}
	f.mu.Unlock()
	out := &sqs.SendMessageBatchOutput{Failed: failed}
	if len(pass) > 0 {
		r, err := f.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: in.QueueUrl, Entries: pass}, opts...)
		if err != nil {
			return nil, err
		}
		out.Successful = r.Successful
		out.Failed = append(out.Failed, r.Failed...)
	}
	return out, nil
}

func bodies(n int) []sqsqueue.Message {
	var out []sqsqueue.Message
	for i := range n {
		out = append(out, sqsqueue.Message{Body: "b" + strconv.Itoa(i)})
	}
	return out
}

func TestRetriesOnlyFailedEntries(t *testing.T) {
	c, url := setup(t)
	f := &flaky{api: c, failOnce: map[string]bool{"1": true, "4": true, "7": true}}
	q := sqsqueue.New(f, url)
	if err := q.Send(t.Context(), bodies(10)); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 2 || strings.Join(f.calls[1], ",") != "1,4,7" {
		t.Errorf("calls %v, want all ten then 1,4,7", f.calls)
	}
	if got := receiveAll(t, c, url); len(got) != 10 {
		t.Errorf("%d messages arrived, want each of 10 once", len(got))
	}
}

func TestCallErrorsAreRetried(t *testing.T) {
	c, url := setup(t)
	f := &flaky{api: c, failCalls: 2}
	q := sqsqueue.New(f, url)
	if err := q.Send(t.Context(), bodies(3)); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 3 || len(receiveAll(t, c, url)) != 3 {
		t.Errorf("%d calls; want two failed calls and one that delivers 3", len(f.calls))
	}
}

func TestUnsentMessagesAreNamed(t *testing.T) {
	c, url := setup(t)
	f := &flaky{api: c, sender: map[string]bool{"2": true}, failAll: false}
	q := sqsqueue.New(f, url)
	q.Attempts = 3
	err := q.Send(t.Context(), bodies(12))
	var se *sqsqueue.SendError
	if !errors.As(err, &se) || len(se.Failed) != 1 || !strings.Contains(se.Failed[2], "InvalidParameterValue") {
		t.Fatalf("error %v, want message 2 named as not sent", err)
	}
	if len(f.calls) != 2 {
		t.Errorf("%d calls: a sender fault must not be retried", len(f.calls))
	}
	if n := len(receiveAll(t, c, url)); n != 11 {
		t.Errorf("%d sent, want the other 11", n)
	}

	// Failures that persist are retried up to Attempts, then named.
	f2 := &flaky{api: c, failAll: true}
	q2 := sqsqueue.New(f2, url)
	q2.Attempts = 3
	err = q2.Send(t.Context(), bodies(4))
	if !errors.As(err, &se) || len(se.Failed) != 4 || len(f2.calls) != 3 {
		t.Fatalf("error %v after %d calls, want all 4 named after 3 calls", err, len(f2.calls))
	}
	if !strings.Contains(err.Error(), "4 message(s) not sent") || !strings.Contains(err.Error(), "[3] InternalError: try again") {
		t.Errorf("message %q", err)
	}
}

func TestInvalidMessagesSendNothing(t *testing.T) {
	c, url := setup(t)
	q := sqsqueue.New(c, url)
	err := q.Send(t.Context(), []sqsqueue.Message{{Body: "ok"}, {Body: ""}, {Body: "late", Delay: 16 * time.Minute}})
	if err == nil || !strings.Contains(err.Error(), "[1] body is empty") || !strings.Contains(err.Error(), "[2] delay 16m0s") {
		t.Fatalf("error %v, want both problems", err)
	}
	if q.Calls() != 0 || len(receiveAll(t, c, url)) != 0 {
		t.Error("something was sent")
	}
}
