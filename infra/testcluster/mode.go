package testcluster

import (
	"fmt"
	"time"
)

// Mode is how a cluster answers. Modes are values built by the functions
// below; switch them at any time with Cluster.SetMode or queue one-shot
// modes with Cluster.Next.
type Mode struct {
	kind  kind
	delay time.Duration
}

type kind int

const (
	kindHealthy kind = iota
	kindDown
	kindHang
	kindSlow
	kindTrickle
	kindUnauthorized
	kindUnauthorizedOnce
	kindForbidden
	kindGarbled
	kindBadVersion
	kindServerError
)

// Healthy answers every request normally.
func Healthy() Mode { return Mode{kind: kindHealthy} }

// Down closes every connection as soon as it is accepted (and aborts
// requests on connections already open), while keeping the port: clients
// see a reset or an EOF. Stop gives the other kind of down, connection
// refused.
func Down() Mode { return Mode{kind: kindDown} }

// Hang accepts connections and never answers, not even the TLS handshake;
// requests already on open connections block until the client gives up.
func Hang() Mode { return Mode{kind: kindHang} }

// Slow waits d before answering, giving up when the client does.
func Slow(d time.Duration) Mode { return Mode{kind: kindSlow, delay: d} }

// Trickle sends the status line at once and then the body one byte every d.
func Trickle(d time.Duration) Mode { return Mode{kind: kindTrickle, delay: d} }

// Unauthorized answers 401 to every request, whatever the token.
func Unauthorized() Mode { return Mode{kind: kindUnauthorized} }

// UnauthorizedOnce answers 401 to the next request and then is healthy: an
// expired token that a fresh one fixes.
func UnauthorizedOnce() Mode { return Mode{kind: kindUnauthorizedOnce} }

// Forbidden answers 403 to every request: the token authenticates but may
// not read anything.
func Forbidden() Mode { return Mode{kind: kindForbidden} }

// Garbled answers 200 with a body that is not JSON.
func Garbled() Mode { return Mode{kind: kindGarbled} }

// BadVersion answers /version with valid JSON whose gitVersion is not a
// version; other paths stay healthy.
func BadVersion() Mode { return Mode{kind: kindBadVersion} }

// ServerError answers 500 to every request.
func ServerError() Mode { return Mode{kind: kindServerError} }

func (m Mode) String() string {
	switch m.kind {
	case kindHealthy:
		return "Healthy"
	case kindDown:
		return "Down"
	case kindHang:
		return "Hang"
	case kindSlow:
		return fmt.Sprintf("Slow(%s)", m.delay)
	case kindTrickle:
		return fmt.Sprintf("Trickle(%s)", m.delay)
	case kindUnauthorized:
		return "Unauthorized"
	case kindUnauthorizedOnce:
		return "UnauthorizedOnce"
	case kindForbidden:
		return "Forbidden"
	case kindGarbled:
		return "Garbled"
	case kindBadVersion:
		return "BadVersion"
	case kindServerError:
		return "ServerError"
	}
	return fmt.Sprintf("Mode(%d)", int(m.kind))
}
