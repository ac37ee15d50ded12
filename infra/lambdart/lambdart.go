// Package lambdart measures how a function binary starts the way Lambda
// starts it: built with the Makefile's Lambda flags (for the host's
// architecture, so that it runs here), executed with AWS_LAMBDA_RUNTIME_API
// pointing at a tiny local implementation of the Lambda runtime API, and
// timed from process start to its first request handled. It also sums
// package init times from GODEBUG=inittrace=1.
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
	"sync/atomic"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Start{}, err
	}
	ready, done := make(chan time.Time, 1), make(chan result, 1)
	srv := &http.Server{Handler: runtimeAPI(event, ready, done)}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(append([]string{}, env...), "AWS_LAMBDA_RUNTIME_API="+ln.Addr().String(), "GODEBUG=inittrace=1")
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
	select {
	case r := <-done:
		st.FirstResponse, st.Response, st.Errored = r.at.Sub(t0), r.body, r.errored
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-scanned
		return Start{}, fmt.Errorf("%s: no response: %s", filepath.Base(bin), logs.String())
	}
	select {
	case at := <-ready:
		st.Ready = at.Sub(t0)
	default:
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	<-scanned
	st.InitMS = initMS
	st.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return st, nil
}

type result struct {
	at      time.Time
	body    []byte
	errored bool
}

// runtimeAPI serves one invocation of event, then holds every further
// poll until the process is stopped.
func runtimeAPI(event []byte, ready chan<- time.Time, done chan<- result) http.Handler {
	const prefix = "/2018-06-01/runtime/"
	var served atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		p := strings.TrimPrefix(r.URL.Path, prefix)
		switch {
		case r.Method == http.MethodGet && p == "invocation/next":
			if !served.CompareAndSwap(false, true) {
				<-r.Context().Done()
				return
			}
			select {
			case ready <- now:
			default:
			}
			w.Header().Set("Lambda-Runtime-Aws-Request-Id", "lambdart-1")
			w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(30*time.Second).UnixMilli(), 10))
			w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:lambdart")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(event)
		case r.Method == http.MethodPost && (strings.HasSuffix(p, "/response") || strings.HasSuffix(p, "/error") || p == "init/error"):
			body, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusAccepted)
			select {
			case done <- result{at: now, body: body, errored: !strings.HasSuffix(p, "/response")}:
			default:
			}
		default:
			http.NotFound(w, r)
		}
	})
}
