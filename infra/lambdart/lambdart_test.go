package lambdart_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"spaces/infra/emulator/emulatortest"
	"spaces/infra/lambdart"
)

// firstEvents is each function's first invocation: a sample event that
// reads the table once (or serves a file) and finds nothing, so that the
// start, not the work, is measured.
var firstEvents = map[string]string{
	"api":         "events/api/get-space.json",
	"discovery":   "events/discovery/list-namespaces.json",
	"scheduler":   "events/scheduler/schedule.json",
	"prober":      "events/prober/batch.json",
	"cascade":     "events/cascade/deregistration.json",
	"revisions":   "events/revisions/claim.json",
	"console":     "events/console/get-index.json",
	"provisioner": "events/provisioner/step.json",
}

type binary struct {
	run, arm64 string // host build (run here), linux/arm64 build (what Lambda gets)
	err        error
}

var (
	buildMu sync.Mutex
	builds  = map[string]*binary{}
)

// build builds function fn of the module in dir once per test binary.
func build(b *testing.B, dir, fn string) *binary {
	buildMu.Lock()
	defer buildMu.Unlock()
	key := dir + "|" + fn
	if bin, ok := builds[key]; ok {
		return bin
	}
	out := filepath.Join(os.TempDir(), "lambdart-"+filepath.Base(dir)+"-"+fn)
	bin := &binary{run: out + "-" + runtime.GOARCH, arm64: out + "-arm64"}
	pkg := "./functions/" + fn
	if bin.err = lambdart.Build(b.Context(), dir, pkg, runtime.GOARCH, bin.run); bin.err == nil {
		bin.err = lambdart.Build(b.Context(), dir, pkg, "arm64", bin.arm64)
	}
	builds[key] = bin
	return bin
}

// BenchmarkColdStart starts every function binary the way Lambda does
// (see package doc) against the emulator, b.N times each, and reports:
// the linux/arm64 binary's size and zip size, the sum of package init
// times, process start to the runtime API's first poll (ready-ms), and to
// the first response (first-ms, mean and minimum); init-ms likewise. With
// LAMBDART_BEFORE=<checkout of an earlier commit>, the api function of
// that checkout is measured in the same run as api-before.
//
//	GOFLAGS=-modfile=$(make -s overlay) go test -run '^$' -bench ColdStart -benchtime 10x ./infra/lambdart
func BenchmarkColdStart(b *testing.B) {
	root, _ := filepath.Abs("../..")
	env := emulatortest.Start(b)
	secretARN := cursorSecret(b, env)
	vars := append(os.Environ(),
		"AWS_ENDPOINT_URL="+env.Endpoint, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=emulator", "AWS_SECRET_ACCESS_KEY=emulator",
		"AWS_EC2_METADATA_DISABLED=true",
		"TABLE_NAME="+env.Name(b, "SpacesTable"), "STALE_AFTER=8m",
		"PROBE_QUEUE_URL="+env.Resources["ProbeQueue"].URL, "PROBE_INTERVAL=1m", "HEARTBEAT=5m",
		"REVISIONS_QUEUE_URL="+env.Resources["RevisionsQueue"].URL, "REVISIONS_DLQ_URL="+env.Resources["RevisionsDLQ"].URL,
		"PROVISIONING_QUEUE_URL="+env.Resources["ProvisioningQueue"].URL,
		"EVENT_BUS_NAME="+env.Name(b, "EventBus"), "CURSOR_SECRET_ARN="+secretARN,
		"DISCOVERY_FUNCTION=spaces-discovery", "OIDC_ISSUER=https://auth.example.com/", "OIDC_CLIENT_ID=console")
	type target struct{ name, dir, fn string }
	var targets []target
	fns := make([]string, 0, len(firstEvents))
	for fn := range firstEvents {
		fns = append(fns, fn)
	}
	slices.Sort(fns)
	if before := os.Getenv("LAMBDART_BEFORE"); before != "" {
		targets = append(targets, target{"api-before", before, "api"})
	}
	for _, fn := range fns {
		targets = append(targets, target{fn, root, fn})
	}
	for _, tg := range targets {
		b.Run(tg.name, func(b *testing.B) {
			bin := build(b, tg.dir, tg.fn)
			if bin.err != nil {
				b.Fatal(bin.err)
			}
			event, err := os.ReadFile(filepath.Join(root, firstEvents[tg.fn]))
			if err != nil {
				b.Fatal(err)
			}
			var initMS, minInit float64
			var ready, first, minFirst, cpu time.Duration
			b.ResetTimer()
			for range b.N {
				st, err := lambdart.Run(b.Context(), bin.run, vars, event)
				if err != nil {
					b.Fatal(err)
				}
				if st.Errored || !json.Valid(st.Response) {
					b.Fatalf("first invocation failed: %s", st.Response)
				}
				initMS += st.InitMS
				if minInit == 0 || st.InitMS < minInit {
					minInit = st.InitMS
				}
				ready += st.Ready
				cpu += st.CPU
				first += st.FirstResponse
				if minFirst == 0 || st.FirstResponse < minFirst {
					minFirst = st.FirstResponse
				}
			}
			b.StopTimer()
			fi, err := os.Stat(bin.arm64)
			if err != nil {
				b.Fatal(err)
			}
			zipped, err := lambdart.ZipSize(bin.arm64)
			if err != nil {
				b.Fatal(err)
			}
			n := float64(b.N)
			b.ReportMetric(float64(fi.Size())/1e6, "MB")
			b.ReportMetric(float64(zipped)/1e6, "zip-MB")
			b.ReportMetric(initMS/n, "init-ms")
			// On a loaded machine the minimum is the better comparison.
			b.ReportMetric(minInit, "init-min-ms")
			b.ReportMetric(float64(ready.Microseconds())/1e3/n, "ready-ms")
			b.ReportMetric(float64(first.Microseconds())/1e3/n, "first-ms")
			b.ReportMetric(float64(minFirst.Microseconds())/1e3, "first-min-ms")
			b.ReportMetric(float64(cpu.Microseconds())/1e3/n, "cpu-ms")
		})
	}
}

// cursorSecret creates the api function's cursor secret in the emulator.
func cursorSecret(b *testing.B, env *emulatortest.Env) string {
	sm := secretsmanager.NewFromConfig(env.Config, func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(env.Endpoint) })
	out, err := sm.CreateSecret(b.Context(), &secretsmanager.CreateSecretInput{
		Name: aws.String(env.Prefix + "CursorSecret"), SecretString: aws.String("lambdart-cursor-secret-lambdart-cursor-secret")})
	if err != nil {
		b.Fatal(err)
	}
	return *out.ARN
}

// TestRuntimeInvokesInTurn plays a function's runtime client against
// Runtime: each invocation reaches one poll with its own request id, the
// response (or error) posted comes back to Invoke, and an init error fails
// the invocations after it.
func TestRuntimeInvokesInTurn(t *testing.T) {
	rt, err := lambdart.NewRuntime()
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	base := "http://" + rt.Addr() + "/2018-06-01/runtime/"
	post := func(path string, body string) {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("POST %s: %s", path, resp.Status)
		}
	}
	// The function: answers "re:<event>", posts an error for the event
	// "fail", and fails its init at the event "init".
	ids := make(chan string, 4)
	go func() {
		for {
			resp, err := http.Get(base + "invocation/next")
			if err != nil {
				return
			}
			event, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
			ids <- id
			switch string(event) {
			case "fail":
				post("invocation/"+id+"/error", "failed")
			case "init":
				post("init/error", "no init")
				return
			default:
				post("invocation/"+id+"/response", "re:"+string(event))
			}
		}
	}()
	for _, c := range []struct {
		event, response string
		errored         bool
	}{{"a", "re:a", false}, {"b", "re:b", false}, {"fail", "failed", true}, {"init", "no init", true}, {"c", "no init", true}} {
		inv, err := rt.Invoke(t.Context(), []byte(c.event))
		if err != nil {
			t.Fatalf("%s: %v", c.event, err)
		}
		if string(inv.Response) != c.response || inv.Errored != c.errored {
			t.Errorf("%s: response %q errored %t, want %q %t", c.event, inv.Response, inv.Errored, c.response, c.errored)
		}
		if !c.errored && inv.Posted.Before(inv.Handed) {
			t.Errorf("%s: posted %s before handed %s", c.event, inv.Posted, inv.Handed)
		}
	}
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if id == "" || seen[id] {
			t.Errorf("request id %q empty or handed out twice", id)
		}
		seen[id] = true
	}
	if len(seen) != 4 || rt.FirstPoll().IsZero() {
		t.Errorf("%d invocations polled (want 4: the last fails on the init error), first poll %s", len(seen), rt.FirstPoll())
	}
}
