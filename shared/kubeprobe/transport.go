package kubeprobe

import (
	"container/list"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Why a cache of our own instead of client-go's: client-go keeps one
// transport per distinct TLS configuration in a process-wide cache. With the
// TLSCacheGC behaviour of v0.36+ an entry is dropped once the garbage
// collector reclaims the client that used it, but the transport's kept-alive
// connections are not closed then: they live until their 90 s idle timeout.
// A prober that sees thousands of clusters a minute therefore holds a
// connection, two goroutines and a file descriptor per cluster probed in the
// last 90 s, and cannot release them on demand (Lambda allows 1,024 file
// descriptors). Here each cluster gets a pool in a bounded LRU; a pool
// pushed out closes its idle connections as soon as no probe uses it.

// idleTimeout keeps a probe's connection for the next probe a minute later.
const idleTimeout = 90 * time.Second

type transportCache struct {
	mu    sync.Mutex
	lru   *list.List // of *pool, most recent first
	pools map[string]*list.Element
}

type pool struct {
	key     string
	rt      *http.Transport
	users   int
	evicted bool
}

// transportKey names what makes a pool safe to share: the same server and
// the same trusted CA. The token is not part of it; it is added per request.
func transportKey(host string, ca []byte) string {
	sum := sha256.Sum256(ca)
	return host + "|" + hex.EncodeToString(sum[:16])
}

// acquire returns the pool for key, creating it with mk, and marks it in
// use until release.
func (c *transportCache) acquire(key string, limit int, mk func() (*http.Transport, error)) (*pool, error) {
	c.mu.Lock()
	if c.pools == nil {
		c.pools = map[string]*list.Element{}
		c.lru = list.New()
	}
	if e, ok := c.pools[key]; ok {
		c.lru.MoveToFront(e)
		p := e.Value.(*pool)
		p.users++
		c.mu.Unlock()
		return p, nil
	}
	rt, err := mk()
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	p := &pool{key: key, rt: rt, users: 1}
	c.pools[key] = c.lru.PushFront(p)
	var idle []*pool
	for c.lru.Len() > limit {
		if old := c.evictLocked(c.lru.Back()); old != nil {
			idle = append(idle, old)
		}
	}
	c.mu.Unlock()
	closeIdle(idle)
	return p, nil
}

// release ends one use of p; an evicted pool closes when its last probe ends.
func (c *transportCache) release(p *pool) {
	c.mu.Lock()
	p.users--
	done := p.evicted && p.users == 0
	c.mu.Unlock()
	if done {
		p.rt.CloseIdleConnections()
	}
}

func (c *transportCache) closeAll() {
	c.mu.Lock()
	var idle []*pool
	for c.lru != nil && c.lru.Len() > 0 {
		if old := c.evictLocked(c.lru.Back()); old != nil {
			idle = append(idle, old)
		}
	}
	c.mu.Unlock()
	closeIdle(idle)
}

// evictLocked drops e from the cache and returns its pool if nothing uses
// it, for the caller to close outside the lock.
func (c *transportCache) evictLocked(e *list.Element) *pool {
	p := c.lru.Remove(e).(*pool)
	delete(c.pools, p.key)
	p.evicted = true
	if p.users == 0 {
		return p
	}
	return nil
}

func closeIdle(pools []*pool) {
	for _, p := range pools {
		// Also cancels dials that no request waits for any more.
		p.rt.CloseIdleConnections()
	}
}

// newTransport builds a pool like client-go's (HTTP/2 with health pings,
// proxy from the environment honouring CIDRs in NO_PROXY) but with every
// connection-level wait bounded by the probe timeout: net/http finishes a
// dial in the background after its request gave up, and that background
// work must not outlive the probe by much.
func newTransport(tlsConf *tls.Config, timeout time.Duration) *http.Transport {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return utilnet.SetTransportDefaults(&http.Transport{
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: timeout,
		DialContext:         dialer.DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     idleTimeout,
	})
}

// limitBody makes a body longer than max fail with errBodyTooLarge.
type limitBody struct {
	rt  http.RoundTripper
	max int64
}

var errBodyTooLarge = errors.New("answer too large")

// WrappedRoundTripper lets client-go's wrappers reach the transport below to
// cancel a request.
func (l limitBody) WrappedRoundTripper() http.RoundTripper { return l.rt }

func (l limitBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: l.max}
	return resp, nil
}

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errBodyTooLarge
	}
	return n, err
}
