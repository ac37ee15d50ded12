// Command applypatch applies a unified diff to one file by exact text
// replacement: each hunk's old lines (context and removals) must occur
// exactly once in the file and are replaced by its new lines (context and
// additions). It exists so that infra/emulator/kumo/overlay.sh needs only Go,
// not the patch tool (which a fresh Debian machine may lack), and it fails
// loudly when an anchor is missing or ambiguous instead of applying fuzzily.
//
//	go run ./infra/emulator/kumo/applypatch -patch patches/dynamodb-streams.patch -in storage.go -out patched.go
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	patchPath := flag.String("patch", "", "unified diff against one file")
	in := flag.String("in", "", "the file to patch")
	out := flag.String("out", "", "where to write the patched file")
	flag.Parse()
	if *patchPath == "" || *in == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: applypatch -patch FILE -in FILE -out FILE")
		os.Exit(2)
	}
	if err := run(*patchPath, *in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "applypatch:", err)
		os.Exit(1)
	}
}

func run(patchPath, in, out string) error {
	diff, err := os.ReadFile(patchPath)
	if err != nil {
		return err
	}
	src, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	hunks, err := parse(diff)
	if err != nil {
		return err
	}
	text := string(src)
	for i, h := range hunks {
		if n := strings.Count(text, h.old); n != 1 {
			return fmt.Errorf("%s: hunk %d (%s) found %d times in %s, want exactly once: the upstream file changed; update the patch", patchPath, i+1, h.header, n, in)
		}
		text = strings.Replace(text, h.old, h.new, 1)
	}
	return os.WriteFile(out, []byte(text), 0o644)
}

type hunk struct{ header, old, new string }

// parse reads the hunks of a unified diff (file headers are skipped).
func parse(diff []byte) ([]hunk, error) {
	var hunks []hunk
	var cur *hunk
	var old, new strings.Builder
	flush := func() {
		if cur != nil {
			cur.old, cur.new = old.String(), new.String()
			hunks = append(hunks, *cur)
		}
		old.Reset()
		new.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(diff))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "@@"):
			flush()
			cur = &hunk{header: line}
		case cur == nil, strings.HasPrefix(line, `\ No newline`):
		case strings.HasPrefix(line, "+"):
			new.WriteString(line[1:] + "\n")
		case strings.HasPrefix(line, "-"):
			old.WriteString(line[1:] + "\n")
		case strings.HasPrefix(line, " "), line == "":
			ctx := strings.TrimPrefix(line, " ")
			old.WriteString(ctx + "\n")
			new.WriteString(ctx + "\n")
		default:
			return nil, fmt.Errorf("unexpected diff line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	if len(hunks) == 0 {
		return nil, errors.New("the patch has no hunks")
	}
	return hunks, nil
}
