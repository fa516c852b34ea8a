package farrob

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBuildHelloRuns(t *testing.T) {
	t.Parallel()
	hello, err := BuildHello(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartCompare([]string{hello}, []string{"/bin/sh", "-c", "sleep 0.03; echo slow"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.N != 3 || p.AOut != HelloOutput || p.BOut != "slow\n" {
		t.Fatalf("pair %+v", p)
	}
	if p.PerRunB() < 30*time.Millisecond || p.PerRunA() >= p.PerRunB() {
		t.Fatalf("per run: hello %s, sleep 0.03 %s", p.PerRunA(), p.PerRunB())
	}
}

func TestStartCompareInterleaves(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "order")
	a := []string{"/bin/sh", "-c", "echo a >> " + log}
	b := []string{"/bin/sh", "-c", "echo b >> " + log}
	if _, err := StartCompare(a, b, 4); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(strings.Fields(string(got)), ""); s != "abbaabba" {
		t.Fatalf("order %q, want abbaabba", s)
	}
}

func TestStartCompareFails(t *testing.T) {
	t.Parallel()
	_, err := StartCompare([]string{"/bin/true"}, []string{"/bin/sh", "-c", "echo broken >&2; exit 3"}, 2)
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("err = %v, want the failing command's output", err)
	}
}

func TestSubmitManyLib(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	res, err := SubmitManyLib(base, 25, 10) // three batches, the last short
	if err != nil {
		t.Fatal(err)
	}
	if res.Jobs != 25 || res.Elapsed <= 0 {
		t.Fatalf("result %+v", res)
	}
	left, err := os.ReadDir(base)
	if err != nil || len(left) != 0 {
		t.Fatalf("spool left behind: %v %v", left, err)
	}
}
