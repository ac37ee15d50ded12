// Package lambdart measures how a function binary starts the way Lambda
// starts it: built with the Makefile's Lambda flags (for the host's
// architecture, so that it runs here), executed with AWS_LAMBDA_RUNTIME_API
// pointing at a tiny local implementation of the Lambda runtime API, and
// timed from process start to its first request handled. It also sums
// package init times from GODEBUG=inittrace=1. Runtime serves a process
// invocation after invocation, one at a time as Lambda serves an instance,
// and times each as Lambda bills it; CPUShare gives a process the CPU
// Lambda gives a function of a memory size.
package lambdart

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Build builds the package pkg (such as ./functions/api) of the module in
// dir with the Makefile's Lambda flags for linux/goarch into out.
func Build(ctx context.Context, dir, pkg, goarch, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	// The module's own go.mod: the overlay of a test run is not for builds
	// of another checkout.
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s in %s: %v\n%s", pkg, dir, err, b)
	}
	return nil
}

// ZipSize is the size of a deployment package holding the binary as
// bootstrap (deflate, as sam build zips it).
func ZipSize(bin string) (int64, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "bootstrap", Method: zip.Deflate})
	if err != nil {
		return 0, err
	}
	f, err := os.Open(bin)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return int64(buf.Len()), nil
}

// Start is one measured cold start.
type Start struct {
	// Ready is process start to the first GET .../invocation/next (the
	// binary's init done, lambda.Start polling).
	Ready time.Duration
	// FirstResponse is process start to the first invocation's response
	// (or error) posted back.
	FirstResponse time.Duration
	// InitMS is the sum of the package init clock times GODEBUG=inittrace=1
	// printed (the runtime's own and every package's init).
	InitMS float64
	// CPU is the process's user and system time, start to stop (just after
	// the first response): unlike the wall times, it hardly moves with
	// the machine's load.
	CPU time.Duration
	// Response is what the first invocation answered; Errored when it was
	// posted to .../error (or the init failed).
	Response []byte
	Errored  bool
}

var initLine = regexp.MustCompile(`^init \S+ @[0-9.]+ ms, ([0-9.]+) ms clock`)

// Run starts bin once with env, hands it event as its first invocation
// through a local runtime API, and stops it after the response.
func Run(ctx context.Context, bin string, env []string, event []byte) (Start, error) {
	rt, err := NewRuntime()
	if err != nil {
		return Start{}, err
	}
	defer rt.Close()

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(append([]string{}, env...), "AWS_LAMBDA_RUNTIME_API="+rt.Addr(), "GODEBUG=inittrace=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return Start{}, err
	}
	var initMS float64
	var logs strings.Builder
	scanned := make(chan struct{})
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return Start{}, err
	}
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := initLine.FindStringSubmatch(sc.Text()); m != nil {
				v, _ := strconv.ParseFloat(m[1], 64)
				initMS += v
			} else if logs.Len() < 4096 {
				logs.WriteString(sc.Text() + "\n")
			}
		}
	}()
	var st Start
	inv, err := rt.Invoke(ctx, event)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-scanned
		return Start{}, fmt.Errorf("%s: no response: %s", filepath.Base(bin), logs.String())
	}
	st.FirstResponse, st.Response, st.Errored = inv.Posted.Sub(t0), inv.Response, inv.Errored
	if at := rt.FirstPoll(); !at.IsZero() {
		st.Ready = at.Sub(t0)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	<-scanned
	st.InitMS = initMS
	st.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return st, nil
}

// Runtime is a local implementation of the Lambda runtime API for one
// function instance: Invoke hands an event to the next poll of
// .../invocation/next and waits for its response, one invocation at a
// time, as Lambda does with an instance. A process reaches it through
// AWS_LAMBDA_RUNTIME_API=Addr(); an init error (.../init/error) fails the
// invocation waiting, or the next one.
type Runtime struct {
	ln  net.Listener
	srv *http.Server
	// next carries each invocation to the poll that takes it.
	next chan *invocation
	mu   sync.Mutex
	// running: the invocations handed out, by request id, until answered.
	running   map[string]*invocation
	seq       int
	firstPoll time.Time
	initErr   []byte
	// Deadline is how long an invocation may run (Lambda-Runtime-Deadline-Ms;
	// default 30 s).
	Deadline time.Duration
}

// Invocation is one invocation's answer.
type Invocation struct {
	Response []byte
	// Errored: posted to .../error, or the init failed.
	Errored bool
	// Handed is when the event was written to the poll's answer, Posted
	// when the response (or error) arrived: Duration is what Lambda bills,
	// from the event handed to the runtime to its response.
	Handed, Posted time.Time
	Duration       time.Duration
}

type invocation struct {
	id    string
	event []byte
	done  chan Invocation
	// handed is set when a poll takes the event.
	handed time.Time
}

// NewRuntime listens on a loopback port.
func NewRuntime() (*Runtime, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rt := &Runtime{ln: ln, next: make(chan *invocation), running: map[string]*invocation{}, Deadline: 30 * time.Second}
	rt.srv = &http.Server{Handler: http.HandlerFunc(rt.serve)}
	go func() { _ = rt.srv.Serve(ln) }()
	return rt, nil
}

// Addr is the value of AWS_LAMBDA_RUNTIME_API.
func (rt *Runtime) Addr() string { return rt.ln.Addr().String() }

// Close stops serving; polls waiting are released.
func (rt *Runtime) Close() { _ = rt.srv.Close() }

// FirstPoll is when the process first polled for an invocation (its init
// done), zero until then.
func (rt *Runtime) FirstPoll() time.Time {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.firstPoll
}

// Invoke hands event to the function's next poll and waits for its
// response, or ctx.
func (rt *Runtime) Invoke(ctx context.Context, event []byte) (Invocation, error) {
	rt.mu.Lock()
	if rt.initErr != nil {
		defer rt.mu.Unlock()
		return Invocation{Response: rt.initErr, Errored: true}, nil
	}
	rt.seq++
	inv := &invocation{id: "lambdart-" + strconv.Itoa(rt.seq), event: event, done: make(chan Invocation, 1)}
	rt.running[inv.id] = inv
	rt.mu.Unlock()
	defer func() {
		rt.mu.Lock()
		delete(rt.running, inv.id)
		rt.mu.Unlock()
	}()
	select {
	case rt.next <- inv:
	case r := <-inv.done: // the init failed
		return r, nil
	case <-ctx.Done():
		return Invocation{}, ctx.Err()
	}
	select {
	case r := <-inv.done:
		return r, nil
	case <-ctx.Done():
		return Invocation{}, ctx.Err()
	}
}

func (rt *Runtime) serve(w http.ResponseWriter, r *http.Request) {
	const prefix = "/2018-06-01/runtime/"
	now := time.Now()
	p := strings.TrimPrefix(r.URL.Path, prefix)
	switch {
	case r.Method == http.MethodGet && p == "invocation/next":
		rt.mu.Lock()
		if rt.firstPoll.IsZero() {
			rt.firstPoll = now
		}
		rt.mu.Unlock()
		var inv *invocation
		select {
		case inv = <-rt.next:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", inv.id)
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(rt.Deadline).UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:lambdart")
		w.Header().Set("Content-Type", "application/json")
		rt.mu.Lock()
		inv.handed = time.Now()
		rt.mu.Unlock()
		_, _ = w.Write(inv.event)
	case r.Method == http.MethodPost && p == "init/error":
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		rt.mu.Lock()
		rt.initErr = body
		for id, inv := range rt.running {
			inv.done <- Invocation{Response: body, Errored: true, Handed: now, Posted: now}
			delete(rt.running, id)
		}
		rt.mu.Unlock()
	case r.Method == http.MethodPost && strings.HasPrefix(p, "invocation/") && (strings.HasSuffix(p, "/response") || strings.HasSuffix(p, "/error")):
		body, _ := io.ReadAll(r.Body)
		id := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(p, "invocation/"), "/response"), "/error")
		rt.mu.Lock()
		inv, ok := rt.running[id]
		var handed time.Time
		if ok {
			handed = inv.handed
			delete(rt.running, id)
		}
		rt.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		inv.done <- Invocation{Response: body, Errored: !strings.HasSuffix(p, "/response"), Handed: handed, Posted: now, Duration: now.Sub(handed)}
	default:
		http.NotFound(w, r)
	}
}
