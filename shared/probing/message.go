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

// Message is the body of a probe message: {"org_id", "id"} for a tick, with
// a kind for the other messages and, for a re-probe, the version the failed
// probe stored.
type Message struct {
	OrgID   string `json:"org_id"`
	ID      string `json:"id"`
	Kind    string `json:"kind,omitempty"`
	Version int64  `json:"version,omitempty"`
}

// Delayed is a message and how long SQS holds it back.
type Delayed struct {
	Message Message
	Delay   time.Duration
}

// Encode is the message's JSON body.
func (m Message) Encode() string {
	b, _ := json.Marshal(m) // strings and an integer cannot fail
	return string(b)
}

// DecodeMessage reads and checks a message body.
func DecodeMessage(body string) (Message, error) {
	var m Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return Message{}, fmt.Errorf("probe message is not JSON: %w", err)
	}
	var errs []error
	if m.OrgID == "" {
		errs = append(errs, errors.New("org_id is empty"))
	}
	if !space.ValidID(m.ID) {
		errs = append(errs, errors.New("id is not a UUID"))
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
