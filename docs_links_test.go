package spaces_test

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The front door stays short: what Spaces is, the two commands, a
// five-minute tour and links; the rest lives in docs/.
const readmeMaxLines = 200

// docFiles are the documents whose links TestDocLinks checks.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	return append([]string{"README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "agent/README.md"}, docs...)
}

// TestDocLinks: every relative link of the documents names a file of the
// repository, and every #anchor a heading of the document it points to
// (GitHub's anchors); README.md stays within readmeMaxLines.
func TestDocLinks(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, want at most %d: move the detail to docs/", n, readmeMaxLines)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		anchors[file] = headingAnchors(string(b))
		return anchors[file]
	}
	checked := 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range brokenLinks(file, string(b), anchorsOf) {
			t.Errorf("%s: %s", file, problem)
		}
		checked += len(links(string(b)))
	}
	if checked == 0 {
		t.Fatal("no links found: the link parser is broken")
	}
}

// TestBrokenLinksAreFound: the checker itself reports a missing file, a
// missing anchor in another file and in the same one, and passes the
// links that resolve.
func TestBrokenLinksAreFound(t *testing.T) {
	doc := "# Title\n\n## A heading, with punctuation!\n\n" +
		"[ok](#a-heading-with-punctuation) [ok2](README.md) [ok3](docs/tour.md#local-data) [web](https://example.com/x)\n" +
		"[gone](no/such/file.md) [bad anchor](README.md#no-such-heading) [bad self](#nope)\n" +
		"`[in code](also/missing.md)`\n\n```sh\n[in a block](missing.md)\n```\n"
	anchorsOf := func(file string) map[string]bool {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return headingAnchors(string(b))
	}
	got := brokenLinks("X.md", doc, func(f string) map[string]bool {
		if f == "X.md" {
			return headingAnchors(doc)
		}
		return anchorsOf(f)
	})
	want := []string{"no/such/file.md", "README.md#no-such-heading", "#nope"}
	if len(got) != len(want) {
		t.Fatalf("broken links %q, want the ones naming %q", got, want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], "("+w+")") {
			t.Errorf("broken link %d = %q, want one naming %s", i, got[i], w)
		}
	}
}

// TestHeadingAnchors follows GitHub's rule: lowercase, spaces to '-',
// punctuation dropped, repeats numbered.
func TestHeadingAnchors(t *testing.T) {
	a := headingAnchors("# Spaces\n## Bad input is refused, never stored and never a 5xx\n" +
		"## Cloud trust: a connection works for the org that made it, only\n## Creating clusters (provisioning)\n" +
		"## `make run` and *tests*\n## Notes\n## Notes\n```\n# not a heading\n```\n")
	for _, want := range []string{"spaces", "bad-input-is-refused-never-stored-and-never-a-5xx",
		"cloud-trust-a-connection-works-for-the-org-that-made-it-only", "creating-clusters-provisioning",
		"make-run-and-tests", "notes", "notes-1"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a line in a code block became a heading")
	}
}

var linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// links are the targets of the inline links of a markdown text, outside
// code blocks and code spans.
func links(md string) []string {
	var out []string
	for _, line := range proseLines(md) {
		for _, m := range linkRE.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// brokenLinks checks the relative links of file (whose text is md):
// anchorsOf answers the anchors of a file named from the repository root.
func brokenLinks(file, md string, anchorsOf func(string) map[string]bool) []string {
	var out []string
	for _, target := range links(md) {
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		ref, anchor, _ := strings.Cut(target, "#")
		dest := file
		if ref != "" {
			dest = path.Join(path.Dir(file), ref)
			if _, err := os.Stat(dest); err != nil {
				out = append(out, "("+target+"): no file "+dest)
				continue
			}
		}
		if anchor == "" {
			continue
		}
		if !strings.HasSuffix(dest, ".md") {
			out = append(out, "("+target+"): an anchor into "+dest+", which is not markdown")
			continue
		}
		if !anchorsOf(dest)[anchor] {
			out = append(out, "("+target+"): no heading #"+anchor+" in "+dest)
		}
	}
	return out
}

// headingAnchors are the anchors GitHub gives a document's headings.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(md) {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		text = strings.TrimLeft(text, "#")
		if text == "" || text[0] != ' ' {
			continue
		}
		slug := slugify(strings.TrimSpace(text))
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugify is GitHub's heading anchor: lowercase; letters, digits, '-'
// and '_' kept, spaces to '-', everything else dropped.
func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// proseLines are a markdown text's lines outside fenced code blocks.
func proseLines(md string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

var codeSpanRE = regexp.MustCompile("`[^`]*`")

func stripCodeSpans(line string) string { return codeSpanRE.ReplaceAllString(line, "") }
