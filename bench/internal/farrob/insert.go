package farrob

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/pkg/job"
)

// InsertResult is jobs submitted over elapsed time.
type InsertResult struct {
	Jobs    int
	Elapsed time.Duration
}

// Rate is jobs per second.
func (r InsertResult) Rate() float64 { return float64(r.Jobs) / r.Elapsed.Seconds() }

func newSpool(base, prefix string) (string, *job.Spool, error) {
	root, err := os.MkdirTemp(base, prefix)
	if err != nil {
		return "", nil, err
	}
	s, err := job.Open(root + "/spool")
	if err != nil {
		sys.RemoveTree(root)
		return "", nil, err
	}
	return root, s, nil
}

// SubmitCLI runs `farroctl submit --kind noop` once per job (a process
// per job, the prompt on stdin), n times in a row.
func (b Bins) SubmitCLI(base string, n int) (InsertResult, error) {
	root, s, err := newSpool(base, "farro-cli-")
	if err != nil {
		return InsertResult{}, err
	}
	defer sys.RemoveTree(root)
	start := time.Now()
	for i := 0; i < n; i++ {
		cmd := exec.Command(b.Path("farroctl"), "--spool", s.Root, "submit", "--kind", "noop")
		cmd.Env = cleanEnv()
		cmd.Stdin = strings.NewReader(`{"n":` + fmt.Sprint(i) + "}\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			return InsertResult{}, fmt.Errorf("farroctl submit: %v: %s", err, out)
		}
	}
	el := time.Since(start)
	if got, _ := CountDir(s.StateDir(job.Queued)); got != n {
		return InsertResult{}, fmt.Errorf("farroctl submit: %d jobs queued, want %d", got, n)
	}
	return InsertResult{Jobs: n, Elapsed: el}, nil
}

// SubmitBatch runs one `farroctl submit --batch --kind noop FILE` of n
// JSON Lines.
func (b Bins) SubmitBatch(base string, n int) (InsertResult, error) {
	root, s, err := newSpool(base, "farro-batch-")
	if err != nil {
		return InsertResult{}, err
	}
	defer sys.RemoveTree(root)
	var buf bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&buf, "{\"prompt\":{\"n\":%d}}\n", i)
	}
	in := filepath.Join(root, "jobs.jsonl")
	if err := os.WriteFile(in, buf.Bytes(), 0o644); err != nil {
		return InsertResult{}, err
	}
	cmd := exec.Command(b.Path("farroctl"), "--spool", s.Root, "submit", "--batch", "--kind", "noop", in)
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return InsertResult{}, fmt.Errorf("farroctl submit --batch: %v: %s", err, stderr.String())
	}
	el := time.Since(start)
	if got, _ := CountDir(s.StateDir(job.Queued)); got != n {
		return InsertResult{}, fmt.Errorf("farroctl submit --batch: %d jobs queued, want %d", got, n)
	}
	return InsertResult{Jobs: n, Elapsed: el}, nil
}

// SubmitLib calls pkg/job's Spool.Submit n times from g goroutines.
func SubmitLib(base string, n, g int) (InsertResult, error) {
	root, s, err := newSpool(base, "farro-lib-")
	if err != nil {
		return InsertResult{}, err
	}
	defer sys.RemoveTree(root)
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := s.Submit(job.SubmitRequest{Kind: "noop", Prompt: fmt.Appendf(nil, `{"n":%d}`, i), Actor: "bench"}); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		return InsertResult{}, err
	}
	return InsertResult{Jobs: n, Elapsed: el}, nil
}
