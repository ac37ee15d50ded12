package space

import "time"

// ProbeTarget names one space the prober must probe. As the scheduler
// reads it from the probe index it also carries its probe shard and its
// digest (ProbeDigest): what the prober needs to probe the space and to
// tell whether the result changes what is stored, without reading it. A
// target of a registration probe or a re-probe carries only its ids
// (Carried is false): the prober reads the space, strongly consistent, as
// the liveness check.
type ProbeTarget struct {
	OrgID string `json:"org_id"`
	ID    string `json:"id"`
	// Shard is the space's probe shard: which deregistration fence covers
	// it (Fence).
	Shard  string       `json:"probe_shard,omitempty"`
	Digest *ProbeDigest `json:"digest,omitempty"`
}

// Carried reports whether t carries the space's state (its digest, from
// the index), so the prober need not read it.
func (t ProbeTarget) Carried() bool { return t.Shard != "" && t.Digest != nil }

// Ids is t without the state it carries.
func (t ProbeTarget) Ids() ProbeTarget { return ProbeTarget{OrgID: t.OrgID, ID: t.ID} }

// Space is the registered space t describes, as far as its digest says
// (ProbeDigest.Space).
func (t ProbeTarget) Space() Space {
	if t.Digest == nil {
		return Space{ID: t.ID, OrgID: t.OrgID}
	}
	return t.Digest.Space(t.OrgID, t.ID)
}

// The deregistration fence keeps "a deregistered space is refused before
// any cloud call" without a read of each space: the transaction that
// deregisters a space also writes a fence entry under its probe shard,
// keyed by its deleted_at and kept FenceRetention at least (a TTL only ever
// deletes after expiry), and the prober reads its message's shard's
// entries since the message's LiveAt, strongly consistent, once a message.
//
// Why it holds. A tick message carries the time T its index page was
// read. A space listed then was not deregistered before T - ProbeIndexLag:
// the index had shown that deregistration (ProbeIndexLag bounds the
// index's lag behind the table, and how far a deleted_at, stamped before
// its transaction, precedes its commit). So a listed space deregistered at
// all was deregistered at or after LiveAt = T - ProbeIndexLag, and read at
// now its fence entry is found, provided it still exists: it does while
// now - LiveAt <= FenceRetention. A message older than that (FenceCovers
// false) is dropped; the next tick sends its spaces again.
const (
	// ProbeIndexLag bounds how far the probe index (a GSI, eventually
	// consistent: normally well under a second) lags behind the table,
	// plus how long a deregistration's commit can follow its deleted_at
	// (the API's timeout).
	ProbeIndexLag = 5 * time.Minute
	// FenceRetention is how long a fence entry is kept at least: the index
	// lag plus the oldest message the prober still handles (20 minutes:
	// a tick waits up to a minute, a failed part of one is sent again
	// after seconds, and a backlog of the queue is caught up within it).
	FenceRetention = ProbeIndexLag + 20*time.Minute
)

// LiveAt is the earliest time a space listed by an index read at readAt
// can have been deregistered (see FenceRetention).
func LiveAt(readAt time.Time) time.Time { return readAt.Add(-ProbeIndexLag) }

// FenceCovers reports whether the fence, read at now, still holds every
// deregistration since liveAt.
func FenceCovers(liveAt, now time.Time) bool { return !now.After(liveAt.Add(FenceRetention)) }

// WithBeat is s as readers see it given its probe shard's beat: the tick
// time of the last tick of the shard the prober handled. Every space the
// index listed for that tick was probed within an interval after it, and a
// probe that changed nothing wrote nothing, so the space's last probe is
// the later of its stored one and the beat; and while the stored probe is
// a success, so is every probe since (a failure is a change, written at
// once), so its last success moves with it. A beat before the space was
// registered says nothing of it.
func (s Space) WithBeat(beat time.Time) Space {
	if s.Synthetic || s.Deleted() || beat.IsZero() || beat.Before(s.CreatedAt) {
		return s
	}
	if s.Probe.LastProbeAt == nil || s.Probe.LastProbeAt.Before(beat) {
		b := beat.UTC()
		s.Probe.LastProbeAt = &b
		if s.Probe.LastSuccessAt != nil && s.Probe.Reason == "" && s.Probe.ConsecutiveFailures == 0 {
			s.Probe.LastSuccessAt = &b
		}
	}
	return s
}
