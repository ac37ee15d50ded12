package space

import (
	"encoding/json"
	"time"
)

// FailureThreshold is how many consecutive failed probes make a space inactive.
const FailureThreshold = 3

// Probe timing defaults. An unchanged result is never stored: what shows
// that a space is still probed is its probe shard's beat (Space.WithBeat), which
// the prober records once per shard and interval, for the tick it handled.
// A beat is at most about two intervals old while the prober runs (the tick
// before, whose last message waits up to an interval), so a status is
// stale once its space's last probe, or its shard's beat, is older than
// three intervals: a stopped prober shows within three intervals.
const (
	DefaultProbeInterval = time.Minute
	DefaultStaleAfter    = 3 * DefaultProbeInterval
)

// Probe failure reasons. A failed probe is a result, not an error.
const (
	ReasonUnreachable            = "Unreachable"
	ReasonTimeout                = "Timeout"
	ReasonUnauthorized           = "Unauthorized"
	ReasonBadResponse            = "BadResponse"
	ReasonCredentialsUnavailable = "CredentialsUnavailable"
	ReasonClusterNotFound        = "ClusterNotFound"
	ReasonAccessDenied           = "AccessDenied"
	ReasonCloudUnavailable       = "CloudUnavailable"
	// ReasonProbeStale marks a status reported as unknown because no probe
	// result arrived for too long: the prober stopped, so the fleet is not
	// known to be healthy.
	ReasonProbeStale = "ProbeStale"
	// ReasonNotProbed marks a space that has not been probed yet.
	ReasonNotProbed = "NotProbed"
)

// Outcome is one probe's result. Reason is empty on success.
type Outcome struct {
	At      time.Time
	Reason  string
	Message string
	Latency time.Duration
	Version *ServerVersion
	// Certificate is the serving certificate the API server presented, set
	// by any probe that got an answer (a 401 shows it too); nil when none
	// came back, and always for an agent's lease.
	Certificate *Certificate
	// Missed, for an agent's lease (LeaseCadence.Outcome), is how many lease
	// intervals went by without a renewal: the failure count is that,
	// not the number of checks, so checking more often never makes a
	// space inactive sooner.
	Missed int
}

// OK reports whether the probe succeeded.
func (o Outcome) OK() bool { return o.Reason == "" }

// ApplyProbe moves s through the status state machine: a success makes it
// active, FailureThreshold consecutive failures make it inactive, and fewer
// failures keep the current status so one lost packet never flips it. It
// reports whether the status changed. It also announces an inventory
// threshold due at the probe's time (Space.Announce), unless the version
// changed: each write is at most one event.
func ApplyProbe(s Space, o Outcome) (Space, bool) {
	before := s
	at := o.At.UTC()
	s.Probe.LastProbeAt = &at
	s.Probe.LatencyMS = o.Latency.Milliseconds()
	if o.Certificate != nil {
		// Kept when a probe saw none: a cluster that stops answering has
		// not changed its certificate.
		c := *o.Certificate
		c.NotAfter = c.NotAfter.UTC()
		s.Probe.Certificate = &c
	}
	next := s.Status
	if o.OK() {
		s.Probe.ConsecutiveFailures = 0
		s.Probe.Reason, s.Probe.Message = "", ""
		s.Probe.LastSuccessAt = &at
		s.Probe.ServerVersion = o.Version
		next = Active
	} else {
		s.Probe.ConsecutiveFailures++
		if o.Missed > 0 {
			s.Probe.ConsecutiveFailures = o.Missed
		}
		s.Probe.Reason, s.Probe.Message = o.Reason, o.Message
		// An agent never heard from is unknown, not inactive: nothing says
		// its cluster is down.
		if s.Probe.ConsecutiveFailures >= FailureThreshold && o.Reason != ReasonAgentNotConnected {
			next = Inactive
		}
	}
	s = s.forgetStale()
	if _, _, changed := VersionChanged(before, s); !changed {
		s, _ = s.Announce(at)
	}
	return transition(s, next, at)
}

// ApplyManual sets a status reported by an internal caller through the same
// transition bookkeeping as a probe.
func ApplyManual(s Space, status Status, reason string, at time.Time) (Space, bool) {
	at = at.UTC()
	s.Probe.Reason = reason
	s.Probe.Message = ""
	if status == Active {
		s.Probe.ConsecutiveFailures = 0
	}
	return transition(s, status, at)
}

// StatusSince is when the space took its stored status: its last
// transition, else its registration (a space never probed, or never
// changed since). Only a transition moves it.
func (s Space) StatusSince() time.Time {
	if s.Probe.LastTransitionAt != nil {
		return s.Probe.LastTransitionAt.UTC()
	}
	return s.CreatedAt.UTC()
}

func transition(s Space, next Status, at time.Time) (Space, bool) {
	changed := next != s.Status
	if changed {
		s.Status = next
		s.Probe.LastTransitionAt = &at
	}
	return s, changed
}

// probeFacts are the facts of its cluster that a probe reads and stores
// when they change (NeedsWrite): for each, where a probe record holds it
// and whether an outcome replaces it (as ApplyProbe does; an outcome that
// does not keeps the stored one). The probe digest carries a fingerprint
// of each (ProbeDigest.Facts), so that the prober tells a changed fact
// without reading the space: a new fact is one line here
// (TestDigestNeedsWrite holds the two to ApplyProbe).
var probeFacts = []struct {
	of  func(Probe) any
	set func(Outcome) bool
}{
	{func(p Probe) any { return p.ServerVersion }, Outcome.OK},
	// Any answer shows the certificate, a refusal too; compared as an
	// instant, whatever zone it was read in.
	{func(p Probe) any {
		if p.Certificate == nil {
			return nil
		}
		c := *p.Certificate
		c.NotAfter = c.NotAfter.UTC()
		return c
	}, func(o Outcome) bool { return o.Certificate != nil }},
}

// factText is a fact as compared: its JSON (nil apart from every value).
func factText(v any) string {
	b, _ := json.Marshal(v) // strings, times and pointers to them cannot fail
	return string(b)
}

// NeedsWrite reports whether a probe that turned old into next must be
// stored. Only changes are: the status, the failure reason, the facts
// (probeFacts: the server version and the serving certificate), an
// inventory threshold newly announced (Notices), and the failure count up to
// FailureThreshold (it moves the space toward inactive). An unchanged
// result, and further failures of an inactive space with the same reason,
// are not written at all, so the cost of probing grows with changes, not
// with time or the fleet: that the space is still probed is its shard's
// beat (Space.WithBeat), not its item.
func NeedsWrite(old, next Space) bool {
	if stateChanged(old, next) || !old.Notices.Equal(next.Notices) {
		return true
	}
	for _, f := range probeFacts {
		if factText(f.of(old.Probe)) != factText(f.of(next.Probe)) {
			return true
		}
	}
	return false
}

// stateChanged is NeedsWrite apart from the facts: what the probe digest
// holds as it is stored.
func stateChanged(old, next Space) bool {
	if old.Status != next.Status ||
		old.Probe.Reason != next.Probe.Reason ||
		old.Probe.LastProbeAt == nil || next.Probe.LastProbeAt == nil {
		return true
	}
	return old.Probe.ConsecutiveFailures != next.Probe.ConsecutiveFailures &&
		min(old.Probe.ConsecutiveFailures, next.Probe.ConsecutiveFailures) < FailureThreshold
}

// Observed is the space as readers must see it at now: a status whose last
// stored probe is older than staleAfter (or a space never probed for that
// long) is reported as unknown with reason ProbeStale.
func (s Space) Observed(now time.Time, staleAfter time.Duration) Space {
	last := s.CreatedAt
	if s.Probe.LastProbeAt != nil {
		last = *s.Probe.LastProbeAt
	}
	switch {
	case s.Synthetic:
	case staleAfter > 0 && now.Sub(last) > staleAfter:
		s.Status = Unknown
		s.Probe.Reason = ReasonProbeStale
		s.Probe.Message = "no probe result since " + last.UTC().Format(time.RFC3339)
	case s.Probe.LastProbeAt == nil && s.Probe.Reason == "" && s.Connectivity == ViaAgent:
		s.Probe.Reason = ReasonAgentNotConnected
	case s.Probe.LastProbeAt == nil && s.Probe.Reason == "":
		s.Probe.Reason = ReasonNotProbed
	}
	if s.Connectivity == "" {
		s.Connectivity = Direct // an item without connectivity is a direct space
	}
	return s
}
