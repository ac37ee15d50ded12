package space

import "testing"

func TestDecideClaim(t *testing.T) {
	at := t0
	cases := []struct {
		name     string
		s        Space
		found    bool
		attempts int
		want     ClaimDecision
		reason   string
	}{
		{"active", Space{Status: Active}, true, 0, ClaimDeploy, ""},
		{"active after retries", Space{Status: Active}, true, 2, ClaimDeploy, ""},
		{"inactive, first claim", Space{Status: Inactive}, true, 0, ClaimRetry, ReasonSpaceInactive},
		{"unknown, second claim", Space{Status: Unknown}, true, 1, ClaimRetry, ReasonSpaceInactive},
		{"inactive, third claim", Space{Status: Inactive}, true, 2, ClaimStop, ReasonSpaceInactive},
		{"deregistered", Space{Status: Active, DeletedAt: &at}, true, 0, ClaimDeadLetter, GateSpaceDeregistered},
		{"no such space", Space{}, false, 0, ClaimDeadLetter, GateSpaceDeregistered},
	}
	for _, c := range cases {
		if got, reason := DecideClaim(c.s, c.found, c.attempts); got != c.want || reason != c.reason {
			t.Errorf("%s: %v %q, want %v %q", c.name, got, reason, c.want, c.reason)
		}
	}
}
