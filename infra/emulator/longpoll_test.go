package emulator_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
)

// A long poll returns as soon as a message is available
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-short-and-long-polling.html),
// also one that becomes visible while the poll waits, when its delay or its
// visibility timeout ends: no send announces those, and unpatched kumo
// answered such a poll empty at the end of its wait
// (patches/sqs-long-poll.patch). The probe queue's messages are all
// delayed, so the event source's receives (and what they cost) depend on it.
func TestLongPollReturnsMessagesThatBecomeVisible(t *testing.T) {
	const tmpl = `
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 1
`
	env := emulatortest.StartWith(t, []byte(tmpl))
	q := awsclient.SQS(env.Config, env.Endpoint)
	url := env.Resources["Queue"].URL
	ctx := t.Context()
	poll := func(what string) []sqstypes.Message {
		t.Helper()
		// A wait far longer than the delay: a poll that is not woken
		// answers empty after it.
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 5})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return out.Messages
	}
	one := func(ms []sqstypes.Message) bool { return len(ms) == 1 && aws.ToString(ms[0].Body) == "delayed" }

	// Delayed: sent before the poll starts, visible during it.
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("delayed"), DelaySeconds: 1}); err != nil {
		t.Fatal(err)
	}
	if got := poll("delayed"); !one(got) {
		t.Fatalf("a long poll while a delayed message became visible answered %d messages, want [delayed]", len(got))
	}
	// Received and not deleted: visible again when its 1-second
	// visibility timeout ends, during the next poll.
	got := poll("redelivered")
	if !one(got) {
		t.Fatalf("a long poll while a received message's visibility timeout ended answered %d messages, want [delayed]", len(got))
	}
	if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: got[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	// Nothing left to become visible: the poll waits its whole time and
	// answers empty.
	start := time.Now()
	if got := poll("empty"); len(got) != 0 {
		t.Fatalf("an empty queue's long poll answered %d messages", len(got))
	}
	if waited := time.Since(start); waited < 4*time.Second {
		t.Fatalf("an empty queue's 5-second long poll answered after %v: it must wait", waited)
	}
}
