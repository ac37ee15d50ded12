package main

import (
	"strings"
	"testing"
)

// The development sign-in mints tokens for any org: make run refuses to
// serve it beyond loopback unless told to, and then the banner warns.
func TestCheckAddr(t *testing.T) {
	for _, c := range []struct {
		addr  string
		optIn bool
		ok    bool
	}{
		{"", false, true},
		{"127.0.0.1:8080", false, true},
		{"[::1]:8080", false, true},
		{"localhost:8080", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"192.168.1.5:8080", false, false},
		{"[::]:8080", false, false},
		{"0.0.0.0:8080", true, true},
		{"nonsense", false, false},
	} {
		if err := checkAddr(c.addr, c.optIn); (err == nil) != c.ok {
			t.Errorf("checkAddr(%q, %v) = %v, want ok=%v", c.addr, c.optIn, err, c.ok)
		}
	}
	if w := remoteWarning("0.0.0.0:8080"); !strings.Contains(w, "any org") {
		t.Errorf("no warning for 0.0.0.0: %q", w)
	}
	if w := remoteWarning("127.0.0.1:8080"); w != "" {
		t.Errorf("warning for loopback: %q", w)
	}
}
