package client

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestGeneratedIsCurrent regenerates the client with the command of
// generate.go's generate line (its output to stdout instead of the file) and compares:
// an openapi.yaml changed without `go generate ./client` fails here.
func TestGeneratedIsCurrent(t *testing.T) {
	args := generateLine(t)
	i := slices.Index(args, "-o")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("the go:generate line has no -o <file>: %q", args)
	}
	file := args[i+1]
	args = slices.Delete(args, i, i+2)
	cmd := exec.Command(args[0], args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("%q: %v\n%s", args, err, stderr.Bytes())
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The generator writes the file through go/format; its stdout is the
	// same text.
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		n := 0
		for n < len(gl) && n < len(wl) && gl[n] == wl[n] {
			n++
		}
		line := func(l []string) string {
			if n < len(l) {
				return l[n]
			}
			return "<end>"
		}
		t.Fatalf("%s is stale (openapi.yaml or oapi-codegen.yaml changed): run `go generate ./client`\nfirst difference at line %d:\n generated: %s\n committed: %s",
			file, n+1, line(gl), line(wl))
	}
}

// generateLine is the command of generate.go's go:generate line.
func generateLine(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("generate.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "//go:generate "); ok {
			return strings.Fields(rest)
		}
	}
	t.Fatal("generate.go has no go:generate line")
	return nil
}

// TestIdempotentCreatesMatchSpec: the routes the client gives an
// Idempotency-Key are exactly the routes of openapi.yaml that take one.
func TestIdempotentCreatesMatchSpec(t *testing.T) {
	raw, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]yaml.Node `yaml:"paths"`
		Components struct {
			Parameters map[string]struct {
				Name string `yaml:"name"`
				In   string `yaml:"in"`
			} `yaml:"parameters"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	type param struct {
		Ref  string `yaml:"$ref"`
		Name string `yaml:"name"`
		In   string `yaml:"in"`
	}
	takes := func(ps []param) bool {
		for _, p := range ps {
			if r, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
				c := doc.Components.Parameters[r]
				p.Name, p.In = c.Name, c.In
			}
			if p.In == "header" && strings.EqualFold(p.Name, "Idempotency-Key") {
				return true
			}
		}
		return false
	}
	var spec []string
	for path, item := range doc.Paths {
		var shared []param
		if n, ok := item["parameters"]; ok {
			if err := n.Decode(&shared); err != nil {
				t.Fatal(err)
			}
		}
		for method, n := range item {
			if method == "parameters" || strings.HasPrefix(method, "x-") || method == "summary" || method == "description" || method == "servers" {
				continue
			}
			var op struct {
				Parameters []param `yaml:"parameters"`
			}
			if err := n.Decode(&op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if takes(op.Parameters) || takes(shared) {
				spec = append(spec, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(spec)
	listed := slices.Sorted(slices.Values(idempotentCreates))
	if len(spec) == 0 {
		t.Fatal("openapi.yaml has no route with an Idempotency-Key: the reading is broken")
	}
	if !slices.Equal(spec, listed) {
		t.Errorf("routes taking an Idempotency-Key:\n openapi.yaml: %q\n idempotency.go: %q", spec, listed)
	}
	for _, r := range spec {
		m, p, _ := strings.Cut(r, " ")
		concrete := strings.NewReplacer("{", "", "}", "").Replace(p)
		if !takesIdempotencyKey(m, concrete) {
			t.Errorf("%s: takesIdempotencyKey(%q, %q) is false", r, m, concrete)
		}
	}
	if takesIdempotencyKey("GET", "/spaces") || takesIdempotencyKey("POST", "/spaces/x") {
		t.Error("takesIdempotencyKey matches a route that takes no key")
	}
}

// TestClientImports: the client is built from openapi.yaml alone; it links
// nothing of the service.
func TestClientImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/oapi-codegen/runtime") {
		t.Fatalf("go list -deps gave no runtime: %q", deps)
	}
	for _, d := range deps {
		if d == "spaces" || (strings.HasPrefix(d, "spaces/") && d != "spaces/client") {
			t.Errorf("the client imports %s", d)
		}
	}
}
