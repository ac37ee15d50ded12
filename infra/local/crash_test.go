package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"spaces/infra/emulator"
	"spaces/infra/testwait"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// crashChildEnv makes the test binary a persisting local stack (see
// TestMain) instead of running tests: the crash test kills it with SIGKILL.
const crashChildEnv = "SPACES_TEST_CRASH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		runCrashChild()
		return
	}
	os.Exit(runCheckingIAM(m))
}

// runCrashChild starts a persisting stack on free ports, prints its
// addresses and a token as one JSON line, and serves until killed.
func runCrashChild() {
	dir := os.Getenv(crashChildEnv)
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("SPACES_TEST_CRASH_LOG") != "" { // to see what a child did
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", EmulatorAddr: "127.0.0.1:0", DataDir: dir, Persist: true,
		Log:     log,
		Probing: ProbingConfig{Disabled: true},
		// A message received before a kill comes back in 5 s, not the
		// template's 180: the test's scale is seconds.
		Webhooks: WebhooksConfig{Wait: time.Second, Visibility: 5 * time.Second},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(1)
	}
	token, err := st.Signer.Mint("acme", "crash", nil, time.Hour)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(1)
	}
	line, _ := json.Marshal(map[string]string{"api": st.APIURL, "emulator": st.PublicURL, "table": st.Table, "token": token})
	fmt.Println(string(line))
	select {}
}

type crashChild struct {
	cmd                         *exec.Cmd
	api, emulator, table, token string
}

func startCrashChild(t testing.TB, dataDir string) *crashChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dataDir, emulator.DataDirEnv+"="+dataDir+"/emulator")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the crash child did not start: %v", err)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("crash child said %q: %v", line, err)
	}
	return &crashChild{cmd: cmd, api: m["api"], emulator: m["emulator"], table: m["table"], token: m["token"]}
}

// readyAccount creates a cloud account and marks it ready in the table,
// as a verification would: no cloud verifies it here.
func (c *crashChild) readyAccount(t testing.TB) string {
	t.Helper()
	code, m, err := c.post("/cloud-accounts", "", map[string]any{"provider": "aws", "name": "crash",
		"connection": map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}})
	if err != nil || code != http.StatusCreated {
		t.Fatalf("create account: %d %v %v", code, m, err)
	}
	cfg, err := emulator.LoadConfig(t.Context(), c.emulator)
	if err != nil {
		t.Fatal(err)
	}
	acct := accountOf(t, m)
	acct.Status, acct.Version = space.AccountReady, acct.Version+1
	if err := dynamostore.New(awsclient.DynamoDB(cfg, c.emulator), c.table).SaveAccount(t.Context(), acct); err != nil {
		t.Fatal(err)
	}
	return acct.ID
}

// kill ends the child with SIGKILL and waits for it.
func (c *crashChild) kill(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
}

func (c *crashChild) post(path, idemKey string, body any) (int, map[string]any, error) {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", c.api+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, err
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return res.StatusCode, m, nil
}

func (c *crashChild) status(path string) int {
	req, _ := http.NewRequest("GET", c.api+path, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// TestAcknowledgedWritesSurviveAKill: registrations race a SIGKILL of the
// local stack, round after round on the same data folder; every one that
// was answered 201 is there after the restart, and the registry's own
// bookkeeping (claims, the account's space count, grants, idempotency
// records) agrees with the spaces stored. Each round kills once it has a
// count of acknowledgements, not after a fixed time, so a busy machine
// proves as much as an idle one; the six workers' requests cut off by the
// kill are the writes in flight.
func TestAcknowledgedWritesSurviveAKill(t *testing.T) {
	dir := t.TempDir()
	var (
		account string
		acked   = map[string]string{} // space id -> idempotency key
	)
	const rounds, workers, perRound = 3, 6, 20
	for round := range rounds {
		c := startCrashChild(t, dir)
		for id := range acked {
			if got := c.status("/spaces/" + id); got != http.StatusOK {
				t.Fatalf("round %d: space %s was acknowledged before the kill and now answers %d", round, id, got)
			}
		}
		if account == "" {
			account = c.readyAccount(t)
		}
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			stop = make(chan struct{})
		)
		for w := range workers {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					code, m, err := c.post("/spaces", key, registerBody("aws", account, "crash-"+key))
					if err != nil {
						return // the stack is gone
					}
					if code == http.StatusCreated {
						mu.Lock()
						acked[m["id"].(string)] = key
						mu.Unlock()
					}
				}
			})
		}
		want := (round + 1) * perRound
		testwait.Eventually(t, 2*time.Minute, fmt.Sprintf("%d acknowledged registrations", want), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) >= want
		})
		if err := c.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		_ = c.cmd.Wait()
		t.Logf("round %d: %d registrations acknowledged so far", round, len(acked))
	}

	c := startCrashChild(t, dir)
	for id := range acked {
		if got := c.status("/spaces/" + id); got != http.StatusOK {
			t.Errorf("space %s was acknowledged and now answers %d", id, got)
		}
	}
	checkBookkeeping(t, c, account, acked)
}

// checkBookkeeping reads the whole table and checks that claims, grants,
// idempotency records and the account's space count agree with the spaces.
func checkBookkeeping(t *testing.T, c *crashChild, account string, acked map[string]string) {
	t.Helper()
	cfg, err := emulator.LoadConfig(t.Context(), c.emulator)
	if err != nil {
		t.Fatal(err)
	}
	items := scanTable(t, cfg, c.emulator, c.table)
	s := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }
	spaces, claims, grants, idem := map[string]bool{}, map[string]string{}, map[string]bool{}, map[string]string{}
	count := -1.0
	for _, m := range items {
		sk := s(m, "sk")
		switch {
		case strings.HasPrefix(sk, "SPACE#"):
			spaces[s(m, "id")] = true
		case strings.HasPrefix(sk, "CLAIM#"):
			claims[sk] = s(m, "space_id")
		case strings.HasPrefix(sk, "GRANT#"):
			grants[strings.TrimPrefix(sk, "GRANT#")] = true
		case strings.HasPrefix(sk, "IDEMP#"):
			sp, _ := m["space"].(map[string]any)
			idem[strings.TrimPrefix(sk, "IDEMP#")] = s(sp, "id")
		case sk == "ACCOUNT#"+account:
			count, _ = m["space_count"].(float64)
		}
	}
	if int(count) != len(spaces) {
		t.Errorf("the account counts %v spaces, the table holds %d", count, len(spaces))
	}
	if len(claims) != len(spaces) || len(grants) != len(spaces) {
		t.Errorf("%d spaces, %d claims, %d grants: each space has exactly one of each", len(spaces), len(claims), len(grants))
	}
	for _, id := range claims {
		if !spaces[id] || !grants[id] {
			t.Errorf("claim of space %s: space stored %v, grant stored %v", id, spaces[id], grants[id])
		}
	}
	for id, key := range acked {
		if idem[key] != id {
			t.Errorf("idempotency record %s names %q, want %s", key, idem[key], id)
		}
	}
	t.Logf("%d spaces, %d acknowledged, all consistent", len(spaces), len(acked))
}
