package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/provisioning"
	"spaces/shared/space"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

// TestSampleStepEvent pushes events/provisioner/step.json through the
// handler the function runs, on the emulator: as shipped its job does not
// exist yet, so the first receive is handed back (the job's write follows
// its first message) and the third is dropped; once the job is stored
// queued, the delivery moves it to creating and queues the next step for
// the next version, and a redelivery of the same message changes nothing;
// the queue's last receive of the next step fails the job.
func TestSampleStepEvent(t *testing.T) {
	raw, err := os.ReadFile("../../events/provisioner/step.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil || len(ev.Records) != 1 {
		t.Fatalf("sample: %d records, %v", len(ev.Records), err)
	}
	var m provisioning.Message
	if err := json.Unmarshal([]byte(ev.Records[0].Body), &m); err != nil || m.JobID == "" || m.Version != 1 {
		t.Fatalf("sample body %q: %+v %v", ev.Records[0].Body, m, err)
	}

	env := emulatortest.Start(t)
	table := env.Name(t, "SpacesTable")
	store := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), table)
	queue := env.Resources["ProvisioningQueue"].URL
	// The provisioner as the function builds it; no step here reaches a cloud.
	p := wiring.Provisioner(parts.AWS{Config: env.Config, Endpoint: env.Endpoint}, wiring.ProvisionerSettings{
		Common:            parts.Common{Table: table, StaleAfter: space.DefaultStaleAfter},
		ProvisioningQueue: queue, EventBus: env.Name(t, "EventBus"), MaxReceives: provisioning.DefaultMaxReceives,
	}, provisioning.Unconfigured{}, nil, slog.New(slog.DiscardHandler))

	resp, err := p.HandleSQS(t.Context(), ev)
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("first receive of a message whose job is not stored: %+v %v; want it handed back", resp, err)
	}
	third := ev
	third.Records = []events.SQSMessage{ev.Records[0]}
	third.Records[0].Attributes = map[string]string{"ApproximateReceiveCount": "3"}
	if resp, err = p.HandleSQS(t.Context(), third); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("third receive: %+v %v; want it dropped", resp, err)
	}

	now := time.Now().UTC()
	job := provisioning.Job{ID: m.JobID, OrgID: m.OrgID, Provider: space.AWS, CloudAccountID: "6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f",
		Config: space.Config{"clusterName": "sample", "region": "us-east-1"}, State: provisioning.Queued, Since: now,
		Steps: []provisioning.Step{{State: provisioning.Queued, At: now}}, CreatedAt: now, UpdatedAt: now, Version: 1}
	if err := store.CreateJob(t.Context(), job, provisioning.Idempotency{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second is a redelivery
		if resp, err = p.HandleSQS(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d: %+v %v; want it acknowledged", i+1, resp, err)
		}
	}
	got, err := store.GetJob(t.Context(), m.OrgID, m.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != provisioning.Creating || got.Version != 2 {
		t.Errorf("job after the deliveries: %s version %d; want creating at version 2", got.State, got.Version)
	}
	// The queue's last receive of a step that keeps failing fails the job
	// on the table, instead of leaving it stuck behind the DLQ.
	last := ev
	last.Records = []events.SQSMessage{ev.Records[0]}
	last.Records[0].Body = provisioning.Message{OrgID: m.OrgID, JobID: m.JobID, Version: 2}.Encode()
	last.Records[0].Attributes = map[string]string{"ApproximateReceiveCount": "5"}
	if resp, err = p.HandleSQS(t.Context(), last); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("last receive: %+v %v; want it acknowledged", resp, err)
	}
	if got, err = store.GetJob(t.Context(), m.OrgID, m.JobID); err != nil || got.State != provisioning.Failed ||
		got.Failure.Reason != provisioning.ReasonStepKeptFailing || !got.Failure.Retryable || got.Failure.Step != provisioning.Creating {
		t.Errorf("job after the last receive: %+v %v", got.Failure, err)
	}
	out, err := awsclient.SQS(env.Config, env.Endpoint).ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != (provisioning.Message{OrgID: m.OrgID, JobID: m.JobID, Version: 2}).Encode() {
		t.Errorf("queued after the deliveries: %d messages; want the one next step at version 2", len(out.Messages))
	}
}
