package main

import (
	"log/slog"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/space"
	"spaces/shared/wiring/agents"
	"spaces/shared/wiring/parts"
)

// TestIoTSampleEventsThroughTheLambdaPath sends the IoT samples (an
// authorizer request, a presence batch) through the function's Lambda handler:
// each reaches its handler by its shape. The sample's credential is no
// one's: refused, without a Lambda error; its space is unknown: dropped,
// no batch item failure.
func TestIoTSampleEventsThroughTheLambdaPath(t *testing.T) {
	env := emulatortest.Start(t)
	s := agents.Settings{Common: parts.Common{Table: env.Name(t, "SpacesTable"), StaleAfter: space.DefaultStaleAfter},
		ProbeQueue: env.Resources["ProbeQueue"].URL,
		Presence:   space.PresenceConfig{Endpoint: "example-ats.iot.us-east-1.amazonaws.com:443", Authorizer: "spaces-agent", ClientPrefix: "spaces-"}}
	handle := serve(agents.NewHandlers(parts.AWS{Config: env.Config, Endpoint: env.Endpoint}, s, agents.Options{Log: slog.New(slog.DiscardHandler)}), nil)
	raw, err := os.ReadFile("../../events/presence/authorizer.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := handle(t.Context(), raw)
	if res, ok := out.(events.IoTCoreCustomAuthorizerResponse); err != nil || !ok || res.IsAuthenticated {
		t.Errorf("authorizer sample: %#v %v, want a refusal", out, err)
	}
	if raw, err = os.ReadFile("../../events/presence/presence.json"); err != nil {
		t.Fatal(err)
	}
	out, err = handle(t.Context(), raw)
	if res, ok := out.(events.SQSEventResponse); err != nil || !ok || len(res.BatchItemFailures) != 0 {
		t.Errorf("presence sample: %#v %v, want no failures", out, err)
	}
}
