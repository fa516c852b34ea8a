package job_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq/fsqtest"
	"github.com/farro-dev/farro/pkg/job"
)

// readStream reads every line of every segment of s's event stream, in
// order, failing the test on a line that is not one whole JSON object.
func readStream(t *testing.T, s *job.Spool) []job.StreamLine {
	t.Helper()
	names, err := s.StreamSegments()
	if err != nil {
		t.Fatal(err)
	}
	var out []job.StreamLine
	for _, name := range names {
		f, err := s.OpenStreamSegment(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, job.MaxStreamLine), job.MaxStreamLine)
		for sc.Scan() {
			var l job.StreamLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%s: line %q is not whole: %v", name, sc.Text(), err)
			}
			out = append(out, l)
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f.Close()
	}
	return out
}

// transitions lists the "from>to" of the stream's lines about id, with the
// type for lines that are not transitions.
func transitions(lines []job.StreamLine, id string) []string {
	var out []string
	for _, l := range lines {
		if l.JobID != id {
			continue
		}
		if l.Event.Type == job.StreamTransition {
			out = append(out, l.Event.From+">"+l.Event.To)
		} else {
			out = append(out, l.Event.Type+":"+l.Event.From)
		}
	}
	return out
}

// Every transaction of a job's life writes its stream line once, with the
// job's id, kind, correlation id and the field names of the daemons' logs.
func TestStreamCarriesEveryTransitionOnce(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "life")
	if err := c.Commit(job.Failed, "exit 1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Move("life", job.Failed, job.Deferred, "managerd", "retry in 1s", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Move("life", job.Deferred, job.Queued, "managerd", "due", nil); err != nil {
		t.Fatal(err)
	}
	c2, err := s.Claim("life", holder)
	if err != nil {
		t.Fatal(err)
	}
	corr := c2.Envelope().Lifecycle.CorrelationID
	if err := c2.Commit(job.Killed, "killed by operator", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retry("life", "farroctl", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Move("life", job.Queued, job.Held, "farroctl", "held by operator", nil); err != nil {
		t.Fatal(err)
	}
	// Recovery: a stale job whose status still says in-progress is
	// repaired in place (Reconcile's rewrite).
	place(t, s, job.Stale, "", "rec", job.InProgress, nil)
	if _, err := s.Reconcile("rec", "watchdogd", "test"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(transitions(readStream(t, s), "rec"), " "); got != "in-progress>stale" {
		t.Fatalf("stream of rec: %s", got)
	}
	held, err := s.Submit(job.SubmitRequest{ID: "held1", Kind: "noop", Held: true, Prompt: []byte(`{}`), Actor: "farroctl"})
	if err != nil || held.Status != job.Held {
		t.Fatal(err)
	}
	lines := readStream(t, s)
	got := strings.Join(transitions(lines, "life"), " ")
	want := ">queued queued>in-progress in-progress>failed failed>deferred deferred>queued queued>in-progress in-progress>killed killed>queued queued>held" // the submit has no from
	if got != want {
		t.Fatalf("stream of life:\n got %s\nwant %s", got, want)
	}
	if got := strings.Join(transitions(lines, "held1"), " "); got != ">held" {
		t.Fatalf("stream of held1: %s", got)
	}
	// The stream and the job's own events.jsonl agree line for line.
	data, err := os.ReadFile(filepath.Join(s.JobDir(job.Held, "", "life"), job.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 9 {
		t.Fatalf("events.jsonl has %d lines, the stream 9 transitions", n)
	}
	var sawKill bool
	for _, l := range lines {
		if l.App != "farro" || l.Actor == "" || l.Kind == "" && l.JobID == "life" || l.Timestamp == "" || l.Message == "" || l.Attempt == nil {
			t.Fatalf("line lacks a field: %+v", l)
		}
		if l.Event.To == "killed" {
			sawKill = true
			if l.CorrelationID != corr || l.Level != "warn" || l.Reason != "killed by operator" || *l.Attempt != 2 || l.Actor != holder.Actor {
				t.Fatalf("kill line %+v: want correlation %s, level warn, attempt 2", l, corr)
			}
			if _, err := time.Parse(job.StreamTimeLayout, l.Timestamp); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !sawKill {
		t.Fatal("no kill line")
	}
}

// rm writes a removed line; the job's directory (and its events.jsonl) is
// gone, the stream keeps its history.
func TestStreamRemove(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "gone")
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remove("gone", "farroctl"); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(transitions(readStream(t, s), "gone"), " ")
	if got != ">queued queued>in-progress in-progress>succeeded removed:succeeded" {
		t.Fatalf("stream of gone: %s", got)
	}
}

// A reason of any length is cut so that the line stays below the bound of
// an atomic append.
func TestStreamLineIsBounded(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "long")
	if err := c.Commit(job.Failed, strings.Repeat("é", 100_000), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Audit(job.Audit{Command: "hold", JobIDs: make([]string, 500), Reason: strings.Repeat("x", 1<<20)}); err != nil {
		t.Fatal(err)
	}
	names, _ := s.StreamSegments()
	for _, n := range names {
		data, err := os.ReadFile(s.Path(job.StreamDir, n))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if len(line) > job.MaxStreamLine {
				t.Fatalf("a line of %d bytes, over %d", len(line), job.MaxStreamLine)
			}
		}
	}
	lines := readStream(t, s)
	last := lines[len(lines)-1]
	if last.Count != 500 || len(last.JobIDs) >= 500 || !last.Truncated || last.Event.Type != job.StreamOperator {
		t.Fatalf("audit line: count %d, %d ids, truncated %v", last.Count, len(last.JobIDs), last.Truncated)
	}
}

const streamWriterEnv = "FARRO_TEST_STREAM_WRITER"

// runStreamWriter is the child process of TestStreamConcurrentProcesses:
// it appends audit lines to the spool named by the environment.
func runStreamWriter(spec string) {
	root, n, _ := strings.Cut(spec, ",")
	count, _ := strconv.Atoi(n)
	s, err := job.Open(root, job.Existing())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i := 0; i < count; i++ {
		if err := s.Audit(job.Audit{Command: "proc", JobIDs: []string{fmt.Sprintf("p%d-%d", os.Getpid(), i)}, Reason: strings.Repeat("r", 2000)}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(0)
}

// Several processes and several goroutines (each goroutine with a Spool
// of its own, so with a descriptor of its own, and some sharing one)
// append at once: every line comes out whole, none lost.
func TestStreamConcurrentProcesses(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const procs, perProc, goroutines, perG = 3, 200, 6, 200
	var cmds []*exec.Cmd
	for i := 0; i < procs; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), streamWriterEnv+"="+s.Root+","+strconv.Itoa(perProc))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	shared, err := job.Open(s.Root)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := shared
			if g%2 == 0 {
				w, _ = job.Open(s.Root)
			}
			for i := 0; i < perG; i++ {
				_ = w.Audit(job.Audit{Command: "goroutine", JobIDs: []string{fmt.Sprintf("g%d-%d", g, i)}, Reason: strings.Repeat("g", 1500)})
			}
		}()
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer process: %v", err)
		}
	}
	seen := map[string]int{}
	for _, l := range readStream(t, s) {
		seen[l.JobID]++
	}
	if len(seen) != procs*perProc+goroutines*perG {
		t.Fatalf("%d distinct lines, want %d", len(seen), procs*perProc+goroutines*perG)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s appears %d times", id, n)
		}
	}
}

// A hostile entry where the segment (or events/ itself) should be blocks
// nobody: the transition completes, its events.jsonl has the line, and
// the lost stream line is counted and warned about once.
func TestStreamHostileSegment(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"segment", "dir"} {
		for _, kind := range fsqtest.HostileKinds {
			if where == "dir" && kind == fsqtest.Directory {
				continue // events/ is a directory
			}
			t.Run(where+"/"+kind, func(t *testing.T) {
				t.Parallel()
				root := filepath.Join(t.TempDir(), "spool")
				var warns []string
				var mu sync.Mutex
				s, err := job.Open(root, job.WithStreamWarn(func(err error, n uint64) {
					mu.Lock()
					defer mu.Unlock()
					warns = append(warns, fmt.Sprintf("%d %v", n, err))
				}))
				if err != nil {
					t.Fatal(err)
				}
				target := s.Path(job.StreamDir)
				if where == "segment" {
					if err := os.Mkdir(target, 0o755); err != nil {
						t.Fatal(err)
					}
					target = s.Path(job.StreamDir, job.StreamSegment(time.Now()))
				}
				fsqtest.PlantHostile(t, target, kind)
				planted, err := os.Lstat(target)
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					c, err := s.Claim(submit(t, s, "h1").ID, holder)
					if err == nil {
						err = c.Commit(job.Succeeded, "", nil)
					}
					done <- err
				}()
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("transition failed: %v", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the transition blocked on the hostile entry")
				}
				ev, err := os.ReadFile(filepath.Join(s.JobDir(job.Succeeded, "", "h1"), job.EventsFile))
				if err != nil || strings.Count(string(ev), "\n") != 3 {
					t.Fatalf("events.jsonl: %q %v", ev, err)
				}
				regular := kind == fsqtest.Sparse && where == "segment"
				if regular {
					// A (huge) regular file is a segment like any other.
					if n := s.StreamFailures(); n != 0 {
						t.Fatalf("%d failures appending to a regular file", n)
					}
					return
				}
				if n := s.StreamFailures(); n != 3 {
					t.Fatalf("StreamFailures = %d, want 3 (submit, claim, commit)", n)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(warns) != 1 || !strings.HasPrefix(warns[0], "1 event stream") {
					t.Fatalf("warnings %q, want one (rate-limited)", warns)
				}
				// The hostile entry is left as it was.
				fi, err := os.Lstat(target)
				if err != nil || fi.Mode().Type() != planted.Mode().Type() || fi.Size() != planted.Size() {
					t.Fatalf("hostile entry replaced: %v %v", fi, err)
				}
			})
		}
	}
}

func TestExpireStream(t *testing.T) {
	t.Parallel()
	s := setup(t)
	if err := os.Mkdir(s.Path(job.StreamDir), 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 24, 14, 30, 0, 0, time.UTC)
	for _, h := range []int{-200, -169, -168, -167, 0} {
		name := job.StreamSegment(now.Add(time.Duration(h) * time.Hour))
		if err := os.WriteFile(s.Path(job.StreamDir, name), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Something hostile named like an old segment, and a stranger.
	fsqtest.PlantHostile(t, s.Path(job.StreamDir, job.StreamSegment(now.Add(-300*time.Hour))), fsqtest.FIFO)
	if err := os.WriteFile(s.Path(job.StreamDir, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := s.ExpireStream(now.Add(-168 * time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(removed, " "); got != "2026-11-16T06.jsonl 2026-11-17T13.jsonl" {
		t.Fatalf("removed %s", got)
	}
	left, _ := s.StreamSegments()
	if got := strings.Join(left, " "); got != "2026-11-12T02.jsonl 2026-11-17T14.jsonl 2026-11-17T15.jsonl 2026-11-24T14.jsonl" {
		t.Fatalf("left %s", got)
	}
}
