package kubeprobe_test

import (
	"context"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"spaces/infra/testcluster"
	"spaces/shared/kubecred"
	"spaces/shared/kubeprobe"
)

// BenchmarkProbe1000Clusters probes a fleet of 1,000 test clusters that
// each answer in 50 ms, 100 probes at a time; one op is a sweep of the
// whole fleet. Besides probes/s it reports what the process holds after the
// sweeps (goroutines and file descriptors above the fleet's own, which
// counts both ends of each kept-alive loopback connection) and what is left
// once the prober is closed.
//
//   - lru=256 (the default bound) cycles through more clusters than it
//     keeps, so every probe makes a new TLS connection: the worst case.
//   - lru=1024 keeps every cluster's connection: probes after the first
//     sweep reuse them.
//   - client-go-cache is plain discovery.NewDiscoveryClientForConfig, for
//     comparison: its process-wide cache keeps every connection for 90 s
//     and offers no way to close them.
func BenchmarkProbe1000Clusters(b *testing.B) {
	const fleet, concurrency = 1000, 100
	ca, err := testcluster.NewCA()
	if err != nil {
		b.Fatal(err)
	}
	creds := make([]kubecred.Credentials, fleet)
	for i := range creds {
		c, err := testcluster.New(testcluster.WithCA(ca))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		c.SetMode(testcluster.Slow(50 * time.Millisecond))
		creds[i] = c.Credentials()
	}

	for _, v := range []struct {
		name  string
		probe func(context.Context, kubecred.Credentials) bool
		close func()
	}{
		prober("lru=256", &kubeprobe.Prober{Timeout: 5 * time.Second}),
		prober("lru=1024", &kubeprobe.Prober{Timeout: 5 * time.Second, MaxTransports: 1024}),
		{name: "client-go-cache", probe: clientGoProbe, close: func() {}},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			baseG, baseFD := runtime.NumGoroutine(), openFDs(b)
			probes := 0
			for b.Loop() {
				sweep(b, creds, concurrency, v.probe)
				probes += fleet
			}
			b.ReportMetric(float64(probes)/b.Elapsed().Seconds(), "probes/s")
			b.ReportMetric(0, "ns/op") // a sweep's duration says less than probes/s
			b.ReportMetric(float64(runtime.NumGoroutine()-baseG), "goroutines-held")
			b.ReportMetric(float64(openFDs(b)-baseFD), "fds-held")

			v.close()
			runtime.GC() // lets client-go's cache drop its entry, for a fair comparison
			// The server learns of closes asynchronously; give it a moment.
			deadline := time.Now().Add(3 * time.Second)
			for runtime.NumGoroutine() > baseG && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			b.ReportMetric(float64(runtime.NumGoroutine()-baseG), "goroutines-after-close")
			b.ReportMetric(float64(openFDs(b)-baseFD), "fds-after-close")
		})
	}
}

func prober(name string, p *kubeprobe.Prober) struct {
	name  string
	probe func(context.Context, kubecred.Credentials) bool
	close func()
} {
	return struct {
		name  string
		probe func(context.Context, kubecred.Credentials) bool
		close func()
	}{name, func(ctx context.Context, c kubecred.Credentials) bool { return p.Probe(ctx, c).OK() }, p.Close}
}

// clientGoProbe is the textbook call, through client-go's own transport
// cache.
func clientGoProbe(ctx context.Context, c kubecred.Credentials) bool {
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{
		Host:            c.Server,
		BearerToken:     c.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData},
		Timeout:         5 * time.Second,
	})
	if err != nil {
		return false
	}
	_, err = dc.ServerVersionWithContext(ctx)
	return err == nil
}

func sweep(b *testing.B, creds []kubecred.Credentials, concurrency int, probe func(context.Context, kubecred.Credentials) bool) {
	next := make(chan kubecred.Credentials)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for c := range next {
				if !probe(b.Context(), c) {
					failed.Add(1)
				}
			}
		})
	}
	for _, c := range creds {
		next <- c
	}
	close(next)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d probes failed", n, len(creds))
	}
}

func openFDs(b *testing.B) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Fatal(err)
	}
	return len(entries)
}

// BenchmarkProbeOneCluster is the prober's own cost per probe once the
// connection is open: a healthy cluster answering at once.
func BenchmarkProbeOneCluster(b *testing.B) {
	c, err := testcluster.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	p := &kubeprobe.Prober{}
	b.Cleanup(p.Close)
	creds := c.Credentials()
	b.ReportAllocs()
	for b.Loop() {
		if o := p.Probe(b.Context(), creds); !o.OK() {
			b.Fatalf("%+v", o)
		}
	}
}
