package probing_test

import (
	"strings"
	"testing"

	"spaces/shared/probing"
	"spaces/shared/space"
)

// FuzzDecodeMessage: any SQS body either decodes into a message the prober
// can act on (an org, a space UUID, a known kind, a version for a re-probe)
// that encodes back to the same message, or is refused without a panic.
func FuzzDecodeMessage(f *testing.F) {
	const id = "0b5d3c52-4d7e-4b0e-9a43-2f0d6c1e8a11"
	for _, s := range []string{
		`{"org_id":"acme","id":"` + id + `"}`,
		`{"org_id":"acme","id":"` + id + `","kind":"registered"}`,
		`{"org_id":"acme","id":"` + id + `","kind":"reprobe","version":3}`,
		`{"org_id":"acme","id":"` + id + `","kind":"reprobe"}`,
		`{"org_id":"acme","id":"` + id + `","kind":"other"}`,
		`{"org_id":"","id":"x"}`, `{"org_id":"acme","id":"` + id + `","version":1e30}`,
		`{"org_id":"acme","id":"` + id + `","org_id":"globex"}`, `[]`, `null`, ``, `{`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, err := probing.DecodeMessage(body)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "probe message is not") {
				t.Fatalf("error %q does not say what is wrong with the message", err)
			}
			return
		}
		if m.OrgID == "" || !space.ValidID(m.ID) {
			t.Fatalf("accepted %q: %+v", body, m)
		}
		switch m.Kind {
		case probing.KindTick, probing.KindRegistered:
		case probing.KindReprobe:
			if m.Version < 1 {
				t.Fatalf("accepted a re-probe without a version: %q", body)
			}
		default:
			t.Fatalf("accepted kind %q", m.Kind)
		}
		again, err := probing.DecodeMessage(m.Encode())
		if err != nil || again != m {
			t.Fatalf("round trip of %+v: %+v, %v", m, again, err)
		}
	})
}
