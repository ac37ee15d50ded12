package probing_test

import (
	"reflect"
	"strings"
	"testing"

	"spaces/shared/probing"
	"spaces/shared/space"
)

// FuzzDecodeMessage: any SQS body either decodes into a message the prober
// can act on (an org and a space UUID, or a tick of 2 to MaxSpaces distinct
// such spaces; a known kind, a version for a re-probe) that encodes back to
// the same message, or is refused without a panic.
func FuzzDecodeMessage(f *testing.F) {
	const id, id2 = "0b5d3c52-4d7e-4b0e-9a43-2f0d6c1e8a11", "7c1e2b0a-3f4d-4e5a-8b6c-9d0e1f2a3b4c"
	for _, s := range []string{
		`{"org_id":"acme","id":"` + id + `"}`,
		`{"org_id":"acme","id":"` + id + `","kind":"registered"}`,
		`{"org_id":"acme","id":"` + id + `","kind":"reprobe","version":3}`,
		`{"org_id":"acme","id":"` + id + `","kind":"reprobe"}`,
		`{"org_id":"acme","id":"` + id + `","kind":"other"}`,
		`{"org_id":"","id":"x"}`, `{"org_id":"acme","id":"` + id + `","version":1e30}`,
		`{"org_id":"acme","id":"` + id + `","org_id":"globex"}`, `[]`, `null`, ``, `{`,
		`{"spaces":[{"org_id":"acme","id":"` + id + `"},{"org_id":"globex","id":"` + id2 + `"}]}`,
		`{"spaces":[{"org_id":"acme","id":"` + id + `"},{"org_id":"globex","id":"` + id2 + `"}],"retry":true}`,
		`{"spaces":[{"org_id":"acme","id":"` + id + `"},{"org_id":"acme","id":"` + id + `"}]}`,
		`{"spaces":[{"org_id":"acme","id":"` + id + `"}]}`, `{"spaces":[]}`,
		`{"spaces":[{"org_id":"acme","id":"` + id + `"},{"org_id":"","id":"x"}],"kind":"reprobe","version":2}`,
		`{"org_id":"acme","id":"` + id + `","spaces":[{"org_id":"acme","id":"` + id2 + `"},{"org_id":"acme","id":"` + id + `"}]}`,
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
		ones := m.Each()
		if len(ones) < 1 || len(ones) > probing.MaxSpaces || (len(ones) > 1 && (m.Kind != probing.KindTick || m.OrgID != "" || m.ID != "")) {
			t.Fatalf("accepted %q: %+v", body, m)
		}
		seen := map[string]bool{}
		for _, o := range ones {
			if o.OrgID == "" || !space.ValidID(o.ID) || seen[o.ID] || o.Kind != m.Kind || o.Retry != m.Retry {
				t.Fatalf("accepted %q: space %+v", body, o)
			}
			seen[o.ID] = true
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
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip of %+v: %+v, %v", m, again, err)
		}
	})
}

// TestDecodeMessageWithoutDigests: a tick of a scheduler from before
// probe digests (its spaces carry the space's attributes, which this
// prober does not read) decodes with each space by its ids only, so the
// prober reads each one (its liveness check); a digest without read_at is
// refused.
func TestDecodeMessageWithoutDigests(t *testing.T) {
	const id = "0b5d3c52-4d7e-4b0e-9a43-2f0d6c1e8a11"
	old := `{"spaces":[{"org_id":"o","id":"` + id + `","probe_shard":"07","name":"n","provider":"aws","status":"active","probe":{"consecutive_failures":0},"version":3}],"read_at":"2026-12-05T12:00:00Z"}`
	m, err := probing.DecodeMessage(old)
	if err != nil {
		t.Fatalf("a previous release's tick: %v", err)
	}
	if each := m.Each(); len(each) != 1 || each[0].Target != nil || each[0].ID != id {
		t.Errorf("a previous release's tick reads as %+v, want its space by ids", each)
	}
	noReadAt := `{"spaces":[{"org_id":"o","id":"` + id + `","probe_shard":"07","digest":"1|3|a|0||tpbdc1|hT3aOP|aws|acct|c=c,r=us-east-1|"}]}`
	if _, err := probing.DecodeMessage(noReadAt); err == nil {
		t.Error("a digest without read_at was accepted")
	}
}
