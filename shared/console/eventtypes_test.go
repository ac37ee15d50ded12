package console

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEventTypesAreTheAPIs: the Integrations screen offers as checkboxes
// exactly openapi.yaml's WebhookEventType, in its order, so the console
// never offers a type the API refuses nor hides one it delivers.
func TestEventTypesAreTheAPIs(t *testing.T) {
	doc, err := os.ReadFile("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^    WebhookEventType:\n      type: string\n      enum: \[([^\]]*)\]`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("openapi.yaml has no WebhookEventType enum on one line")
	}
	var api []string
	for _, s := range strings.Split(string(m[1]), ",") {
		api = append(api, strings.TrimSpace(s))
	}
	js, err := os.ReadFile("static/integrations.js")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)export const EVENT_TYPES = \[(.*?)\n\];`).FindSubmatch(js)
	if block == nil {
		t.Fatal("static/integrations.js has no EVENT_TYPES")
	}
	var console []string
	for _, e := range regexp.MustCompile(`(?m)^  \['([^']+)', '`).FindAllSubmatch(block[1], -1) {
		console = append(console, string(e[1]))
	}
	if len(api) < 9 || !slices.Equal(api, console) {
		t.Errorf("the console offers the event types\n  %v\nopenapi.yaml's WebhookEventType is\n  %v", console, api)
	}
}
