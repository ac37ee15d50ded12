package local

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkDeregistrationToEvent: from the 204 of DELETE /spaces/{id} to the
// "Space Deregistered" event, through the stream and the local poller
// (100 ms poll interval), for a space with one environment.
func BenchmarkDeregistrationToEvent(b *testing.B) {
	st, pub := startCascadeStack(b, 100*time.Millisecond)
	c := newClient(b, st, "acme")
	acct := c.account("aws")
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		id := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, fmt.Sprintf("bench-%d", i))))["id"].(string)
		c.must(201, c.do("POST", "/environments", map[string]any{"name": "e", "space_id": id}))
		before := len(pub.events())
		b.StartTimer()
		c.must(204, c.do("DELETE", "/spaces/"+id, nil))
		for len(pub.events()) == before {
			time.Sleep(time.Millisecond)
		}
	}
}
