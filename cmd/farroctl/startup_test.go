package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The build tag make builds with (Makefile: GOFLAGS): urfave/cli without
// its Markdown and man page writers.
const buildTags = "urfave_cli_no_docs"

// heavy are packages farroctl must not link: a package that is linked at
// all runs its initialisation at every start, whatever the command, and
// these made farroctl --version start 3.5 times slower than a minimal Go
// program. A prefix ending in "/" covers a module's packages.
var heavy = []string{
	"github.com/prometheus/client_golang/", // default registry, Go and process collectors
	"github.com/prometheus/client_model/",  // protobuf descriptors
	"github.com/prometheus/common/",
	"github.com/prometheus/procfs",
	"google.golang.org/protobuf/",
	"github.com/farro-dev/farro/internal/metrics", // the Prometheus half of farro's metrics (internal/tally is the other)
	"github.com/farro-dev/farro/internal/metricsd",
	"github.com/russross/blackfriday/", // urfave/cli's Markdown writer (left out by the build tag)
	"github.com/cpuguy83/go-md2man/",
	"runtime/metrics",
	"expvar",
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, out)
	}
	return strings.Fields(string(out))
}

// heavyOf is the entry of heavy that covers pkg, or "".
func heavyOf(pkg string) string {
	for _, h := range heavy {
		if pkg == strings.TrimSuffix(h, "/") || (strings.HasSuffix(h, "/") && strings.HasPrefix(pkg, h)) {
			return h
		}
	}
	return ""
}

// TestFarroctlLinksNoHeavyPackage is the regression guard of farroctl's
// start (not timed): none of the heavy packages is among farroctl's
// dependencies as make builds it, while the daemons still link their
// Prometheus metrics, and make and the Debian package build with the tag.
func TestFarroctlLinksNoHeavyPackage(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, pkg := range goList(t, "-tags="+buildTags, "-deps", ".") {
		if h := heavyOf(pkg); h != "" && !seen[h] {
			seen[h] = true
			t.Errorf("farroctl links %s (%s): its package initialisation runs at every farroctl start (docs/ARCHITECTURE.md, Decisions: farroctl's start)", pkg, h)
		}
	}
	for _, d := range []string{"agentd", "managerd", "watchdogd"} {
		deps := strings.Join(goList(t, "-tags="+buildTags, "-deps", "../"+d), "\n") + "\n"
		for _, want := range []string{"github.com/farro-dev/farro/internal/metricsd\n", "github.com/prometheus/client_golang/prometheus\n"} {
			if !strings.Contains(deps, want) {
				t.Errorf("%s does not link %s: --metrics-addr would serve nothing", d, strings.TrimSpace(want))
			}
		}
	}
	for _, f := range []string{"../../Makefile", "../../deploy/deb/build-deb.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "export GOFLAGS") && strings.Contains(line, "-tags="+buildTags) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s does not export GOFLAGS with -tags=%s", f, buildTags)
		}
	}
}

// TestFarroctlInitIsSmall runs farroctl --version with the runtime's
// trace of package initialisations (GODEBUG=inittrace=1) and bounds what
// they allocate, in all and per package: a regular expression compiled at
// package level, a table filled in an init or a heavy library brought
// back shows up here, by name, whatever the machine's speed. Before the
// packages above left farroctl, its initialisations made 6,185
// allocations (797 KB); after, under 500 (110 KB).
func TestFarroctlInitIsSmall(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "farroctl")
	if out, err := exec.Command("go", "build", "-tags="+buildTags, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("farroctl --version: %v\n%s", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "farroctl version ") {
		t.Fatalf("farroctl --version printed %q", stdout.String())
	}
	const (
		maxAllocs    = 1000 // all packages
		maxBytes     = 256 << 10
		maxPkgAllocs = 200 // one package
		maxPkgBytes  = 64 << 10
	)
	var allocs, nbytes, inits int
	for _, line := range strings.Split(stderr.String(), "\n") {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(line)
		if len(f) != 11 || f[0] != "init" || f[8] != "bytes," || f[10] != "allocs" {
			continue
		}
		b, err1 := strconv.Atoi(f[7])
		a, err2 := strconv.Atoi(f[9])
		if err1 != nil || err2 != nil {
			t.Fatalf("unexpected inittrace line %q", line)
		}
		inits++
		allocs += a
		nbytes += b
		if a > maxPkgAllocs || b > maxPkgBytes {
			t.Errorf("the initialisation of %s makes %d allocations (%d bytes) at every farroctl start; at most %d (%d bytes): make it lazy (sync.OnceValue) or keep the package out of farroctl", f[1], a, b, maxPkgAllocs, maxPkgBytes)
		}
	}
	if inits < 20 {
		t.Fatalf("only %d init lines in the trace (the GODEBUG=inittrace=1 format changed?):\n%s", inits, stderr.String())
	}
	if allocs > maxAllocs || nbytes > maxBytes {
		t.Errorf("farroctl's package initialisations make %d allocations (%d bytes) in all; at most %d (%d bytes)", allocs, nbytes, maxAllocs, maxBytes)
	}
	t.Logf("%d package initialisations: %d allocations, %d bytes", inits, allocs, nbytes)
}
