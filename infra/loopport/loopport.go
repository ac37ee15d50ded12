// Package loopport gives tests loopback ports they may close and open again
// (a cluster stopped and restarted on the same URL).
//
// A port from listening on :0 lies in the kernel's ephemeral range, which
// the kernel hands to the next outgoing connection of any process once our
// listener closes: under load a restart found its port taken by some client
// socket ("address already in use"). A port below that range is only ever
// taken by an explicit bind, so these come from there
// (TestPortsBelowEphemeralRange).
package loopport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// floor keeps clear of the well-known and commonly configured ports.
const floor = 20000

// Free returns n distinct loopback TCP ports that were free a moment ago.
func Free(n int) ([]int, error) {
	ls, err := listen(n)
	if err != nil {
		return nil, err
	}
	ports := make([]int, len(ls))
	for i, l := range ls {
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	return ports, nil
}

// Listen listens on a loopback TCP port that can be opened again after
// Close.
func Listen() (net.Listener, error) {
	ls, err := listen(1)
	if err != nil {
		return nil, err
	}
	return ls[0], nil
}

func listen(n int) ([]net.Listener, error) {
	low := ephemeralLow()
	var ls []net.Listener
	for tries := 0; len(ls) < n; tries++ {
		if tries > 1000 {
			for _, l := range ls {
				l.Close()
			}
			return nil, fmt.Errorf("loopport: no free port in [%d, %d)", floor, low)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(floor+rand.IntN(low-floor)))
		if err != nil {
			continue // taken: try another
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range; 32768 when it cannot be read).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > floor+1000 {
				low = v
			}
		}
	}
	return low
}
