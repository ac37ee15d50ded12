package local

import (
	"bytes"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestWebhookReplay: a delivered event replayed (one, or every one since a
// time) reaches the receiver again with its original webhook-id and body,
// signed so that the reference library verifies it; replaying twice is
// harmless (the same id again). Bad replays (unknown or malformed delivery
// ids, another org's endpoint, a paused endpoint, a missing, malformed or
// future since, an unknown field) are refused and send nothing.
func TestWebhookReplay(t *testing.T) {
	rc := newHookReceiver(t)
	st := webhookStack(t, rc)
	c := newClient(t, st, "acme")
	created := c.must(201, c.do("POST", "/webhook-endpoints", map[string]any{
		"url": rc.srv.URL + "/hooks", "event_types": []string{"space.registered"}}))
	id := created["id"].(string)
	verifier, err := standardwebhooks.NewWebhook(created["secret"].(string))
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
	acct := c.account("aws")
	c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "replayed-1")))
	eventually(t, "the first registration", func() bool { return len(rc.requests()) >= 1 })
	c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "replayed-2")))
	eventually(t, "both registrations", func() bool { return len(rc.requests()) >= 2 })
	originals := rc.requests()
	firstID, secondID := originals[0].header.Get("webhook-id"), originals[1].header.Get("webhook-id")
	base := "/webhook-endpoints/" + id

	other := newClient(t, st, "globex")
	for _, tc := range []struct {
		name   string
		c      *client
		path   string
		body   any
		status int
	}{
		{"unknown delivery", c, base + "/deliveries/msg_unknown/replay", nil, 404},
		{"malformed delivery id", c, base + "/deliveries/nope/replay", nil, 404},
		{"another org's endpoint", other, base + "/deliveries/" + firstID + "/replay", nil, 404},
		{"another org's, since", other, base + "/replay", map[string]any{"since": before}, 404},
		{"unknown endpoint", c, "/webhook-endpoints/0b6f3c1e-2d4a-4f8b-9c1d-7e5a3b2c1d0f/deliveries/" + firstID + "/replay", nil, 404},
		{"since missing", c, base + "/replay", map[string]any{}, 422},
		{"since not a time", c, base + "/replay", map[string]any{"since": "yesterday"}, 422},
		{"since a number", c, base + "/replay", map[string]any{"since": 5}, 400},
		{"since in the future", c, base + "/replay", map[string]any{"since": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, 422},
		{"unknown field", c, base + "/replay", map[string]any{"since": before, "until": before}, 400},
		{"not JSON", c, base + "/replay", "since=now", 400},
	} {
		if r := tc.c.do("POST", tc.path, tc.body); r.status != tc.status {
			t.Errorf("%s: %d %s; want %d", tc.name, r.status, r.body, tc.status)
		}
	}
	c.must(200, c.do("POST", base+"/pause", nil))
	c.must(409, c.do("POST", base+"/deliveries/"+firstID+"/replay", nil))
	c.must(409, c.do("POST", base+"/replay", map[string]any{"since": before}))
	c.must(200, c.do("POST", base+"/resume", nil))
	if n := len(rc.requests()); n != 2 {
		t.Fatalf("refused replays sent %d requests; want none beyond the 2 originals", n-2)
	}

	one := c.must(202, c.do("POST", base+"/deliveries/"+firstID+"/replay", nil))
	if ids, _ := one["webhook_ids"].([]any); len(ids) != 1 || ids[0] != firstID {
		t.Fatalf("replay one: %v", one)
	}
	eventually(t, "the replayed delivery", func() bool { return len(rc.requests()) >= 3 })
	since := c.must(202, c.do("POST", base+"/replay", map[string]any{"since": before}))
	if ids, _ := since["webhook_ids"].([]any); len(ids) != 2 || ids[0] != firstID || ids[1] != secondID || since["next_since"] != nil {
		t.Fatalf("replay since: %v; want [%s %s]", since, firstID, secondID)
	}
	eventually(t, "the replays since", func() bool { return len(rc.requests()) >= 5 })
	got := rc.requests()
	// The first replayed twice (alone, then since), the second once, each
	// as first sent; in any order, as SQS keeps none between messages.
	byID := map[string]hookRequest{firstID: originals[0], secondID: originals[1]}
	times := map[string]int{}
	for i, r := range got[2:min(len(got), 5)] {
		id := r.header.Get("webhook-id")
		times[id]++
		if want, ok := byID[id]; !ok || !bytes.Equal(r.body, want.body) {
			t.Errorf("replay %d: %s %s; want one of the originals as sent", i, id, r.body)
		}
		if err := verifier.Verify(r.body, r.header); err != nil {
			t.Errorf("replay %d does not verify: %v", i, err)
		}
	}
	if times[firstID] != 2 || times[secondID] != 1 {
		t.Errorf("replays by webhook-id %v; want %s twice and %s once", times, firstID, secondID)
	}
	if n := len(got); n != 5 {
		t.Errorf("%d requests; want 5", n)
	}
	// Replaying again is harmless: the same id, which the receiver drops.
	if again := c.must(202, c.do("POST", base+"/deliveries/"+secondID+"/replay", nil)); again["webhook_ids"].([]any)[0] != secondID {
		t.Errorf("a second replay: %v", again)
	}
}
