// Package mantest checks a farro binary's man page (daemon.WriteMan)
// against its CLI definition, for the tests of each binary.
package mantest

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/daemon"
)

// Sections every farro man page has, in this order.
var Sections = []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "SIGNALS", "ENVIRONMENT", "FILES", "SEE ALSO"}

// Check renders app's man page and checks it: every section of Sections
// in order (GLOBAL OPTIONS stands for OPTIONS), every exit status in
// want, every visible flag with its numeric or duration default (one that
// parses back to the flag's value), every <placeholder> of the
// definition's texts kept, and, where groff is installed, a rendering
// without warnings that still shows the placeholders. It returns the
// page (roff) for further checks.
func Check(t *testing.T, app *cli.App, wantExit ...int) string {
	t.Helper()
	var buf bytes.Buffer
	if err := daemon.WriteMan(&buf, app); err != nil {
		t.Fatalf("WriteMan: %v", err)
	}
	page := buf.String()
	if !strings.HasPrefix(page, ".TH "+strings.ToUpper(app.Name)+" 1 ") {
		t.Errorf("no .TH header for section 1:\n%.200s", page)
	}
	at := 0
	for _, s := range Sections {
		i := indexSection(page[at:], s)
		if i < 0 && s == "OPTIONS" {
			i = indexSection(page[at:], "GLOBAL OPTIONS")
		}
		if i < 0 {
			t.Errorf("section %s missing or out of order", s)
			continue
		}
		at += i
	}
	exit := section(page, "EXIT STATUS")
	for _, code := range wantExit {
		if !strings.Contains(exit, ".TP\n.B "+strconv.Itoa(code)+"\n") {
			t.Errorf("EXIT STATUS lacks %d:\n%s", code, exit)
		}
	}

	text := unroff(page)
	var texts []string
	global := map[string]bool{}
	checkFlags := func(block string, flags []cli.Flag) {
		for _, f := range flags {
			if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
				continue
			}
			if df, ok := f.(cli.DocGenerationFlag); ok {
				texts = append(texts, df.GetUsage())
			}
			if !global[f.Names()[0]] {
				checkFlag(t, block, f)
			}
		}
	}
	opts := section(text, "OPTIONS")
	if opts == "" {
		opts = section(text, "GLOBAL OPTIONS")
	}
	checkFlags(opts, app.Flags)
	for _, f := range app.Flags {
		global[f.Names()[0]] = true
	}
	texts = append(texts, app.Usage, app.Description)
	var walk func(cmds []*cli.Command, path string)
	walk = func(cmds []*cli.Command, path string) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			p := strings.TrimSpace(path + " " + c.Name)
			texts = append(texts, c.Usage, c.Description, c.ArgsUsage)
			checkFlags(subsection(text, p), c.Flags)
			walk(c.Subcommands, p)
		}
	}
	walk(app.Commands, "")
	ph := regexp.MustCompile(`<[^<>\s]+>`)
	seen := map[string]bool{}
	for _, s := range texts {
		for _, p := range ph.FindAllString(s, -1) {
			if !seen[p] && !strings.Contains(text, p) {
				t.Errorf("placeholder %s lost", p)
			}
			seen[p] = true
		}
	}

	if groff, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-rLL=100n")
		cmd.Stdin = strings.NewReader(page)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil || errb.Len() > 0 {
			t.Errorf("groff: %v\n%s", err, errb.String())
		}
		rendered := regexp.MustCompile(".\b").ReplaceAllString(out.String(), "") // overstrike
		for p := range seen {
			if !strings.Contains(rendered, p) {
				t.Errorf("placeholder %s not in groff's rendering", p)
			}
		}
	} else {
		if os.Getenv("CI") != "" {
			t.Error("groff is missing: CI installs it (.ci/run), the rendering is not checked")
		}
		t.Log("groff not installed: the rendering is not checked")
	}
	return page
}

// checkFlag checks f's paragraph: its names, and its default when f takes
// a number or a duration.
func checkFlag(t *testing.T, text string, f cli.Flag) {
	t.Helper()
	name := "--" + f.Names()[0]
	var want func(string) bool
	var wantS string
	switch f := f.(type) {
	case *cli.DurationFlag:
		if f.DefaultText != "" {
			wantS = f.DefaultText
			want = func(s string) bool { return s == wantS }
			break
		}
		wantS = f.Value.String()
		want = func(s string) bool { d, err := time.ParseDuration(s); return err == nil && d == f.Value }
	case *cli.IntFlag:
		wantS = strconv.Itoa(f.Value)
		if f.DefaultText != "" {
			wantS = f.DefaultText
		}
		want = func(s string) bool { return s == wantS }
	case *cli.Int64Flag:
		wantS = strconv.FormatInt(f.Value, 10)
		want = func(s string) bool { return s == wantS }
	}
	re := regexp.MustCompile(`(?m)^\.TP\n` + regexp.QuoteMeta(name) + `([ ,].*)?\n(.*)$`)
	ms := re.FindAllStringSubmatch(text, -1)
	if len(ms) == 0 {
		t.Errorf("flag %s missing", name)
		return
	}
	if want == nil {
		return
	}
	for _, m := range ms {
		d := regexp.MustCompile(`\(default: ([^)]*)\)`).FindStringSubmatch(m[2])
		if d == nil || !want(d[1]) {
			t.Errorf("flag %s: default %s not rendered: %q", name, wantS, m[2])
		}
	}
}

// subsection is the block of command path (".SS" and its heading, up to
// the next .SS or .SH).
func subsection(text, path string) string {
	for _, end := range []string{"\n", " "} {
		if i := strings.Index(text, "\n.SS\n"+path+end); i >= 0 {
			body := text[i+len("\n.SS\n"):]
			if j := strings.Index(body, "\n.S"); j >= 0 {
				body = body[:j+1]
			}
			return body
		}
	}
	return ""
}

// indexSection is the offset of ".SH title" in page, or -1.
func indexSection(page, title string) int {
	return strings.Index(page, "\n.SH "+title+"\n")
}

// section is the body of section title (up to the next .SH).
func section(page, title string) string {
	i := indexSection(page, title)
	if i < 0 {
		return ""
	}
	body := page[i+len("\n.SH "+title+"\n"):]
	if j := strings.Index(body, "\n.SH "); j >= 0 {
		body = body[:j+1]
	}
	return body
}

// unroff undoes WriteMan's escapes and fonts: the text as written.
func unroff(s string) string {
	return strings.NewReplacer(`\-`, "-", `\e`, `\`, `\&`, "", `\fB`, "", `\fI`, "", `\fP`, "").Replace(s)
}
