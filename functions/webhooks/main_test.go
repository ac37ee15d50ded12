package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/webhooks"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

// TestSampleEvents pushes events/webhooks/*.json through the function's
// handler, built as main builds it, on the emulator: the stream sample (a
// deregistration of an org with no endpoints) fans out to nothing and the
// queue sample (an endpoint that does not exist) is dropped; neither fails.
func TestSampleEvents(t *testing.T) {
	env := emulatortest.Start(t)
	s := wiring.WebhooksSettings{Table: env.Name(t, "SpacesTable"), Queue: env.Resources["WebhooksQueue"].URL,
		SealerKey: env.Resources["WebhookSecretsKey"].Name}
	h := webhooks.Lambda(wiring.Webhooks(parts.AWS{Config: env.Config, Endpoint: env.Endpoint}, s, slog.New(slog.DiscardHandler)))
	files, _ := filepath.Glob("../../events/webhooks/*.json")
	if len(files) != 2 {
		t.Fatalf("samples: %v", files)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := h(t.Context(), raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		switch r := out.(type) {
		case events.DynamoDBEventResponse:
			if len(r.BatchItemFailures) != 0 {
				t.Errorf("%s: failures %v", f, r.BatchItemFailures)
			}
		case events.SQSEventResponse:
			if len(r.BatchItemFailures) != 0 {
				t.Errorf("%s: failures %v", f, r.BatchItemFailures)
			}
		default:
			b, _ := json.Marshal(out)
			t.Errorf("%s: answered %T %s", f, out, b)
		}
	}
}
