package farrob

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/pkg/job"
)

// helloSrc is the minimal Go program farroctl's process start is compared
// with: it writes one line and exits.
const helloSrc = `package main

import "os"

func main() { os.Stdout.WriteString("hello, world\n") }
`

// HelloOutput is what the minimal binary prints.
const HelloOutput = "hello, world\n"

// BuildHello compiles the minimal Go program into dir/hello with the same
// go command (and defaults) that builds farro's binaries, and returns its
// path.
func BuildHello(dir string) (string, error) {
	src := filepath.Join(dir, "hello-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(helloSrc), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-o", out, "main.go")
	cmd.Dir = src // a build of named files needs no go.mod
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build hello: %v: %s", err, b)
	}
	return out, nil
}

// StartPair is the wall time of n runs each of two commands, run
// interleaved (A B, B A, A B, ...), so that a change of load falls on both.
type StartPair struct {
	N          int
	A, B       time.Duration // summed wall time of the runs
	AOut, BOut string        // the output of A's and B's last run
}

// PerRunA is A's mean wall time per run.
func (p StartPair) PerRunA() time.Duration { return p.A / time.Duration(max(p.N, 1)) }

// PerRunB is B's mean wall time per run.
func (p StartPair) PerRunB() time.Duration { return p.B / time.Duration(max(p.N, 1)) }

// StartCompare runs a and b n times each, interleaved, from process start
// to exit (stdout and stderr collected); any failure is an error.
func StartCompare(a, b []string, n int) (StartPair, error) {
	p := StartPair{N: n}
	run := func(argv []string) (time.Duration, string, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = cleanEnv()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t0 := time.Now()
		err := cmd.Run()
		el := time.Since(t0)
		if err != nil {
			return 0, "", fmt.Errorf("%s: %v: %s", argv[0], err, out.Bytes())
		}
		return el, out.String(), nil
	}
	for i := 0; i < n; i++ {
		for k := 0; k < 2; k++ {
			isA := (i+k)%2 == 0 // A first in even rounds, B first in odd ones
			argv := b
			if isA {
				argv = a
			}
			el, out, err := run(argv)
			if err != nil {
				return StartPair{}, err
			}
			if isA {
				p.A += el
				p.AOut = out
			} else {
				p.B += el
				p.BOut = out
			}
		}
	}
	return p, nil
}

// SubmitManyLib calls pkg/job's Spool.SubmitMany over n jobs in batches of
// batch, from one goroutine, and checks every job is queued.
func SubmitManyLib(base string, n, batch int) (InsertResult, error) {
	root, s, err := newSpool(base, "farro-many-")
	if err != nil {
		return InsertResult{}, err
	}
	defer sys.RemoveTree(root)
	reqs := make([]job.SubmitRequest, 0, batch)
	start := time.Now()
	for i := 0; i < n; i += batch {
		reqs = reqs[:0]
		for k := i; k < min(n, i+batch); k++ {
			reqs = append(reqs, job.SubmitRequest{Kind: "noop", Prompt: fmt.Appendf(nil, `{"n":%d}`, k), Actor: "bench"})
		}
		_, errs := s.SubmitMany(reqs)
		for _, err := range errs {
			if err != nil {
				return InsertResult{}, fmt.Errorf("Spool.SubmitMany: %w", err)
			}
		}
	}
	el := time.Since(start)
	if got, _ := CountDir(s.StateDir(job.Queued)); got != n {
		return InsertResult{}, fmt.Errorf("Spool.SubmitMany: %d jobs queued, want %d", got, n)
	}
	return InsertResult{Jobs: n, Elapsed: el}, nil
}
