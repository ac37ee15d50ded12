package kubetest

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"spaces/infra/loopport"
)

// TestStartOnNewPortsWhenOneWasTaken: loopport.Free's ports were free a
// moment ago, and under a busy suite another test's child can bind one
// before ours does. Here the first ports handed to etcd and to the
// apiserver are held by a listener; each start is tried again on new
// ports and the cluster comes up (without the retry StartCluster fails
// with "exited before it was ready").
func TestStartOnNewPortsWhenOneWasTaken(t *testing.T) {
	taken, err := loopport.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	var calls atomic.Int32
	freePorts = func(n int) ([]int, error) {
		ports, err := loopport.Free(n)
		// The first call is etcd's, the third the apiserver's first.
		if c := calls.Add(1); err == nil && (c == 1 || c == 3) {
			ports[0] = port
		}
		return ports, err
	}
	defer func() { freePorts = loopport.Free }()

	c, err := StartCluster(context.Background(), Options{Dir: t.TempDir()})
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		t.Fatalf("start: %v\n%s", err, c.LogTail(30))
	}
	if got := calls.Load(); got != 4 {
		t.Errorf("ports asked %d times, want 4 (etcd twice, the apiserver twice)", got)
	}
	for _, f := range []string{c.EtcdLog, c.APIServerLog} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "address already in use") {
			t.Errorf("%s does not show the lost port; the test did not take it", f)
		}
	}
	if strings.Contains(c.URL, ":"+strconv.Itoa(port)) {
		t.Errorf("the apiserver serves on the taken port: %s", c.URL)
	}
}
