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

// TestToursPastedTwice runs both tours as a user pastes them: their shell
// blocks, verbatim, with bash, curl and jq, against the demo stack, each
// twice in a row in the same folder (README.md's five-minute tour, then
// docs/tour.md's walk-through). The one stand-in is `make -s token`, which
// make run answers with its development signing key: here a shell function
// answers the same tokens from the stack's signer.
//
// Each paste of README.md's tour must connect an account that turns ready
// and register a space that turns active, then deregister it (204, then
// 404). Each paste of docs/tour.md must register a space that turns
// active, provision a cluster whose job succeeds and whose space takes a
// revision, connect the GCP and Azure demo accounts, and register an
// agent-mode space that turns active once the demo's private cluster runs
// the agent with its bootstrap (the second paste's install restarts the
// agent with its own). A second paste must not trip over the first's
// Idempotency-Keys, clusters or accounts.
func TestToursPastedTwice(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the tours need %s (make test installs it): %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	walk, err := os.ReadFile("../../docs/tour.md")
	if err != nil {
		t.Fatal(err)
	}
	short := shellBlocks(t, "README.md", section(t, string(readme), "A five-minute tour"), 1)
	long := shellBlocks(t, "docs/tour.md", string(walk), 4)

	st := startWith(t, Config{
		Demo:         &demo.Options{CreateDelay: 2 * time.Second},
		Probing:      ProbingConfig{Interval: 2 * time.Second},
		Provisioning: ProvisioningConfig{PollInterval: time.Second, Wait: time.Second},
	})
	// The folder make run leaves behind, as the tours read it.
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
	script := func(t *testing.T, name, blocks, summary string) string {
		if !strings.Contains(blocks, apiLine) {
			t.Fatalf("%s's tour no longer starts with %q: update this test", name, apiLine)
		}
		return prelude + strings.Replace(blocks, apiLine, "export API="+st.APIURL, 1) + "\n" + summary + "\n"
	}
	paste := func(t *testing.T, n int, script string) string {
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("paste %d: %v\n%s", n, err, out)
		}
		t.Logf("paste %d:\n%s", n, out)
		return string(out)
	}
	id := `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	seen := map[string]bool{}
	// fresh fails when a paste reports an id an earlier paste reported.
	fresh := func(t *testing.T, n int, line string) {
		for _, field := range strings.Fields(line)[1:] {
			k, v, _ := strings.Cut(field, "=")
			if !strings.HasSuffix(k, "status") && !strings.HasSuffix(k, "state") {
				if seen[v] {
					t.Errorf("paste %d reused %s %s of an earlier paste", n, k, v)
				}
				seen[v] = true
			}
		}
	}

	t.Run("README.md", func(t *testing.T) {
		s := script(t, "README.md", short, `echo "SHORT account=$ACCOUNT space=$SPACE status=$STATUS"`)
		want := regexp.MustCompile(`(?m)^SHORT account=` + id + ` space=` + id + ` status=active$`)
		for n := 1; n <= 2; n++ {
			out := paste(t, n, s)
			line := want.FindString(out)
			if line == "" {
				t.Fatalf("paste %d did not end as the tour says:\n%s", n, out)
			}
			if !strings.Contains(out, "\nready\n") {
				t.Errorf("paste %d: the account did not turn ready:\n%s", n, out)
			}
			if !strings.Contains(out, "\n204\n404\n") {
				t.Errorf("paste %d: deregistering did not answer 204, then 404:\n%s", n, out)
			}
			fresh(t, n, line)
		}
	})

	t.Run("docs/tour.md", func(t *testing.T) {
		if st.Demo.Real == nil {
			t.Fatalf("the demo has no real API server (step 12 deploys there): %s", st.Demo.RealMissing)
		}
		s := script(t, "docs/tour.md", long, `echo "TOUR space=$SPACE status=$STATUS job=$JOB job_state=$(jq -r .state job.json) new=$NEW env=$ENV rev=$REV rev_state=$REVSTATE agent=$AGENT_SPACE agent_status=$AGENT_STATUS"`)
		want := regexp.MustCompile(`(?m)^TOUR space=` + id + ` status=active job=` + id + ` job_state=succeeded new=` + id +
			` env=` + id + ` rev=` + id + ` rev_state=deployed agent=` + id + ` agent_status=active$`)
		for n := 1; n <= 2; n++ {
			out := paste(t, n, s)
			line := want.FindString(out)
			if line == "" {
				t.Fatalf("paste %d did not end as the tour says:\n%s", n, out)
			}
			// Only step 5 of the second paste finds its namespace there (the
			// first paste made it on the same cluster, as the tour says).
			if c := strings.Count(out, "the namespace already exists"); c != n-1 {
				t.Errorf("paste %d: %d namespace creates answered 409, want %d:\n%s", n, c, n-1, out)
			}
			// The GCP and Azure accounts of the third block turned ready.
			if c := strings.Count(out, "\nready\n"); c < 2 {
				t.Errorf("paste %d: %d accounts of the GCP/Azure block turned ready, want 2:\n%s", n, c, out)
			}
			fresh(t, n, line)
		}
	})
}

// section is the text of a markdown document's "## title" section, up to
// its next "## " heading.
func section(t *testing.T, doc, title string) string {
	t.Helper()
	_, s, ok := strings.Cut(doc, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("no section %q", title)
	}
	s, _, _ = strings.Cut(s, "\n## ")
	return s
}

// shellBlocks is a tour's shell, in order: its ```sh blocks but the one
// that starts `make run` and the one that looks inside the emulator with
// the AWS CLI (not part of the tour's story). want is how many there are,
// so that a block added or lost is noticed here.
func shellBlocks(t *testing.T, name, text string, want int) string {
	t.Helper()
	var out []string
	for _, part := range strings.Split(text, "```sh\n")[1:] {
		code, _, _ := strings.Cut(part, "```")
		if strings.TrimSpace(code) == "make run" || strings.Contains(code, "aws --endpoint-url") {
			continue
		}
		out = append(out, code)
	}
	if len(out) != want {
		t.Fatalf("%s has %d shell blocks to paste, want %d: update this test", name, len(out), want)
	}
	return strings.Join(out, "\n")
}
