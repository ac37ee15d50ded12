package probing_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"spaces/shared/probing"
	"spaces/shared/space"
)

// shardedLister serves shard i as targets i*100.. (and agents agent
// spaces of its own), and fails chosen shards.
type shardedLister struct {
	perShard, agents int
	fail             map[int]bool
}

func (l shardedLister) ProbeShards() int { return 3 }

func (l shardedLister) AgentProbeTargets(_ context.Context, shard int, after string, limit int) ([]space.ProbeTarget, string, error) {
	return l.list(shard, "a", l.agents, after, limit)
}

func (l shardedLister) ProbeTargets(_ context.Context, shard int, after string, limit int) ([]space.ProbeTarget, string, error) {
	return l.list(shard, "0", l.perShard, after, limit)
}

func (l shardedLister) list(shard int, kind string, n int, after string, limit int) ([]space.ProbeTarget, string, error) {
	if l.fail[shard] {
		return nil, "", errors.New("index unavailable")
	}
	var all []space.ProbeTarget
	for i := range n {
		all = append(all, space.ProbeTarget{OrgID: "o", ID: fmt.Sprintf("%s0000000-0000-4000-8000-%06d%06d", kind, shard, i)})
	}
	start := 0
	for start < len(all) && all[start].ID <= after {
		start++
	}
	end := min(start+limit, len(all))
	next := ""
	if end < len(all) {
		next = all[end-1].ID
	}
	return all[start:end], next, nil
}

type failingQueue struct{ err error }

func (q failingQueue) Enqueue(context.Context, []probing.Delayed) error { return q.err }

// Agent spaces are packed MaxSpaces a message whatever their delays and
// shards, where direct spaces fill messages within one shard's page.
func TestAgentSpacesArePacked(t *testing.T) {
	c := newClock()
	q := &clockQueue{clock: c}
	s := probing.NewScheduler(probing.Scheduler{Targets: shardedLister{perShard: 30, agents: 120}, Queue: q, PageSize: 200, Now: c.Now, Log: discardLogger()})
	out, err := s.TickShards(t.Context(), probing.Shards{First: 0, Last: 0})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spaces != 150 {
		t.Fatalf("fan-out %+v, want 150 spaces", out)
	}
	// 120 agent spaces: 3 messages (50, 50, 20); 30 direct spaces of one
	// shard: one message.
	if out.Messages != 3+1 {
		t.Errorf("%d messages, want 3 for the agent spaces and 1 for the direct spaces", out.Messages)
	}
	sizes := map[int]int{}
	q.mu.Lock()
	for _, m := range q.msgs {
		sizes[len(m.msg.Each())]++
	}
	q.mu.Unlock()
	if sizes[50] != 2 || sizes[20] != 1 || sizes[30] != 1 {
		t.Errorf("message sizes %v, want two of 50 and one of 20 (the agent spaces), one of 30 (the direct)", sizes)
	}

	// Across shards too: 3 shards of 20 agent spaces are 2 messages (50
	// and 10), not one a shard.
	q2 := &clockQueue{clock: c}
	s2 := probing.NewScheduler(probing.Scheduler{Targets: shardedLister{agents: 20}, Queue: q2, PageSize: 200, Now: c.Now, Log: discardLogger()})
	if out, err := s2.Tick(t.Context()); err != nil || out.Spaces != 60 || out.Messages != 2 {
		t.Errorf("3 shards of 20 agent spaces: %+v %v, want 60 spaces in 2 messages", out, err)
	}
	if q2.pending() != 60 {
		t.Errorf("%d spaces queued, want 60", q2.pending())
	}
}

// A failing shard does not stop the others, and the error names it.
func TestTickReportsFailedShards(t *testing.T) {
	c := newClock()
	q := &clockQueue{clock: c}
	s := probing.NewScheduler(probing.Scheduler{Targets: shardedLister{perShard: 25, fail: map[int]bool{1: true}}, Queue: q, PageSize: 10, Now: c.Now, Log: discardLogger()})
	out, err := s.Tick(t.Context())
	if err == nil || !strings.Contains(err.Error(), "shard 1: index unavailable") || strings.Contains(err.Error(), "shard 0") {
		t.Errorf("error %v, want shard 1 named", err)
	}
	// 3 pages of each shard's direct spaces, 1 (empty) of its agent spaces.
	if out.Spaces != 50 || q.pending() != 50 || out.Pages != 8 {
		t.Errorf("fan-out %+v, %d queued; want shards 0 and 2 (50 spaces, 8 pages)", out, q.pending())
	}
	s.Targets = shardedLister{perShard: 5}
	s.Queue = failingQueue{errors.New("sqs: 3 message(s) not sent")}
	if _, err := s.Tick(t.Context()); err == nil || strings.Count(err.Error(), "not sent") != 3 {
		t.Errorf("error %v, want each shard's send failure", err)
	}
}

// A tick over a range of shards sends exactly those shards' spaces; a range
// the index does not have sends nothing and fails.
func TestTickShardsSendsItsRangeOnly(t *testing.T) {
	c := newClock()
	q := &clockQueue{clock: c}
	s := probing.NewScheduler(probing.Scheduler{Targets: shardedLister{perShard: 25}, Queue: q, PageSize: 10, Now: c.Now, Log: discardLogger()})
	out, err := s.TickShards(t.Context(), probing.Shards{First: 1, Last: 2})
	if err != nil || out.Spaces != 50 || q.pending() != 50 {
		t.Fatalf("shards 1-2: %+v %v, %d queued; want 50", out, err, q.pending())
	}
	q.mu.Lock()
	for _, q := range q.msgs {
		for _, m := range q.msg.Each() {
			if strings.HasPrefix(m.ID, "00000000-0000-4000-8000-000000") {
				t.Errorf("shard 0's %s was sent", m.ID)
			}
		}
	}
	q.mu.Unlock()
	for _, r := range []probing.Shards{{First: -1, Last: 0}, {First: 2, Last: 3}, {First: 2, Last: 1}} {
		if out, err := s.TickShards(t.Context(), r); err == nil || out.Spaces != 0 {
			t.Errorf("shards %+v: %+v %v, want refused", r, out, err)
		}
	}
	if q.pending() != 50 {
		t.Errorf("%d queued after refused ranges, want still 50", q.pending())
	}
}

// A schedule's input names its shards (events/scheduler/shard-range.json);
// without one, every shard is fanned out.
func TestHandleScheduleTakesTheShardRange(t *testing.T) {
	raw, err := os.ReadFile("../../events/scheduler/shard-range.json")
	if err != nil {
		t.Fatal(err)
	}
	var in probing.ScheduleInput
	if err := json.Unmarshal(raw, &in); err != nil || in.Shards == nil {
		t.Fatalf("sample input %s: %v", raw, err)
	}
	c := newClock()
	q := &clockQueue{clock: c}
	lister := shardedLister{perShard: 7}
	s := probing.NewScheduler(probing.Scheduler{Targets: lister, Queue: q, PageSize: 10, Now: c.Now, Log: discardLogger()})
	want := 0
	for shard := in.Shards.First; shard <= min(in.Shards.Last, lister.ProbeShards()-1); shard++ {
		want += lister.perShard
	}
	in.Shards.Last = min(in.Shards.Last, lister.ProbeShards()-1) // this lister has 3 shards
	body, _ := json.Marshal(in)
	if out, err := s.HandleSchedule(t.Context(), body); err != nil || out.Spaces != want {
		t.Errorf("ranged schedule: %+v %v, want %d spaces", out, err, want)
	}
	if out, err := s.HandleSchedule(t.Context(), []byte(`{"detail-type":"Scheduled Event"}`)); err != nil || out.Spaces != 3*lister.perShard {
		t.Errorf("schedule without a range: %+v %v, want every shard", out, err)
	}
	if _, err := s.HandleSchedule(t.Context(), []byte(`{"shards":{"first":0,"last":99}}`)); err == nil {
		t.Error("a range beyond the index was accepted")
	}
}

// recordingQueue keeps each Enqueue call's messages.
type recordingQueue struct {
	mu    sync.Mutex
	calls [][]probing.Delayed
}

func (q *recordingQueue) Enqueue(_ context.Context, msgs []probing.Delayed) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, slices.Clone(msgs))
	return nil
}

// A page is sent in as few messages as MaxSpaces allows, of even sizes
// (so that the prober's fence read of a message is shared by up to
// MaxSpaces spaces), in order of delay (so that each SendMessageBatch of 10
// becomes visible together); each message waits its first space's delay,
// and no space is probed later than its own, Jitter of its id.
func TestTickFillsMessages(t *testing.T) {
	q := &recordingQueue{}
	s := probing.NewScheduler(probing.Scheduler{Targets: shardedLister{perShard: 700}, Queue: q, PageSize: 500, Log: discardLogger()})
	out, err := s.Tick(t.Context())
	if err != nil || out.Spaces != 2100 {
		t.Fatalf("tick: %+v %v", out, err)
	}
	if len(q.calls) != 6 {
		t.Fatalf("%d sends, want one per page (6)", len(q.calls))
	}
	seen := map[string]bool{}
	sent := 0
	for _, msgs := range q.calls {
		if !slices.IsSortedFunc(msgs, func(a, b probing.Delayed) int { return cmp.Compare(a.Delay, b.Delay) }) {
			t.Errorf("a page of %d sent with its delays out of order", len(msgs))
		}
		inPage, smallest, largest := 0, probing.MaxSpaces, 0
		for _, m := range msgs {
			ones := m.Message.Each()
			if len(ones) > probing.MaxSpaces || (len(ones) > 1) != (m.Message.Spaces != nil) {
				t.Errorf("a message of %d spaces: %+v", len(ones), m.Message)
			}
			if _, err := probing.DecodeMessage(m.Message.Encode()); err != nil {
				t.Errorf("message %+v: %v", m.Message, err)
			}
			if want := probing.Jitter(ones[0].ID, space.DefaultProbeInterval); m.Delay != want {
				t.Errorf("a message delayed %s, want its first space's %s", m.Delay, want)
			}
			for _, o := range ones {
				if own := probing.Jitter(o.ID, space.DefaultProbeInterval); own < m.Delay {
					t.Errorf("%s delayed %s, later than its own %s", o.ID, m.Delay, own)
				}
				if seen[o.ID] {
					t.Errorf("%s sent twice", o.ID)
				}
				seen[o.ID] = true
			}
			inPage += len(ones)
			smallest, largest = min(smallest, len(ones)), max(largest, len(ones))
		}
		if want := (inPage + probing.MaxSpaces - 1) / probing.MaxSpaces; len(msgs) != want || largest-smallest > 1 {
			t.Errorf("a page of %d sent in %d messages of %d to %d spaces, want %d of even sizes", inPage, len(msgs), smallest, largest, want)
		}
		sent += len(msgs)
	}
	if len(seen) != 2100 {
		t.Errorf("%d distinct spaces sent, want 2,100", len(seen))
	}
	if out.Messages != sent || sent >= 2100/2 {
		t.Errorf("fan-out reports %d messages, %d sent for 2,100 spaces: want them equal and well under one a space", out.Messages, sent)
	}
}

// carryingLister serves agent spaces of shard 0 as the store's index
// does: each with its probe shard and digest, but one (an entry whose
// digest cannot be read) by ids only.
type carryingLister struct {
	shardedLister
	bare string
}

func (l carryingLister) AgentProbeTargets(ctx context.Context, shard int, after string, limit int) ([]space.ProbeTarget, string, error) {
	out, next, err := l.shardedLister.AgentProbeTargets(ctx, shard, after, limit)
	for i := range out {
		if out[i].ID == l.bare {
			continue
		}
		d := space.ProbeDigest{Version: 2, Status: space.Active, Connectivity: space.ViaAgent}
		out[i].Shard, out[i].Digest = "a00", &d
	}
	return out, next, err
}

// TestAgentSpacesCarryTheirState: agent spaces are sent with what the
// index holds of them (so the prober reads no space), read_at the tick's
// start, before any index read; one the index holds no digest of goes by
// ids only, in a message of its own, which the prober reads; the last
// message carries the agent spaces' beat.
func TestAgentSpacesCarryTheirState(t *testing.T) {
	c := newClock()
	q := &clockQueue{clock: c}
	l := carryingLister{shardedLister: shardedLister{agents: 60}}
	all, _, _ := l.shardedLister.AgentProbeTargets(t.Context(), 0, "", 100)
	l.bare = all[7].ID
	start := c.Now()
	s := probing.NewScheduler(probing.Scheduler{Targets: l, Queue: q, PageSize: 200, Now: c.Now, Log: discardLogger()})
	if _, err := s.TickShards(t.Context(), probing.Shards{First: 0, Last: 0}); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	carried, bare := 0, 0
	for i, m := range q.msgs {
		msg, err := probing.DecodeMessage(m.msg.Encode())
		if err != nil {
			t.Fatal(err)
		}
		for _, one := range msg.Each() {
			switch {
			case one.Target != nil && msg.ReadAt != nil && msg.ReadAt.Equal(start):
				carried++
			case one.Target == nil && msg.ReadAt == nil && one.ID == l.bare:
				bare++
			default:
				t.Errorf("message %d: space %s carried %t, read_at %v (the tick began %v)", i, one.ID, one.Target != nil, msg.ReadAt, start)
			}
		}
		if last := i == len(q.msgs)-1; (msg.Beat == probing.AgentBeat) != last {
			t.Errorf("message %d of %d: beat %q", i, len(q.msgs), msg.Beat)
		}
	}
	if carried != 59 || bare != 1 {
		t.Errorf("%d spaces carried, %d by ids only; want 59 and 1", carried, bare)
	}
}
