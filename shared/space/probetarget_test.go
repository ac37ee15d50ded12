package space

import (
	"testing"
	"time"
)

// TestFenceCovers: a message is handled only while the fence still holds
// every deregistration since its spaces were last known listed (its index
// read less the index lag), and dropped once it is older.
func TestFenceCovers(t *testing.T) {
	read := t0
	live := LiveAt(read)
	if !live.Equal(read.Add(-ProbeIndexLag)) {
		t.Fatalf("LiveAt(%s) = %s", read, live)
	}
	cases := []struct {
		now  time.Time
		want bool
	}{
		{read, true},
		{read.Add(59 * time.Second), true}, // a tick's longest delay
		{live.Add(FenceRetention), true},   // the last instant an entry is surely kept
		{live.Add(FenceRetention + time.Nanosecond), false},
		{read.Add(time.Hour), false},
	}
	for i, c := range cases {
		if got := FenceCovers(live, c.now); got != c.want {
			t.Errorf("case %d: FenceCovers(%s, %s) = %v, want %v", i, live, c.now, got, c.want)
		}
	}
	if FenceRetention-ProbeIndexLag < 2*DefaultProbeInterval {
		t.Errorf("a tick of delay up to an interval must be covered: retention %s, index lag %s", FenceRetention, ProbeIndexLag)
	}
}

// TestWithBeat: readers see a space's last probe as the later of its
// stored one and its shard's beat, except for what the beat cannot speak
// of (a space registered after it, a synthetic or deregistered space).
func TestWithBeat(t *testing.T) {
	stored := t0.Add(time.Minute)
	beat := t0.Add(10 * time.Minute)
	s := Space{ID: "a", Status: Active, CreatedAt: t0, Probe: Probe{LastProbeAt: &stored, LastSuccessAt: &stored}}
	if got := s.WithBeat(beat).Probe; got.LastProbeAt == nil || !got.LastProbeAt.Equal(beat) || !got.LastSuccessAt.Equal(beat) {
		t.Errorf("later beat: last probe %v, last success %v, want %s", got.LastProbeAt, got.LastSuccessAt, beat)
	}
	// A stored failure: the probes since failed too (the same reason,
	// past the threshold), so the last success stays.
	down := Space{ID: "d", Status: Inactive, CreatedAt: t0,
		Probe: Probe{LastProbeAt: &stored, LastSuccessAt: &t0, Reason: ReasonTimeout, ConsecutiveFailures: FailureThreshold}}
	if got := down.WithBeat(beat).Probe; !got.LastProbeAt.Equal(beat) || !got.LastSuccessAt.Equal(t0) {
		t.Errorf("inactive space: last probe %v, last success %v; want %s and %s", got.LastProbeAt, got.LastSuccessAt, beat, t0)
	}
	if s.Probe.LastProbeAt != &stored || !s.Probe.LastProbeAt.Equal(stored) {
		t.Error("WithBeat changed its receiver")
	}
	if got := s.WithBeat(t0).Probe.LastProbeAt; !got.Equal(stored) {
		t.Errorf("earlier beat: last probe %v, want the stored %s", got, stored)
	}
	never := Space{ID: "b", Status: Unknown, CreatedAt: t0}
	if got := never.WithBeat(t0.Add(-time.Second)).Probe.LastProbeAt; got != nil {
		t.Errorf("a beat before the registration: last probe %v, want none", got)
	}
	if got := never.WithBeat(time.Time{}).Probe.LastProbeAt; got != nil {
		t.Errorf("no beat: last probe %v", got)
	}
	syn := Space{ID: "c", Synthetic: true, CreatedAt: t0}
	if syn.WithBeat(beat).Probe.LastProbeAt != nil {
		t.Error("a synthetic space is never probed")
	}
	// A stopped prober: the beat stops, and three intervals later readers
	// see ProbeStale.
	fresh := s.WithBeat(beat).Observed(beat.Add(DefaultStaleAfter), DefaultStaleAfter)
	stale := s.WithBeat(beat).Observed(beat.Add(DefaultStaleAfter+time.Second), DefaultStaleAfter)
	if fresh.Status != Active || stale.Probe.Reason != ReasonProbeStale {
		t.Errorf("at the bound: %s/%s; past it: %s/%s", fresh.Status, fresh.Probe.Reason, stale.Status, stale.Probe.Reason)
	}
}

// TestTargetSpace: a carried target is the space as its digest says; an
// ids-only one is not carried.
func TestTargetSpace(t *testing.T) {
	at := t0
	d := DigestOf(Space{Provider: AWS, CloudAccountID: "acc", Config: Config{"clusterName": "c"}, Connectivity: Direct,
		Status: Active, Probe: Probe{ConsecutiveFailures: 1, LastProbeAt: &at}, Version: 3})
	tg := ProbeTarget{OrgID: "o", ID: "a", Shard: "07", Digest: &d}
	if !tg.Carried() || tg.Ids().Carried() || (ProbeTarget{OrgID: "o", ID: "a", Digest: &d}).Carried() {
		t.Fatal("Carried")
	}
	s := tg.Space()
	if s.ID != "a" || s.OrgID != "o" || s.Provider != AWS || s.CloudAccountID != "acc" || s.Connectivity != Direct ||
		s.Config["clusterName"] != "c" || s.Status != Active || s.Version != 3 || s.Probe.ConsecutiveFailures != 1 ||
		!s.Probe.LastProbeAt.Equal(at) {
		t.Errorf("Space() = %+v", s)
	}
}
