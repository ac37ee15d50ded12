package eventbus_test

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/eventbus"
	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// TestPublishJob: a succeeded and a failed job each publish one event of
// their detail-type (source spaces) on the emulated bus, with the detail
// docs/provisioning.md documents (its sample decodes to the same keys); a canceled job
// publishes nothing.
func TestPublishJob(t *testing.T) {
	env := emulatortest.Start(t)
	rec := &recorder{api: eventbus.NewClient(env.Config, env.Endpoint)}
	pub := eventbus.New(rec, env.Name(t, "EventBus"))
	at := time.Date(2026, 12, 1, 9, 12, 0, 0, time.UTC)
	j := provisioning.Job{ID: "3c2b1a9f-8e7d-4c6b-a5f4-e3d2c1b0a987", OrgID: "acme", Provider: space.AWS,
		CloudAccountID: "6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f", Config: space.Config{"clusterName": "prod-eu", "region": "eu-west-1"},
		State: provisioning.Failed, Since: at, Failure: &provisioning.Failure{Step: provisioning.Creating, Reason: space.ReasonCloudRefused,
			Message: "InvalidParameterException: unsupported Kubernetes version 1.31"}}
	ok := j
	ok.State, ok.Failure, ok.SpaceID = provisioning.Succeeded, nil, "5d1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f"
	canceled := j
	canceled.State, canceled.Failure = provisioning.Canceled, nil
	for _, x := range []provisioning.Job{j, ok, canceled} {
		if err := pub.PublishJob(t.Context(), x); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.in) != 2 {
		t.Fatalf("%d events, want 2 (none for the canceled job)", len(rec.in))
	}
	details := map[string]map[string]any{}
	for _, in := range rec.in {
		e := in.Entries[0]
		if aws.ToString(e.Source) != "spaces" || !aws.ToTime(e.Time).Equal(at) {
			t.Errorf("entry %+v", e)
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &d); err != nil {
			t.Fatal(err)
		}
		details[aws.ToString(e.DetailType)] = d
	}
	failed, succeeded := details[eventbus.JobFailed], details[eventbus.JobSucceeded]
	if failed == nil || succeeded == nil || succeeded["space_id"] != ok.SpaceID || succeeded["failure"] != nil ||
		failed["failure"].(map[string]any)["reason"] != "CloudRefused" || failed["cluster_name"] != "prod-eu" {
		t.Fatalf("details %v", details)
	}
	// docs/provisioning.md's sample is this very event.
	doc, err := os.ReadFile("../../docs/provisioning.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```json\n(\\{\"source\": \"spaces\", \"detail-type\": \"Provisioning Job Failed\".*?)\n```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/provisioning.md has no Provisioning Job Failed sample")
	}
	var sample struct {
		Detail map[string]any `json:"detail"`
	}
	if err := json.Unmarshal(m[1], &sample); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sample.Detail, failed) {
		t.Errorf("docs/provisioning.md's sample detail\n%v\nis not what is published\n%v", sample.Detail, failed)
	}
}
