package local

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// BenchmarkStoredChangeToReceiver: from a space's stored registration (the
// body's timestamp: its created_at) to the receiver's 2xx of
// space.registered, through the table's stream (the local poller's 200 ms
// interval), the fan-out, the delivery queue and one signed HTTPS attempt,
// on the local stack; p50 and p99 over the registrations. "beside-10s" adds
// a second endpoint for the same events whose receiver answers after 10 s
// (the attempts' timeout): the first endpoint's figures should not move.
func BenchmarkStoredChangeToReceiver(b *testing.B) {
	for _, slow := range []bool{false, true} {
		name := "alone"
		if slow {
			name = "beside-10s"
		}
		b.Run(name, func(b *testing.B) { benchmarkChangeToReceiver(b, slow) })
	}
}

func benchmarkChangeToReceiver(b *testing.B, slow bool) {
	rc := newHookReceiver(b)
	st := webhookStack(b, rc)
	c := newClient(b, st, "acme")
	c.must(201, c.do("POST", "/webhook-endpoints", map[string]any{"url": rc.srv.URL + "/hooks", "event_types": []string{"space.registered"}}))
	if slow {
		// The same test certificate as rc's, so the stack trusts it too.
		done := make(chan struct{})
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(10 * time.Second):
			case <-done:
			case <-r.Context().Done():
			}
			w.WriteHeader(204)
		}))
		b.Cleanup(srv.Close)
		b.Cleanup(func() { close(done) })
		c.must(201, c.do("POST", "/webhook-endpoints", map[string]any{"url": srv.URL + "/slow", "event_types": []string{"space.registered"}}))
	}
	acct := c.account("aws")
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		before := len(rc.requests())
		c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, fmt.Sprintf("bench-%d", i))))
		for deadline := time.Now().Add(time.Minute); len(rc.requests()) == before; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("registration %d: no delivery within a minute", i)
			}
		}
		r := rc.requests()[before]
		var body struct {
			Timestamp time.Time `json:"timestamp"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, r.at.Sub(body.Timestamp))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "ms-p50")
	b.ReportMetric(pct(0.99), "ms-p99")
}
