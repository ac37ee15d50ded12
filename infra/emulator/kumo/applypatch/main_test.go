package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const patch = `--- a/f.go
+++ b/f.go
@@ -1,3 +1,4 @@
 func f() {
-	old()
+	new1()
+	new2()
 }
`

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApplies(t *testing.T) {
	in := write(t, "f.go", "package x\n\nfunc f() {\n\told()\n}\n")
	out := filepath.Join(t.TempDir(), "out.go")
	if err := run(write(t, "p.patch", patch), in, out); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	if want := "package x\n\nfunc f() {\n\tnew1()\n\tnew2()\n}\n"; string(got) != want {
		t.Errorf("got %q", got)
	}
}

// TestFailsLoudly: an upstream change (the anchor is gone or appears twice)
// is an error naming the hunk, never a fuzzy application.
func TestFailsLoudly(t *testing.T) {
	p := write(t, "p.patch", patch)
	for name, src := range map[string]string{
		"missing": "package x\n\nfunc f() {\n\tother()\n}\n",
		"twice":   "func f() {\n\told()\n}\nfunc f() {\n\told()\n}\n",
	} {
		out := filepath.Join(t.TempDir(), "out.go")
		err := run(p, write(t, "f.go", src), out)
		if err == nil || !strings.Contains(err.Error(), "hunk 1") || !strings.Contains(err.Error(), "update the patch") {
			t.Errorf("%s: %v", name, err)
		}
		if _, statErr := os.Stat(out); statErr == nil {
			t.Errorf("%s: wrote %s anyway", name, out)
		}
	}
	if err := run(write(t, "empty.patch", "--- a\n+++ b\n"), write(t, "f.go", "x"), filepath.Join(t.TempDir(), "o")); err == nil {
		t.Error("a patch without hunks applied")
	}
}
