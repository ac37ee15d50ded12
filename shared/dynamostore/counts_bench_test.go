package dynamostore_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// BenchmarkCountsCost prices the fleet counts on the emulator's unit counts
// (awscost): reading them in an org of 10,000 spaces (one Query, per op),
// and what keeping them adds to each write, reported once as the units of a
// registration, a heartbeat, a transition and a deregistration.
func BenchmarkCountsCost(b *testing.B) {
	env := emulatortest.Start(b)
	meter := awscost.New()
	db := awsclient.DynamoDB(meter.Instrument(env.Config), env.Endpoint)
	f := &fixture{store: dynamostore.New(db, env.Name(b, "SpacesTable")), db: db,
		table: env.Name(b, "SpacesTable"), org: uuid.NewString()}
	f.account = f.createAccount(b, f.org, space.AWS)

	const spaces, workers = 10_000, 16
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := next.Add(1); n <= spaces; n = next.Add(1) {
				if err := f.store.Register(b.Context(), f.newSpace(int(n)), space.Idempotency{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}

	// One of each write, metered alone.
	meter.Take()
	s := f.register(b, f.newSpace(spaces+1))
	reg := meter.Take()
	if _, err := f.store.UpdateSpace(b.Context(), f.org, s.ID, space.Update[space.Space]{At: now.Add(time.Second),
		Apply: func(s space.Space) (space.Space, error) { s.Probe.LatencyMS = 9; return s, nil }}); err != nil {
		b.Fatal(err)
	}
	beat := meter.Take()
	if err := f.setStatus(b, s.ID, space.Active, now.Add(2*time.Second)); err != nil {
		b.Fatal(err)
	}
	tr := meter.Take()
	if _, err := f.store.Deregister(b.Context(), f.org, s.ID, 0, now.Add(3*time.Second)); err != nil {
		b.Fatal(err)
	}
	dereg := meter.Take()
	b.ReportMetric(reg.TotalWRU(), "register-WRU")
	b.ReportMetric(beat.TotalWRU(), "heartbeat-WRU")
	b.ReportMetric(tr.TotalWRU(), "transition-WRU")
	b.ReportMetric(dereg.TotalWRU(), "deregister-WRU")

	var c space.Counts
	var err error
	for b.Loop() {
		if c, err = f.store.Counts(b.Context(), f.org); err != nil {
			b.Fatal(err)
		}
	}
	read := meter.Take()
	if c.Total != spaces {
		b.Fatalf("counted %d spaces, want %d", c.Total, spaces)
	}
	b.ReportMetric(float64(read.Requests["DynamoDB Query"])/float64(b.N), "requests/op")
	b.ReportMetric(read.TotalRRU()/float64(b.N), "RRU/op")
	b.ReportMetric(read.TotalRRU()/float64(b.N)*awscost.PriceRRU*1e6, "USD/1M-reads")
}
