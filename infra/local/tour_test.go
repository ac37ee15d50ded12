package local

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"spaces/infra/demo"
)

// TestReadmeTourPastedTwice runs the README's tour as a user pastes it:
// its shell blocks, verbatim, with bash, curl and jq, against the demo
// stack, twice in a row in the same folder. The one stand-in is `make -s
// token`, which make run answers with its development signing key: here a
// shell function answers the same tokens from the stack's signer. Each
// paste must register a space that turns active, provision a cluster whose
// job succeeds and whose space takes a revision, connect the GCP and
// Azure demo accounts, and register an agent-mode space that turns active
// once the demo's private cluster runs the agent with its bootstrap (the
// second paste's install restarts the agent with its own); the second
// paste must not trip over the first's Idempotency-Keys, clusters or
// accounts.
func TestReadmeTourPastedTwice(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the tour needs %s (make test installs it): %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := tourBlocks(t, string(readme))

	st := startWith(t, Config{
		Demo:         &demo.Options{CreateDelay: 2 * time.Second},
		Probing:      ProbingConfig{Interval: 2 * time.Second},
		Provisioning: ProvisioningConfig{PollInterval: time.Second, Wait: time.Second},
	})
	if st.Demo.Real == nil {
		t.Fatalf("the demo has no real API server (step 12 deploys there): %s", st.Demo.RealMissing)
	}

	// The folder make run leaves behind, as the tour reads it.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".local"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"simcloud-url": []byte(st.Demo.Cloud.URL + "\n"), "simcloud-ca.pem": st.Demo.Cloud.CAPEM} {
		if err := os.WriteFile(filepath.Join(dir, ".local", name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mint := func(org string, scopes ...string) string {
		tok, err := st.Signer.Mint(org, "dev", scopes, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	prelude := fmt.Sprintf(`make() {
  case "$*" in
    "-s token ORG=acme") echo %s ;;
    "-s token ORG=globex") echo %s ;;
    "-s token ORG=acme SCOPE=spaces:internal") echo %s ;;
    *) echo "the tour ran an unexpected make $*" >&2; return 1 ;;
  esac
}
`, mint("acme"), mint("globex"), mint("acme", "spaces:internal"))
	const apiLine = "export API=http://127.0.0.1:8080"
	if !strings.Contains(blocks, apiLine) {
		t.Fatalf("the tour no longer starts with %q: update this test", apiLine)
	}
	script := prelude + strings.Replace(blocks, apiLine, "export API="+st.APIURL, 1) +
		"\necho \"TOUR space=$SPACE status=$STATUS job=$JOB job_state=$(jq -r .state job.json) new=$NEW env=$ENV rev=$REV rev_state=$REVSTATE agent=$AGENT_SPACE agent_status=$AGENT_STATUS\"\n"

	id := `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	want := regexp.MustCompile(`(?m)^TOUR space=` + id + ` status=active job=` + id + ` job_state=succeeded new=` + id +
		` env=` + id + ` rev=` + id + ` rev_state=deployed agent=` + id + ` agent_status=active$`)
	seen := map[string]bool{}
	for paste := 1; paste <= 2; paste++ {
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("paste %d: %v\n%s", paste, err, out)
		}
		t.Logf("paste %d:\n%s", paste, out)
		line := want.FindString(string(out))
		if line == "" {
			t.Fatalf("paste %d did not end as the tour says:\n%s", paste, out)
		}
		// Only step 5 of the second paste finds its namespace there (the
		// first paste made it on the same cluster, as the README says).
		if n := strings.Count(string(out), "the namespace already exists"); n != paste-1 {
			t.Errorf("paste %d: %d namespace creates answered 409, want %d:\n%s", paste, n, paste-1, out)
		}
		// The GCP and Azure accounts of the last block turned ready.
		if n := strings.Count(string(out), "\nready\n"); n < 2 {
			t.Errorf("paste %d: %d accounts of the GCP/Azure block turned ready, want 2:\n%s", paste, n, out)
		}
		for _, field := range strings.Fields(line)[1:] {
			if k, v, _ := strings.Cut(field, "="); k != "status" && k != "job_state" && k != "rev_state" && k != "agent_status" {
				if seen[v] {
					t.Errorf("paste %d reused %s %s of the first paste", paste, k, v)
				}
				seen[v] = true
			}
		}
	}
}

// tourBlocks is the README tour's shell, in order: the blocks of "A
// five-minute tour" after `make run`, up to the one that looks inside the
// emulator with the AWS CLI (not part of the tour's story).
func tourBlocks(t *testing.T, readme string) string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## A five-minute tour\n")
	if !ok {
		t.Fatal("README has no tour section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var out []string
	for _, part := range strings.Split(section, "```sh\n")[1:] {
		code, _, _ := strings.Cut(part, "```")
		if strings.TrimSpace(code) == "make run" || strings.Contains(code, "aws --endpoint-url") {
			continue
		}
		out = append(out, code)
	}
	if len(out) != 4 {
		t.Fatalf("the tour has %d shell blocks to paste, want 4 (register, provision, GCP/Azure, agent): update this test", len(out))
	}
	return strings.Join(out, "\n")
}
