package fleetsim_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// cut is the state of one agent's network.
type cut int

const (
	up     cut = iota
	silent     // packets are held (a network that drops everything; TCP waits)
	reset      // open connections are reset at the cut; new ones wait like silent
)

// network is the agents' way out to IoT Core, one per agent: a
// TLS-terminating relay between each agent's paho client and the broker
// model, which knows each connection's client id from its CONNECT. It
// cuts an agent's network (held or reset connections, failed HTTP
// calls), and stands in for paho's keep-alive pings, which paho times in
// real time: ping writes a PINGREQ to the broker on the agent's live
// connection and swallows the PINGRESP, so the broker's keep-alive rule,
// read from the simulated clock, sees the pings a live agent would send.
//
// It counts what the settling of each simulated instant waits for:
// connections the broker accepted and connections closed on the broker's
// side (each is one connected and one disconnected lifecycle event), and,
// per agent, when a connection's CONNACK or end reached its paho client
// (the agent reacts to both).
type network struct {
	ln     net.Listener
	broker string
	dial   *tls.Config
	seq    *marks

	mu       sync.Mutex
	cond     *sync.Cond
	state    map[string]cut
	links    map[string][]*link
	accepted int // connections the broker accepted
	ended    int // accepted connections closed on the broker's side
	acked    map[string]int64
	lost     map[string]int64
}

type link struct {
	id       string
	agent    net.Conn
	broker   net.Conn
	wmu      sync.Mutex
	pongs    chan struct{}
	injected atomic.Int32
	acked    bool // guarded by network.mu
	done     chan struct{}
	once     sync.Once
	counted  bool // the broker accepted it; guarded by network.mu
	closedB  bool // guarded by network.mu
}

func newNetwork(server *tls.Config, brokerAddr string, dial *tls.Config, seq *marks) (*network, error) {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		return nil, err
	}
	n := &network{ln: ln, broker: brokerAddr, dial: dial, seq: seq, state: map[string]cut{},
		links: map[string][]*link{}, acked: map[string]int64{}, lost: map[string]int64{}}
	n.cond = sync.NewCond(&n.mu)
	go n.serve()
	return n, nil
}

func (n *network) addr() string { return n.ln.Addr().String() }

func (n *network) close() {
	_ = n.ln.Close()
	n.mu.Lock()
	for id := range n.state {
		n.state[id] = up
	}
	var all []*link
	for _, ls := range n.links {
		all = append(all, ls...)
	}
	n.cond.Broadcast()
	n.mu.Unlock()
	for _, l := range all {
		n.shut(l)
	}
}

func (n *network) serve() {
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		go n.handle(c)
	}
}

// pass waits while id's network holds packets: a cut holds an open
// connection's packets when silent (a reset has closed it), and a new
// connection's in either case.
func (n *network) pass(id string, l *link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for n.state[id] == silent || (l == nil && n.state[id] == reset) {
		n.cond.Wait()
	}
}

func (n *network) handle(ac net.Conn) {
	ar := bufio.NewReader(ac)
	pk, err := packets.ReadPacket(ar)
	cp, ok := pk.(*packets.ConnectPacket)
	if err != nil || !ok {
		_ = ac.Close()
		return
	}
	id := cp.ClientIdentifier
	n.pass(id, nil) // a new connection waits out any cut
	bc, err := tls.Dial("tcp", n.broker, n.dial)
	if err != nil {
		_ = ac.Close()
		return
	}
	l := &link{id: id, agent: ac, broker: bc, pongs: make(chan struct{}, 4), done: make(chan struct{})}
	n.mu.Lock()
	n.links[id] = append(n.links[id], l)
	n.mu.Unlock()
	if err := cp.Write(bc); err != nil {
		n.shut(l)
		return
	}
	go n.toBroker(l, ar)
	n.toAgent(l)
}

func (n *network) toBroker(l *link, ar *bufio.Reader) {
	for {
		pk, err := packets.ReadPacket(ar)
		if err != nil {
			n.pass(l.id, l)
			n.shut(l)
			return
		}
		n.pass(l.id, l)
		l.wmu.Lock()
		err = pk.Write(l.broker)
		l.wmu.Unlock()
		if err != nil {
			n.shut(l)
			return
		}
	}
}

func (n *network) toAgent(l *link) {
	br := bufio.NewReader(l.broker)
	for {
		pk, err := packets.ReadPacket(br)
		if err != nil {
			n.brokerClosed(l)
			n.pass(l.id, l)
			n.shut(l)
			return
		}
		if _, ok := pk.(*packets.PingrespPacket); ok && l.injected.Load() > 0 {
			l.injected.Add(-1)
			l.pongs <- struct{}{}
			continue
		}
		if ca, ok := pk.(*packets.ConnackPacket); ok && ca.ReturnCode == packets.Accepted {
			n.mu.Lock()
			l.counted = true
			n.accepted++
			n.mu.Unlock()
			n.seq.poke()
		}
		n.pass(l.id, l)
		if ca, ok := pk.(*packets.ConnackPacket); ok && ca.ReturnCode == packets.Accepted {
			// Marked before paho can read it: the agent's reaction comes
			// after the mark.
			n.mu.Lock()
			l.acked = true
			n.acked[l.id] = n.seq.Add(1)
			n.mu.Unlock()
		}
		if err := pk.Write(l.agent); err != nil {
			n.shut(l)
			return
		}
	}
}

// brokerClosed notes that l's broker side is closed (once).
func (n *network) brokerClosed(l *link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !l.closedB {
		l.closedB = true
		if l.counted {
			n.ended++
		}
		n.seq.poke()
	}
}

// shut closes both sides of l.
func (n *network) shut(l *link) {
	l.once.Do(func() {
		n.mu.Lock()
		ls := n.links[l.id]
		for i, x := range ls {
			if x == l {
				n.links[l.id] = append(ls[:i:i], ls[i+1:]...)
				break
			}
		}
		if l.acked { // paho reports the loss of an established connection only; marked before it can
			n.lost[l.id] = n.seq.Add(1)
		}
		n.mu.Unlock()
		_ = l.agent.Close()
		_ = l.broker.Close()
		n.brokerClosed(l)
		close(l.done)
	})
}

// set changes id's network: a reset closes its open connections at once.
func (n *network) set(id string, c cut) {
	n.mu.Lock()
	n.state[id] = c
	var drop []*link
	if c == reset {
		drop = append(drop, n.links[id]...)
	}
	n.cond.Broadcast()
	n.mu.Unlock()
	for _, l := range drop {
		n.shut(l)
	}
}

func (n *network) isUp(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state[id] == up
}

// ping is a live agent's keep-alive on id's established connection, if
// its network is up.
func (n *network) ping() {
	n.mu.Lock()
	var ls []*link
	for id, all := range n.links {
		if n.state[id] != up {
			continue
		}
		for _, l := range all {
			if l.acked {
				ls = append(ls, l)
			}
		}
	}
	n.mu.Unlock()
	var sent []*link
	for _, l := range ls {
		l.injected.Add(1)
		l.wmu.Lock()
		err := packets.NewControlPacket(packets.Pingreq).Write(l.broker)
		l.wmu.Unlock()
		if err != nil {
			l.injected.Add(-1)
			continue
		}
		sent = append(sent, l)
	}
	for _, l := range sent {
		select {
		case <-l.pongs:
		case <-l.done:
		case <-time.After(10 * time.Second):
		}
	}
}

// live reports whether id has a connection whose CONNACK reached the
// agent, and when the last CONNACK and the last end reached it.
func (n *network) live(id string) (connected bool, acked, lost int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range n.links[id] {
		if l.acked && !l.closedB {
			connected = true
		}
	}
	return connected, n.acked[id], n.lost[id]
}

// counts are the connections the broker accepted and those closed on its
// side.
func (n *network) counts() (accepted, ended int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.accepted, n.ended
}

// transport fails an agent's HTTP calls while its network is cut.
type transport struct {
	n    *network
	id   string
	base http.RoundTripper
	tr   *tracker
}

var errUnreachable = errors.New("network is unreachable (a simulated cut)")

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.tr.begin()
	defer t.tr.end()
	if !t.n.isUp(t.id) {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, errUnreachable
	}
	return t.base.RoundTrip(r)
}
