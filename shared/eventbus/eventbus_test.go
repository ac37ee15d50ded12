package eventbus_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/eventbus"
	"spaces/shared/space"
)

// recorder keeps what was sent to the real (emulated) EventBridge. kumo
// delivers rule targets to a fixed port set at process start, so the test
// checks the request and EventBridge's answer rather than a delivery.
type recorder struct {
	api eventbus.API
	in  []*eventbridge.PutEventsInput
}

func (r *recorder) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	r.in = append(r.in, in)
	return r.api.PutEvents(ctx, in, opts...)
}

func TestPublishTransition(t *testing.T) {
	env := emulatortest.Start(t)
	rec := &recorder{api: eventbus.NewClient(env.Config, env.Endpoint)}
	bus := env.Name(t, "EventBus")
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tr := space.Transition{OrgID: "acme", SpaceID: "00000000-0000-4000-8000-000000000001", From: space.Active, To: space.Inactive,
		Reason: space.ReasonTimeout, Message: "no answer", At: at}
	if err := eventbus.New(rec, bus).PublishTransition(t.Context(), tr); err != nil {
		t.Fatal(err)
	}
	if len(rec.in) != 1 || len(rec.in[0].Entries) != 1 {
		t.Fatalf("requests %+v", rec.in)
	}
	e := rec.in[0].Entries[0]
	if aws.ToString(e.Source) != "spaces" || aws.ToString(e.DetailType) != "Space Status Changed" || aws.ToString(e.EventBusName) != bus || !aws.ToTime(e.Time).Equal(at) {
		t.Errorf("entry %+v", e)
	}
	var detail map[string]any
	if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &detail); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"org_id": "acme", "space_id": tr.SpaceID, "from": "active", "to": "inactive", "reason": "Timeout", "at": "2026-03-01T12:00:00Z"}
	if len(detail) != len(want) {
		t.Errorf("detail %v, want exactly %v", detail, want)
	}
	for k, v := range want {
		if detail[k] != v {
			t.Errorf("detail.%s = %v, want %v", k, detail[k], v)
		}
	}
}

// An entry EventBridge rejects is an error, not a silent loss.
type rejecting struct{}

func (rejecting) PutEvents(context.Context, *eventbridge.PutEventsInput, ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	return &eventbridge.PutEventsOutput{FailedEntryCount: 1, Entries: []types.PutEventsResultEntry{{ErrorCode: aws.String("InternalFailure"), ErrorMessage: aws.String("try later")}}}, nil
}

func TestRejectedEntryIsAnError(t *testing.T) {
	err := eventbus.New(rejecting{}, "bus").PublishTransition(t.Context(), space.Transition{SpaceID: "s", To: space.Active, At: time.Now()})
	if err == nil || err.Error() != "eventbridge PutEvents rejected the event: InternalFailure: try later" {
		t.Errorf("error %v", err)
	}
}
