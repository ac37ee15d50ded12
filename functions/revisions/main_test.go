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
	"spaces/shared/revisions"
	"spaces/shared/space"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

// TestSampleClaimEvent pushes events/revisions/claim.json through the claim
// the function runs, on the emulator: as shipped, its revision exists
// nowhere and the message is acknowledged with nothing dead-lettered; once
// that revision is pending on a space that is not registered (deregistered),
// the claim dead-letters it, exactly once across a redelivery.
func TestSampleClaimEvent(t *testing.T) {
	raw, err := os.ReadFile("../../events/revisions/claim.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Records) != 1 {
		t.Fatalf("%d records in the sample, want 1", len(ev.Records))
	}
	var m revisions.Message
	if err := json.Unmarshal([]byte(ev.Records[0].Body), &m); err != nil || m.OrgID == "" || m.RevisionID == "" {
		t.Fatalf("sample body %q: %+v %v", ev.Records[0].Body, m, err)
	}

	env := emulatortest.Start(t)
	store := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Name(t, "SpacesTable"))
	q := awsclient.SQS(env.Config, env.Endpoint)
	dlq := env.Resources["RevisionsDLQ"].URL
	// The claimer as the function builds it; no claim here reaches a cluster.
	c := wiring.Claimer(parts.AWS{Config: env.Config, Endpoint: env.Endpoint}, wiring.ClaimerSettings{
		Common:         parts.Common{Table: env.Name(t, "SpacesTable"), StaleAfter: space.DefaultStaleAfter},
		RevisionsQueue: env.Resources["RevisionsQueue"].URL, RevisionsDLQ: dlq,
	}, nil, nil, slog.New(slog.DiscardHandler))
	deadLetters := func() []string {
		t.Helper()
		out, err := q.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlq), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		for _, msg := range out.Messages {
			bodies = append(bodies, aws.ToString(msg.Body))
			if _, err := q.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(dlq), ReceiptHandle: msg.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		return bodies
	}

	resp, err := c.HandleSQS(t.Context(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("sample as shipped: %+v %v; want it acknowledged", resp, err)
	}
	if got := deadLetters(); len(got) != 0 {
		t.Fatalf("dead letters for a revision that does not exist: %v", got)
	}

	now := time.Now().UTC().Truncate(time.Second)
	rev := space.Revision{ID: m.RevisionID, OrgID: m.OrgID, EnvironmentID: "0d5b7c1e-3f2a-4b6c-8d9e-1a2b3c4d5e6f",
		SpaceID: "6a7b8c9d-0e1f-4a2b-9c3d-4e5f6a7b8c9d", Namespace: "default", State: space.RevisionPending,
		Manifests: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "sample"}}},
		CreatedAt: now, UpdatedAt: now, Version: 1}
	if err := store.CreateRevision(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second is a redelivery
		resp, err = c.HandleSQS(t.Context(), ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d: %+v %v; want it acknowledged", i+1, resp, err)
		}
	}
	got, err := store.GetRevision(t.Context(), m.OrgID, m.RevisionID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != space.RevisionDeadLettered || got.Reason == "" {
		t.Errorf("revision after the claim: state %s, reason %q; want dead-lettered with a reason", got.State, got.Reason)
	}
	if dl := deadLetters(); len(dl) != 1 || dl[0] != ev.Records[0].Body {
		t.Errorf("dead letters %v; want the sample's body once", dl)
	}
}
