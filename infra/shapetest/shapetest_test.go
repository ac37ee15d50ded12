package shapetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

type inner struct {
	N    int     `json:"n,omitempty"`
	Rate float64 `json:"rate,omitempty"`
}

type sample struct {
	Name    string            `json:"name,omitempty"`
	On      bool              `json:"on,omitempty"`
	At      *time.Time        `json:"at,omitempty"`
	Tags    map[string]string `json:"tags,omitempty"`
	List    []inner           `json:"list,omitempty"`
	Any     any               `json:"any,omitempty"`
	Raw     json.RawMessage   `json:"raw,omitempty"`
	Skipped string            `json:"-"`
	hidden  string
	inner
}

func TestFillSetsEveryEncodedField(t *testing.T) {
	var s sample
	Fill(&s)
	got := Marshal(t, s)
	want := []string{"any string", "at string", "list array", "list[] object", "list[].n number", "list[].rate number",
		"n number", "name string", "on boolean", "rate number", "raw object", "tags object", "tags.<key> string"}
	if !slices.Equal(got, want) {
		t.Errorf("shape of a filled value:\n got %q\nwant %q", got, want)
	}
	if s.hidden != "" {
		t.Errorf("Fill set an unexported field: %q", s.hidden)
	}
}

// recorder is a testing.TB that keeps what Golden reports.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Logf(string, ...any)       {}
func (r *recorder) Errorf(f string, a ...any) { r.errors = append(r.errors, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.Errorf(f, a...); panic("fatal") }

func TestGoldenReportsEveryDifference(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shapes.golden")
	sections := map[string][]string{"A": {"x string", "y number"}, "B": {"z boolean"}}
	if err := os.WriteFile(file, []byte(format("a header\nof two lines", sections)), 0o644); err != nil {
		t.Fatal(err)
	}

	same := &recorder{TB: t}
	Golden(same, file, "", "how to accept", sections)
	if len(same.errors) != 0 {
		t.Errorf("the shapes the file holds differ: %v", same.errors)
	}

	changed := &recorder{TB: t}
	Golden(changed, file, "", "how to accept", map[string][]string{"A": {"x string", "y2 number"}, "C": nil})
	if len(changed.errors) != 1 {
		t.Fatalf("reported %d errors, want 1: %v", len(changed.errors), changed.errors)
	}
	for _, want := range []string{"A: - y number", "A: + y2 number", "B: gone", "C: new", "how to accept"} {
		if !strings.Contains(changed.errors[0], want) {
			t.Errorf("the report lacks %q:\n%s", want, changed.errors[0])
		}
	}
}
