package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// internalRef matches wording that cites the design documents by number
// or the way the project was developed instead of saying the thing
// itself: "seed 004", "Seed 000 §6", "issue 4", "from other sessions".
var internalRef = regexp.MustCompile(`(?i)\bseeds? 0*[0-9]+\b|\bseed 00|\bissue #?[0-9]|\bother sessions?\b`)

// TestUserTextCitesNoDesignDocuments: README.md, docs/*.md (the
// reliability measurements aside) and every `farroctl [COMMAND...] --help`
// of the real command definitions (from which the man page is made) say
// what they mean, never "seed 004's score" or "helpers from other
// sessions". Each offending line is listed.
func TestUserTextCitesNoDesignDocuments(t *testing.T) {
	t.Parallel()
	var offenders []string
	check := func(where, text string) {
		for i, line := range strings.Split(text, "\n") {
			if internalRef.MatchString(line) {
				offenders = append(offenders, where+":"+itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
	}
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	for _, p := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		if filepath.Base(p) == "RELIABILITY.md" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		check(strings.TrimPrefix(p, root+string(filepath.Separator)), string(b))
	}

	var paths [][]string
	var walk func(prefix []string, cmds []*cli.Command)
	walk = func(prefix []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(append([]string{}, prefix...), c.Name)
			paths = append(paths, p)
			walk(p, c.Subcommands)
		}
	}
	walk(nil, newApp(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}).Commands)
	if len(paths) < 20 {
		t.Fatalf("only %d commands found", len(paths))
	}
	for _, p := range append([][]string{{}}, paths...) {
		var out, errb bytes.Buffer
		args := append(append([]string{"farroctl"}, p...), "--help")
		if code := run(args, strings.NewReader(""), &out, &errb); code != 0 {
			t.Errorf("%s: exit %d: %s", strings.Join(args, " "), code, errb.String())
			continue
		}
		check(strings.Join(args, " "), out.String()+errb.String())
	}
	for _, o := range offenders {
		t.Errorf("cites a design document instead of saying what it means: %s", o)
	}
}

func itoa(n int) string {
	var b []byte
	for n >= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(append([]byte{byte('0' + n)}, b...))
}
