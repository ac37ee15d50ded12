package probing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"spaces/infra/awscost"
	"spaces/infra/emulator"
	"spaces/infra/lambdart"
	"spaces/infra/simcloud"
	"spaces/shared/kubecred"
	"spaces/shared/kubeprobe"
	"spaces/shared/metrics"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

// proberInstanceEnv carries an instanceConfig to a process of the test
// binary that is to be the prober's Lambda instance (TestMain).
const proberInstanceEnv = "SPACES_PROBER_INSTANCE"

// instanceConfig is what the prober's instance needs to build the prober
// as the cost benchmark builds it in its own process.
type instanceConfig struct {
	Endpoint, Table, Queue, Bus string
	Cloud                       simcloud.Endpoints
	MaxTransports, Concurrency  int
	// Timeout: PROBE_TIMEOUT's, if set.
	Timeout time.Duration
}

// instanceEvent is an SQS event with the benchmark's fake time, which the
// instance's prober and minter read (the benchmark's clock moves faster
// than real time).
type instanceEvent struct {
	Now time.Time             `json:"now"`
	SQS lambdaevents.SQSEvent `json:"sqs"`
}

// runProberInstance is the prober as a Lambda function: built by
// shared/wiring with the benchmark's settings, the production minter
// against the benchmark's simulated clouds, served through the Lambda
// runtime API (AWS_LAMBDA_RUNTIME_API) by aws-lambda-go, one invocation at
// a time, each through the production handler (Prober.HandleSQS).
func runProberInstance(raw string) {
	var cfg instanceConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "prober instance:", err)
		os.Exit(2)
	}
	awsCfg, err := emulator.LoadConfig(context.Background(), cfg.Endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "prober instance:", err)
		os.Exit(2)
	}
	var now atomic.Pointer[time.Time]
	clock := func() time.Time { return *now.Load() }
	t0 := time.Now()
	now.Store(&t0)
	a := parts.AWS{Config: awsCfg, Endpoint: cfg.Endpoint}
	minter := cfg.Cloud.Minter(a.Store(cfg.Table))
	minter.Now = clock
	log := discardLogger()
	checker := &kubeprobe.Prober{MaxTransports: cfg.MaxTransports}
	p := wiring.Prober(a, wiring.ProberSettings{
		Common:     parts.Common{Table: cfg.Table, StaleAfter: space.DefaultStaleAfter},
		ProbeQueue: cfg.Queue, EventBus: cfg.Bus, Interval: space.DefaultProbeInterval,
	}, kubecred.Minter(minter), checker, log)
	if cfg.Concurrency > 0 {
		p.Concurrency = cfg.Concurrency
	}
	if cfg.Timeout > 0 {
		p.Timeout, checker.Timeout = cfg.Timeout, cfg.Timeout
	}
	p.Now, p.Metrics = clock, &metrics.Emitter{Log: log, Now: clock}
	lambda.Start(func(ctx context.Context, ev instanceEvent) (lambdaevents.SQSEventResponse, error) {
		now.Store(&ev.Now)
		return p.HandleSQS(ctx, ev.SQS)
	})
}

// proberInstance is a process running the prober as one Lambda instance
// (runProberInstance), held to the CPU share Lambda gives memoryMB
// (lambdart.CPUShare), invoked through a local runtime API
// (lambdart.Runtime) one batch at a time.
type proberInstance struct {
	memoryMB int
	cmd      *exec.Cmd
	rt       *lambdart.Runtime
	cpu      *lambdart.CPUShare
	stderr   bytes.Buffer
}

// startProberInstance starts the instance; the benchmark fails, saying
// why, if no cgroup can be made.
func startProberInstance(b *testing.B, cfg instanceConfig, memoryMB int) *proberInstance {
	raw, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	bin, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	in := &proberInstance{memoryMB: memoryMB}
	in.cpu, err = lambdart.NewCPUShare(fmt.Sprintf("spaces-prober-%d-%d", os.Getpid(), memoryMB), memoryMB)
	if err != nil {
		b.Fatalf("the prober's Lambda duration is measured in a process held to Lambda's CPU share for %d MB, in a cgroup of its own, and none can be made here (run as root on a machine with a writable cgroup file system): %v", memoryMB, err)
	}
	if in.rt, err = lambdart.NewRuntime(); err != nil {
		_ = in.cpu.Close()
		b.Fatal(err)
	}
	in.rt.Deadline = 15 * time.Minute
	in.cmd = exec.Command(bin)
	in.cmd.Env = append(os.Environ(), proberInstanceEnv+"="+string(raw), "AWS_LAMBDA_RUNTIME_API="+in.rt.Addr())
	in.cmd.Stdout, in.cmd.Stderr = &in.stderr, &in.stderr
	in.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := in.cmd.Start(); err != nil {
		in.rt.Close()
		_ = in.cpu.Close()
		b.Fatal(err)
	}
	b.Cleanup(in.stop)
	if err := in.cpu.Add(in.cmd.Process.Pid); err != nil {
		b.Fatal(err)
	}
	return in
}

func (in *proberInstance) stop() {
	if in.cmd.ProcessState == nil {
		_ = in.cmd.Process.Kill()
		_ = in.cmd.Wait()
	}
	in.rt.Close()
	_ = in.cpu.Close()
}

// invoke hands the instance batch at the benchmark's time now and returns
// the invocation's duration and the messages it failed.
func (in *proberInstance) invoke(b *testing.B, now time.Time, batch []probing.Delivery) (time.Duration, int) {
	ev := instanceEvent{Now: now}
	for _, d := range batch {
		ev.SQS.Records = append(ev.SQS.Records, lambdaevents.SQSMessage{MessageId: d.MessageID, Body: d.Body,
			Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(max(1, d.ReceiveCount))}, MessageAttributes: d.Attributes})
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		b.Fatal(err)
	}
	inv, err := in.rt.Invoke(context.Background(), raw)
	if err != nil || inv.Errored {
		in.stop() // its output complete
		b.Fatalf("prober instance (%d MB): %v %s\n%s", in.memoryMB, err, inv.Response, in.stderr.String())
	}
	var resp lambdaevents.SQSEventResponse
	if err := json.Unmarshal(inv.Response, &resp); err != nil {
		b.Fatal(err)
	}
	return inv.Duration, len(resp.BatchItemFailures)
}

// timedBatch is a batch the cost benchmark invoked, at its fake time, and
// whether in the measured window.
type timedBatch struct {
	at       time.Time
	batch    []probing.Delivery
	measured bool
}

// instanceRun is what the prober's Lambda instance did with the measured
// window's batches.
type instanceRun struct {
	memoryMB int
	vcpus    float64
	// lambda: the invocations and their billed seconds (to the
	// millisecond) at memoryMB.
	lambda    awscost.Lambda
	durations []time.Duration
	// cpu: the instance's CPU time (the cgroup's usage); throttled: the
	// periods its quota ran out in.
	cpu        time.Duration
	throttled  int64
	handshakes int
	failed     int
	probes     int
}

func (r instanceRun) mean() time.Duration {
	var sum time.Duration
	for _, d := range r.durations {
		sum += d
	}
	return (sum / time.Duration(max(1, len(r.durations)))).Round(time.Millisecond)
}

// instanceSizes are the memory sizes the prober's instance is measured
// at: PROBER_MEMORY_MB (comma-separated; the first is priced), else the
// variant's.
func instanceSizes(b *testing.B, def int) []int {
	s := os.Getenv("PROBER_MEMORY_MB")
	if s == "" {
		return []int{def}
	}
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 128 || n > 10240 {
			b.Fatalf("PROBER_MEMORY_MB: %q is not a Lambda memory size (128 to 10,240 MB)", f)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// replayInstance hands every recorded batch, in order and at its time, to
// a new prober instance of memoryMB (the warm-up's too, so that its
// minter's cache is as warm as the benchmark's prober's was), and measures
// the measured window's invocations. accepted counts the test clusters'
// connections; billed rounds a duration as Lambda bills it.
func replayInstance(b *testing.B, cfg instanceConfig, memoryMB int, batches []timedBatch, accepted func() int, billed func(time.Duration) float64) instanceRun {
	in := startProberInstance(b, cfg, memoryMB)
	defer in.stop()
	r := instanceRun{memoryMB: memoryMB, vcpus: in.cpu.VCPUs, lambda: awscost.Lambda{MemoryMB: memoryMB}}
	usage := func() (time.Duration, int64) {
		cpu, err := in.cpu.Usage()
		if err != nil {
			b.Fatal(err)
		}
		thr, err := in.cpu.Throttled()
		if err != nil {
			b.Fatal(err)
		}
		return cpu, thr
	}
	var cpu0 time.Duration
	var thr0 int64
	var acc0 int
	started := false
	for _, tb := range batches {
		if tb.measured && !started {
			started = true
			cpu0, thr0 = usage()
			acc0 = accepted()
		}
		d, failed := in.invoke(b, tb.at, tb.batch)
		if tb.measured {
			r.durations = append(r.durations, d)
			r.lambda.Invocations++
			r.lambda.Seconds += billed(d)
			r.failed += failed
			r.probes += spacesIn(b, tb.batch)
		}
	}
	cpu, thr := usage()
	r.cpu, r.throttled, r.handshakes = cpu-cpu0, thr-thr0, accepted()-acc0
	if r.probes == 0 {
		b.Fatal("no batch in the measured window")
	}
	return r
}
