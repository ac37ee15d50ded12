package probing_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"spaces/infra/testcluster"
	"spaces/shared/probing"
	"spaces/shared/space"
)

// The prober handles the sample SQS event (events/prober/batch.json) as
// Lambda delivers it: the space ids in it exist in no store, so every
// message is acknowledged; the second, a redelivery, first looks for an
// unpublished transition; the third names two spaces. Then the same shape
// with real spaces.
func TestHandleSQSSampleEvent(t *testing.T) {
	raw, err := os.ReadFile("../../events/prober/batch.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev lambdaevents.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Records) != 3 {
		t.Fatalf("%d records in the sample", len(ev.Records))
	}
	for _, r := range ev.Records {
		if _, err := probing.DecodeMessage(r.Body); err != nil {
			t.Errorf("sample message %s: %v", r.MessageId, err)
		}
	}
	h := newHarness(t, time.Second)
	resp, err := h.prober.HandleSQS(t.Context(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("sample: %+v %v", resp, err)
	}

	c := testcluster.NewForTest(t)
	s, s2, s3 := h.register("sample", false), h.register("sample-2", false), h.register("sample-3", false)
	for _, x := range []space.Space{s, s2, s3} {
		h.minter.Set(x.ID, c.Credentials())
	}
	ev.Records[0].Body = probing.Message{OrgID: h.org, ID: s.ID}.Encode()
	ev.Records[1].Body = "garbage"
	ev.Records[2].Body = probing.TickOf(targets(s2, s3)).Encode()
	resp, err = h.prober.HandleSQS(t.Context(), ev)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[1].MessageId {
		t.Fatalf("response %+v %v: want only the garbage message reported", resp, err)
	}
	for _, x := range []space.Space{s, s2, s3} {
		if got := h.get(x.ID); got.Status != space.Active {
			t.Errorf("%s: status %s", x.ID, got.Status)
		}
	}
}

// The scheduler handles the sample schedule event (events/scheduler/schedule.json).
func TestHandleScheduleSampleEvent(t *testing.T) {
	raw, err := os.ReadFile("../../events/scheduler/schedule.json")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, time.Second)
	a, b := h.register("a", false), h.register("b", false)
	h.register("synthetic", true)
	out, err := h.scheduler.HandleSchedule(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	// The index is shared by every test of the binary's table: this test's
	// table is its own, so exactly its two probed spaces are fanned out.
	if out.Spaces != 2 || h.queue.pending() != 2 {
		t.Fatalf("fan-out %+v, %d queued; want the 2 non-synthetic spaces", out, h.queue.pending())
	}
	h.queue.mu.Lock()
	defer h.queue.mu.Unlock()
	for _, q := range h.queue.msgs {
		// A message waits its first space's delay (the two share one
		// when they share a shard).
		want := probing.Jitter(q.msg.Each()[0].ID, space.DefaultProbeInterval)
		for _, m := range q.msg.Each() {
			if got := q.due.Sub(h.clock.Now()); got != want || got > probing.Jitter(m.ID, space.DefaultProbeInterval) || (m.ID != a.ID && m.ID != b.ID) || m.Kind != probing.KindTick {
				t.Errorf("message %+v due in %s, want %s", m, got, want)
			}
		}
	}
}

func TestJitterIsStableAndSpread(t *testing.T) {
	counts := make([]int, 60)
	for i := range 6000 {
		id := time.Unix(int64(i), 0).Format("20060102150405") + "-id"
		d := probing.Jitter(id, time.Minute)
		if d != probing.Jitter(id, time.Minute) || d < 0 || d >= time.Minute || d%time.Second != 0 {
			t.Fatalf("jitter %s", d)
		}
		counts[d/time.Second]++
	}
	for s, n := range counts {
		if n < 50 || n > 150 { // 100 expected per second
			t.Errorf("second %d has %d of 6000 spaces", s, n)
		}
	}
	if probing.Jitter("x", 10*time.Second) >= 10*time.Second || probing.Jitter("x", 500*time.Millisecond) != 0 {
		t.Error("jitter exceeds a short interval")
	}
}
