package probing

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"spaces/shared/space"
)

// Kinds of probe message.
const (
	// KindTick is the scheduler's minute tick (the empty kind on the wire).
	KindTick = ""
	// KindRegistered probes a space just registered.
	KindRegistered = "registered"
	// KindReprobe follows a failed probe within seconds.
	KindReprobe = "reprobe"
)

// MaxSpaces is the most spaces one probe message names: the scheduler cuts
// each index page into as few messages as this allows, so that the
// prober's fence read of a message and SQS's sends, receives and deletes
// (each priced per request) fall by up to this factor. The prober probes a message's spaces
// at once: the template's BatchSize (1 message) × MaxSpaces is the
// prober's DefaultConcurrency, and its Timeout is sized for one such round
// (TestBatchFitsTheProberTimeout). 50 rather than 10: at 10,000 spaces a
// shard's page held about 42 spaces per second of delay, and messages of up to 10
// (7.1 spaces each, in batches of 5 messages) still left the event
// source's receives at 0.11 a space; one message a batch of up to 50 takes
// one receive and one delete per message (BENCHMARKS.md, "Monthly cost per
// 1,000 spaces").
const MaxSpaces = 50

// Message is the body of a probe message. One space: {"org_id", "id"} for
// a tick, with a kind for the other messages and, for a re-probe, the
// version the failed probe stored. Spaces (a tick only):
// {"spaces": [...], "read_at"}, at most MaxSpaces, each carrying what the
// probe index holds of it (space.ProbeTarget) so that the prober reads no
// space (agent spaces too); or several {"org_id", "id"} (a space whose
// index entry has no digest it can read, or an older scheduler's agent
// spaces), which the prober reads. Retry marks the
// spaces the prober sent again after their part of a message failed (see
// HandleBatch).
type Message struct {
	OrgID   string `json:"org_id,omitempty"`
	ID      string `json:"id,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Version int64  `json:"version,omitempty"`
	// Spaces are a tick's spaces when it names several; OrgID and ID are
	// then empty.
	Spaces []space.ProbeTarget `json:"spaces,omitempty"`
	// Retry: sent again by the prober after this space (or these spaces)
	// failed in a message whose other spaces were handled. Handled as a
	// redelivery (a missed transition is republished first), and never
	// split again: if it fails, SQS retries it whole.
	Retry bool `json:"retry,omitempty"`
	// ReadAt is when the scheduler read the index page the carried
	// spaces come from (for agent spaces, packed from several pages, the
	// tick's start, before any): the prober reads the deregistration
	// fence of direct spaces from space.LiveAt(ReadAt) and drops the
	// message once the fence no longer covers it (space.FenceCovers).
	// Set exactly when Spaces carry their state.
	ReadAt *time.Time `json:"read_at,omitempty"`
	// Beat names the probe shard ("07", or "a" for the agent spaces) whose
	// tick this message closes, Tick that tick's time: once the message is
	// handled the prober records the shard's beat (readers' last probe of
	// its spaces).
	Beat string     `json:"beat,omitempty"`
	Tick *time.Time `json:"tick,omitempty"`
	// Target is the carried state of the one space of a message Each made
	// (not on the wire).
	Target *space.ProbeTarget `json:"-"`
}

// TickOf is the tick message of targets (one or more; the caller keeps to
// MaxSpaces): the one-space form for one that carries nothing, which every
// prober reads.
func TickOf(targets []space.ProbeTarget) Message {
	if len(targets) == 1 && !targets[0].Carried() {
		return Message{OrgID: targets[0].OrgID, ID: targets[0].ID}
	}
	return Message{Spaces: targets}
}

// CarriedTickOf is the tick message of targets read from the index at
// readAt, carrying their state.
func CarriedTickOf(targets []space.ProbeTarget, readAt time.Time) Message {
	at := readAt.UTC()
	return Message{Spaces: targets, ReadAt: &at}
}

// Each is the message split into one message per space, in its order.
func (m Message) Each() []Message {
	if len(m.Spaces) == 0 {
		return []Message{m}
	}
	out := make([]Message, len(m.Spaces))
	for i, t := range m.Spaces {
		out[i] = Message{OrgID: t.OrgID, ID: t.ID, Kind: m.Kind, Retry: m.Retry, ReadAt: m.ReadAt}
		if t.Carried() {
			out[i].Target = &m.Spaces[i]
		}
	}
	return out
}

// Delayed is a message and how long SQS holds it back.
type Delayed struct {
	Message Message
	Delay   time.Duration
}

// Encode is the message's JSON body.
func (m Message) Encode() string {
	b, _ := json.Marshal(m) // strings, integers and booleans cannot fail
	return string(b)
}

// DecodeMessage reads and checks a message body, of either form.
func DecodeMessage(body string) (Message, error) {
	var m Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return Message{}, fmt.Errorf("probe message is not JSON: %w", err)
	}
	var errs []error
	target := func(prefix, org, id string) {
		if org == "" {
			errs = append(errs, errors.New(prefix+"org_id is empty"))
		}
		if !space.ValidID(id) {
			errs = append(errs, errors.New(prefix+"id is not a UUID"))
		}
	}
	if m.Spaces == nil {
		target("", m.OrgID, m.ID)
	} else {
		switch {
		case m.OrgID != "" || m.ID != "":
			errs = append(errs, errors.New("a message names either one space (org_id, id) or several (spaces), not both"))
		case len(m.Spaces) < 1 || len(m.Spaces) > MaxSpaces:
			errs = append(errs, fmt.Errorf("spaces names %d spaces, not 1 to %d", len(m.Spaces), MaxSpaces))
		case m.Kind != KindTick:
			errs = append(errs, errors.New("only a tick names several spaces"))
		}
		seen := map[string]bool{}
		for i, t := range m.Spaces {
			target(fmt.Sprintf("spaces[%d]: ", i), t.OrgID, t.ID)
			if seen[t.ID] {
				errs = append(errs, fmt.Errorf("spaces[%d]: space %s named twice", i, t.ID))
			}
			seen[t.ID] = true
			// Carried state is trusted only under the fence, which needs
			// the read time; ids alone are read (so a tick of a scheduler
			// before digests, whose spaces carry none, reads each space).
			if t.Carried() && m.ReadAt == nil {
				errs = append(errs, fmt.Errorf("spaces[%d]: a space carries its state (probe_shard, digest) only when the message has read_at", i))
			}
		}
	}
	if m.ReadAt != nil && m.Spaces == nil {
		errs = append(errs, errors.New("read_at comes only with spaces that carry their state"))
	}
	if (m.Beat == "") != (m.Tick == nil) || (m.Beat != "" && m.Kind != KindTick) {
		errs = append(errs, errors.New("a tick's beat names its shard and its tick time, both or neither"))
	}
	switch m.Kind {
	case KindTick, KindRegistered:
	case KindReprobe:
		if m.Version < 1 {
			errs = append(errs, errors.New("a re-probe needs the version it follows"))
		}
	default:
		errs = append(errs, fmt.Errorf("kind %q is unknown", m.Kind))
	}
	if err := errors.Join(errs...); err != nil {
		return Message{}, fmt.Errorf("probe message is not valid: %w", err)
	}
	return m, nil
}

// Jitter is a space's delay within an interval: a stable hash of its id,
// in whole seconds from 0 to min(interval, 60 s) - 1, so that a fleet's
// probes spread evenly over the minute and each space keeps its second.
func Jitter(id string, interval time.Duration) time.Duration {
	n := int64(min(interval, time.Minute) / time.Second)
	if n <= 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return time.Duration(h.Sum64()%uint64(n)) * time.Second
}
