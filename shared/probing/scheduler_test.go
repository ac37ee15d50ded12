package probing_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"spaces/shared/probing"
	"spaces/shared/space"
)

// shardedLister serves shard i as targets i*100.., and fails chosen shards.
type shardedLister struct {
	perShard int
	fail     map[int]bool
}

func (l shardedLister) ProbeShards() int { return 3 }

func (l shardedLister) ProbeTargets(_ context.Context, shard int, after string, limit int) ([]space.ProbeTarget, string, error) {
	if l.fail[shard] {
		return nil, "", errors.New("index unavailable")
	}
	var all []space.ProbeTarget
	for i := range l.perShard {
		all = append(all, space.ProbeTarget{OrgID: "o", ID: fmt.Sprintf("00000000-0000-4000-8000-%06d%06d", shard, i)})
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

// A failing shard does not stop the others, and the error names it.
func TestTickReportsFailedShards(t *testing.T) {
	c := newClock()
	q := &clockQueue{clock: c}
	s := probing.NewScheduler(probing.Scheduler{Targets: shardedLister{perShard: 25, fail: map[int]bool{1: true}}, Queue: q, PageSize: 10, Now: c.Now, Log: discardLogger()})
	out, err := s.Tick(t.Context())
	if err == nil || !strings.Contains(err.Error(), "shard 1: index unavailable") || strings.Contains(err.Error(), "shard 0") {
		t.Errorf("error %v, want shard 1 named", err)
	}
	if out.Spaces != 50 || q.pending() != 50 || out.Pages != 6 {
		t.Errorf("fan-out %+v, %d queued; want shards 0 and 2 (50 spaces, 6 pages)", out, q.pending())
	}
	s.Targets = shardedLister{perShard: 5}
	s.Queue = failingQueue{errors.New("sqs: 3 message(s) not sent")}
	if _, err := s.Tick(t.Context()); err == nil || strings.Count(err.Error(), "not sent") != 3 {
		t.Errorf("error %v, want each shard's send failure", err)
	}
}
