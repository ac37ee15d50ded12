package budget

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestBudget: each hop's deadline is its caller's less the reserve, never
// later than its own, and no deadline stays none.
func TestBudget(t *testing.T) {
	at := time.Now().Add(10 * time.Second)
	parent, cancel := context.WithDeadline(context.Background(), at)
	defer cancel()

	ctx, c1 := Within(parent, APIReserve)
	defer c1()
	if d, _ := ctx.Deadline(); !d.Equal(at.Add(-APIReserve)) {
		t.Errorf("Within: %v, want %v", d, at.Add(-APIReserve))
	}
	none, c0 := Within(context.Background(), APIReserve)
	defer c0()
	if _, ok := none.Deadline(); ok {
		t.Error("Within gave a context without a deadline one")
	}
	// A handed-down deadline later than the hop's own does not extend it.
	later, c2 := Until(parent, at.Add(time.Minute))
	defer c2()
	if d, _ := later.Deadline(); !d.Equal(at) {
		t.Errorf("Until a later deadline: %v, want %v", d, at)
	}
	sooner, c3 := Until(parent, at.Add(-3*time.Second))
	defer c3()
	if d, _ := sooner.Deadline(); !d.Equal(at.Add(-3 * time.Second)) {
		t.Errorf("Until a sooner deadline: %v", d)
	}

	var seen time.Time
	h := Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen, _ = r.Context().Deadline() }), APIReserve)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil).WithContext(parent))
	if !seen.Equal(at.Add(-APIReserve)) {
		t.Errorf("Handler: the request's deadline %v, want %v", seen, at.Add(-APIReserve))
	}
}
