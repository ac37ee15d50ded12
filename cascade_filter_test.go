package spaces_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"spaces"
	"spaces/infra/emulator"
	"spaces/shared/dynamostore"
	"spaces/shared/eventfilter"
)

// TestCascadeFilterMatchesOnlyDeregistrations: the FilterCriteria that
// template.yaml gives the cascade's stream source (the one definition, which
// the local poller applies too) passes the sample deregistration record and
// no other sample; the handler's own check agrees on each.
func TestCascadeFilterMatchesOnlyDeregistrations(t *testing.T) {
	src, err := emulator.FunctionStreamSource(spaces.Template, "CascadeFunction", "Deregistrations")
	if err != nil {
		t.Fatal(err)
	}
	if len(src.Patterns) != 1 {
		t.Fatalf("patterns %v", src.Patterns)
	}
	pat, err := eventfilter.Compile(src.Patterns[0])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"deregistration.json": true, "status-change.json": false}
	files, _ := filepath.Glob("events/cascade/*.json")
	if len(files) != len(want) {
		t.Fatalf("samples %v, want %d", files, len(want))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, r := range ev.Records {
			ok, err := pat.MatchValue(r)
			if err != nil {
				t.Fatal(err)
			}
			if ok != want[filepath.Base(f)] {
				t.Errorf("%s: filter matched = %v", f, ok)
			}
			if _, isDereg := (&dynamostore.Store{}).Deregistration(r); isDereg != ok {
				t.Errorf("%s: the handler's check says %v, the filter %v", f, isDereg, ok)
			}
		}
	}
	// Lambda settings the cascade relies on.
	if !src.BisectBatchOnFunctionError || !src.ReportBatchItemFailures || src.MaximumRetryAttempts != 5 ||
		src.StartingPosition != "LATEST" || src.OnFailure != "CascadeFailureQueue" || src.Table != "SpacesTable" {
		t.Errorf("stream source %+v", src)
	}
}
