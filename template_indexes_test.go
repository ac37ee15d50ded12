package spaces_test

import (
	"fmt"
	"slices"
	"testing"
)

// TestAPIMayQueryItsIndexes: the API function's role may Query each index
// its listings read (names, registered, status: GET /spaces by name,
// registration or status; env-revisions and
// stopped-revisions: the revision listings), and each is an index of the
// spaces table. Without the grant, DynamoDB refuses the Query in AWS while
// the emulator, which checks no IAM, would answer it.
func TestAPIMayQueryItsIndexes(t *testing.T) {
	tpl := parseRaw(t)
	indexes := map[string]bool{}
	for _, g := range list(tpl.Resources["SpacesTable"].Properties["GlobalSecondaryIndexes"]) {
		indexes[fmt.Sprint(get(g, "IndexName"))] = true
	}
	granted := map[string]bool{}
	for _, st := range statements(tpl)[ref(tpl.Resources["ApiFunction"].Properties["Role"])] {
		if st["Effect"] != "Allow" || !slices.Contains(list(st["Action"]), any("dynamodb:Query")) {
			continue
		}
		for _, r := range list(st["Resource"]) {
			if sub, ok := get(r, "Fn::Sub").(string); ok {
				granted[sub] = true
			}
		}
	}
	for _, idx := range []string{"names", "registered", "status", "env-revisions", "stopped-revisions"} {
		if !indexes[idx] {
			t.Errorf("SpacesTable has no index %s", idx)
		}
		if !granted["${SpacesTable.Arn}/index/"+idx] {
			t.Errorf("the API's role may not Query the %s index", idx)
		}
	}
}
