// Package webhook delivers events to customers' endpoints per Standard
// Webhooks v1: the signature (sign.go), the one HTTP client that may reach
// an endpoint (Guard: every connection resolves the host, refuses any
// address space.AddressRefusal names, and dials the very address it
// checked, so a DNS answer that changes between check and connect, DNS
// rebinding, cannot reach a refused address), and one attempt's outcome
// (Send).
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"spaces/shared/space"
)

// Guard resolves and checks endpoint hosts. The zero Guard refuses
// loopback and uses the system resolver.
type Guard struct {
	// AllowLoopback lets endpoints be on loopback: the local stack only.
	AllowLoopback bool
	// Lookup resolves a host (nil: net.DefaultResolver).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// dial connects to a checked address (nil: a net.Dialer whose Control
	// checks the address again). Tests record what is dialed.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// ErrRefused is a connection refused by the address rule.
var ErrRefused = errors.New("refused address")

func (g Guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if g.Lookup != nil {
		return g.Lookup(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// Refusal resolves host and says why one of its addresses may not be
// reached ("" when none is refused): space.HostChecker, at creation.
func (g Guard) Refusal(ctx context.Context, host string) (string, error) {
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return "", err
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("%s has no address", host)
	}
	for _, a := range addrs {
		if r := space.AddressRefusal(a, g.AllowLoopback); r != "" {
			return r, nil
		}
	}
	return "", nil
}

// DialContext is the transport's dialer: resolve once, refuse the host if
// any of its addresses is refused (a host that mixes a public and a private
// address is not trusted with either), then dial the checked addresses in
// turn, by IP, never by name.
func (g Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s has no address", host)
	}
	for _, a := range addrs {
		if r := space.AddressRefusal(a, g.AllowLoopback); r != "" {
			return nil, fmt.Errorf("%w: %s resolves to %s", ErrRefused, host, r)
		}
	}
	dial := g.dial
	if dial == nil {
		d := &net.Dialer{Timeout: 5 * time.Second, Control: g.control}
		dial = d.DialContext
	}
	var errs []error
	for _, a := range addrs {
		c, err := dial(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// control checks the address the socket is about to connect to: the last
// word, whatever dialed it.
func (g Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrRefused, address)
	}
	if r := space.AddressRefusal(ap.Addr(), g.AllowLoopback); r != "" {
		return fmt.Errorf("%w: %s is %s", ErrRefused, ap.Addr(), r)
	}
	return nil
}
