package loopport

import (
	"net"
	"testing"
)

// TestPortsBelowEphemeralRange: ports come from below the kernel's ephemeral
// range, distinct, and a closed one opens again.
func TestPortsBelowEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		ports, err := Free(3)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if p < floor || p >= low {
				t.Fatalf("port %d outside [%d, %d)", p, floor, low)
			}
			if seen[p] {
				t.Fatalf("port %d given twice in %v", p, ports)
			}
			seen[p] = true
		}
	}
	l, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if p := l.Addr().(*net.TCPAddr).Port; p < floor || p >= low {
		t.Fatalf("Listen's port %d outside [%d, %d)", p, floor, low)
	}
	l.Close()
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("reopen %s: %v", addr, err)
	}
	again.Close()
}
