package testcluster

import (
	"errors"
	"net"
	"sync"
)

// listener keeps one address across Stop and Start: the HTTP server's
// accept loop blocks in Accept while the socket is closed and resumes when
// it is opened again on the same port, so a stopped cluster refuses
// connections and a started one comes back where clients expect it.
type listener struct {
	addr net.Addr
	// admit decides what happens to a fresh connection: false means a fault
	// took it (closed or held) and the server never sees it.
	admit func(net.Conn) bool

	mu      sync.Mutex
	inner   net.Listener  // nil while stopped
	restart chan struct{} // closed by start; fresh while stopped
	closed  chan struct{}
	done    bool
}

func newListener(inner net.Listener, admit func(net.Conn) bool) *listener {
	restart := make(chan struct{})
	close(restart)
	return &listener{addr: inner.Addr(), admit: admit, inner: inner, restart: restart, closed: make(chan struct{})}
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		inner, restart := l.inner, l.restart
		l.mu.Unlock()
		if inner == nil {
			select {
			case <-restart:
				continue
			case <-l.closed:
				return nil, net.ErrClosed
			}
		}
		conn, err := inner.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return nil, net.ErrClosed
			default:
			}
			l.mu.Lock()
			stopped := l.inner != inner
			l.mu.Unlock()
			if stopped {
				continue
			}
			return nil, err
		}
		if l.admit(conn) {
			return conn, nil
		}
	}
}

// stop closes the socket; connections are then refused.
func (l *listener) stop() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return errClosed
	}
	if l.inner == nil {
		return nil
	}
	err := l.inner.Close()
	l.inner = nil
	l.restart = make(chan struct{})
	return err
}

// start listens again on the same address.
func (l *listener) start() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return errClosed
	}
	if l.inner != nil {
		return nil
	}
	inner, err := net.Listen(l.addr.Network(), l.addr.String())
	if err != nil {
		return err
	}
	l.inner = inner
	close(l.restart)
	return nil
}

func (l *listener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	l.done = true
	close(l.closed)
	if l.inner == nil {
		return nil
	}
	err := l.inner.Close()
	l.inner = nil
	return err
}

func (l *listener) Addr() net.Addr { return l.addr }

var errClosed = errors.New("testcluster: cluster is closed")
